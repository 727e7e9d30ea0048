"""Whether one policy is as narrow as another: the ceiling that `dal test` sets for the workflows a test
invokes and that `dal mcp` sets for what an agent asks for. Both hosts run code they do not trust under a
policy the operator gave, and the untrusted side may only narrow it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from dal.effects.policy import Policy

__all__ = ["beyond", "capped", "loosened"]


def _within(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def beyond(policy: Policy, ceiling: Policy) -> list[str]:
    """What `policy` allows that `ceiling` does not, one phrase each (empty: it is as narrow or narrower).
    A program is runnable when allowed or allowed with approval; an approval the ceiling requires must
    stay required; roots must lie inside the ceiling's; classing a program as a read or idempotent (so
    that DAL runs it again on a retry) is DAL being less careful, so it must be the ceiling's too."""
    out: list[str] = []
    runnable = (policy.allowed | policy.approval) - policy.denied
    may = (ceiling.allowed | ceiling.approval) - ceiling.denied
    if extra := sorted(runnable - may):
        out.append("running " + ", ".join(extra))
    if unapproved := sorted((ceiling.approval & runnable) - policy.approval):
        out.append("running " + ", ".join(unapproved) + " without approval")
    if reads := [r for r in policy.read_roots if not _within(r, ceiling.read_roots)]:
        out.append("reading " + ", ".join(reads))
    if writes := [r for r in policy.write_roots if not _within(r, ceiling.write_roots)]:
        out.append("writing " + ", ".join(writes))
    if env := sorted(policy.env_allow - ceiling.env_allow):
        out.append("env() of " + ", ".join(env))
    if policy.allow_net and not ceiling.allow_net:
        out.append("the network")
    ceiling_prefixes = set(ceiling.prefix_rules)
    if loose := [r.shown() for r in policy.prefix_rules if r.decision == "allow" and r not in ceiling_prefixes]:
        out.append("running " + ", ".join(f"`{x}`" for x in loose) + " by prefix rules the ceiling lacks")
    ceiling_rules = {r.name: r for r in ceiling.rules}
    for r in policy.rules:
        c = ceiling_rules.get(r.name)
        if r.idempotent and not (c is not None and c.idempotent):
            out.append(f"classing {r.name} as idempotent")
        if r.effect_class == "read" and not (c is not None and c.effect_class == "read"):
            out.append(f"classing {r.name} as a read")
    return out


def loosened(policy: Policy, ceiling: Policy) -> list[str]:
    """What capped() would take back from `policy`, one phrase each: a path the ceiling protects or hides
    that `policy` does not, a limit above the ceiling's. A host that must run `policy` as it is (a stored
    policy a continuation keeps) refuses it rather than capping it silently."""
    out: list[str] = []
    if unprotected := [p for p in ceiling.protected if p not in policy.protected]:
        out.append("writing protected " + ", ".join(unprotected))
    if shown := [p for p in ceiling.hidden if p not in policy.hidden]:
        out.append("seeing hidden " + ", ".join(shown))
    limited = capped(policy, ceiling)
    from dal.effects.policy import LIMIT_DEFAULTS

    for key in ("timeout", "max_output", *LIMIT_DEFAULTS):
        if getattr(limited, key) != getattr(policy, key):
            out.append(f"{key} {getattr(policy, key) if getattr(policy, key) is not None else 'unset'} "
                       f"(the ceiling's is {getattr(limited, key)})")
    return out


def capped(policy: Policy, ceiling: Policy) -> Policy:
    """`policy` kept under `ceiling` where beyond() does not compare: everything the ceiling protects or
    hides stays protected or hidden, the ceiling's deny and approve prefix rules still decide, and every
    limit is the smaller of the two (a limit left unset counts as its default), so that a test's own TOML
    cannot drop the operator's `[paths] protect` or lift a `[limits]` value (docs/testing.md, "The policy
    ceiling")."""
    from dal.core import defaults
    from dal.effects.policy import LIMIT_DEFAULTS

    def least(key: str, default: float) -> Any:
        mine, theirs = getattr(policy, key), getattr(ceiling, key)
        if mine is None and theirs is None:
            return None
        return min(default if mine is None else mine, default if theirs is None else theirs)

    held = [r for r in ceiling.prefix_rules if r.decision != "allow"]  # the ceiling's refusals and approvals hold
    return policy.evolve(
        prefix_rules=tuple(dict.fromkeys([*policy.prefix_rules, *held])),
        protected=tuple(dict.fromkeys([*policy.protected, *ceiling.protected])),
        hidden=tuple(dict.fromkeys([*policy.hidden, *ceiling.hidden])),
        timeout=least("timeout", defaults.EFFECT_TIMEOUT),
        max_output=least("max_output", defaults.MAX_OUTPUT),
        **{key: least(key, default) for key, default in LIMIT_DEFAULTS.items()},
    )
