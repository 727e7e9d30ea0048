"""`dal resume K &` and, a random 0-200 ms later, `dal approve K`: the decision is never lost.

It applies to the run that is resuming when that run has not reached the gate yet, else to the next
resume, and `dal approve` says which. Counted over many tries: the approved send executes exactly once,
never without a decision, and approve's message matches what happened. DAL_RACE_TRIES sets the number of
tries (default 50)."""

from __future__ import annotations

import os
import random
import re
import time
from collections import Counter

SEND = """\
let body = run("cat input.txt")
let sent = run("echo report | tee -a outbox.txt")
print("sent:", sent.status)
"""
RUN = ["run", "--key", "send", "--require-approval=tee", "s.dal"]


def test_approve_while_a_resume_starts(make_durable) -> None:
    tries = int(os.environ.get("DAL_RACE_TRIES", "50"))
    rng = random.Random(13)
    seen: Counter[str] = Counter()
    for i in range(tries):
        d = make_durable(f"try{i}")
        d.write("s.dal", SEND)
        assert d.cli(*RUN).code == 3
        resumer = d.spawn("resume", "send")
        time.sleep(rng.uniform(0.0, 0.2))
        approved = d.cli("approve", "send", "--note", f"try {i}")
        _out, err = resumer.communicate(timeout=60)
        assert approved.code == 0, (i, approved)
        first = [r for r in d.receipts() if r["previous_run"]][0]  # the resumer's run
        says = approved.out.splitlines()[-1]
        if first["status"] == "completed":
            assert resumer.returncode == 0, err
            # It saw the decision: approve named it as resuming now, or as starting (it held the key's lock
            # but had not recorded its run), or recorded the decision before it was under way (then "when
            # you resume": this resume was that one).
            assert (f"applies to run {first['run_id']}, which is resuming now" in says
                    or f"applies to the run process {resumer.pid} is starting now" in says
                    or "applies when the operation next reaches effect 2: `dal resume" in says), says
            seen["applied to the resuming run"] += 1
        else:
            # It reached the gate before the decision: it waits, and approve said the next resume applies.
            assert resumer.returncode == 3 and first["status"] == "waiting", err
            assert re.search(rf"applies when you resume: (run {first['run_id']}, resuming now, reached effect "
                             rf"2 before this decision)"
                             rf"|applies when the operation next reaches effect 2: `dal resume {first['run_id']}`"
                             rf"|applies to the run process {resumer.pid} is starting now", says), says
            again = d.cli("resume", "send")
            assert again.code == 0, (i, again)  # not lost: the next resume executes it
            seen["applied to the next resume"] += 1
        assert d.lines("outbox.txt") == ["report"], i
        sends = [item for r in d.receipts() for item in r["effects"]["items"]
                 if item["seq"] == 2 and item["status"] == "completed" and not item["replayed"]]
        assert len(sends) == 1 and "approved by" in sends[0]["reason"] and f"try {i}" in sends[0]["reason"]
        assert d.cli(*RUN).code == 0 and d.latest()["status"] == "skipped"
        d.check_store()
    assert sum(seen.values()) == tries
    print(dict(seen))  # -s shows how the tries fell
