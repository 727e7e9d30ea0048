"""`dal worker --metrics-port`: a real worker's Prometheus endpoint on 127.0.0.1, scraped over HTTP and read
with prometheus-client's own parser: jobs by state and queue, run and effect durations, outcomes by retry
class, lease losses and takeovers; a client that connects and sends nothing does not hold the worker up."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from worker_queue import Queue

prometheus = pytest.importorskip("prometheus_client.parser")


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - the test's own worker on 127.0.0.1
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in prometheus.text_string_to_metric_families(text) for s in family.samples}


def _journaled(q: Queue, command: str) -> bool:
    """Whether the store holds the result of an effect `command`."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(q.db, timeout=5)) as c:
        return c.execute("SELECT 1 FROM effects WHERE command = ? AND result IS NOT NULL", (command,)).fetchone() \
            is not None


def url_of(log: str) -> str:
    return re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", log).group(1)


def test_a_real_workers_metrics_count_what_it_did(queue: Queue) -> None:
    q = queue
    q.write("ok.dal", 'run("echo ok >> ok.txt")\nrun("echo again >> ok.txt")\n')
    q.write("bad.dal", 'run("cat input.txt")\nfail("the figures look wrong")\n')
    q.write("long.dal", 'operation("long")\nfor i in range(50) {\n    run("echo " + str(i) + " >> long.txt")\n'
            '    run("sleep 0.1")\n}\n')
    q.write("taken.dal", 'operation("taken")\nrun("echo a >> taken.txt")\nrun("sleep 1")\nrun("echo b >> taken.txt")\n')
    # A worker without metrics starts `taken` and dies (kill -9, its job processes too): the one with
    # metrics takes the job over once its lease ran out.
    assert q.cli("submit", "taken.dal").code == 0
    gone = q.worker("--lease", "1")
    # Killed once effect 1's result is journaled (not merely once its append shows: in between, a kill leaves an
    # effect whose outcome is unknown, which rightly waits for a person).
    q.wait_for(lambda: q.lines("taken.txt") == ["a"] and _journaled(q, "echo a >> taken.txt"), 30,
               "the first worker to journal its job's first effect")
    os.killpg(gone.pid, signal.SIGKILL)
    gone.wait(10)
    for name in ("ok", "bad"):
        assert q.cli("submit", f"{name}.dal", "--key", name).code == 0
    w = q.started(q.worker("--lease", "1", "--concurrency", "2", "--metrics-port", "0"))
    url = url_of(q.logs())
    q.wait_for(lambda: {q.job(j)["state"] for j in (1, 2, 3)} == {"done", "parked"}, 60, "three jobs routed")
    silent = socket.create_connection(("127.0.0.1", int(url.split(":")[2].split("/")[0])))  # sends nothing
    assert q.cli("submit", "long.dal").code == 0
    q.wait_for(lambda: len(q.lines("long.txt")) >= 2, 30, "the long job to start")
    assert q.cli("job", "cancel", "4").code == 0  # its lease is lost at the next renewal
    q.wait_for(lambda: "lost its lease (cancelled)" in q.logs() or "no longer this worker's" in q.logs(), 30,
               "the lease loss")
    t0 = time.monotonic()
    m = scrape(url)
    assert time.monotonic() - t0 < 5  # the silent client held nothing up
    silent.close()
    w.send_signal(signal.SIGTERM)
    assert w.wait(30) == 0, q.logs()

    def value(name: str, **labels: str) -> float:
        return m.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("dal_worker_jobs", state="done", queue="default") == 2  # ok and taken
    assert value("dal_worker_jobs", state="parked", queue="default") == 1
    assert value("dal_worker_jobs", state="cancelled", queue="default") == 1
    assert value("dal_worker_outcomes_total", retry="none", state="done") == 2
    assert value("dal_worker_outcomes_total", retry="inspect", state="parked") == 1
    assert value("dal_worker_takeovers_total") == 1
    assert value("dal_worker_lease_losses_total") == 1
    assert value("dal_worker_run_seconds_count", queue="default") >= 3
    assert value("dal_worker_run_seconds_sum", queue="default") > 0
    assert value("dal_worker_effect_seconds_count") >= 5  # ok's two, bad's one, taken's two after the takeover
    assert value("dal_worker_store_refusing") == 0 and value("dal_worker_job_processes") >= 1
    assert q.lines("taken.txt") == ["a", "b"]  # the takeover replayed the append
    # Every metric docs/workers.md lists is served, and nothing of DAL's that it does not list.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "workers.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(dal_worker_\w+)", doc.split("## Metrics", 1)[1].split("\n## ", 1)[0]))
    served = {re.sub(r"_(bucket|count|sum)$", "", name) for name, _ in m if name.startswith("dal_worker_")}
    assert listed == served, (listed, served)


def test_metrics_need_the_extra_and_a_free_port(queue: Queue, tmp_path: Path) -> None:
    q = queue
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = q.run("worker", "--until-idle", "--metrics-port", str(port))
    assert r.code == 2 and f"cannot serve metrics on 127.0.0.1:{port}" in r.err and "Traceback" not in r.err, r
