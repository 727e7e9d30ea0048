"""The journal of an operation never drops a run, however many attempts it had (/tmp/attack-dur 15,
executed at full size: the store is given 10,050 early-ending attempts directly, as a week of cron runs of
a broken script would leave them)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import dal

GOOD = "run(\"printf 'a0\\n' >> a.log\")\nrun(\"echo send1 | tee -a outbox.txt\")\n"
BAD = 'let x = int("not a number")\n' + GOOD
POLICY = {"require_approval": ["tee"]}


def test_the_first_attempt_stays_in_the_journal_after_ten_thousand_attempts(tmp_path: Path) -> None:
    script = tmp_path / "s.dal"
    script.write_text(GOOD)
    first = dal.run(str(script), key="K", workspace=str(tmp_path), policy=POLICY)
    assert first.status == "waiting"
    script.write_text(BAD)
    broken = dal.run(str(script), key="K", workspace=str(tmp_path), policy=POLICY)
    assert broken.status == "failed"

    # Clone the broken attempt 10,050 times, each continuing the one before (as `retry` attempts do).
    db = sqlite3.connect(tmp_path / ".dal" / "dal.db")
    cols = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    row = dict(zip(cols, db.execute("SELECT * FROM runs WHERE run_id = ?", (broken.run_id,)).fetchone(),
                   strict=True))
    prev = broken.run_id
    rows = []
    for i in range(10_050):
        rid = f"run_20990101T{i:09d}Z_c0ffee"
        rows.append({**row, "run_id": rid, "previous_run": prev,
                     "receipt": row["receipt"].replace(broken.run_id, rid)})
        prev = rid
    db.executemany(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                   [[r[c] for c in cols] for r in rows])
    db.commit()
    db.close()

    script.write_text(GOOD)
    fixed = dal.run(str(script), key="K", workspace=str(tmp_path), policy=POLICY)
    assert (tmp_path / "a.log").read_text().split() == ["a0"]  # replayed, not appended again
    assert fixed.status == "waiting"  # the send still waits for its approval
    assert fixed.effects["items"][0]["replayed"] is True
