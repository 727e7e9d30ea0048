"""`dal mcp` through the SDK's own stdio client: what an agent can do, and the walls it cannot pass —
executed next to marker files, with the decision made by the operator's `dal approve`."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_agent import CONSOLE, Agent, cli, runs_of, serve

READ_ONLY = {"check", "check_command", "show_receipt", "list_waiting"}


def test_an_agent_runs_a_script_and_gets_its_receipt(ws: Path) -> None:
    async def scenario(a: Agent) -> None:
        tools = (await a.session.list_tools()).tools
        assert {t.name for t in tools} == READ_ONLY | {"run", "submit", "resume"}
        for t in tools:
            assert t.annotations.readOnlyHint is (t.name in READ_ONLY), t.name
            assert not any(w in t.name for w in ("approve", "deny", "resolve", "decide"))
        out = await a.ok("run", {"script": 'print("hello")\nlet r = run("echo from-effect")\nprint(r)',
                                 "key": "greet:1"})
        assert out["status"] == "completed" and out["retry"] == "none" and out["new_run"] is True
        assert out["output"] == "hello\nfrom-effect\n"
        assert out["effects"] == [{"seq": 1, "command": "echo from-effect", "status": "completed",
                                   "summary": "from-effect"}]
        rid = out["run_id"]
        assert out["receipt"] == f"dal://runs/{rid}"
        templates = (await a.session.list_resource_templates()).resourceTemplates
        assert [t.uriTemplate for t in templates] == ["dal://runs/{run_id}"]
        body = (await a.session.read_resource(f"dal://runs/{rid}")).contents[0]
        receipt = json.loads(body.text)
        assert receipt["run_id"] == rid and receipt["status"] == "completed" and body.mimeType == "application/json"
        listed = [str(r.uri) for r in (await a.session.list_resources()).resources]
        assert f"dal://runs/{rid}" in listed
        shown = await a.ok("show_receipt", {"run": "greet:1"})
        assert shown["run_id"] == rid and shown["full"]["schema"] == "dal.receipt/v1"
        # a completed key runs nothing again
        again = await a.ok("run", {"script": 'print("hello")\nlet r = run("echo from-effect")\nprint(r)',
                                   "key": "greet:1"})
        assert again["status"] == "skipped"

    serve(ws, scenario)


def test_an_approval_gated_effect_waits_for_a_person_and_the_agents_resume_finishes_after_dal_approve(
        ws: Path) -> None:
    marker = ws / "sent.txt"
    script = 'let r = run("touch sent.txt")\nprint(r.status)\n'

    async def waits(a: Agent) -> str:
        out = await a.ok("run", {"script": script, "key": "send:42"})
        assert out["status"] == "waiting" and out["external_effect"] == "pending_approval"
        rid = out["run_id"]
        assert out["decide"]["console"] == f"{CONSOLE}/runs/{rid}"
        assert f"dal approve {rid} --effect 1" in out["decide"]["cli"]
        assert not marker.exists()
        # calling the waiting key again creates no new run; resuming without a decision is refused
        again = await a.ok("run", {"script": script, "key": "send:42"})
        assert again["run_id"] == rid and again["new_run"] is False and again["status"] == "waiting"
        msg = await a.refused("resume", {"run": rid})
        assert "no decision has been recorded" in msg and f"{CONSOLE}/runs/{rid}" in msg
        queued = await a.ok("submit", {"script": script, "key": "send:42"})
        assert queued["submitted"] is False and queued["run_id"] == rid and "waits for a person" in queued["reason"]
        waiting = await a.ok("list_waiting", {})
        assert [(w["run_id"], w["decision_recorded"]) for w in waiting["waiting"]] == [(rid, False)]
        assert not marker.exists()
        return rid

    rid = serve(ws, waits)
    assert runs_of(ws, "mcp:send:42") == [rid]
    # the operator decides, outside the agent's reach
    p = cli("approve", rid, "--workspace", str(ws), cwd=ws)
    assert p.returncode == 0, p.stderr

    async def finishes(a: Agent) -> None:
        waiting = await a.ok("list_waiting", {})
        assert [(w["run_id"], w["decision_recorded"]) for w in waiting["waiting"]] == [(rid, True)]
        done = await a.ok("resume", {"run": rid})
        assert done["status"] == "completed" and done["output"] == "completed\n"
        assert marker.exists()
        assert (await a.ok("list_waiting", {}))["count"] == 0
        again = await a.ok("run", {"script": script, "key": "send:42"})
        assert again["status"] == "skipped"

    serve(ws, finishes)


def test_a_waiting_key_decided_by_a_person_finishes_through_run_with_the_same_key(ws: Path) -> None:
    script = 'let r = run("touch sent.txt")\nprint(r.status)\n'
    rid = serve(ws, lambda a: a.ok("run", {"script": script, "key": "k"}))["run_id"]
    assert cli("approve", rid, "--workspace", str(ws), cwd=ws).returncode == 0
    out = serve(ws, lambda a: a.ok("run", {"script": script, "key": "k"}))
    assert out["status"] == "completed" and out["new_run"] is True and (ws / "sent.txt").exists()


def test_a_denial_made_through_the_cli_reaches_the_script_on_the_agents_resume(ws: Path) -> None:
    script = 'let r = run("touch sent.txt")\nprint(r.status)\n'
    rid = serve(ws, lambda a: a.ok("run", {"script": script, "key": "deny-me"}))["run_id"]
    assert cli("deny", rid, "--workspace", str(ws), cwd=ws).returncode == 0
    out = serve(ws, lambda a: a.ok("resume", {"run": rid}))
    assert out["status"] == "completed" and out["output"] == "denied\n"
    assert not (ws / "sent.txt").exists()


def test_widening_the_policy_or_a_budget_is_refused_and_nothing_runs(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = ws / "canary"

    async def scenario(a: Agent) -> None:
        msg = await a.refused("run", {"script": 'run("sh -c \\"touch canary\\"")', "key": "w1",
                                      "policy": {"allow_run": ["sh", "echo"]}})
        assert "running sh" in msg and "may only narrow" in msg
        msg = await a.refused("run", {"script": f'run("touch {outside}/x")', "key": "w2",
                                      "policy": {"allow_write": [str(outside)]}})
        assert f"writing {outside}" in msg
        msg = await a.refused("run", {"script": 'print(1)', "key": "w3", "policy": {"allow_net": True}})
        assert "the network" in msg
        msg = await a.refused("run", {"script": 'print(env("HOME"))', "key": "w4", "policy": {"allow_env": ["HOME"]}})
        assert "env() of HOME" in msg
        msg = await a.refused("run", {"script": 'print(1)', "key": "w5", "max_steps": 10_000_000})
        assert "max_steps 10000000 (the operator's is 5000)" in msg
        msg = await a.refused("check_command", {"command": "sh -c 'touch canary'", "policy": {"allow_run": ["sh"]}})
        assert "running sh" in msg
        # naming a gated program does not ungate it: narrowing keeps the operator's approvals
        out = await a.ok("run", {"script": 'print(run("touch canary").status)', "key": "w6",
                                 "policy": {"allow_run": ["touch"]}})
        assert out["status"] == "waiting"
        # narrowing works: a program the agent leaves out is denied
        out = await a.ok("run", {"script": 'print(run("echo hi").status)', "key": "w7",
                                 "policy": {"allow_run": ["touch"]}, "max_steps": 100})
        assert out["output"] == "denied\n" and out["status"] == "completed"
        out = await a.ok("run", {"script": 'let i = 0\nwhile true {\n    i = i + 1\n}',
                                 "key": "w8", "max_steps": 50})
        assert out["status"] == "exhausted"
        for key in ("w1", "w2", "w3", "w4", "w5"):
            assert runs_of(ws, "mcp:" + key) == []
        # the policy is the one read at start: a dal.toml rewritten since (by anyone) widens nothing
        (ws / "dal.toml").write_text('[run]\nallow = ["sh", "touch", "echo"]\n')
        out = await a.ok("run", {"script": 'print(run("sh -c \\"touch canary\\"").status)', "key": "w9"})
        assert out["output"] == "denied\n"

    serve(ws, scenario, "--max-steps", "5000")
    assert not canary.exists() and not (outside / "x").exists()


def test_the_agents_keys_are_its_own_and_an_operation_the_operator_widened_is_not_continued_by_it(
        ws: Path) -> None:
    # The operator's own operation K: the agent's key K is another operation (mcp:K), and cannot resume it.
    (ws / "backup.dal").write_text('print(run("echo backup"))\n')
    assert cli("run", "backup.dal", "--key", "nightly", "--workspace", str(ws), cwd=ws).returncode == 0
    script = 'run("touch a")\nrun("sh -c \\"touch b\\"")\nprint("end")\n'

    async def start(a: Agent) -> str:
        mine = await a.ok("run", {"script": 'print("agent")', "key": "nightly"})
        assert mine["key"] == "mcp:nightly" and mine["status"] == "completed"
        operator_run = runs_of(ws, "nightly")[0]
        msg = await a.refused("resume", {"run": operator_run})
        assert "dal mcp did not start" in msg
        # nor does it read the operator's receipts: their output may hold what its policy does not let it read
        assert "dal mcp did not start" in await a.refused("show_receipt", {"run": operator_run})
        assert (await a.ok("show_receipt", {"run": "nightly"}))["run_id"] == mine["run_id"]  # its own key
        listed = [str(r.uri) for r in (await a.session.list_resources()).resources]
        assert f"dal://runs/{operator_run}" not in listed and f"dal://runs/{mine['run_id']}" in listed
        try:
            await a.session.read_resource(f"dal://runs/{operator_run}")
            raise AssertionError("the operator's receipt was readable")
        except Exception as e:  # noqa: BLE001 - the SDK raises McpError for an error response
            assert "dal mcp did not start" in str(e)
        out = await a.ok("run", {"script": script, "key": "widened"})
        assert out["status"] == "waiting"  # touch a waits for approval
        return str(out["run_id"])

    first = serve(ws, start)
    assert cli("run", "backup.dal", "--key", "nightly", "--workspace", str(ws), cwd=ws).stdout == ""  # skipped
    # The operator continues the agent's operation by hand, adding sh: its stored policy is now wider.
    assert cli("approve", first, "--workspace", str(ws), cwd=ws).returncode == 0
    p = cli("resume", first, "--require-approval=sh", "--workspace", str(ws), cwd=ws)
    assert p.returncode == 3, p.stderr  # touch a ran; sh waits for approval
    second = runs_of(ws, "mcp:widened")[0]
    assert cli("approve", second, "--workspace", str(ws), cwd=ws).returncode == 0

    async def refused(a: Agent) -> None:
        msg = await a.refused("resume", {"run": second})
        assert "running sh" in msg and f"dal resume {second}" in msg
        msg = await a.refused("run", {"script": script, "key": "widened"})
        assert "running sh" in msg

    serve(ws, refused)
    assert (ws / "a").exists() and not (ws / "b").exists()


def test_an_operation_stored_under_fewer_protections_or_higher_limits_is_not_continued_by_the_agent(
        ws: Path) -> None:
    # The operator tightens dal.toml (a protected path, a lower timeout) and restarts dal mcp: the agent's
    # waiting operation keeps its stored, looser policy, so only the operator may continue it.
    script = 'run("touch a")\nrun("touch Makefile")\nprint("end")\n'

    async def start(a: Agent) -> str:
        out = await a.ok("run", {"script": script, "key": "tight"})
        assert out["status"] == "waiting"
        return str(out["run_id"])

    first = serve(ws, start)
    assert cli("approve", first, "--workspace", str(ws), cwd=ws).returncode == 0
    (ws / "dal.toml").write_text((ws / "dal.toml").read_text()
                                 + '\n[paths]\nprotect = ["Makefile"]\n\n[limits]\ntimeout = 5\n')

    async def refused(a: Agent) -> None:
        msg = await a.refused("resume", {"run": first})
        assert "writing protected" in msg and "Makefile" in msg and "timeout" in msg, msg
        assert f"dal resume {first}" in msg
        msg = await a.refused("run", {"script": script, "key": "tight"})
        assert "writing protected" in msg

    serve(ws, refused)
    assert not (ws / "a").exists() and not (ws / "Makefile").exists()


def test_malformed_arguments_get_clear_errors_and_the_server_keeps_serving(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.dal").write_text('print("x")\n')

    async def scenario(a: Agent) -> None:
        cases = [
            ("run", {"script": 'print(1)'}, "run: argument `key` is required"),
            ("run", {"script": 3, "key": "k"}, "run: argument `script` must be a non-empty string, got 3"),
            ("run", {"script": "print(1)", "key": "k", "max_steps": "many"},
             'argument `max_steps` must be a positive integer, got "many"'),
            ("run", {"script": "print(1)", "key": "k", "max_steps": -4}, "must be a positive integer, got -4"),
            ("run", {"script": "print(1)", "key": "k", "bogus": 1}, "run: unknown argument `bogus`"),
            ("run", {"script": "print(1)", "key": "k", "policy": "wide"}, "argument `policy` must be a JSON object"),
            ("run", {"script": "print(1)", "key": "k", "policy": {"allow_all": True}},
             "policy: unknown key `allow_all`"),
            ("run", {"script": "print(1)", "key": "k", "policy": {"allow_run": "echo"}},
             "`allow_run` must be a list of non-empty strings"),
            ("run", {"script": "print(1)", "path": "a.dal", "key": "k"}, "one of them"),
            ("run", {"path": "../elsewhere.dal", "key": "k"}, "outside the workspace"),
            ("run", {"path": "missing.dal", "key": "k"}, "no such script: missing.dal"),
            ("run", {"script": "print(1)", "key": "k", "max_memory": "lots"}, "max_memory: expected a size"),
            ("show_receipt", {"run": "run_nope"}, "show_receipt: "),
            ("approve", {"run": "x"}, "unknown tool 'approve'"),
        ]
        for tool, args, expected in cases:
            msg = await a.refused(tool, args)
            assert expected in msg, (tool, args, msg)
            assert "Traceback" not in msg
        assert runs_of(ws, "mcp:k") == []
        checked = await a.ok("check", {"script": 'print(x)\n'})
        assert checked["ok"] is False and checked["diagnostics"][0]["line"] == 1
        assert "^" in checked["diagnostics"][0]["rendered"]
        verdict = await a.ok("check_command", {"command": "touch a.txt"})
        assert verdict["decision"] == "approval required"
        assert (await a.ok("check_command", {"command": "curl http://example.com"}))["decision"] == "deny"

    serve(ws, scenario)


def test_submit_queues_a_job_that_a_worker_runs_under_the_narrowed_policy_once_per_key(ws: Path) -> None:
    script = 'print(run("echo queued"))\nprint(run("touch nope.txt").status)\n'

    async def scenario(a: Agent) -> None:
        out = await a.ok("submit", {"script": script, "key": "job-a", "policy": {"allow_run": ["echo"]},
                                    "max_steps": 500})
        assert out["submitted"] is True and out["job"]["state"] == "ready"
        again = await a.ok("submit", {"script": script, "key": "job-a"})
        assert again["submitted"] is False and "already has job" in again["reason"]
        msg = await a.refused("submit", {"script": 'print(1)\n', "key": "job-b", "policy": {"allow_run": ["sh"]}})
        assert "running sh" in msg
        bad = await a.ok("submit", {"script": 'print(\n', "key": "job-c"})
        assert bad["submitted"] is False and "does not parse" in bad["reason"]
        for tool in ("submit", "run"):  # DAL's own keys: an agent must not take the operator's job 7's
            msg = await a.refused(tool, {"script": 'print(1)\n', "key": "job:7"})
            assert "which DAL keeps for the keys it gives jobs" in msg

    serve(ws, scenario)
    p = cli("worker", "--until-idle", "--concurrency", "1", "--workspace", str(ws), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "[job 1] queued\n[job 1] denied\n"  # touch was left out of the job's policy
    assert not (ws / "nope.txt").exists()

    async def done(a: Agent) -> None:
        r = await a.ok("show_receipt", {"run": "job-a"})
        assert r["status"] == "completed" and r["full"]["steps"]["budget"] == 500
        again = await a.ok("submit", {"script": script, "key": "job-a"})
        assert again["submitted"] is False and "already completed" in again["reason"]

    serve(ws, done)
