"""The command-line options of a run, shared by every command that starts one (`dal run`, `dal resume`,
`dal policy check`, `dal repl`): their argument types (clear messages for a bad number, duration or size),
the policy flags, the budget, store and output flags, and the workspace a command works in."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dal.effects.context import DEFAULT_EFFECT_TIMEOUT, DEFAULT_MAX_OUTPUT, EffectContext
from dal.effects.policy import Policy
from dal.runner.workspace import Found, find_workspace


def positive_int(text: str) -> int:
    """A whole number above zero; `1_000_000` and `1,000,000` are accepted."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds above zero, with or without a trailing `s`."""
    try:
        value = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MIN_MEMORY = 16 << 20


def memory_size(text: str) -> int:
    """A memory size: bytes, or with a unit K, M, G or T (powers of 1024; `KB`, `KiB`, `MB`... too)."""
    t = text.strip().lower().replace("_", "")
    for suffix in ("ib", "b"):
        if t.endswith(suffix) and len(t) > len(suffix) and t[-len(suffix) - 1] in "kmgt":
            t = t[: -len(suffix)]
            break
    unit = t[-1:] if t[-1:] in _UNITS and not t[-1:].isdigit() else ""
    number = t[: len(t) - len(unit)]
    try:
        value = int(float(number) * _UNITS[unit])
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 2G, got {text!r}") from None
    if value < MIN_MEMORY:
        raise argparse.ArgumentTypeError(f"must be at least 16M, got {text}")
    return value


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
    (dal/runner/workspace.py). Says on stderr when the workspace found is nested inside another one (once per
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
