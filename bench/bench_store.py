"""What the checks on opening a store cost. Prints figures; asserts nothing.

    python bench/bench_store.py [RUNS]      # default 10,000 runs

Every open checks the header, the schema and (with no WAL) the page count; PRAGMA integrity_check runs
only when the store is at most FULL_CHECK_ALWAYS bytes, a crash left its WAL, or the store is not as DAL last
left it (its seal). This measures, on a store of RUNS runs (each with a receipt of a few KB and three
journal rows): a writer's open+close when sealed (what every `dal run` pays), a reader's open+close,
PRAGMA integrity_check alone (what an unsealed big store pays once), and a small store's open+close.
Warm page cache: a cold cache makes the check cost what reading the whole file from disk costs.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dal.receipts import store as store_module
from dal.receipts.store import Store


def receipt(i: int) -> dict:
    rid = f"run_2026{i // 2_678_400_000 % 12 + 1:02d}01T{i // 3_600_000 % 24:02d}{i // 60_000 % 60:02d}" \
          f"{i // 1000 % 60:02d}{i % 1000:03d}Z_{i:06x}"
    items = [{"seq": s, "command": f"git log --oneline -n {s}", "status": "completed", "class": "read", "code": 0,
              "summary": "a1b2c3 fix the parser\n" * 8, "reason": None, "reads": ["."], "writes": [],
              "duration_ms": 4.2, "line": 3 + s, "column": 5, "loop_iteration": s, "replayed": False}
             for s in (1, 2, 3)]
    return {
        "schema": "dal.receipt/v1", "run_id": rid, "operation": f"deploy:{i}", "key": f"deploy:{i}",
        "script": {"path": "deploy.dal", "sha256": "a" * 64}, "workspace": "/srv/ws", "status": "completed",
        "attempted_at": "2026-09-02T10:15:00.000Z", "finished_at": "2026-09-02T10:15:01.000Z",
        "duration_ms": 1000.0, "steps": {"used": 420, "budget": 1_000_000},
        "effects": {"count": 3, "budget": None, "items": items, "omitted": 0}, "artifacts": [],
        "external_effect": "none", "retry": "none", "blocker": None, "error": None,
        "result": {"status": "deployed", "notes": "x" * 600}, "loops": [], "loops_omitted": 0,
        "attempts": {"invocations": 1, "new": 1, "resumes": 0, "duplicates": 0}, "previous_run": None,
        "skipped_of": None,
    }


def fill(db: Path, runs: int) -> None:
    with Store(db) as store:
        store.set_synchronous("NORMAL")
        for start in range(0, runs, 500):
            batch = [receipt(i) for i in range(start, min(runs, start + 500))]
            store.save_receipts(batch, validate=False)
            for r in batch:
                for item in r["effects"]["items"]:
                    store.journal_intent(r["run_id"], item["seq"], item["command"], "read",
                                         detail={"line": item["line"], "idempotent": True})
                    store.journal_result(r["run_id"], item["seq"], item)


def timed(fn, n: int) -> float:
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t)
    return statistics.median(xs) * 1000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "big.db", Path(tmp) / "small.db"
        fill(big, runs)
        fill(small, 50)
        size = big.stat().st_size
        Store(big).close()  # sealed
        writer = timed(lambda: Store(big).close(), 21)
        reader = timed(lambda: Store(big, readonly=True).close(), 21)
        small_writer = timed(lambda: Store(small).close(), 21)

        def quick() -> None:
            import sqlite3

            c = sqlite3.connect(f"file:{big}?mode=ro", uri=True)
            assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            c.close()

        check = timed(quick, 5)

        def listing() -> None:  # `dal receipts` in full, `latest`, and one page of a filter
            with Store(big, readonly=True) as st:
                st.list_runs(limit=None)
                st.find("latest")
                st.list_runs(limit=20, status="completed")

        listed = timed(listing, 5)
        print(f"- store of {runs:,} runs: {size / 2**20:.1f} MiB (integrity_check on every open up to "
              f"{store_module.FULL_CHECK_ALWAYS / 2**20:.0f} MiB)")
        print(f"- writer open+close, sealed (each `dal run`): {writer:.2f} ms; reader open+close: {reader:.2f} ms")
        print(f"- PRAGMA integrity_check of the whole store (an unsealed big store, once): {check:.0f} ms "
              f"({check / (size / 2**20):.2f} ms per MiB)")
        print(f"- small store ({small.stat().st_size / 2**10:.0f} KiB, checked every time): writer open+close "
              f"{small_writer:.2f} ms")
        print(f"- every run listed, `latest` found and a page of 20 completed runs: {listed:.0f} ms")
        print(json.dumps({"runs": runs, "bytes": size, "writer_ms": round(writer, 3), "reader_ms": round(reader, 3),
                          "integrity_check_ms": round(check, 1), "small_writer_ms": round(small_writer, 3),
                          "list_ms": round(listed, 1)}))


if __name__ == "__main__":
    main()
