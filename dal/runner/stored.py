"""What the store keeps of how a run was started, and reading it back: one module for the writer and every
reader (the journal's chain, the crashed-run receipt, `dal resume`, the policy in force).

The run's row keeps it as JSON (the column is named `policy`, for the store's first layout):

    {"spec": RunSpec.to_json(),      # how the run was specified; its `policy` is the policy in force
     "attempt": "new",               # new | resume | retry | duplicate | rejected (dal/runner/journal.py)
     "sha256": "...",                # of the script's text as it ran
     "adopted_from": "run_..." | null, "added": {...},   # the stored policy adopted, and what flags added
     "key_by": "script"}             # present when the script chose the key (operation("K")), not the operator

Rows stored before the spec existed (`{"launch": {...}, "args": {...}, "in_force": {...}, ...}`) are still
read: `StoredRun.of` gives the same facts from them, and `spec` is rebuilt from the launch and the flags by
`resume_spec` (dal/runner/build.py).
"""

from __future__ import annotations

from typing import Any

from dal.core.records import ValueRecord
from dal.effects.policy import Policy
from dal.receipts.queries import attempt_of, key_by_script, script_of, script_sha256_of
from dal.runner.spec import RunSpec


class StoredRun(ValueRecord):
    """The start of a run as the store keeps it. `spec` is None for a row stored before specs existed
    (`legacy` then holds its launch and flags); `policy` is None when the row kept no policy in force (an
    older DAL stored only the flags)."""

    __slots__ = ("spec", "attempt", "sha256", "policy", "adopted_from", "added", "legacy")

    def __init__(self, spec: RunSpec | None, attempt: str | None, sha256: str | None, policy: Policy | None,
                 adopted_from: str | None = None, added: dict[str, Any] | None = None,
                 legacy: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.attempt = attempt
        self.sha256 = sha256
        self.policy = policy
        self.adopted_from = adopted_from
        self.added = added or {}
        self.legacy = legacy

    @classmethod
    def of(cls, row: dict[str, Any] | None) -> StoredRun:
        """Read a run row (`Store.run_row()`, `Store.lineage()`). Raises PolicyError when the stored policy
        cannot be read and SpecError when the stored spec cannot, so that nothing runs under half of it."""
        data = (row or {}).get("policy") or {}
        if "spec" in data:
            spec = RunSpec.from_json(data["spec"])
            return cls(spec, _str(data.get("attempt")), _str(data.get("sha256")), spec.policy,
                       _str(data.get("adopted_from")), data.get("added") or {})
        launch = data.get("launch") or {}
        in_force = data.get("in_force")
        policy = Policy.from_json(in_force) if in_force is not None else None
        return cls(None, _str(launch.get("attempt")), _str(launch.get("sha256")), policy,
                   _str(data.get("adopted_from")), data.get("added") or {},
                   legacy={"launch": launch, "args": dict(data.get("args") or {})})

    attempt_of = staticmethod(attempt_of)  # dal/receipts/queries.py: the stores read it too

    key_by_script = staticmethod(key_by_script)  # dal/receipts/queries.py: the stores read them too
    script_of = staticmethod(script_of)

    script_sha256_of = staticmethod(script_sha256_of)

    def budget(self, name: str) -> Any:
        """A budget the run was started with (max_steps, max_effects, timeout, max_memory), or None."""
        if self.spec is not None:
            return getattr(self.spec, name)
        return (self.legacy or {}).get("launch", {}).get(name)


def run_record(spec: RunSpec, attempt: str, sha256: str | None, adopted_from: str | None,
               added: dict[str, Any] | None, key_by_script: bool = False) -> dict[str, Any]:
    """What the store keeps of a run's start (begin_run's `policy`): `spec` as it runs, with the policy in
    force."""
    out = {"spec": spec.to_json(), "attempt": attempt, "sha256": sha256, "adopted_from": adopted_from,
           "added": added or {}}
    if key_by_script:
        out["key_by"] = "script"
    return out


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None
