"""A job's receipt is kept by the store; it is copied to `<run_id>.json` and `.md` files only when the job
was submitted with `--receipts DIR`, or when the store could not take it (the files are then its only
record). A `dal run` writes its files as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from worker_queue import Queue

from dal.receipts import files
from dal.receipts.store import Store, StoreError
from dal.runner.build import build_spec
from dal.worker.spec import run_spec

SCRIPT = 'run("echo hi")\n'


def receipt_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("run_*")) if folder.is_dir() else []


def job_run(ws: Path, key: str, **spec: object) -> object:
    """One attempt of a job, as a job process runs it (dal.worker.spec.run_spec), on a store it lends."""
    db = ws / ".dal" / "dal.db"
    with Store(db) as store:
        return run_spec(build_spec(ws / "s.dal", workspace=ws, store=db, **spec), store=db, key=key, fence=None,
                        lent=store)


def test_a_jobs_receipt_is_in_the_store_and_in_files_only_when_asked_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT)
    made: list[object] = []
    real_mkstemp = files.mkstemp
    monkeypatch.setattr(files, "mkstemp", lambda *a, **k: made.append(a) or real_mkstemp(*a, **k))
    report = job_run(tmp_path, "plain")
    assert report.receipt["status"] == "completed" and report.json_path is None
    assert receipt_files(tmp_path / ".dal" / "receipts") == []
    assert made == [] and (tmp_path / ".dal" / "receipts").is_dir()  # the folder, without a probe file in it
    with Store(tmp_path / ".dal" / "dal.db", readonly=True) as store:
        assert store.get_run(report.receipt["run_id"]) == report.receipt

    asked = job_run(tmp_path, "asked", receipts=str(tmp_path / "rec"))
    run_id = asked.receipt["run_id"]
    assert receipt_files(tmp_path / "rec") == [f"{run_id}.json", f"{run_id}.md"]
    assert json.loads((tmp_path / "rec" / f"{run_id}.json").read_text()) == asked.receipt
    assert receipt_files(tmp_path / ".dal" / "receipts") == []


def test_a_receipt_the_store_refused_is_written_to_files_anyway(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT)

    def refuse(self: Store, receipt: dict, **kw: object) -> None:
        raise StoreError("database or disk is full", None)

    monkeypatch.setattr(Store, "save_receipt", refuse)
    report = job_run(tmp_path, "refused")
    run_id = report.receipt["run_id"]
    assert report.store_problem and report.json_path is not None
    assert receipt_files(tmp_path / ".dal" / "receipts") == [f"{run_id}.json", f"{run_id}.md"]


def test_a_worker_leaves_no_receipt_files_and_dal_receipt_show_reads_the_store(queue: Queue) -> None:
    q = queue
    q.write("s.dal", SCRIPT)
    assert q.cli("submit", "s.dal", "--key", "k").code == 0
    assert q.worker("--until-idle").wait(60) == 0, q.logs()
    run_id = q.job(1)["last_run_id"]
    assert q.job(1)["state"] == "done" and receipt_files(q.ws / ".dal" / "receipts") == []
    shown = q.cli("receipt", "show", run_id)
    assert shown.code == 0 and run_id in shown.out and "completed" in shown.out
