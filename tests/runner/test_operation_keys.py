"""A key a script chooses with operation("K") can neither widen its policy to K's stored one nor take K from
the operator (executed next to a secret in DAL's environment and a marker a
forbidden program would create)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SECRET = "s3cr3t-4242"


def dal(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1", DAL_TEST_SECRET=SECRET)
    env.pop("DAL_STORE", None)
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=ws, capture_output=True, text=True, env=env,
                          timeout=120)


def latest(ws: Path) -> dict:
    p = dal(ws, "receipt", "show", "latest", "--json")
    return json.loads(p.stdout)


def test_a_script_chosen_key_does_not_adopt_a_wider_stored_policy(tmp_path: Path) -> None:
    s = tmp_path / "job.dal"
    s.write_text('operation("deploy")\nprint(run("sh -c \'echo trusted step\'"))\nfail("transient")\n')
    first = dal(tmp_path, "run", "--allow-run=sh", "--allow-env=DAL_TEST_SECRET", "job.dal")
    assert first.returncode == 1 and "trusted step" in first.stdout
    # The script (untrusted: it may be rewritten) at the same path, run with the default policy.
    s.write_text('operation("deploy")\nrun("sh -c \'echo trusted step\'")\nprint("secret:", env("DAL_TEST_SECRET"))\n'
                 'print(run("sh -c \'touch sh-ran\'"))\n')
    second = dal(tmp_path, "run", "job.dal")
    assert second.returncode == 2, second.stderr
    assert SECRET not in second.stdout + second.stderr
    assert not (tmp_path / "sh-ran").exists()
    assert "continues an operation only under the same policy" in second.stderr
    assert second.stderr.count("(policy ") == 2  # both digests named
    assert "dal resume" in second.stderr and "Traceback" not in second.stderr


def test_a_script_chosen_key_continues_under_the_same_policy(tmp_path: Path) -> None:
    s = tmp_path / "job.dal"
    s.write_text('operation("deploy")\nrun("printf \'a0\\n\' >> a.log")\nfail("transient")\n')
    assert dal(tmp_path, "run", "--allow-run=sh", "job.dal").returncode == 1
    s.write_text('operation("deploy")\nrun("printf \'a0\\n\' >> a.log")\nprint("done")\n')
    again = dal(tmp_path, "run", "--allow-run=sh", "job.dal")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "a.log").read_text().split() == ["a0"]  # replayed from the journal, not run again
    assert latest(tmp_path)["previous_run"] is not None


def test_an_operator_key_continues_what_operation_started_in_the_same_script(tmp_path: Path) -> None:
    s = tmp_path / "job.dal"
    s.write_text('operation("deploy")\nrun("printf \'a0\\n\' >> a.log")\nfail("transient")\n')
    assert dal(tmp_path, "run", "job.dal").returncode == 1
    s.write_text('operation("deploy")\nrun("printf \'a0\\n\' >> a.log")\n')
    assert dal(tmp_path, "run", "--key", "deploy", "job.dal").returncode == 0
    assert (tmp_path / "a.log").read_text().split() == ["a0"]


def test_a_script_cannot_squat_the_operators_key(tmp_path: Path) -> None:
    (tmp_path / "untrusted.dal").write_text('operation("nightly-backup")\nprint("squatted")\n')
    assert dal(tmp_path, "run", "untrusted.dal").returncode == 0
    (tmp_path / "backup.dal").write_text('run("printf \'ran\\n\' >> backup.log")\n')
    cron = dal(tmp_path, "run", "--key", "nightly-backup", "backup.dal")
    assert cron.returncode == 0 and latest(tmp_path)["status"] == "completed"
    assert (tmp_path / "backup.log").read_text().split() == ["ran"]
    # The operator's operation is the one that counts for the key now: it is done once.
    again = dal(tmp_path, "run", "--key", "nightly-backup", "backup.dal")
    assert again.returncode == 0 and latest(tmp_path)["status"] == "skipped"
    assert (tmp_path / "backup.log").read_text().split() == ["ran"]


def test_a_script_cannot_complete_the_operators_failed_operation(tmp_path: Path) -> None:
    job = tmp_path / "job.dal"
    job.write_text('run("printf \'a0\\n\' >> a.log")\nfail("transient")\n')
    assert dal(tmp_path, "run", "--key", "K", "job.dal").returncode == 1
    # A script elsewhere would replay the journaled command and "complete" K: it is stopped at operation("K").
    (tmp_path / "untrusted.dal").write_text('operation("K")\nrun("printf \'a0\\n\' >> a.log")\n')
    squat = dal(tmp_path, "run", "untrusted.dal")
    assert squat.returncode == 2, squat.stderr
    assert "operation 'K' is another script's" in squat.stderr and "untrusted.dal:1:1" in squat.stderr
    assert (tmp_path / "a.log").read_text().split() == ["a0"]  # nothing of it ran
    job.write_text('run("printf \'a0\\n\' >> a.log")\nrun("printf \'a1\\n\' >> a.log")\n')
    fixed = dal(tmp_path, "run", "--key", "K", "job.dal")
    assert fixed.returncode == 0
    r = latest(tmp_path)
    assert r["status"] == "completed" and r["effects"]["items"][0]["replayed"] is True
    assert (tmp_path / "a.log").read_text().split() == ["a0", "a1"]


SEND = 'operation("send-invoice-42")\nrun("printf \'sent\\n\' >> ../outbox.txt")\n'


def test_a_completed_operation_stays_done_when_its_script_moves(tmp_path: Path) -> None:
    # A script-chosen key was scoped by the script's path only, so `git mv`, a moved
    # workspace or a bind mount made a completed send run again. The same text by another path is the
    # same script.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "send.dal").write_text(SEND)
    outbox = tmp_path / "outbox.txt"
    assert dal(ws, "run", "--allow-write=..", "send.dal").returncode == 0
    (ws / "jobs").mkdir()
    (ws / "send.dal").rename(ws / "jobs" / "send.dal")
    moved = dal(ws, "run", "--allow-write=..", "jobs/send.dal")
    assert moved.returncode == 0, moved.stderr
    assert latest(ws)["status"] == "skipped"
    ws.rename(tmp_path / "ws-moved")
    again = dal(tmp_path / "ws-moved", "run", "--allow-write=..", "jobs/send.dal")
    assert again.returncode == 0, again.stderr
    assert latest(tmp_path / "ws-moved")["status"] == "skipped"
    assert outbox.read_text().split() == ["sent"]


def test_a_moved_and_edited_script_stops_at_its_key_until_the_operator_says(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "send.dal").write_text(SEND)
    outbox = tmp_path / "outbox.txt"
    assert dal(ws, "run", "--allow-write=..", "send.dal").returncode == 0
    (ws / "send.dal").unlink()
    (ws / "send2.dal").write_text(SEND + 'print("edited")\n')
    stopped = dal(ws, "run", "--allow-write=..", "send2.dal")
    assert stopped.returncode == 2, stopped.stderr
    assert "Nothing ran" in stopped.stderr and "send2.dal:1:1" in stopped.stderr
    assert f"dal run --key send-invoice-42 {ws / 'send2.dal'}" in stopped.stderr
    assert outbox.read_text().split() == ["sent"]
    # The operator decides to run it as an operation of its own: it runs, once.
    assert dal(ws, "run", "--allow-write=..", "--key", "send-invoice-42", "send2.dal").returncode == 0
    assert outbox.read_text().split() == ["sent", "sent"]
    assert dal(ws, "run", "--allow-write=..", "send2.dal").returncode == 0
    assert latest(ws)["status"] == "skipped" and outbox.read_text().split() == ["sent", "sent"]
