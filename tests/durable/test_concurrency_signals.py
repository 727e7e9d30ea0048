"""One key, one runner: eight simultaneous invocations of a key execute its effects once. SIGINT and
SIGTERM during a loop: the effect under way finishes and is journaled, receipts are written, the exit
code is 130/143, and the run resumes without repeating anything."""

from __future__ import annotations

import json
import re
import signal
import time

import pytest

SLOW = 'run("echo line >> append.txt")\nrun("sleep 2")\n'


def test_eight_invocations_of_one_key_run_effects_once(durable) -> None:
    d = durable
    d.write("slow.dal", SLOW)
    procs = [d.spawn("run", "--key", "shared", "slow.dal", *(["--wait", "60"] if i % 2 else [])) for i in range(8)]
    results = [(p.args, *p.communicate(timeout=90), p.returncode) for p in procs]
    assert d.lines("append.txt") == ["line"]
    receipts = d.check_store()
    assert [r["status"] for r in receipts].count("completed") == 1
    for argv, _out, err, code in results:
        if "--wait" in argv:
            assert code == 0, err  # waited for the holder, then found the key done (or was the holder)
        elif code == 3:
            # Refused at once, naming the process that holds the key; no run recorded for it.
            assert re.search(r"operation 'shared' is being run by process \d+ \(run run_\w+\)", err), err
        else:
            assert code == 0, err
    refused = sum(1 for argv, *_rest, code in results if code == 3)
    assert refused >= 1  # they did overlap: the holder sleeps 2 s, the eight start within about one
    assert len(receipts) == 8 - refused
    assert all(r["status"] == "skipped" for r in receipts if r["status"] != "completed")


LOOP = """\
let i = 0
while i < 12 {
    run("echo tick >> ticks.txt && sleep 0.1")
    i = i + 1
}
print("ticks:", i)
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_a_loop_leaves_a_resumable_run(durable, sig, code) -> None:
    d = durable
    d.write("loop.dal", LOOP)
    proc = d.spawn("run", "--key", "ticker", "loop.dal")
    deadline = time.monotonic() + 30
    while len(d.lines("ticks.txt")) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    (stopped,) = d.check_store()
    assert stopped["status"] == "interrupted" and stopped["retry"] == "resume"
    (loop,) = stopped["loops"]
    assert loop["exit"] == "interrupted" and loop["iterations"] >= 3
    done = len(d.lines("ticks.txt"))
    assert stopped["effects"]["count"] == done  # the effect under way finished and was journaled
    assert all(i["status"] == "completed" for i in stopped["effects"]["items"])

    resumed = d.cli("resume", "ticker")
    assert resumed.code == 0, resumed
    assert resumed.out == "ticks: 12\n"
    assert d.lines("ticks.txt") == ["tick"] * 12  # the appends before the signal were not repeated
    items = d.latest()["effects"]["items"]
    assert [i["replayed"] for i in items] == [True] * done + [False] * (12 - done)
    d.check_store()


def test_a_waiter_takes_over_from_a_holder_killed_with_kill_9(durable) -> None:
    d = durable
    d.write("slow.dal", 'run("echo line >> append.txt")\nrun("sleep 3")\nrun("echo done >> append.txt")\n')
    holder = d.spawn("run", "--key", "shared", "slow.dal")
    deadline = time.monotonic() + 30
    while not d.lines("append.txt") and time.monotonic() < deadline:
        time.sleep(0.02)
    waiter = d.spawn("run", "--key", "shared", "--wait", "60", "slow.dal")
    time.sleep(0.5)  # the waiter is up and polling the lock
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=30)
    _out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert d.lines("append.txt") == ["line", "done"]  # the append before the kill was not repeated
    dead, resumed = d.check_store()
    assert dead["status"] == "interrupted" and resumed["run_id"] in dead["blocker"]
    assert resumed["status"] == "completed" and resumed["previous_run"] == dead["run_id"]
    assert [i["replayed"] for i in resumed["effects"]["items"]] == [True, False, False]


def test_operation_in_the_script_on_a_busy_key_exits_3(durable) -> None:
    d = durable
    d.write("op.dal", 'print("starting")\noperation("shared")\nrun("echo line >> append.txt")\nrun("sleep 2")\n')
    holder = d.spawn("run", "op.dal")
    deadline = time.monotonic() + 30
    while not d.lines("append.txt") and time.monotonic() < deadline:
        time.sleep(0.02)
    second = d.cli("run", "op.dal")
    assert second.code == 3, second
    assert second.out == "starting\n"  # what ran before operation() ran; no effect did
    assert re.search(r"operation 'shared' is being run by process \d+", second.err)
    assert "internal error" not in second.err
    holder.communicate(timeout=30)
    assert holder.returncode == 0
    assert d.lines("append.txt") == ["line"]
    assert [r["status"] for r in d.check_store()] == ["completed"]  # the refused invocation left no run


def test_a_busy_key_in_host_mode_prints_a_json_error_instead_of_a_receipt(durable) -> None:
    d = durable
    d.write("slow.dal", 'run("echo line >> append.txt")\nrun("sleep 2")\n')
    holder = d.spawn("run", "--key", "shared", "slow.dal")
    deadline = time.monotonic() + 30
    while not d.lines("append.txt") and time.monotonic() < deadline:
        time.sleep(0.02)
    second = d.run("run", "--key", "shared", "--json", "slow.dal")
    assert second.code == 3, second
    error = json.loads(second.out)["error"]  # stdout is one JSON object a host can parse
    assert error["exit_code"] == 3
    assert re.search(r"operation 'shared' is being run by process \d+", error["message"])
    assert error["message"] in second.err
    holder.communicate(timeout=30)
    assert d.lines("append.txt") == ["line"]
