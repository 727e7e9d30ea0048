"""Fixtures for the queue's tests: a workspace whose policy classes `tee` as external (a stand-in for a
send) and allows `sleep`, the `dal` command in-process (fast) and as real processes (workers, for
kill -9, SIGSTOP and SIGTERM), and readers of the store's jobs and the files scripts append to."""

from __future__ import annotations

from pathlib import Path

import pytest
from worker_queue import POLICY, Queue

from tests.harness import make_workspace


@pytest.fixture
def queue(tmp_path: Path, pycache: Path, monkeypatch: pytest.MonkeyPatch) -> Queue:
    monkeypatch.delenv("DAL_STORE", raising=False)
    monkeypatch.delenv("DAL_TEST_CRASH_AT", raising=False)
    q = Queue(make_workspace(tmp_path / "ws", POLICY), pycache)
    yield q
    q.stop_all()
