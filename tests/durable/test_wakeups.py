"""A waiting operation woken again and again (a cron job, a worker's sweep) while it waits for a person:
each wake-up replays the journal and stops at the same gate. It writes its own run, its hold and its
receipt, never a copy of the journal it replayed, so the store does not grow by the whole journal each time;
and what it replays is still what the next attempt and the receipts see."""

from __future__ import annotations


def _effect_rows(d) -> int:
    import sqlite3

    conn = sqlite3.connect(d.db)
    try:
        return conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0]
    finally:
        conn.close()


def test_a_wake_up_copies_nothing_it_replays(durable) -> None:
    d = durable
    d.write("s.dal", 'for i in range(40) { run("printf \'" + str(i) + "\\\\n\' >> a.log") }\n'
                     'run("echo sent | tee -a outbox.txt")\nrun("printf \'after\\\\n\' >> a.log")\n')
    assert d.cli("run", "--key", "k", "--require-approval=tee", "s.dal").code == 3
    first = _effect_rows(d)
    assert first == 41  # 40 appends and the proposal
    for _ in range(3):
        woken = d.cli("run", "--key", "k", "s.dal")
        assert woken.code == 3, woken
        items = d.latest()["effects"]["items"]
        assert [i["replayed"] for i in items[:40]] == [True] * 40 and items[40]["status"] == "pending_approval"
    assert _effect_rows(d) == first + 3  # one proposal per wake-up, nothing copied
    assert d.lines("a.log") == [str(i) for i in range(40)]
    assert d.cli("approve", "k").code == 0
    done = d.cli("run", "--key", "k", "s.dal")
    assert done.code == 0, done
    assert d.lines("outbox.txt") == ["sent"]
    assert d.lines("a.log") == [str(i) for i in range(40)] + ["after"]
    assert d.cli("run", "--key", "k", "s.dal").code == 0 and d.latest()["status"] == "skipped"
    d.check_store()


def test_a_wake_up_killed_after_its_replay_gets_a_receipt_listing_what_it_replayed(durable) -> None:
    """The receipt a later invocation writes for a run that died lists the effects it replayed (from the
    operation's journal) before the one it died in."""
    d = durable
    d.write("s.dal", 'run("printf \'a0\\\\n\' >> a.log")\nrun("printf \'a1\\\\n\' >> a.log")\n'
                     'run("echo sent | tee -a outbox.txt")\n')
    assert d.cli("run", "--key", "k", "--require-approval=tee", "s.dal").code == 3
    assert d.cli("approve", "k").code == 0
    killed = d.run("run", "--key", "k", "s.dal", DAL_TEST_CRASH_AT="after-intent:3")
    assert killed.code in (-9, 137), killed
    held = d.cli("run", "--key", "k", "s.dal")
    assert held.code == 3, held  # the send's outcome is unknown: held for a person
    buried = [r for r in d.receipts() if r["status"] == "interrupted"][-1]
    items = buried["effects"]["items"]
    assert [(i["seq"], i["replayed"]) for i in items[:2]] == [(1, True), (2, True)], items
    assert items[2]["seq"] == 3 and items[2]["status"] == "uncertain"
    assert d.lines("a.log") == ["a0", "a1"]


def test_a_store_deleted_while_a_run_uses_it_stops_the_run_loudly(durable) -> None:
    """A cleanup job's `rm -rf .dal` mid-run: SQLite would go on writing into the deleted file, the run
    would say `completed`, and the next invocation would run every effect again without a word. The first
    journal write after the deletion refuses, so nothing more runs, and the run says the journal is gone."""
    import shutil
    import time

    from dal.receipts.store import Store

    d = durable
    d.write("s.dal", 'run("printf \'a0\\\\n\' >> a.log")\nrun("sleep 3")\nrun("printf \'a1\\\\n\' >> a.log")\n')
    proc = d.spawn("run", "--key", "k", "s.dal")
    deadline = time.monotonic() + 60
    while True:  # until the sleep has started: its intent is journaled
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        if d.db.exists():
            try:
                with Store(d.db, readonly=True) as store:
                    rows = store.list_runs(limit=1)
                    if rows and any(e["seq"] == 2 for e in store.journal(rows[0]["run_id"])):
                        break
            except Exception:  # the store is being created
                pass
        time.sleep(0.05)
    shutil.rmtree(d.ws / ".dal")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "was deleted or replaced while this process used it" in err, err
    assert "journaled nowhere else" in err, err
    assert d.lines("a.log") == ["a0"]  # nothing ran after the deletion was seen
