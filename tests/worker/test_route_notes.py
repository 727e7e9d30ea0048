"""Issue 30: a route's note is a clause the worker's log line goes on after (`... → parked`, `...; again
in 2.0 s`): a runner's message that ends in a full stop does not leave `.;` in the middle of a line."""

from __future__ import annotations

from dal.worker import routing

MESSAGE = "cannot write receipt files in /srv/x/.dal/receipts: Permission denied. Nothing ran."


def test_a_runner_message_is_a_clause_of_every_route_it_gives() -> None:
    job = {"job_id": 1, "attempts": 0, "max_attempts": 3, "resume_streak": 0}
    parked = routing.for_runner_error(MESSAGE, 2, job, 100.0, 1.0)
    assert parked.note == "the run could not start: " + MESSAGE[:-1]
    busy = routing.for_runner_error("operation 'k' is running in run_x.", 3, job, 100.0, 1.0)
    assert busy.note.startswith("operation 'k' is running in run_x; again in ")
    faulted = routing.for_runner_error(MESSAGE, 2, job, 100.0, 1.0, store_fault=True)
    for route in (parked, busy, faulted):
        assert ".;" not in route.note and ". ;" not in route.note and not route.note.endswith("."), route.note


def test_dal_jobs_shows_a_waiting_jobs_note_up_to_its_next_move(queue) -> None:
    # The note was cut at 60 characters, most of them the run id, before the command a person needs.
    q = queue
    q.write("send.dal", 'run("echo report | tee -a outbox.txt")\n')
    assert q.cli("submit", "send.dal", "--key", "send", "--require-approval", "tee").code == 0
    assert q.worker("--until-idle").wait(60) == 0
    assert q.job(1)["state"] == "waiting"
    row = q.cli("jobs").out.splitlines()[1]
    run_id = q.job(1)["last_run_id"]
    assert f"dal approve {run_id}" in row and "…" not in row, row
    assert not row.split("  ")[-1].startswith("run "), row  # the LAST RUN column has its status already
