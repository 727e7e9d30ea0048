"""Loop receipts: one at every loop exit, kept compact.

Every exit of every loop produces a receipt. To keep a run's receipt bounded when a loop inside a
function called in a hot loop exits 100,000 times, each loop site keeps its first few exits in full
and folds the rest into one aggregated receipt (exit count, iterations and steps summed, the last
exit's reason). Exits that end the run abnormally (error, budget, interrupt, waiting, fail, finish)
are always kept in full: they are what the operator reads first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dal.eval.runtime import LoopFrame, LoopSite
from dal.receipts.compact import compact

FULL_PER_SITE = 5
FULL_TOTAL = 100
ABNORMAL = frozenset({"error", "budget", "interrupted", "waiting", "fail", "finish"})


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class LoopRecorder:
    """Collects loop receipts as loops exit; `receipts()` returns them in exit order."""

    def __init__(self, on_receipt: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._receipts: list[dict[str, Any]] = []
        self._per_site: dict[LoopSite, int] = {}
        # Aggregated exits of a hot site, kept as a bare list on the hot path and turned into a receipt
        # once, when the receipts are read: [first exit's receipt, exits, iterations, steps, seconds,
        # last reason, last clause, evidence left out].
        self._aggregate: dict[LoopSite, list[Any]] = {}
        self.on_receipt = on_receipt
        self.omitted = 0

    def loop_exit(
        self,
        frame: LoopFrame,
        reason: str,
        clause: str | None,
        steps: int,
        ended_at: float,
        snapshot: Callable[[], dict[str, Any]],
    ) -> None:
        site = frame.site
        agg = self._aggregate.get(site)
        if agg is not None and reason not in ABNORMAL:  # the hot path: a few additions, nothing built
            agg[1] += 1
            agg[2] += frame.iterations
            agg[3] += steps
            agg[4] += ended_at - frame.started_at
            agg[5] = reason
            agg[6] = clause
            if frame.evidence or frame.evidence_omitted:
                agg[7] += len(frame.evidence) + frame.evidence_omitted
            return
        seen = self._per_site.get(site, 0)
        self._per_site[site] = seen + 1
        if reason in ABNORMAL or (seen < FULL_PER_SITE and len(self._receipts) < FULL_TOTAL):
            receipt = self._new(frame, reason, clause, steps, ended_at, snapshot())
            self._receipts.append(receipt)
            if self.on_receipt is not None:
                self.on_receipt(receipt)
            return
        first = self._new(frame, reason, clause, 0, ended_at, {})
        self._aggregate[site] = [
            first, 1, frame.iterations, steps, ended_at - frame.started_at, reason, clause,
            len(frame.evidence) + frame.evidence_omitted,
        ]

    @staticmethod
    def _new(
        frame: LoopFrame, reason: str, clause: str | None, steps: int, ended_at: float, snap: dict[str, Any]
    ) -> dict[str, Any]:
        site = frame.site
        return {
            "kind": site.kind,
            "file": site.filename,
            "line": site.span.line,
            "column": site.span.column,
            "source": site.header,
            "exit": reason,
            "clause": clause,
            "iterations": frame.iterations,
            "steps": steps,
            "started_at": _iso(frame.started_at),
            "duration_ms": round((ended_at - frame.started_at) * 1000, 3),
            "snapshot": {k: compact(v) for k, v in snap.items()},
            "evidence": list(frame.evidence),
            "evidence_omitted": frame.evidence_omitted,
            "exits": 1,
            "aggregated": False,
        }

    def receipts(self) -> list[dict[str, Any]]:
        out = list(self._receipts)
        for first, exits, iterations, steps, seconds, reason, clause, omitted in self._aggregate.values():
            out.append({
                **first,
                "exit": reason,
                "clause": clause,
                "iterations": iterations,
                "steps": steps,
                "duration_ms": round(seconds * 1000, 3),
                "snapshot": {},
                "evidence": [],
                "evidence_omitted": omitted,
                "exits": exits,
                "aggregated": True,
            })
        return out
