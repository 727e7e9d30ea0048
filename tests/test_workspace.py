"""Workspace discovery (dal/runner/workspace.py): the nearest enclosing folder with a dal.toml or a .dal/ folder,
as git and cargo find theirs; `--workspace` wins; none found is the current directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dal.runner.workspace import CEILING_ENV, find_workspace


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CEILING_ENV, str(tmp_path))  # nothing above the test's folder takes part
    root = tmp_path / "repo"
    (root / "a" / "b" / "c").mkdir(parents=True)
    return root.resolve()


def test_the_nearest_folder_with_dal_toml_wins(tree: Path) -> None:
    (tree / "dal.toml").write_text("")
    found = find_workspace(start=tree / "a" / "b" / "c")
    assert (found.path, found.how, found.outer) == (tree, "dal.toml", None)
    assert found.note() is None


def test_a_dal_folder_marks_a_workspace_too(tree: Path) -> None:
    (tree / "a" / ".dal").mkdir()
    found = find_workspace(start=tree / "a" / "b")
    assert (found.path, found.how) == (tree / "a", ".dal")


def test_no_marker_means_the_current_directory(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree / "a" / "b")
    found = find_workspace()
    assert (found.path, found.how) == (tree / "a" / "b", "current directory")


def test_workspace_flag_overrides_discovery(tree: Path) -> None:
    (tree / "dal.toml").write_text("")
    found = find_workspace(tree / "a", start=tree / "a" / "b")
    assert (found.path, found.how) == (tree / "a", "--workspace")


def test_a_nested_workspace_is_used_and_named(tree: Path) -> None:
    (tree / "dal.toml").write_text("")
    (tree / "a" / "b" / "dal.toml").write_text("")
    found = find_workspace(start=tree / "a" / "b" / "c")
    assert (found.path, found.outer) == (tree / "a" / "b", tree)
    note = found.note()
    assert note is not None and f"is inside workspace {tree}" in note and f"--workspace {tree}" in note


def test_a_ceiling_stops_the_walk(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree / "dal.toml").write_text("")
    monkeypatch.setenv(CEILING_ENV, f"/nonexistent{os.pathsep}{tree / 'a'}")
    assert find_workspace(start=tree / "a" / "b").path == tree / "a" / "b"  # tree/a and above: not looked at
    assert find_workspace(start=tree / "a").path == tree / "a"  # starting in the ceiling: still itself


def test_a_folder_every_user_may_write_is_passed_over(tree: Path) -> None:
    shared = tree / "a"
    (shared / "dal.toml").write_text("[run]\nallow = [\"sh\"]\n")
    (shared / ".dal").mkdir()
    shared.chmod(0o1777)  # as /tmp: anyone could have put the marker there
    try:
        found = find_workspace(start=tree / "a" / "b")
        assert (found.path, found.how) == (tree / "a" / "b", "current directory")
        assert found.passed_over == shared / "dal.toml"
        assert "writable by every user" in (found.note() or "")
        # starting in it, its own dal.toml is used, as dal always did
        assert find_workspace(start=shared).how == "dal.toml"
    finally:
        shared.chmod(0o755)
