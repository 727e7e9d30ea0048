"""What an agent is told to do next (`next`, and the `next:` of `rendered`): call its `resume` tool for its
own run, never a `dal resume` command it has no terminal for; nothing at all for a job it submitted, which a
worker continues once a person decides."""

from __future__ import annotations

from pathlib import Path

from mcp_agent import Agent, cli, serve


def test_an_agent_resumes_its_run_and_a_worker_its_job(ws: Path) -> None:
    script = 'print(run("touch sent.txt").status)\n'

    async def ran(a: Agent) -> None:
        out = await a.ok("run", {"script": script, "key": "mine"})
        assert out["status"] == "waiting"
        rid = out["run_id"]
        assert out["next"].endswith(f"and call `resume` with run {rid}"), out["next"]
        assert "dal resume" not in out["next"] and "dal resume" not in out["rendered"].rsplit("next:", 1)[1]
        assert (await a.ok("submit", {"script": script, "key": "queued"}))["submitted"] is True

    serve(ws, ran)
    p = cli("worker", "--until-idle", "--concurrency", "1", "--workspace", str(ws), cwd=ws)
    assert p.returncode == 0, p.stderr

    async def shown(a: Agent) -> None:
        job = await a.ok("show_receipt", {"run": "queued"})
        assert job["status"] == "waiting"
        assert "a worker continues it" in job["next"] and "resume" not in job["next"], job["next"]
        assert "nothing to call" in job["note"] and "resume" not in job["note"], job["note"]

    serve(ws, shown)
