"""Start-up stays light: `dal check` and `dal run` do not load what they do not use (the REPL, the
schema validator), so a cold start is not paid for features the command does not need."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
from dal.cli.main import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("prompt_toolkit", "pygments", "jsonschema", "tree_sitter", "dal.repl", "dal.runner")
               if m in sys.modules)
print("LOADED:" + ",".join(heavy))
"""


def loaded(tmp: Path, *args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "DAL_VALIDATE_RECEIPTS"}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp, capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    line = [x for x in p.stdout.splitlines() if x.startswith("LOADED:")][-1]
    return set(filter(None, line.removeprefix("LOADED:").split(",")))


def test_check_loads_no_runner_repl_or_validator(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("x")\n')
    assert loaded(tmp_path, "check", "s.dal") == set()


def test_run_loads_no_repl_validator_or_shell_parser(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("x")\n')
    assert loaded(tmp_path, "run", "s.dal", "-q") == {"dal.runner"}
    # the shell parser comes with the first run()
    (tmp_path / "e.dal").write_text('print(run("echo hi"))\n')
    assert loaded(tmp_path, "run", "e.dal", "-q") == {"dal.runner", "tree_sitter"}
