"""The page a decision lands on says who continues the run: the person (`dal resume RUN`) for a plain
`dal run`, a worker for a queued job (nobody is sent to `dal resume`). It used to say "a worker picks up a
queued job" after every decision, a plain run's included."""

from __future__ import annotations

from console_helpers import SEND, Server, Workspace, form_of, login, request


def _decide(console: Server, rid: str) -> str:
    cookie = login(console)
    r, page = request(console, "GET", "/waiting", cookie=cookie)
    assert r.status == 200, page
    r, text = request(console, "POST", "/decide", cookie=cookie,
                      body={**form_of(page, rid, 2), "decision": "approved", "note": "ok"})
    assert r.status == 200, text
    return text


def test_after_a_plain_runs_decision_the_person_resumes_it(workspace: Workspace, console: Server) -> None:
    w = workspace
    w.write("send.dal", SEND)
    assert w.dal("run", "--key", "send", "--require-approval=tee", "send.dal").code == 3
    rid = w.waiting_run("send")
    text = _decide(console, rid)
    assert "a worker" not in text and "queued job" not in text
    assert f"dal resume {rid}" in text and "Nothing ran now." in text


def test_after_a_jobs_decision_a_worker_continues_it(workspace: Workspace, console: Server) -> None:
    w = workspace
    w.write("send.dal", SEND)
    assert w.dal("submit", "--key", "send", "--require-approval=tee", "send.dal").code == 0
    w.worker()
    job = w.jobs()["send"]
    assert job["state"] == "waiting"
    text = _decide(console, job["last_run_id"])
    assert "dal resume" not in text
    assert f"applies when job {job['job_id']} next reaches effect 2" in text and "a worker continues it" in text
    assert w.jobs()["send"]["state"] == "ready"
