"""One module says what to do next (dal/receipts/nextstep.py), right for each kind of run: a plain run the
person resumes, a queued job a worker continues, a keyless run (its own operation), and an agent over MCP."""

from __future__ import annotations

from dal.receipts.nextstep import Continuer, job_next, run_next
from dal.receipts.render import render

RID = "run_20260902T101500000Z_4f9a2c"
JOB = {"job_id": 7, "state": "waiting", "last_run_id": RID}


def test_a_keyless_run_that_asks_for_a_replay_is_a_new_run_not_the_same_operation(build) -> None:
    r = build.base(status="failed", retry="replay", key=None, operation="script:article")
    said = run_next(r)
    assert said.startswith("`dal run article.dal` (a new run")
    assert "same key" not in said and "same operation" not in said
    keyed = build.base(status="failed", retry="replay", key="k", operation="k")
    assert run_next(keyed) == "`dal run --key k article.dal` (same operation, same key)"


def test_a_jobs_waiting_run_is_continued_by_a_worker_not_by_dal_resume(receipts: dict) -> None:
    for name in ("waiting", "waiting_uncertain", "interrupted"):
        plain, job = run_next(receipts[name]), run_next(receipts[name], job=JOB)
        assert f"`dal resume {RID}`" in plain, plain
        assert "dal resume" not in job and "job 7" in job, job
    said = run_next(receipts["waiting"], job=JOB)
    assert f"`dal approve {RID} --effect 4`" in said and "makes job 7 ready again" in said
    decided = {"seq": 4, "decision": "approved", "who": "ana"}
    assert run_next(receipts["waiting"], [decided], job=JOB) == (
        "nothing to do: effect 4 was approved by ana, so job 7 is ready again and a worker continues it")
    assert run_next(receipts["waiting"], [decided]) == f"`dal resume {RID}` (effect 4 was approved by ana)"
    assert "dal resume" not in render(receipts["waiting"], job=JOB).rsplit("next:", 1)[1]


def test_a_jobs_next_step_by_its_state(receipts: dict) -> None:
    assert job_next({**JOB, "state": "ready"}, None) == "waits for a worker (`dal worker`)"
    waiting = job_next(JOB, receipts["waiting"])
    assert "dal resume" not in waiting and waiting.endswith("(or `dal job retry 7`)")
    assert job_next({**JOB, "state": "parked"}, receipts["failed"]) == (
        f"inspect `dal receipt show {RID}`, fix what it names, then `dal job retry 7`")


def test_an_agent_is_told_to_call_its_resume_tool(receipts: dict) -> None:
    agent = Continuer(front="mcp")
    assert run_next(receipts["interrupted"], by=agent) == f"call `resume` with run {RID}"
    waiting = run_next(receipts["waiting"], by=agent)
    assert waiting.startswith("a person reviews") and waiting.endswith(f"and call `resume` with run {RID}")
    assert render(receipts["interrupted"], by=agent).endswith(f"next: call `resume` with run {RID}\n")
