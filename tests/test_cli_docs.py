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


def test_check_knows_the_test_builtins_in_test_scripts(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "flow.test.dal").write_text('assert_eq(1 + 1, 2)\nassert(true, "fine")\n')
    (tmp_path / "plain.dal").write_text('assert(true, "x")\n')
    ok = subprocess.run([sys.executable, "-m", "dal", "check", "flow.test.dal"], cwd=tmp_path,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "dal", "check", "plain.dal"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "undefined name `assert`" in bad.stderr


def test_check_shows_warnings_beside_errors(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "both.dal").write_text("while true { }\nlet x = y\n")
    p = subprocess.run([sys.executable, "-m", "dal", "check", "both.dal"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert p.returncode == 2
    assert "error[name]" in p.stderr and "warning[unbounded-loop]" in p.stderr
    assert p.stderr.rstrip().endswith("both.dal: 1 error, 1 warning")
