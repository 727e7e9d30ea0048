"""`dal run`: run one script under its budgets, policy and receipts."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

EXIT_BY_STATUS = {
    "completed": 0,
    "skipped": 0,
    "failed": 1,
    "rejected": 2,
    "waiting": 3,
    "exhausted": 4,
    "interrupted": 130,
}


def _positive_int(text: str) -> int:
    try:
        v = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}")
    return v


def _seconds(text: str) -> float:
    try:
        v = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def add_budget_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-steps", type=_positive_int, default=1_000_000, metavar="N",
                   help="step budget: every statement and expression costs one step (default 1,000,000)")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="wall-clock budget for the whole run (default: none)")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a script",
        description="Run a DAL script. The whole script is parsed and checked before anything runs. "
        "Exit codes: 0 completed or skipped, 1 failed, 2 rejected (syntax or name errors) or usage "
        "error, 3 waiting for a person, 4 a budget ran out, 130 interrupted (143 on SIGTERM).",
    )
    p.add_argument("script", type=Path, metavar="SCRIPT")
    add_budget_flags(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from dal.cli.main import read_script
    from dal.diagnostics import render, want_color
    from dal.eval.interpreter import Engine, check_source
    from dal.eval.runtime import Runtime

    source = read_script(args.script)
    color = want_color(sys.stderr)
    checked, errors = check_source(source, str(args.script))
    if errors:
        for e in errors:
            sys.stderr.write(render(e, color) + "\n\n")
        sys.stderr.write(f"dal: {args.script} was rejected: nothing ran\n")
        return EXIT_BY_STATUS["rejected"]
    assert checked is not None
    rt = Runtime(max_steps=args.max_steps, timeout=args.timeout, write=sys.stdout.write)
    engine = Engine(rt)
    got: dict[str, str] = {}

    def on_signal(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        got["signal"] = name
        rt.interrupt(name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = engine.execute(checked)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    sys.stdout.flush()
    if outcome.error is not None:
        sys.stderr.write(render(outcome.error, color) + "\n")
    code = EXIT_BY_STATUS[outcome.status]
    if outcome.status == "interrupted" and got.get("signal") == "SIGTERM":
        code = 143
    return code
