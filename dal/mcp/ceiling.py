"""What the operator gave `dal mcp` when it started — the policy and the budgets — and the one way an
agent's arguments may change them: narrower. An argument that would widen anything is refused, naming
what it would widen; nothing an agent sends can add a program, a root, the network, an `env()` name, an
approval-free run of a gated program, or a larger budget."""

from __future__ import annotations

import os
from typing import Any

from dal.core import defaults
from dal.core.shellword import sh_quote
from dal.effects.policy import Policy
from dal.effects.policy.narrowing import beyond, loosened

# The agent's `policy` argument: the policy flags' names, each naming what the run may use at most.
NARROWING = {
    "allow_run": "the only programs the run may use (each must be one the operator's policy allows; "
                 "a program the operator gates stays gated)",
    "require_approval": "programs whose every command waits for a person's approval, besides the operator's",
    "allow_read": "the only extra read roots (each inside a read root of the operator's policy)",
    "allow_write": "the only write roots (each inside a write root of the operator's policy)",
    "allow_net": "false: no network even where the operator's policy allows it",
    "allow_env": "the only variables env() may read besides the harmless set",
}
BUDGETS = ("max_steps", "max_effects", "timeout", "max_memory", "effect_timeout")


class Widening(Exception):
    """An agent asked for more than the operator allowed; the message names what and says who can grant it."""


class Ceiling:
    """The operator's policy (fixed at start) and budgets; `None` budgets are DAL's defaults."""

    def __init__(self, policy: Policy, *, max_steps: int | None = None, max_effects: int | None = None,
                 timeout: float | None = None, max_memory: int | None = None) -> None:
        self.policy = policy
        self.budgets: dict[str, Any] = {
            "max_steps": max_steps or defaults.MAX_STEPS,
            "max_effects": max_effects,
            "timeout": timeout,
            "max_memory": max_memory or defaults.MAX_MEMORY,
            "effect_timeout": policy.timeout or defaults.EFFECT_TIMEOUT,
        }

    # -- the policy ---------------------------------------------------------------------------------

    def narrow(self, asked: dict[str, Any] | None) -> Policy:
        """The operator's policy narrowed by the agent's `policy` argument (None: the operator's as it is).
        Raises Widening naming every way it would be wider, and ValueError for an argument of a wrong shape."""
        if not asked:
            return self.policy
        p = self.policy
        unknown = sorted(set(asked) - set(NARROWING))
        if unknown:
            raise ValueError(f"policy: unknown key `{unknown[0]}`; its keys are: " + ", ".join(NARROWING))
        for k, v in asked.items():
            if k == "allow_net":
                if not isinstance(v, bool):
                    raise ValueError(f"policy: `allow_net` must be true or false, got {v!r}")
            elif not (isinstance(v, list) and all(isinstance(x, str) and x for x in v)):
                raise ValueError(f"policy: `{k}` must be a list of non-empty strings, got {v!r}")
        # A Policy's `allowed` holds every runnable program, `approval` those of them that wait for a person.
        gated = set(asked.get("require_approval", ()))
        keep = (set(asked["allow_run"]) if "allow_run" in asked else set(p.allowed)) | gated
        approval = (keep & set(p.approval)) | gated
        allowed = keep
        ws = p.workspace
        changes: dict[str, Any] = {"allowed": frozenset(allowed), "approval": frozenset(approval)}
        if "allow_write" in asked:
            changes["write_roots"] = tuple(_roots(ws, asked["allow_write"]))
        writes = changes.get("write_roots", p.write_roots)
        if "allow_read" in asked:
            changes["read_roots"] = tuple(dict.fromkeys([ws, *_roots(ws, asked["allow_read"]), *writes]))
        if "allow_net" in asked:
            changes["allow_net"] = asked["allow_net"]
        if "allow_env" in asked:
            changes["env_allow"] = frozenset(asked["allow_env"])
        narrowed: Policy = p.evolve(**changes)
        if wider := beyond(narrowed, p):
            raise Widening(self.widening("the policy asked for", wider))
        return narrowed

    def widening(self, what: str, wider: list[str]) -> str:
        return (f"refused: {what} would allow {'; '.join(wider)}, which the operator's policy for dal mcp "
                f"({self.policy.source}) does not: an agent may only narrow it (fewer programs, more approvals, "
                "narrower roots, lower budgets); nothing was run. Only the operator can grant more, by "
                "restarting `dal mcp` with another --policy")

    def check_stored(self, stored: Policy | None, run_id: str) -> None:
        """An operation continued through dal mcp runs under its stored policy: refuse one wider than this
        server's (an operation the operator started by hand with more flags stays the operator's)."""
        if stored is None:
            raise Widening(f"refused: run {run_id} keeps no policy in force that dal mcp can compare with its "
                           f"own; only the operator can continue it (`dal resume {sh_quote(run_id)}`)")
        # beyond() compares what may run and where; loosened() what is protected, hidden and limited.
        if wider := beyond(stored, self.policy) + loosened(stored, self.policy):
            raise Widening(f"refused: the operation of run {run_id} runs under its stored policy, which allows "
                           f"{'; '.join(wider)} beyond the operator's policy for dal mcp ({self.policy.source}); "
                           f"only the operator can continue it (`dal resume {sh_quote(run_id)}`); nothing was run")

    # -- budgets --------------------------------------------------------------------------------------

    def budgets_for(self, asked: dict[str, Any], stored: dict[str, Any] | None = None) -> dict[str, Any]:
        """The budgets of a run: each the agent's when it is at most the operator's, else refused; not given:
        the operator's (for a resumed run, its own stored budget when that is lower). Raises Widening."""
        from dal.runner.build import parse_memory

        out: dict[str, Any] = {}
        too_high = []
        for name in BUDGETS:
            cap = self.budgets[name]
            v = asked.get(name)
            if name == "max_memory" and v is not None:
                try:
                    v = parse_memory(str(v))
                except ValueError as e:
                    raise ValueError(f"max_memory: {e}") from None
            if v is not None and cap is not None and v > cap:
                too_high.append(f"{name} {v} (the operator's is {cap})")
            own = (stored or {}).get(name)
            if v is None:
                v = cap if own is None or (cap is not None and own > cap) else own
            out[name] = v
        if too_high:
            raise Widening("refused: " + ", ".join(too_high) + " is above what the operator gave dal mcp: an "
                           "agent may only lower budgets; nothing was run")
        return out


def _roots(ws: str, entries: list[str]) -> list[str]:
    return [os.path.realpath(os.path.join(ws, os.path.expanduser(e))) for e in entries]
