"""The REPL's command line (`dal repl`, `python -m dal.repl`): the same policy flags as `dal run`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dal.runner.options import add_policy_flags, positive_int

DEFAULT_MAX_STEPS = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `dal repl`: the policy flags of `dal run`, the step budget, the history file."""
    add_policy_flags(parser)
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"step budget of each input (default: {DEFAULT_MAX_STEPS:,})",
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


def _policy_and_context(args: argparse.Namespace) -> tuple[Any, Any]:
    """The policy and effect context the flags describe, exactly as `dal run` builds them."""
    try:
        from dal.effects import PolicyError
        from dal.runner.options import context_from_args, policy_from_args
    except ImportError:  # no effects yet: run() stays unavailable in the session
        return None, None
    try:
        policy = policy_from_args(args)
    except PolicyError as e:
        raise _UsageError(str(e)) from None
    return policy, context_from_args(args, policy)


class _UsageError(Exception):
    """A bad flag or policy file: reported in one line, exit 2."""


def run_repl(args: argparse.Namespace) -> int:
    """Start the REPL with the parsed flags; returns the exit code."""
    from dal.repl.app import Repl
    from dal.repl.history import LazyFileHistory, default_history_path
    from dal.repl.session import Session
    from dal.repl.wiring import SessionWiring
    from dal.runner.workspace import find_workspace

    workspace = find_workspace(getattr(args, "workspace", None)).path
    if not workspace.is_dir():
        print(f"dal: error: the workspace {workspace} is not a directory", file=sys.stderr)
        return 2
    args.workspace = workspace
    try:
        policy, context = _policy_and_context(args)
    except _UsageError as e:
        print(f"dal: error: {e}", file=sys.stderr)
        return 2
    session = Session(filename="<repl>", max_steps=args.max_steps, workspace=workspace, policy=policy)
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
        _save_receipt(session, wiring, workspace, status)


def _save_receipt(session: Any, wiring: Any, workspace: Path, status: str) -> None:
    """The session's one run receipt; a store problem is reported, never a traceback on the way out."""
    from dal.receipts.store import StoreError
    from dal.repl.wiring import save_session_receipt

    try:
        md = save_session_receipt(session, wiring, workspace, status)
    except (StoreError, OSError) as e:
        print(f"dal: warning: the session's receipt was not saved: {e}", file=sys.stderr)
        return
    if md is not None:
        print(f"dal: session receipt {md}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    return run_repl(build_parser().parse_args(argv))
