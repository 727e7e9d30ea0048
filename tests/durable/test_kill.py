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

import signal

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
