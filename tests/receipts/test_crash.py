"""kill -9 of a process writing receipts in a loop: the store stays sound, every receipt it said it saved is
there, and every receipt file is whole or absent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dal.receipts.schema import validate
from dal.receipts.store import Store

WRITER = textwrap.dedent(
    """
    import copy, json, sys
    from dal.receipts.files import write_receipt_files
    from dal.receipts.ids import new_run_id, utc_timestamp
    from dal.receipts.store import Store

    template = json.loads(sys.argv[3])
    with Store(sys.argv[1]) as store:
        n = 0
        while True:
            r = copy.deepcopy(template)
            r["run_id"] = new_run_id()
            r["attempted_at"] = r["finished_at"] = utc_timestamp()
            # A big result makes each file take several write() calls, so a kill can land mid-file.
            r["result"] = {"path": "x.md", "status": "verified", "blob": "z" * 200_000}
            store.journal_intent(r["run_id"], 1, "echo hi", "read")
            store.journal_result(r["run_id"], 1, {"status": "completed"})
            store.save_receipt(r, validate=False)
            write_receipt_files(r, sys.argv[2])
            n += 1
            print(r["run_id"], flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_kill_9_while_writing_receipts(tmp_path: Path, receipts: dict) -> None:
    db = tmp_path / "dal.db"
    folder = tmp_path / "receipts"
    reported: list[str] = []
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    for delay in (0.05, 0.13, 0.29):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(folder), json.dumps(receipts["article_verified"])],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert proc.stdout is not None
        reported.append(proc.stdout.readline().strip())  # at least one receipt is through
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
        reported += out.split()
        assert proc.returncode == -signal.SIGKILL

    # A reader straight after the crash (the WAL still holds the last commits) sees every saved run.
    with Store(db, readonly=True) as reader:
        assert set(reported) <= {r["run_id"] for r in reader.list_runs(limit=None)}

    with Store(db) as store:
        assert store.integrity_check() == []
        stored = {r["run_id"] for r in store.list_runs(limit=None)}
        # Nothing lost: every save the writer finished is in the store, with its journal.
        assert set(reported) <= stored
        assert all(store.journal(rid)[0]["status"] == "completed" for rid in reported)
        for rid in list(stored)[:20]:
            validate(store.get_run(rid))

    jsons = sorted(folder.glob("*.json"))
    assert len(jsons) >= len(reported) - 1
    for path in jsons:
        receipt = json.loads(path.read_text("utf-8"))  # whole, or this raises
        assert receipt["run_id"] == path.stem and receipt["run_id"] in stored
    for path in folder.glob("*.md"):
        text = path.read_text("utf-8")
        assert text.startswith("# Tool-loop receipt\n") and "\n- next: " in text and text.endswith("\n")
