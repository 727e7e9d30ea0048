"""The REPL's command line (`dal repl`, `python -m dal.repl`): the same policy flags as `dal run`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dal.core import defaults
from dal.runner.options import add_policy_flags, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `dal repl`: the policy flags of `dal run`, the step budget, the history file."""
    add_policy_flags(parser)
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        default=defaults.MAX_STEPS,
        metavar="N",
        help=f"step budget of each input (default: {defaults.MAX_STEPS:,})",
    )
    parser.add_argument(
        "--history",
        metavar="FILE",
        type=Path,
        help="history file (default: $XDG_STATE_HOME/dal/history)",
    )


def build_parser() -> argparse.ArgumentParser:
    """A standalone parser, for `python -m dal.repl` and for `dal` alone on a terminal."""
    parser = argparse.ArgumentParser(prog="dal repl", description="Start an interactive DAL session.")
    add_arguments(parser)
    return parser


def run_repl(args: argparse.Namespace) -> int:
    """Start the REPL with the parsed flags; returns the exit code."""
    from dal.repl.app import Repl
    from dal.repl.history import LazyFileHistory, default_history_path
    from dal.repl.session import Session
    from dal.repl.wiring import SessionWiring
    from dal.runner.build import SpecError, build_spec
    from dal.runner.options import spec_options
    from dal.runner.spec import effect_context

    notes: list[str] = []
    try:  # the session is specified as `dal run` specifies a run: the same flags, the same builder
        spec = build_spec(None, **spec_options(args), notes=notes)
    except SpecError as e:
        print(f"dal: error: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"dal: note: {note}", file=sys.stderr)
    workspace = Path(spec.workspace)
    policy, context = spec.policy, effect_context(spec, spec.policy)
    session = Session(filename="<repl>", max_steps=spec.max_steps, workspace=workspace, policy=policy)
    history = LazyFileHistory(args.history or default_history_path())
    wiring = SessionWiring(session, context)
    repl = Repl(session, workspace=workspace, wiring=wiring, history=history)
    status = "completed"
    try:
        if not sys.stdin.isatty():
            return repl.run_plain(sys.stdin)
        return repl.run()
    except KeyboardInterrupt:  # Ctrl-C while reading piped input (the prompt handles its own)
        status = "interrupted"
        return 130
    finally:
        _save_receipt(session, wiring, spec, status)


def _save_receipt(session: Any, wiring: Any, spec: Any, status: str) -> None:
    """The session's one run receipt; a store problem is reported, never a traceback on the way out."""
    from dal.receipts.store import StoreError
    from dal.repl.wiring import save_session_receipt

    try:
        md = save_session_receipt(session, wiring, spec, status)
    except (StoreError, OSError) as e:
        print(f"dal: warning: the session's receipt was not saved: {e}", file=sys.stderr)
        return
    if md is not None:
        print(f"dal: session receipt {md}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    return run_repl(build_parser().parse_args(argv))
