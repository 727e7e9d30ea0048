"""The value `run()` returns: it prints, compares and serialises as its summary; fields give exact checks."""

from __future__ import annotations

import attrs

from dal.effects.classify.check import Decision

__all__ = ["EffectResult", "STATUSES"]

STATUSES = ("completed", "failed", "denied", "timeout", "pending_approval")


def _seconds(ms: float | None) -> str:
    if ms is None:
        return "?"
    s = ms / 1000
    return f"{s:g}s" if s == int(s) else f"{s:.1f}s"


@attrs.frozen
class EffectResult:
    command: str
    status: str
    code: int | None
    stdout: str
    stderr: str
    decision: Decision
    duration_ms: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timeout_s: float | None = None
    limit: str | None = None  # the resource limit the command ran into (docs/policy.md, "Limits")
    wall: str | None = None  # the wall that held its programs: "bubblewrap" | "landlock" | "none"; None: not run

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def summary(self) -> str:
        if self.status == "denied":
            return f"denied: {self.decision.reason}"
        if self.status == "pending_approval":
            return f"pending approval: {self.decision.reason}"
        if self.status == "timeout":
            secs = f"{self.timeout_s:g}s" if self.timeout_s is not None else _seconds(self.duration_ms)
            return f"command timed out after {secs}" + (f"; limit reached: {self.limit}" if self.limit else "")
        if self.status == "failed":
            head = f"command failed (exit {self.code})"
            if self.limit:
                return f"{head}: limit reached: {self.limit}"
            first = next((ln for ln in self.stderr.splitlines() if ln.strip()), "")
            return f"{head}: {first}" if first else head
        if self.stdout:
            return self.stdout[:-1] if self.stdout.endswith("\n") else self.stdout
        return "command completed" + (f"; limit reached: {self.limit}" if self.limit else "")

    @property
    def evidence(self) -> str:
        """The summary as a receipt's evidence: the command's output when it printed any (what the script
        looked at), else DAL's words naming the command ("`touch a` completed", "`ls *` denied: ..."),
        so that `record(state, "create", r)` says which command it was."""
        summary = self.summary
        if self.ok and self.stdout:
            return summary
        if summary.startswith("command "):
            return f"`{self.command}` {summary[len('command '):]}"
        return f"`{self.command}` {summary}"

    def __str__(self) -> str:
        return self.summary

    def dal_field(self, name: str) -> object:
        """The DAL value of field `name`; KeyError for a field a result does not have."""
        if name == "ok":
            return self.ok
        if name == "summary":
            return self.summary
        if name in ("command", "code", "stdout", "stderr", "status", "limit"):
            return getattr(self, name)
        raise KeyError(name)

    def to_json(self) -> dict:
        """The evidence record the receipts keep."""
        d = self.decision
        return {
            "command": self.command,
            "status": self.status,
            "code": self.code,
            "summary": self.summary,
            "class": d.effect_class,
            "idempotent": d.idempotent,
            "reason": d.reason,
            "reads": list(d.reads),
            "writes": list(d.writes),
            "programs": list(d.programs),
            "duration_ms": round(self.duration_ms, 3),
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "limit": self.limit,
            "wall": self.wall,
        }
