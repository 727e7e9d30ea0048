"""`dal policy check "CMD"`: say whether the policy allows a shell command, and why, without running it.

The policy flags it shares with `dal run` are in dal/runner/options.py.
Exit codes of `dal policy check`: 0 allowed (also when it would need approval), 1 denied, 2 usage or
policy error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dal.effects import Policy
from dal.runner.options import add_policy_flags, spec_options


def describe_source(policy: Policy) -> str:
    """The policy file in force as a person reads it: relative to the workspace when inside it, with
    the first characters of its SHA-256; "default policy" when there is none."""
    import os

    if policy.file_sha256 is None:
        return "default policy"
    rel = os.path.relpath(policy.source, policy.workspace)
    return f"{rel if not rel.startswith('..') else policy.source} (sha256 {policy.file_sha256[:12]})"


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `policy check` to the main CLI's subcommands; it sets `func(args) -> int`."""
    policy = subparsers.add_parser(
        "policy",
        help="inspect the effect policy",
        description="Inspect the effect policy that guards run().",
    )
    sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    sub.required = True
    check = sub.add_parser(
        "check",
        help="say whether a shell command is allowed, and why, without running it",
        description="Check a shell command against the policy without running it: allow or deny, the "
        "reason, the effect class and the paths it reads and writes. Exit 0 allowed (also when it "
        "needs approval), 1 denied, 2 usage or policy error.",
    )
    check.add_argument("cmd", metavar="CMD", help="the shell command, as one argument")
    check.add_argument("--json", action="store_true", help="print the decision as JSON")
    check.add_argument("--wall", action="store_true",
                       help="also print the wall each pipeline would run in: what it shows, hides and holds")
    add_policy_flags(check)
    # The run's store and receipts are protected and hidden wherever they are: give the ones `dal run` is given.
    where = check.add_argument_group("the run's store and receipts (protected and hidden, as in the run)")
    where.add_argument("--store", default=None, metavar="PATH",
                       help="the run store the runs use (default: WORKSPACE/.dal/dal.db, or $DAL_STORE)")
    where.add_argument("--receipts", type=Path, default=None, metavar="DIR",
                       help="the receipts folder the runs use (default: WORKSPACE/.dal/receipts)")
    check.set_defaults(func=cmd_policy_check)
    return policy


def cmd_policy_check(args: argparse.Namespace) -> int:
    from dal.runner.build import SpecError, build_spec

    notes: list[str] = []
    try:  # the policy a `dal run` with these flags would start from
        spec = build_spec(None, **spec_options(args), notes=notes)
    except SpecError as e:
        from dal.cli import hostmode

        return hostmode.error(str(e), 2)
    for note in notes:
        sys.stderr.write(f"dal: note: {note}\n")
    # What a run adds to the policy before checking an effect: its store and receipts (wherever --store,
    # $DAL_STORE and --receipts put them) protected and hidden, every policy file the store recorded
    # protected (dal/runner/inforce.py), so the two agree.
    from dal.runner.inforce import checked_policy

    policy, note = checked_policy(spec)
    if note is not None:
        sys.stderr.write(f"dal: note: {note}\n")
    from dal.effects import EffectContext, check_command, sandbox_status, wall_kind, walled_only
    from dal.effects.classify.explain import enforced, modelled, runs

    d = check_command(args.cmd, policy)
    if d.allowed:
        import attrs

        d = attrs.evolve(d, reason=_with_origins(d, policy))
    # the wall a run with these flags would have here: without one, only the default toolset runs
    ctx = EffectContext(policy=policy, require_sandbox=spec.require_sandbox, use_sandbox=spec.use_sandbox,
                        unsandboxed_as_root=spec.unsandboxed_as_root)
    d = walled_only(d, ctx)
    kind = wall_kind(ctx)
    if d.allowed and kind.refused:  # root without a wall, a required wall missing: the run refuses every command
        import attrs

        d = attrs.evolve(d, allowed=False, reason=kind.refused)
    verdict = "deny" if not d.allowed else "approval required" if d.approval_required else "allow"
    walls = _walls(d, policy, spec, kind.name) if args.wall and kind.name != "none" else [] if args.wall else None
    if args.json:
        available, why = sandbox_status()
        from dal.cli import hostmode

        hostmode.emit("policy_decision", {
            "decision": verdict,
            "command": args.cmd,
            **d.to_json(),
            "policy": policy.source,
            "policy_sha256": policy.file_sha256,
            "workspace": policy.workspace,
            "workspace_found_by": spec.workspace_how,
            "sandbox": {"available": available, "reason": why},
            "wall": {"kind": kind.name, "reason": kind.reason, "refused": kind.refused},
            "runs": runs(d.plan) if d.allowed and d.plan is not None else None,
            "modelled": modelled(d.programs) if d.allowed else None,
            "enforced": enforced(policy, kind.name, kind.refused),
            **({"walls": [w.to_json() for w in walls]} if walls is not None else {}),
        })
    else:
        lines = [f"{verdict}: {d.reason}"]
        if d.allowed:
            lines += [
                f"  class:      {d.effect_class}",
                f"  reads:      {', '.join(d.reads) or '(none)'}",
                f"  writes:     {', '.join(d.writes) or '(none)'}",
                f"  programs:   {', '.join(d.programs)}",
                f"  idempotent: {'yes' if d.idempotent else 'no'}",
            ]
        lines += [
            f"  workspace:  {policy.workspace} ({spec.workspace_how})",
            f"  policy:     {describe_source(policy)}",
            f"  wall:       {kind.name} ({kind.refused or kind.reason})",
        ]
        if d.allowed:
            lines.append(f"  runs:       {runs(d.plan)}")
            lines.append(f"  modelled:   {modelled(d.programs)}")
        lines.append(f"  enforced:   {enforced(policy, kind.name, kind.refused)}")
        if walls:
            lines += _describe_walls(d, walls)
        sys.stdout.write("\n".join(lines) + "\n")
    return 0 if d.allowed else 1


def _walls(d: Any, policy: Policy, spec: Any, kind: str) -> list[Any]:
    """The wall plan of each pipeline of an allowed command (none for a denied one), under the wall `kind`."""
    import attrs

    from dal.effects.exec.executor import wall_plans
    from dal.effects.wall.sandbox import WallRefused
    from dal.runner.spec import RunSpec

    try:
        plans = wall_plans(d, policy, RunSpec.effective_effect_timeout(spec.effect_timeout, policy))
    except (WallRefused, OSError) as e:
        sys.stderr.write(f"dal: the wall cannot be set up: {e}\n")
        return []
    if kind == "landlock":  # the same view, as rules; its filters add these (landlock_wall.LandlockWall)
        return [attrs.evolve(p, kind=kind, seccomp=(*p.seccomp, "ipc-keyrings", *(() if p.network else ("sockets",))))
                for p in plans]
    return plans


def _describe_walls(d: Any, walls: list[Any]) -> list[str]:
    lines: list[str] = []
    for i, (pipeline, plan) in enumerate(zip(d.plan.items, walls, strict=False)):
        programs = " | ".join(c.argv[0] for c in pipeline.commands)
        lines.append(f"  wall of pipeline {i + 1} ({programs}):")
        lines += [f"    {line}" for line in plan.describe()]
    return lines



def _origins(policy: Policy) -> tuple[Policy, set[str], set[str]]:
    """The policy without the command line's flags, the programs its file allows by name, and those it
    gates behind approval."""
    import tomllib

    if policy.file_sha256 is None:
        return Policy.default(policy.workspace), set(), set()
    from dal.core.digest import sha256
    from dal.core.readbelow import read_named

    base = Policy.load(policy.workspace, policy.source)
    try:  # by descriptor below the workspace, and only the bytes the policy was built from
        raw = read_named(policy.source, (policy.workspace,))
        data = tomllib.loads(raw.decode("utf-8")) if sha256(raw).hexdigest() == policy.file_sha256 else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):  # changed meanwhile: it names nothing
        return base, set(), set()
    run, programs = data.get("run", {}), data.get("programs", {})
    gated = {*run.get("require_approval", []), *(n for n, t in programs.items() if t.get("approval"))}
    named = {*run.get("allow", []), *gated, *(n for n, t in programs.items() if t.get("allow", True))}
    return base, named, gated


def _with_origins(d: Any, policy: Policy) -> str:
    """The decision's reason, saying where each program's permission (or its approval) came from: the
    default toolset, the policy file, or a flag of this command line (--allow-run, --require-approval).
    The check itself names only the policy's source: "allowed by default policy" for a program only
    --allow-run allowed."""
    from dal.effects.policy import DEFAULT_TOOLSET_NAMES, PolicyError

    try:
        base, named, gated = _origins(policy)
    except PolicyError:
        return d.reason
    source = describe_source(policy)
    flag_gated = policy.approval - base.approval

    def origin(name: str, gate: bool) -> str:
        if name in flag_gated and (gate or name not in base.allowed):
            return "--require-approval"
        if gate:
            return source
        if name not in base.allowed:
            return "--allow-run"
        return source if name in named or name not in DEFAULT_TOOLSET_NAMES else "the default toolset"

    def grouped(names: list[str], gate: bool) -> list[tuple[str, str]]:
        by: dict[str, list[str]] = {}
        for name in names:
            by.setdefault(origin(name, gate), []).append(name)
        return [(", ".join(ns), o) for o, ns in by.items()]

    if d.approval_required:
        marker = f" requires approval ({policy.source})"
        if not d.reason.endswith(marker):
            return d.reason
        groups = grouped(d.reason[: -len(marker)].split(", "), True)
        return "; ".join(f"{ns} requires approval ({o})" for ns, o in groups)
    prefix = f"{', '.join(d.programs)} allowed by {policy.source}: "
    if not d.reason.startswith(prefix):
        return d.reason
    groups = grouped(list(d.programs), False)
    said = "; ".join(f"{ns} {'allowed ' if i == 0 else ''}by {o}" for i, (ns, o) in enumerate(groups))
    return f"{said}: {d.reason[len(prefix):]}"
