"""A worker on PostgreSQL whose server stops mid-job and comes back: the job's process says in
one line that it could not route its job, the worker waits its backoff rather than reconnect in a loop (one
refusal line, then `back`), and the job is finished when the server is back, each effect once."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.pg.server import PgServer
from tests.pg.world import World


def test_a_server_stopped_mid_job_costs_a_few_lines_and_the_job_is_finished_once(tmp_path: Path) -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed")
    if os.environ.get("DAL_TEST_PG"):
        pytest.skip("stops only a server the test started itself (DAL_TEST_PG names another)")
    server = PgServer.start()
    w = World(tmp_path / "ws", server.new_database())
    try:
        w.write("s.dal", 'run("echo a >> out.txt")\nrun("sleep 1")\nrun("echo b >> out.txt")\n')
        assert w.dal("submit", "s.dal", "--key", "k").returncode == 0
        p = w.worker("--lease", "30")
        w.wait_for(lambda: w.lines("out.txt"), 60, "the job to start")
        time.sleep(0.4)  # inside `sleep 1`
        server.stop("immediate")  # a crash of the server, a failover: every connection cut
        time.sleep(3.0)
        server.start_again()
        w.wait_for(lambda: w.states().get(1) == "done", 60, "the job to be done")
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0, w.logs()
        log = w.logs()
        assert "Traceback" not in log and "internal error" not in log, log
        assert "refused to route the job" in log or "refused before its run began" in log, log
        assert log.count("the run store refused:") == 1, log  # once, not once per try (--poll 0.1)
        tries = int(re.search(r"the run store is back, after [\d.]+ s refusing \((\d+) tr", log).group(1))
        assert tries <= 10, log
        assert w.lines("out.txt") == ["a", "b"]
    finally:
        w.stop_all()
        server.close()
