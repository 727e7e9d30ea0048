"""The queue harness the worker tests share (imported by name: a module called `conftest` is whichever
folder's conftest pytest imported last when several test folders run together)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.harness import REPO, SEND_POLICY, Files, Result, cli_in, dal_env, stop_groups  # noqa: F401 - REPO: test_queue_against_a_hostile_script

POLICY = SEND_POLICY


class Queue(Files):
    """One workspace, its store and its queue."""

    def __init__(self, ws: Path, pycache: Path) -> None:
        self.ws = ws
        self.pycache = pycache
        self.workers: list[subprocess.Popen[str]] = []

    @property
    def db(self) -> Path:
        return self.ws / ".dal" / "dal.db"

    def env(self, **extra: str) -> dict[str, str]:
        return dal_env(extra, validate=True, pycache=self.pycache, keep_bytecode_flag=False)

    def cli(self, *args: str) -> Result:
        """`dal ARGS` in this process (fast): the same main() the command runs."""
        return cli_in(self.ws, *args)

    def run(self, *args: str, timeout: float = 60, **env: str) -> Result:
        p = subprocess.run([sys.executable, "-m", "dal", *args], cwd=self.ws, env=self.env(**env), text=True,
                           capture_output=True, timeout=timeout)
        return Result(p.returncode, p.stdout, p.stderr)

    def worker(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """`dal worker ARGS` as a real process, in a process group of its own (so that a test can stop or
        kill the worker with its children, as a machine that goes away would)."""
        log = open(self.ws / f"worker-{len(self.workers)}.log", "w", encoding="utf-8")  # noqa: SIM115
        p = subprocess.Popen([sys.executable, "-m", "dal", "worker", "--poll", "0.05", *args], cwd=self.ws,
                             env=self.env(**env), text=True, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.workers.append(p)
        p.log = log.name  # type: ignore[attr-defined]
        return p

    def started(self, p: subprocess.Popen[str], timeout: float = 30) -> subprocess.Popen[str]:
        """Wait until worker `p` says it started (its signal handlers are in place from then on)."""
        self.wait_for(lambda: "started:" in Path(p.log).read_text(encoding="utf-8"), timeout,  # type: ignore
                      "the worker to start")
        return p

    def logs(self) -> str:
        return "\n".join(f.read_text(encoding="utf-8") for f in sorted(self.ws.glob("worker-*.log")))

    def jobs(self) -> dict[int, dict[str, Any]]:
        from dal.receipts.jobs import JobQueue

        with JobQueue.open(self.db) as q:
            return {j["job_id"]: j for j in q.list(limit=None)}

    def job(self, job_id: int) -> dict[str, Any]:
        return self.jobs()[job_id]

    def wait_for(self, what: Callable[[], Any], timeout: float = 20, why: str = "") -> Any:
        end = time.monotonic() + timeout
        while True:
            got = what()
            if got:
                return got
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {why or what}\n{self.logs()}")
            time.sleep(0.05)

    def states(self) -> dict[int, str]:
        return {i: j["state"] for i, j in self.jobs().items()}

    def stop_all(self) -> None:
        stop_groups(self.workers)

    def check_store(self) -> list[dict[str, Any]]:
        """The store passes integrity_check and every stored receipt matches dal.receipt/v1."""
        from dal.receipts.schema import validate
        from dal.receipts.store import Store

        with Store(self.db, readonly=True) as store:
            assert store.integrity_check() == []
            rows = store.list_runs(limit=None)
            got = [r for r in (store.get_run(row["run_id"]) for row in reversed(rows)) if r is not None]
        for r in got:
            validate(r)
        return got
