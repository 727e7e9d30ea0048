"""A workspace whose run store is a PostgreSQL database, and the `dal` command run against it as real processes
(workers, runs, decisions), for the durability tests of the PostgreSQL store. Effects are counted in the world
(lines appended to files), never by asking the store."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.harness import SEND_POLICY as POLICY
from tests.harness import Files, dal_env, make_workspace, stop_groups


class World(Files):
    """One workspace (`ws`), one database (`url`), the workers started in it."""

    def __init__(self, ws: Path, url: str) -> None:
        self.ws = ws
        self.url = url
        self.workers: list[subprocess.Popen[str]] = []
        make_workspace(ws, POLICY)

    def env(self, **extra: str) -> dict[str, str]:
        return dal_env(extra, validate=True, store=self.url)

    def dal(self, *args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd or self.ws, env=self.env(), text=True,
                              capture_output=True, timeout=timeout)

    def spawn(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "dal", *args], cwd=cwd or self.ws, env=self.env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def worker(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        """`dal worker` in a process group of its own (a test kills it with its children, as a host lost)."""
        log = open(self.ws / f"worker-{len(self.workers)}.log", "w", encoding="utf-8")  # noqa: SIM115
        p = subprocess.Popen([sys.executable, "-m", "dal", "worker", "--poll", "0.1", *args], cwd=cwd or self.ws,
                             env=self.env(), text=True, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        p.log = log.name  # type: ignore[attr-defined]
        self.workers.append(p)
        return p

    def logs(self) -> str:
        return "\n".join(f.read_text(encoding="utf-8")[-4000:] for f in sorted(self.ws.glob("worker-*.log")))

    def store(self, readonly: bool = True) -> Any:
        from dal.receipts.location import StoreLocation, open_store

        return open_store(StoreLocation.parse(self.url, self.ws), readonly=readonly)

    def jobs(self) -> dict[int, dict[str, Any]]:
        with self.store() as s:
            return {j["job_id"]: j for j in s.jobs().list(limit=None)}

    def states(self) -> dict[int, str]:
        return {i: j["state"] for i, j in self.jobs().items()}

    def wait_for(self, what: Callable[[], Any], timeout: float, why: str) -> Any:
        end = time.monotonic() + timeout
        while True:
            got = what()
            if got:
                return got
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {why}\n{self.logs()}")
            time.sleep(0.1)

    def settle_waiting(self, happened: Callable[[str], bool]) -> None:
        """The person on call: for each waiting job, say what happened to the effect it waits on."""
        with self.store() as s:
            waiting = [(j, s.get_run(j["last_run_id"])) for j in s.jobs().list(state="waiting", limit=None)]
        for job, receipt in waiting:
            held = [i for i in (receipt or {}).get("effects", {}).get("items", [])
                    if i["status"] in ("uncertain", "pending_approval")]
            if not held:
                continue
            h = held[-1]
            outcome = "done" if happened(h["command"]) else "retry"
            self.dal("resolve", job["key"], "--effect", str(h["seq"]), "--as", outcome, "--note", "looked")

    def check_receipts(self) -> list[dict[str, Any]]:
        """Every stored receipt matches dal.receipt/v1."""
        from dal.receipts.schema import validate

        with self.store() as s:
            assert s.integrity_check() == []
            got = [r for r in (s.get_run(row["run_id"]) for row in s.list_runs(limit=None)) if r is not None]
        for r in got:
            validate(r)
        return got

    def stop_all(self) -> None:
        stop_groups(self.workers)

    def submit_many(self, script: str, keys: list[str], args_of: Callable[[str], dict[str, str]]) -> None:
        """Submit one job by `dal submit` (its spec checked and pinned as usual), then the others with that
        spec and their own key and script arguments, straight into the queue (thousands in seconds)."""
        first = self.dal("submit", script, *[f"{k}={v}" for k, v in args_of(keys[0]).items()], "--key", keys[0],
                         "--json")
        assert first.returncode == 0, first.stderr
        job = json.loads(first.stdout)["job"]
        spec = job["spec"]
        with self.store(readonly=False) as s:
            q = s.jobs()
            for key in keys[1:]:
                one = {**spec, "extensions": {**spec.get("extensions", {}), "args": args_of(key)}}
                q.submit(spec=one, key=key, queue="default", priority=0, run_at=0.0, max_attempts=job["max_attempts"],
                         host=job["host"], movable=True)


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> Any:
    """A World in a fresh workspace on the test's own database; its workers are killed at the end."""
    w = World(tmp_path / "ws", pg_url)
    yield w
    w.stop_all()
