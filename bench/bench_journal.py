"""Cost of the effect journal, and of listing a big store. Prints figures; asserts nothing.

    python bench/bench_journal.py

Targets (issue 5): journaling at most 1 ms per effect over the same effect without the journal; a store
of 10,000 runs lists in well under a second.

The runner commits with synchronous=NORMAL (every commit survives kill -9) and fsyncs only the intent of
an effect that must not run twice (non-idempotent local, external), so the figures are given per kind.
Run it on the disk your stores live on: the fsync figure is the disk's, not DAL's.
"""

from __future__ import annotations

import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dal.effects import EffectContext, Policy
from dal.eval.runtime import Runtime
from dal.receipts.ids import new_run_id, utc_timestamp
from dal.receipts.store import Store
from dal.runner.effects import EffectHandler
from dal.runner.journal import RunJournal
from dal.syntax.ast import Span

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its sibling
from bench_effects import per_call_ms  # noqa: E402


def _span() -> Span:
    return Span(1, 1, 1, 1, 1, 1)


def effect_overhead(ws: Path, command: str, n: int, rounds: int = 9) -> tuple[float, float, float]:
    """Mean time of run(command) through the effect handler without and with the store's journal, in
    interleaved rounds (a subprocess's start-up time drifts; interleaving keeps the drift out of the
    difference). Returns the medians of: without, with, and the per-round difference."""
    policy = Policy.load(ws)
    ctx = EffectContext(policy=policy, use_sandbox=False)
    span = _span()
    bare = EffectHandler(Runtime(), ctx, journal=None)
    store = Store(ws / ".dal" / "dal.db")
    store.set_synchronous("NORMAL")
    run_id = new_run_id()
    store.begin_run(run_id, operation="bench")
    journaled = EffectHandler(Runtime(), ctx, journal=RunJournal(store, lambda: None), run_id=run_id)

    def timed(handler: EffectHandler) -> float:
        started = time.perf_counter()
        for _ in range(n):
            handler(command, span)
        return (time.perf_counter() - started) / n * 1000

    timed(bare)
    timed(journaled)
    without, with_journal, diff = [], [], []
    for _ in range(rounds):
        a = timed(bare)
        b = timed(journaled)
        without.append(a)
        with_journal.append(b)
        diff.append(b - a)
    store.close()
    return statistics.median(without), statistics.median(with_journal), statistics.median(diff)


def receipt_template(run_id: str) -> dict:
    return {
        "schema": "dal.receipt/v1", "run_id": run_id, "operation": "bench", "key": None,
        "script": {"path": "bench.dal", "sha256": "0" * 64}, "workspace": "/tmp", "status": "completed",
        "attempted_at": utc_timestamp(), "finished_at": utc_timestamp(), "duration_ms": 1.0,
        "steps": {"used": 10, "budget": 1_000_000},
        "effects": {"count": 0, "budget": None, "items": [], "omitted": 0},
        "artifacts": [], "external_effect": "none", "retry": "none", "blocker": None, "error": None,
        "result": None, "loops": [], "loops_omitted": 0, "attempts": None, "previous_run": None,
        "skipped_of": None,
    }


def listing(ws: Path, runs: int) -> None:
    db = ws / "big.db"
    with Store(db) as store:
        batch = []
        for i in range(runs):
            r = copy.deepcopy(receipt_template(new_run_id()))
            r["key"] = r["operation"] = f"job:{i % 500}"
            r["status"] = "waiting" if i % 100 == 0 else "completed"
            r["retry"] = "escalate" if r["status"] == "waiting" else "none"
            batch.append(r)
        store.save_receipts(batch, validate=False)
    with Store(db, readonly=True) as store:
        for label, fn in [
            ("list 20 newest (dal receipts)", lambda: store.list_runs(limit=20)),
            ("count all", lambda: store.count_runs()),
            ("list all", lambda: store.list_runs(limit=None)),
            ("list --waiting", lambda: store.list_runs(waiting=True, limit=None)),
            ("newest run of a key", lambda: store.list_runs(key="job:7", limit=1)),
            ("find a key (receipt show KEY)", lambda: store.find("job:7")),
        ]:
            ms = per_call_ms(fn, 5, rounds=3)
            print(f"  {label:32s} {ms:9.3f} ms")

    import contextlib
    import io

    from dal.cli.receipts_cmd import main as receipts_main

    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        receipts_main(["receipts", "--store", str(db)])
    print(f"  {'`dal receipts` in-process':32s} {(time.perf_counter() - started) * 1000:9.3f} ms")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "in.txt").write_text("x\n")
        print("journal overhead per effect (no bubblewrap wall, so the effect itself is as cheap as it gets)")
        for label, command in [
            ("read (cat)", "cat in.txt"),
            ("idempotent local (cp)", "cp in.txt out.txt"),
            ("non-idempotent local (>>), fsynced", "echo x >> log.txt"),
        ]:
            without, with_journal, overhead = effect_overhead(ws, command, 30)
            print(f"  {label:36s} without {without:7.3f} ms   with {with_journal:7.3f} ms   "
                  f"overhead {overhead:7.3f} ms   (target <= 1 ms)")

        store = Store(ws / "raw.db")
        store.set_synchronous("NORMAL")
        run_id = new_run_id()
        store.begin_run(run_id, operation="raw")
        seq = iter(range(1, 10**9))

        def entry() -> None:
            k = next(seq)
            store.journal_intent(run_id, k, "echo", "read")
            store.journal_result(run_id, k, {"status": "completed"})

        normal = per_call_ms(entry, 300)
        store.set_synchronous("FULL")
        full = per_call_ms(entry, 50)
        store.close()
        print(f"  journal alone, intent + result: NORMAL {normal:.3f} ms, FULL (fsync each) {full:.3f} ms")

        print("a store of 10,000 runs")
        listing(ws, 10_000)


if __name__ == "__main__":
    main()
