"""docs/cli.md documents every command and every flag the parser knows: the docs match the code."""

from __future__ import annotations

import argparse
from pathlib import Path

from dal.cli.main import build_parser

DOC = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_command_and_flag_is_documented() -> None:
    missing = []
    for name, sub in _subparsers(build_parser()).items():
        commands = {name: sub, **{f"{name} {k}": v for k, v in _subparsers(sub).items()}}
        for full, parser in commands.items():
            if f"dal {full}" not in DOC:
                missing.append(f"command `dal {full}`")
            for action in parser._actions:
                for flag in action.option_strings:
                    if flag.startswith("--") and flag != "--help" and flag not in DOC:
                        missing.append(f"`dal {full} {flag}`")
    assert not missing, "undocumented in docs/cli.md: " + ", ".join(sorted(set(missing)))
