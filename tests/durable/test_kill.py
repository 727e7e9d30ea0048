"""kill -9 at every boundary of every effect class, then the same `dal run --key` again.

The script has one effect of each class: a read (`cat`), an idempotent local write (`cp`), a
non-idempotent local write (`>>` append) and an external send (`tee -a outbox.txt`, classed external by
the workspace's dal.toml: one line in outbox.txt is one message sent). The test-only hook
DAL_TEST_CRASH_AT=BOUNDARY:SEQ (docs/durability.md) kills the process with SIGKILL at an exact point.

After the crash, the same command again must either complete, or — when the killed effect's outcome is
unknown and it is not safe to run again — hold the run as waiting with the right blocker until a person
resolves it. Either way: no append and no send happens twice, and the store stays sound.
"""

from __future__ import annotations

import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

SCRIPT = """\
# one sleep length per effect: a crash `during` an effect needs it still running
let pauses = split(env("PAUSES"), ",")
let seen = run("cat input.txt && sleep " + pauses[0])
let copied = run("cp input.txt copy.txt && sleep " + pauses[1])
let appended = run("echo line >> append.txt && sleep " + pauses[2])
let sent = run("echo report | tee -a outbox.txt && sleep " + pauses[3])
let count = run("wc -l append.txt")
print(seen, "/", count)
"""

COMMANDS = {
    1: "cat input.txt && sleep 0",
    2: "cp input.txt copy.txt && sleep 0",
    3: "echo line >> append.txt && sleep 0",
    4: "echo report | tee -a outbox.txt && sleep 0",
}
CLASSES = {1: "read", 2: "local", 3: "local", 4: "external"}
BOUNDARIES = ["before-intent", "after-intent", "during", "after-exec", "after-result"]
UNKNOWN_OUTCOME = {"after-intent", "during", "after-exec"}


def pauses(boundary: str, seq: int) -> str:
    return ",".join("1" if boundary == "during" and i == seq else "0" for i in range(1, 5))


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_kill_9_at_every_boundary_then_reinvoke(boundary, make_durable, monkeypatch) -> None:
    cases = {}
    for seq in (1, 2, 3, 4):
        d = make_durable(f"{boundary}-{seq}")
        d.write("report.dal", SCRIPT)
        proc = d.spawn("run", "--key", "report", "report.dal", "--allow-env=PAUSES",
                       DAL_TEST_CRASH_AT=f"{boundary}:{seq}", PAUSES=pauses(boundary, seq))
        cases[seq] = (d, proc)
    for seq, (_, proc) in cases.items():  # the children run in parallel; collect them all
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, (seq, out, err)

    monkeypatch.setenv("PAUSES", "0,0,0,0")
    for seq, (d, _) in cases.items():
        command = COMMANDS[seq].replace("sleep 0", "sleep " + pauses(boundary, seq).split(",")[seq - 1])
        held = boundary in UNKNOWN_OUTCOME and seq in (3, 4)
        again = d.cli("run", "--key", "report", "report.dal")
        receipt = d.latest()
        if not held:
            # Effects with a journaled result are replayed, the rest run live: nothing is asked of anyone.
            assert again.code == 0, (seq, again)
            assert receipt["status"] == "completed"
            items = receipt["effects"]["items"]
            assert [i["command"] for i in items][: seq] == [
                COMMANDS[i].replace("sleep 0", "sleep " + pauses(boundary, seq).split(",")[i - 1])
                for i in range(1, seq + 1)
            ]
            # The killed effect itself ran again only when its result was never journaled (then it was
            # a read or an idempotent write: safe to repeat).
            assert items[seq - 1]["replayed"] is (boundary == "after-result")
            assert all(i["replayed"] for i in items[: seq - 1])
            assert receipt["attempts"]["resumes"] == 1
        else:
            # Unknown outcome of an effect that must not run twice: held for a person.
            assert again.code == 3, (seq, again)
            assert receipt["status"] == "waiting"
            assert receipt["retry"] == "escalate"
            assert receipt["external_effect"] == "uncertain"
            assert f"`{command}`" in receipt["blocker"]
            last = receipt["effects"]["items"][-1]
            assert (last["seq"], last["status"], last["class"]) == (seq, "uncertain", CLASSES[seq])
            show = d.cli("receipt", "show", "report")
            assert f"dal resolve {receipt['run_id']} --effect {seq} --as done|failed|retry" in show.out
            # Invoking again does not guess either.
            assert d.cli("run", "--key", "report", "report.dal").code == 3
            # The person looks at the world, and says what happened.
            target = "append.txt" if seq == 3 else "outbox.txt"
            happened = len(d.lines(target)) == 1
            if boundary == "after-intent":
                assert not happened
            if boundary == "after-exec":
                assert happened
            decided = d.cli("resolve", "report", "--as", "done" if happened else "retry", "--note", "looked")
            assert decided.code == 0, decided
            resumed = d.cli("resume", "report")
            assert resumed.code == 0, resumed
            assert d.latest()["status"] == "completed"
        # Never twice: one appended line, one message sent, whatever happened in between.
        assert d.lines("append.txt") == ["line"], seq
        assert d.lines("outbox.txt") == ["report"], seq
        assert (d.ws / "copy.txt").read_text() == "quarterly figures\n"
        receipts = d.check_store()
        assert receipts[0]["status"] == "interrupted"  # the killed run, buried with a receipt
        assert receipts[-1]["status"] == "completed"
        assert receipts[-1]["external_effect"] == "performed"
        # And once complete, the key is done: a third invocation runs nothing.
        dup = d.cli("run", "--key", "report", "report.dal")
        assert dup.code == 0 and d.latest()["status"] == "skipped"
        assert d.lines("outbox.txt") == ["report"]


RANDOM_SCRIPT = """\
let seen = run("cat input.txt")
let i = 0
while i < 3 {
    run("cp input.txt copy" + str(i) + ".txt")
    run("echo line" + str(i) + " >> append.txt")
    i = i + 1
}
let sent = run("echo report | tee -a outbox.txt")
run("echo after >> append.txt")
print("done", seen.ok, sent.status)
"""
WAKE = ("run", "--key", "job", "--require-approval=tee", "s.dal")
APPENDED = ["line0", "line1", "line2", "after"]


def _happened(d, command: str) -> bool:
    if "tee" in command:
        return "report" in d.lines("outbox.txt")
    return command.split()[1] in d.lines("append.txt")


def _trial(d, rng: random.Random, span: float, kill_again: float) -> dict[str, Any]:
    """Kill the first run at a random instant, then wake the operation again and again (each wake-up
    killed at a random instant with probability `kill_again`), deciding what a person would, until it
    completes. Returns the counts of what went wrong."""
    d.write("s.dal", RANDOM_SCRIPT)
    bad: dict[str, Any] = {"duplicated": 0, "lost": 0, "corrupt": 0, "stuck": 0, "why": []}
    kill_next = True
    for _step in range(40):
        proc = d.spawn(*WAKE)
        if kill_next:
            time.sleep(rng.uniform(0.0, span))
            proc.kill()
        proc.communicate(timeout=60)
        code = proc.returncode
        kill_next = rng.random() < kill_again
        if code == -signal.SIGKILL:
            bad["killed"] = bad.get("killed", 0) + 1
        if code == 0:
            break
        if code == 3:
            held = [i for i in d.latest()["effects"]["items"] if i["status"] in ("pending_approval", "uncertain")]
            if held and held[-1]["status"] == "pending_approval":
                assert d.run("approve", "job").code == 0
            elif held:
                outcome = "done" if _happened(d, held[-1]["command"]) else "retry"
                assert d.run("resolve", "job", "--as", outcome).code == 0
                bad["resolved"] = bad.get("resolved", 0) + 1
        else:
            assert code == -signal.SIGKILL, (code, proc.args)
    else:
        bad["stuck"] += 1
    lines, sent = d.lines("append.txt"), d.lines("outbox.txt")
    bad["duplicated"] += sum(max(0, lines.count(x) - 1) for x in APPENDED) + max(0, sent.count("report") - 1)
    bad["lost"] += sum(1 for x in APPENDED if x not in lines) + ("report" not in sent)
    try:
        d.check_store()  # sound, every run has a receipt that matches the schema
        again = d.run(*WAKE)  # (a subprocess: the trials run in threads)
        assert again.code == 0 and d.latest()["status"] == "skipped", again
        for n in range(3):
            assert (d.ws / f"copy{n}.txt").read_text() == "quarterly figures\n"
    except AssertionError as e:
        bad["corrupt"] += 1
        bad["why"].append(str(e)[:300])
    return bad


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_kill_9_at_random_instants(make_durable) -> None:
    """kill -9 at random instants of the first run and of the wake-ups after it, over a script with a
    read, idempotent writes, appends and an approval-gated send: 0 duplicated, 0 lost, 0 corrupt, 0 stuck.
    DAL_KILL_TRIALS sets the number of trials (default 12; the bench-like mode is a few hundred)."""
    trials = int(os.environ.get("DAL_KILL_TRIALS", "12"))
    rng = random.Random(int(os.environ.get("DAL_KILL_SEED", "9")))
    calibrate = make_durable("calibrate")
    calibrate.write("s.dal", RANDOM_SCRIPT)
    t0 = time.monotonic()
    assert calibrate.run(*WAKE).code == 3
    span = (time.monotonic() - t0) * 1.2  # kills land anywhere from start-up to the gate and past it
    spaces = [make_durable(f"t{i}") for i in range(trials)]
    seeds = [rng.random() for _ in spaces]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda a: _trial(a[0], random.Random(a[1]), span, 0.5),
                                zip(spaces, seeds, strict=True)))
    total = {k: sum(r[k] for r in results) for k in ("duplicated", "lost", "corrupt", "stuck")}
    assert total == {"duplicated": 0, "lost": 0, "corrupt": 0, "stuck": 0}, (total, [r.get("why") for r in results])
    print(f"{trials} trials, {sum(r.get('killed', 0) for r in results)} kills, "
          f"{sum(r.get('resolved', 0) for r in results)} effects of unknown outcome resolved")
