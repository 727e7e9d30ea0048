"""`dal receipt show` of a waiting run that a later run continued points to that run, instead of
suggesting a decision that `dal approve` would now refuse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dal


def test_show_of_a_continued_run_points_to_its_successor(tmp_path: Path) -> None:
    policy = {"require_approval": ["touch"]}
    first = dal.run('run("touch a")\nrun("touch b")\n', workspace=tmp_path, policy=policy, key="two-sends")
    dal.approve(first.run_id, workspace=tmp_path)
    second = dal.resume(first.run_id, workspace=tmp_path, policy=policy)
    assert second.status == "waiting"  # now held at the second touch
    shown = subprocess.run(
        [sys.executable, "-m", "dal", "receipt", "show", first.run_id], cwd=tmp_path, capture_output=True,
        text=True,
    )
    assert shown.returncode == 0, shown.stderr
    next_line = [line for line in shown.stdout.splitlines() if line.startswith("next:")][0]
    assert second.run_id in next_line and "dal approve" not in next_line


def test_list_marks_a_continued_run_as_resumed(tmp_path: Path) -> None:
    policy = {"require_approval": ["touch"]}
    first = dal.run('run("touch a")\n', workspace=tmp_path, policy=policy, key="one-send")
    dal.approve(first.run_id, workspace=tmp_path)
    assert dal.resume(first.run_id, workspace=tmp_path).status == "completed"
    listing = subprocess.run([sys.executable, "-m", "dal", "receipts"], cwd=tmp_path, capture_output=True,
                             text=True)
    row = [line for line in listing.stdout.splitlines() if line.startswith(first.run_id)][0]
    assert " resumed " in row and "escalate" not in row
