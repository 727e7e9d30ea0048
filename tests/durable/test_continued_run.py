"""A run without a key holds the lock of its run id for its life: `dal resume RUN` from another boot
id or pid namespace meets it, whatever the run's pid says there. Executed with real processes; effects counted in
the world."""

from __future__ import annotations

import os
import time
from pathlib import Path

from dal.receipts.store import Store

OTHER_BOOT = "import dal.core.liveness as _p\n_p._BOOT_ID[:] = ['00000000-0000-4000-8000-0000000000aa']\n"


def _recorded(durable: object, timeout: float = 30) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if durable.db.exists():
            with Store(durable.db, readonly=True) as s:
                rows = s.list_runs(limit=None)
            if rows and rows[0]["status"] == "running":
                return rows[0]["run_id"]
        time.sleep(0.05)
    raise AssertionError("the run was not recorded")


def test_a_keyless_run_resumed_elsewhere_while_it_runs_is_refused_and_runs_its_append_once(durable,
                                                                                           tmp_path: Path) -> None:
    """Seen from another boot id, the live run's pid proves nothing, but the lock of its run id, which it holds
    for its life, does: the resume exits 3 and the run goes on (the path where the store refuses the original's
    next intent once a resume is recorded is tested on PostgreSQL, whose lock session can be cut)."""
    other = tmp_path / "otherhost"
    other.mkdir()
    (other / "sitecustomize.py").write_text(OTHER_BOOT, encoding="utf-8")
    durable.write("dal.toml", '[run]\nallow = ["sleep"]\n')
    durable.write("s.dal", 'while not run("test -e go").ok { sleep(0.1) }\nrun("echo sent >> out.txt")\n')
    a = durable.spawn("run", "s.dal")
    rid = _recorded(durable)
    b = durable.run("resume", rid, PYTHONPATH=f"{other}{os.pathsep}{durable.env()['PYTHONPATH']}")
    assert b.code == 3 and f"run {rid} is still running in process {a.pid}" in b.err, b.out + b.err
    assert a.poll() is None
    durable.write("go", "")
    assert a.wait(60) == 0, a.stderr.read()
    assert durable.lines("out.txt") == ["sent"]
    with Store(durable.db, readonly=True) as s:
        assert [r["status"] for r in s.list_runs(limit=None)] == ["completed"]
    durable.check_store()
