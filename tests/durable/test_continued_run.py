"""A run without a key has no key lock while it runs: `dal resume RUN` trusts the process it can see. Seen from
another machine sharing the store, or another pid namespace, a live run looks dead; the resume buries it and
continues the operation. The store refuses the original's next intent once the resume is recorded, so the
append runs once, and the original's own receipt (which replaces the bury receipt) names the run that continued
it instead of telling the operator to resume. Executed with real processes; effects counted in the world."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from dal.receipts.store import Store

OTHER_BOOT = "import dal.core.procinfo as _p\n_p._BOOT_ID[:] = ['00000000-0000-4000-8000-0000000000aa']\n"


def _recorded(durable: object, timeout: float = 30) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if durable.db.exists():
            with Store(durable.db, readonly=True) as s:
                rows = s.list_runs(limit=None)
            if rows and rows[0]["status"] == "running":
                return rows[0]["run_id"]
        time.sleep(0.05)
    raise AssertionError("the run was not recorded")


def test_a_keyless_run_resumed_elsewhere_while_it_runs_stops_before_its_next_effect(durable, tmp_path: Path) -> None:
    other = tmp_path / "otherhost"
    other.mkdir()
    (other / "sitecustomize.py").write_text(OTHER_BOOT, encoding="utf-8")
    durable.write("dal.toml", '[run]\nallow = ["sleep"]\n')
    # The run waits for the file `go` (a read each 0.1 s) before its append: it is let go on only once the
    # resume is recorded, however slow the machine.
    durable.write("s.dal", 'while not run("test -e go").ok { sleep(0.1) }\nrun("echo sent >> out.txt")\n')
    a = durable.spawn("run", "s.dal")
    rid = _recorded(durable)
    b = durable.spawn("resume", rid, PYTHONPATH=f"{other}{os.pathsep}{durable.env()['PYTHONPATH']}")
    end = time.monotonic() + 60
    while a.poll() is None and time.monotonic() < end:  # the resume is recorded: the run's next read is refused
        time.sleep(0.05)
    assert a.wait(60) == 2
    err = a.stderr.read()
    assert "error[store]" in err and "continued this run's operation" in err, err
    durable.write("go", "")
    assert b.wait(60) == 0, b.stderr.read()
    assert durable.lines("out.txt") == ["sent"]  # once: the original did not start its append
    with Store(durable.db, readonly=True) as s:
        later = s.run_row(rid)["resumed_by"]
        receipt = s.get_run(rid)
        assert s.get_run(later)["status"] == "completed"
    assert receipt["status"] == "interrupted" and receipt["retry"] == "none" and receipt["continued_by"] == later
    assert later in receipt["blocker"]
    assert json.loads((durable.ws / ".dal" / "receipts" / f"{rid}.json").read_text())["continued_by"] == later
    assert "dal resume" not in err and f"dal: next: nothing here: run {later} continued this one" in err, err
    shown = durable.run("receipt", "show", rid)
    assert "dal resume" not in shown.out and f"run {later} continued this one" in shown.out, shown.out
    durable.check_store()
