"""Fixtures for the queue's tests: a workspace whose policy classes `tee` as external (a stand-in for a
send) and allows `sleep`, the `dal` command in-process (fast) and as real processes (workers, for
kill -9, SIGSTOP and SIGTERM), and readers of the store's jobs and the files scripts append to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from worker_queue import POLICY, Queue


@pytest.fixture(scope="session")
def pycache() -> Path:
    import tempfile

    p = Path(tempfile.gettempdir()) / f"dal-test-pycache-{os.getuid()}"
    p.mkdir(exist_ok=True)
    return p


@pytest.fixture
def queue(tmp_path: Path, pycache: Path, monkeypatch: pytest.MonkeyPatch) -> Queue:
    monkeypatch.delenv("DAL_STORE", raising=False)
    monkeypatch.delenv("DAL_TEST_CRASH_AT", raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "dal.toml").write_text(POLICY, encoding="utf-8")
    (ws / "input.txt").write_text("quarterly figures\n", encoding="utf-8")
    q = Queue(ws, pycache)
    yield q
    q.stop_all()
