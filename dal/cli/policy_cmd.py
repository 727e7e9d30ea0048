"""`dal policy check "CMD"`: say whether the policy allows a shell command, and why, without running it.

Also the policy flags shared with `dal run` (`add_policy_flags`, `policy_from_args`, `context_from_args`) and
workspace discovery for every command that takes `--workspace` (`workspace_from_args`).
Exit codes of `dal policy check`: 0 allowed (also when it would need approval), 1 denied, 2 usage or
policy error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dal.cli.argtypes import seconds
from dal.effects import EffectContext, Policy, PolicyError
from dal.effects.context import DEFAULT_EFFECT_TIMEOUT, DEFAULT_MAX_OUTPUT
from dal.workspace import Found, find_workspace

__all__ = ["add_policy_flags", "add_unsandboxed_flag", "policy_from_args", "context_from_args", "register",
           "cmd_policy_check", "workspace_from_args", "DEFAULT_EFFECT_TIMEOUT", "DEFAULT_MAX_OUTPUT"]

WORKSPACE_HELP = ("the workspace (default: the nearest folder, from the current directory up, with a dal.toml "
                  "or a .dal/ folder; else the current directory)")


class _Append(argparse.Action):
    """Repeatable and comma-separated: `--allow-run=git,curl --allow-run=make` gives three names."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items += [v.strip() for v in str(values).split(",") if v.strip()]
        setattr(namespace, self.dest, items)


def add_policy_flags(parser: argparse.ArgumentParser, *, additive: bool = False) -> None:
    """The effect-policy flags of `dal run` and `dal policy check`. `additive`: only the flags that add to
    a stored policy (`dal resume`, which has its own --workspace and never reads a policy file)."""
    g = parser.add_argument_group("effect policy" if not additive else
                                  "effect policy (adds to the policy the run started with)")
    if not additive:
        g.add_argument("--workspace", type=Path, metavar="DIR", help=WORKSPACE_HELP)
        g.add_argument(
            "--policy", type=Path, metavar="FILE",
            help="policy TOML file (default: WORKSPACE/dal.toml when it exists)",
        )
    g.add_argument(
        "--allow-run",
        action=_Append,
        default=[],
        metavar="PROG[,PROG...]",
        help="also allow these programs (bare names; repeatable)",
    )
    g.add_argument(
        "--allow-read",
        action=_Append,
        default=[],
        metavar="PATH[,PATH...]",
        help="also allow reads under these paths (relative to the workspace)",
    )
    g.add_argument(
        "--allow-write",
        action=_Append,
        default=[],
        metavar="PATH[,PATH...]",
        help="allow writes only under these paths instead of the whole workspace",
    )
    g.add_argument("--allow-net", action="store_true", help="let programs use the network")
    g.add_argument(
        "--require-approval",
        action=_Append,
        default=[],
        metavar="PROG[,PROG...]",
        help="allow these programs, but only after a person approves each command",
    )
    g.add_argument(
        "--allow-env",
        action=_Append,
        default=[],
        metavar="NAME[,NAME...]",
        help="let env() read these environment variables (besides LANG, TZ and the other harmless ones)",
    )
    g.add_argument(
        "--effect-timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help=f"timeout of each shell command (default {DEFAULT_EFFECT_TIMEOUT:g}s)",
    )
    g.add_argument(
        "--require-sandbox",
        action="store_true",
        help="refuse to run commands when the bubblewrap sandbox is unavailable",
    )
    add_unsandboxed_flag(g)


def add_unsandboxed_flag(parser: Any) -> None:
    """`--unsandboxed-as-root`: as root, run commands even when the bubblewrap wall does not work (they
    would have every capability), instead of refusing each of them."""
    parser.add_argument(
        "--unsandboxed-as-root",
        action="store_true",
        help="as root, run commands even without a working bubblewrap wall (default: refuse them)",
    )


def workspace_from_args(args: argparse.Namespace, *, quiet: bool | None = None) -> Found:
    """The workspace of a command: `--workspace DIR`, else discovered from the current directory
    (dal/workspace.py). Says on stderr when the workspace found is nested inside another one (once per
    command: the result is kept on `args`)."""
    found = getattr(args, "workspace_found", None)
    if isinstance(found, Found):
        return found
    found = find_workspace(getattr(args, "workspace", None))
    args.workspace_found = found
    note = found.note()
    if quiet is None:
        quiet = bool(getattr(args, "quiet", False))
    if note is not None and not quiet:
        sys.stderr.write(f"dal: note: {note}\n")
    return found


def policy_from_args(args: argparse.Namespace) -> Policy:
    """Build the Policy the flags describe; raises PolicyError naming the file or flag at fault."""
    return Policy.load(
        workspace_from_args(args).path,
        getattr(args, "policy", None),
        allow_run=getattr(args, "allow_run", ()) or (),
        allow_read=getattr(args, "allow_read", ()) or (),
        allow_write=getattr(args, "allow_write", ()) or (),
        allow_net=bool(getattr(args, "allow_net", False)),
        require_approval=getattr(args, "require_approval", ()) or (),
        allow_env=getattr(args, "allow_env", ()) or (),
    )


def describe_source(policy: Policy) -> str:
    """The policy file in force as a person reads it: relative to the workspace when inside it, with
    the first characters of its SHA-256; "default policy" when there is none."""
    import os

    if policy.file_sha256 is None:
        return "default policy"
    rel = os.path.relpath(policy.source, policy.workspace)
    return f"{rel if not rel.startswith('..') else policy.source} (sha256 {policy.file_sha256[:12]})"


def context_from_args(args: argparse.Namespace, policy: Policy | None = None) -> EffectContext:
    """The EffectContext the flags describe: timeout from the flag, else the policy file, else 30 s."""
    policy = policy if policy is not None else policy_from_args(args)
    timeout = getattr(args, "effect_timeout", None) or policy.timeout or DEFAULT_EFFECT_TIMEOUT
    return EffectContext(
        policy=policy,
        timeout=timeout,
        max_output=policy.max_output or DEFAULT_MAX_OUTPUT,
        require_sandbox=bool(getattr(args, "require_sandbox", False)),
        unsandboxed_as_root=bool(getattr(args, "unsandboxed_as_root", False)),
    )


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
    add_policy_flags(check)
    check.set_defaults(func=cmd_policy_check)
    return policy


def cmd_policy_check(args: argparse.Namespace) -> int:
    try:
        policy = policy_from_args(args)
    except PolicyError as e:
        sys.stderr.write(f"dal: error: {e}\n")
        return 2
    from dal.effects import check_command, sandbox_status

    d = check_command(args.cmd, policy)
    verdict = "deny" if not d.allowed else "approval required" if d.approval_required else "allow"
    if args.json:
        available, why = sandbox_status()
        out = {
            "decision": verdict,
            "command": args.cmd,
            **d.to_json(),
            "policy": policy.source,
            "policy_sha256": policy.file_sha256,
            "workspace": policy.workspace,
            "workspace_found_by": workspace_from_args(args).how,
            "sandbox": {"available": available, "reason": why},
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
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
            f"  workspace:  {policy.workspace} ({workspace_from_args(args).how})",
            f"  policy:     {describe_source(policy)}",
        ]
        sys.stdout.write("\n".join(lines) + "\n")
    return 0 if d.allowed else 1
