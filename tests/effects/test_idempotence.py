"""Which commands are classed idempotent decides what a retry, or a resume after an unknown outcome (kill -9
between the effect and its journal line), runs again. These run the real `dal run --key` twice with the
fault injected and count what happened on disk (`cp -r`, `cp --backup` were re-run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects import Policy, check_command


@pytest.mark.parametrize(("command", "idempotent"), [
    ("cp a.txt b.txt", True),
    ("cp -T a.txt b.txt", True),
    ("cp --backup=none a.txt b.txt", True),
    ("cp -r src dst", False),
    ("cp -R src dst", False),
    ("cp -a src dst", False),
    ("cp --archive src dst", False),
    ("cp -b a.txt b.txt", False),
    ("cp --backup=numbered a.txt b.txt", False),
    ("cp -S .bak a.txt b.txt", False),
    ("cp -l a.txt c.txt", False),
    ("cp -s a.txt c.txt", False),
])  # fmt: skip
def test_cp_idempotence_class(tmp_path: Path, command: str, idempotent: bool) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "a.txt").write_text("a\n")
    d = check_command(command, Policy.load(tmp_path))
    assert d.allowed, d.reason
    assert d.idempotent is idempotent


def _run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "DAL_TEST_CRASH_AT"} | env
    return subprocess.run([sys.executable, "-m", "dal", "run", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def _tree(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in top.rglob("*"))


def test_a_retry_does_not_copy_a_tree_twice(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a\n")
    (tmp_path / "s.dal").write_text('run("cp -r src dst")\nlet r = run("test -f ready")\n'
                                    'if not r.ok { fail("not ready") }\n')
    first = _run(tmp_path, "--key", "k", "s.dal")
    assert first.returncode != 0
    (tmp_path / "ready").write_text("")
    _run(tmp_path, "--key", "k", "s.dal")
    assert _tree(tmp_path / "dst") == ["a.txt"]  # not dst/src/a.txt: the copy ran once


def test_resume_after_kill_does_not_repeat_a_tree_copy(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a\n")
    (tmp_path / "s.dal").write_text('run("cp -r src dst")\n')
    crashed = _run(tmp_path, "--key", "k", "s.dal", DAL_TEST_CRASH_AT="after-exec:1")
    assert crashed.returncode != 0
    again = _run(tmp_path, "--key", "k", "s.dal")
    assert _tree(tmp_path / "dst") == ["a.txt"], again.stdout + again.stderr


def test_retries_do_not_pile_up_numbered_backups(tmp_path: Path) -> None:
    (tmp_path / "r.txt").write_text("v1\n")
    (tmp_path / "s.dal").write_text('run("cp --backup=numbered r.txt archive.txt")\nlet r = run("test -f ready")\n'
                                    'if not r.ok { fail("not ready") }\n')
    for _ in range(3):
        _run(tmp_path, "--key", "k", "s.dal")
    assert sorted(p.name for p in tmp_path.glob("archive.txt*")) == ["archive.txt"]


@pytest.mark.parametrize("command", ["sort -o out.txt a.txt", "uniq a.txt out.txt", "sort -T tmp a.txt",
                                     "sort -o -- a.txt"])
def test_a_program_that_writes_through_its_arguments_is_at_least_local(tmp_path: Path, command: str) -> None:
    """`sort -o F` and uniq's second operand write F: the class says so ("reads only" said otherwise)."""
    (tmp_path / "a.txt").write_text("b\na\n")
    (tmp_path / "tmp").mkdir()
    decision = check_command(command, Policy.load(tmp_path, _skip_file=True))
    assert decision.allowed and decision.effect_class == "local", decision
