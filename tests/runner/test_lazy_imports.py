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


# What a one-line `dal run` has no use for: Lark (the parser runs generated tables), the policy file's
# TOML parser (no dal.toml), what secrets/tempfile/hashlib/subprocess/shutil bring (ids, temp files,
# digests and the bubblewrap probe are done with os and CPython's own SHA-256), the argument models and
# the shell parser (no run()), the other commands' modules, and persist()'s dataclass.
RUN_NEVER = (
    "lark", "tomllib", "secrets", "hmac", "hashlib", "random", "tempfile", "shutil", "subprocess", "dataclasses",
    "getpass", "shlex", "importlib.resources", "jsonschema", "dal.effects.classify.programs",
    "dal.effects.classify.check", "dal.effects.plan.shell", "dal.effects.exec.executor", "dal.cli.receipts_cmd",
    "dal.cli.durable_cmd",
    "dal.cli.repl_cmd", "dal.cli.test_cmd", "dal.runner.decisions", "dal.receipts.saving", "dal.repl",
)

PROBE_ANY = """
import os, sys
from dal.cli.main import main
code = main(sys.argv[1:])
print("LOADED:" + ",".join(m for m in os.environ["PROBE_MODULES"].split(",") if m in sys.modules))
"""


def loaded_of(tmp: Path, modules: tuple[str, ...], *args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "DAL_VALIDATE_RECEIPTS"}
    env["PROBE_MODULES"] = ",".join(modules)
    p = subprocess.run([sys.executable, "-c", PROBE_ANY, *args], cwd=tmp, capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    line = [x for x in p.stdout.splitlines() if x.startswith("LOADED:")][-1]
    return set(filter(None, line.removeprefix("LOADED:").split(",")))


def test_a_one_line_run_loads_only_what_it_uses(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("x")\n')
    assert loaded_of(tmp_path, RUN_NEVER, "run", "s.dal") == set()  # the sandbox warning's probe included
    assert loaded_of(tmp_path, RUN_NEVER, "run", "s.dal", "--json") == set()


def test_the_policy_file_brings_its_toml_parser(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("x")\n')
    (tmp_path / "dal.toml").write_text('[run]\nallow = ["git"]\n')
    assert loaded_of(tmp_path, ("tomllib",), "run", "s.dal", "-q") == {"tomllib"}


# What a one-effect `dal run` still has no use for: shutil (and its bz2, lzma), which finding a program once
# brought, what tree-sitter-bash's own __init__ imports for highlight queries (importlib.resources, and
# through it tempfile and random), the Landlock wall (bubblewrap is in force), and hashlib with OpenSSL
# (hmac: only a pipeline that writes a held record signs it).
EFFECT_NEVER = ("shutil", "bz2", "lzma", "tempfile", "random", "importlib.resources", "tree_sitter_bash",
                "dal.effects.wall.landlock_wall", "hashlib", "hmac")


def test_a_one_effect_run_loads_no_archive_or_resource_modules(tmp_path: Path) -> None:
    (tmp_path / "e.dal").write_text('print(run("true"))\n')
    assert loaded_of(tmp_path, EFFECT_NEVER, "run", "e.dal", "-q") == set()


SHOWS = """
import sys
import dal.cli.durable_cmd, dal.cli.receipts_cmd, dal.cli.worker_cmd, dal.console.views, dal.mcp.tools
import dal.runner.decisions, dal.runner.shown
print("LOADED:" + ",".join(m for m in ("dal.runner.effects", "dal.runner.runner", "dal.effects.exec.executor")
                           if m in sys.modules))
"""


def test_what_shows_and_decides_about_runs_loads_no_executor() -> None:
    """The console, MCP, the CLI's receipts, decisions and jobs, and the decisions module itself read and
    show runs: none of them imports the code that executes one (the runner, the effect handler)."""
    p = subprocess.run([sys.executable, "-c", SHOWS], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "LOADED:"
