"""The command-line options of a run, shared by every command that starts one (`dal run`, `dal resume`,
`dal policy check`, `dal repl`): their argument types (clear messages for a bad number, duration or size),
the policy flags, the budget, store and output flags, and how they become a RunSpec (`spec_options`: the
builder's keywords, so that a flag and the API keyword of the same name are one setting)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dal.core import defaults
from dal.runner.spec import POLICY_FLAGS


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


def memory_size(text: str) -> int:
    """A memory size: bytes, or with a unit K, M, G or T (powers of 1024; `KB`, `KiB`, `MB`... too)."""
    from dal.runner.build import parse_memory

    try:
        return parse_memory(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def byte_size(text: str) -> int:
    """A size in bytes: a number, or with a unit K, M, G or T (powers of 1024), at least one byte."""
    from dal.runner.build import parse_memory

    try:
        return parse_memory(text, minimum=1)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


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
        help=f"timeout of each shell command (default {defaults.EFFECT_TIMEOUT:g}s)",
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


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """Budgets, store and output flags shared by `dal run` and `dal resume` (every default None: the
    run's own on a resume, else dal/core/defaults.py)."""
    b = p.add_argument_group("budgets")
    b.add_argument("--max-steps", type=positive_int, default=None, metavar="N",
                   help="step budget: every statement and expression costs one step "
                   f"(default {defaults.MAX_STEPS:,})")
    b.add_argument("--max-effects", type=positive_int, default=None, metavar="N",
                   help="effect budget: the number of run() calls allowed (default: no limit)")
    b.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                   help="wall-clock budget for the whole run (default: none)")
    b.add_argument("--max-memory", type=memory_size, default=None, metavar="SIZE",
                   help="memory budget, e.g. 512M or 4G: the memory the run may hold; no one value may take "
                   f"more than half of it (default {defaults.MAX_MEMORY >> 30}G)")
    r = p.add_argument_group("receipts and durability")
    r.add_argument("--max-stored-output", type=byte_size, default=None, metavar="SIZE",
                   help="the command output one run may journal, e.g. 64M (default: $DAL_RUN_STORE_LIMIT, else "
                   "the policy's [limits] max_stored_output, else 256M); past it the next effect does not start")
    r.add_argument("--store", default=None, metavar="PATH",
                   help="the run store (default: WORKSPACE/.dal/dal.db, or $DAL_STORE)")
    r.add_argument("--receipts", type=Path, default=None, metavar="DIR",
                   help="where <run_id>.json and <run_id>.md go (default: WORKSPACE/.dal/receipts)")
    r.add_argument("--wait", type=seconds, default=None, metavar="SECONDS",
                   help="when another process runs the same key, wait this long for it instead of exiting 3")
    o = p.add_argument_group("output")
    o.add_argument("-v", "--verbose", action="store_true", help="print each loop receipt as it is emitted")
    o.add_argument("-q", "--quiet", action="store_true", help="print nothing but the script's own output")
    o.add_argument("--json", action="store_true",
                   help="host mode: print only the final run receipt as JSON on stdout (script output "
                   "goes to stderr)")


_SETTINGS = ("max_steps", "max_effects", "timeout", "max_memory", "effect_timeout", "max_stored_output", "wait")


def spec_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of dal.runner.build.build_spec (or resume_spec) that the parsed flags give: a flag not
    on the command (or not given) is left out, so the builder's default (or the run's own) applies."""
    get = args.__dict__.get
    out: dict[str, Any] = {k: get(k) for k in _SETTINGS if get(k) is not None}
    flags = {k: get(k) for k in POLICY_FLAGS if get(k)}
    if flags:
        out["policy_flags"] = flags
    for name, key in (("workspace", "workspace"), ("policy", "policy_file"), ("store", "store"),
                      ("receipts", "receipts"), ("key", "key")):
        if get(name) is not None:
            out[key] = get(name)
    for name in ("require_sandbox", "unsandboxed_as_root", "new_attempt"):
        if get(name):
            out[name] = True
    if get("script_args"):
        out["args"] = script_args(get("script_args"))
    return out


def add_script_args(p: argparse.ArgumentParser) -> None:
    """The script's arguments, `NAME=VALUE` words right after the script (a word that starts with `-` is
    one of dal's flags, so no argument can be taken for one)."""
    p.add_argument("script_args", nargs="*", metavar="NAME=VALUE",
                   help="the script's arguments (its `param` declarations), as name=value words after the script")


def script_args(words: list[str]) -> dict[str, str]:
    """`NAME=VALUE` words as a map of text values; SpecError naming a word that is not one, or a name given
    twice. The values are read as their declared types when the run starts (dal/eval/args.py)."""
    from dal.runner.spec import SpecError

    out: dict[str, str] = {}
    for word in words:
        name, eq, value = word.partition("=")
        if not eq or not name.isidentifier() or not name.isascii():
            raise SpecError(f"{word!r} is not a script argument: after the script, give its arguments as NAME=VALUE "
                            "(one script per run)")
        if name in out:
            raise SpecError(f"script argument {name} is given twice")
        out[name] = value
    return out
