"""The pipeline rule (docs/policy.md, "Pipelines"): a stage that makes links or moves names may not run next
to a stage that writes paths, since every stage is checked before any starts. The attacks themselves are
executed in the hostile corpus (pipeline-*); this holds what still runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.effects import Policy, check_command


@pytest.mark.parametrize("command", [
    "cp -l a x | sort -o x - a",
    "cp -s a x | true | tee x",
    "cp -r d e | sort -o out a",
    "cp -a d e | touch f",
    "mv a b | tee c",
    "sort -o z a | cp -P a y",
    "cp -l a x | jq .",
])  # fmt: skip
def test_link_makers_next_to_writers_are_denied(tmp_path: Path, command: str) -> None:
    (tmp_path / "a").write_text("a\n")
    (tmp_path / "d").mkdir()
    d = check_command(command, Policy.load(tmp_path).extended(allow_run=["jq"]))
    assert not d.allowed and "makes links or moves names while" in d.reason, d.reason


@pytest.mark.parametrize("command", [
    "cp -l a x | cat a",  # a reader next to a link maker
    "sort a | tee out",  # writers, no link maker
    "cp a x | sort -o y a",  # a plain copy makes no link
    "cp -l a x && sort -o x - a",  # a list: each is checked again before it starts (and x has two links then)
    "cat a | jq . | tee out.json",  # a program without a model is not counted as a link maker
    "cp -s a x | sort a > out",  # a redirection is opened by DAL, refusing links it did not check
])  # fmt: skip
def test_what_still_runs(tmp_path: Path, command: str) -> None:
    (tmp_path / "a").write_text("a\n")
    d = check_command(command, Policy.load(tmp_path).extended(allow_run=["jq"]))
    assert d.allowed, d.reason
