"""`dal repl`: the interactive session (dal/repl/main.py), as a subcommand of `dal`."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `repl` to the main CLI's subcommands."""
    from dal.repl.main import add_arguments, run_repl

    parser = subparsers.add_parser(
        "repl",
        help="interactive session (also `dal` alone on a terminal)",
        description="Start an interactive DAL session. Definitions persist between inputs; "
        "run() obeys the same policy as `dal run`.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_repl, handler=run_repl)
    return parser
