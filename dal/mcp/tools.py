"""The tools `dal mcp` offers, as plain functions over the Python API (dal/api.py): no MCP here, so the
rules — narrow only, no decision by the agent, no second run of a waiting key — are tested without a
client too, and the protocol side (dal/mcp/server.py) only carries arguments and results.

What an agent can do: run, submit, check and resume scripts, check commands, read receipts. What it cannot:
approve, deny or resolve an effect (no tool does), widen the operator's policy or budgets, start a new run
of a key that waits for a person, or resume a run that waits for a decision nobody made."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from dal.core.readbelow import HIDDEN_STATE, NotBelow, read_text_below
from dal.mcp.arguments import Arg, BadArguments, check
from dal.mcp.ceiling import BUDGETS, NARROWING, Ceiling, Widening
from dal.receipts.oplock import WAIT_HINT

# A busy key, as an agent can act on it: no tool takes the command line's --wait.
AGENT_WAIT_HINT = ("; nothing was run: call `run` (or `resume`) with the same key again once that run has ended, "
                   "or read its receipt with `show_receipt`")
TEXT_TAIL = 4000  # characters of a run's output a summary carries (the receipt resource holds the rest)


class ToolFailure(Exception):
    """The tool could not do what it was asked; the message says why and what to do (an MCP error result)."""


_SCRIPT = {
    "script": Arg("string", "the script's DAL source text (give this or `path`)"),
    "path": Arg("string", "a .dal file inside the workspace, relative to it (give this or `script`)"),
}
_POLICY = Arg("object", "narrow the operator's policy for this run (never widen it): "
              + "; ".join(f"{k}: {v}" for k, v in NARROWING.items()))
_BUDGETS = {
    "max_steps": Arg("integer", "step budget (at most the operator's)"),
    "max_effects": Arg("integer", "effect budget (at most the operator's)"),
    "timeout": Arg("number", "wall-clock budget in seconds (at most the operator's)"),
    "max_memory": Arg("size", 'memory budget, bytes or "512M" (at most the operator\'s)'),
    "effect_timeout": Arg("number", "seconds per command (at most the operator's)"),
}
_ARGS = Arg("object", "the script's arguments (its `param` declarations), name to value")

TOOLS: dict[str, dict[str, Any]] = {
    "run": {
        "title": "Run a DAL script",
        "description": "Run a DAL script under the operator's policy (narrowed if you ask) with an operation key, "
        "and return its receipt summary and run id. An effect that needs a person's approval is not executed: "
        "the run comes back `waiting`, with where a person decides; you cannot approve it. Calling a waiting "
        "key again does not start a new run until a person decides; then call `run` or `resume` again.",
        "args": {**_SCRIPT,
                 "key": Arg("string", "the operation key, kept as mcp:<key>: a completed key runs nothing again", True),
                 "args": _ARGS, "policy": _POLICY, **_BUDGETS},
        "read_only": False,
    },
    "submit": {
        "title": "Queue a DAL script",
        "description": "Put a run of a DAL script on the job queue for `dal worker`, under the operator's policy "
        "(narrowed if you ask), with an operation key. A key with an open job or a completed operation submits "
        "nothing.",
        "args": {**_SCRIPT, "key": Arg("string", "the operation key of the job, kept as mcp:<key>", True),
                 "args": _ARGS, "policy": _POLICY, **{k: v for k, v in _BUDGETS.items() if k != "effect_timeout"}},
        "read_only": False,
    },
    "check": {
        "title": "Check a DAL script",
        "description": "Parse and check a DAL script without running anything: every error and warning, with "
        "file, line, column and a caret.",
        "args": dict(_SCRIPT),
        "read_only": True,
    },
    "check_command": {
        "title": "Check a shell command against the policy",
        "description": "Say whether the operator's policy (narrowed if you ask) allows a shell command as run(), "
        "needs approval for it or denies it, and why. Runs nothing.",
        "args": {"command": Arg("string", "the shell command, as a script would pass it to run()", True),
                 "policy": _POLICY},
        "read_only": True,
    },
    "show_receipt": {
        "title": "Show a run's receipt",
        "description": "The receipt of one run (run id, unique prefix, operation key or `latest`): what it did, "
        "every effect, and the next safe move. Also readable as the resource dal://runs/{run_id}.",
        "args": {"run": Arg("string", "a run id, a unique prefix of one, an operation key, or `latest`", True)},
        "read_only": True,
    },
    "list_waiting": {
        "title": "List runs that wait for a person",
        "description": "The runs that wait for a person's decision (an approval, an effect of unknown outcome), "
        "newest first, each with where the person decides and whether a decision has been recorded.",
        "args": {"limit": Arg("integer", "at most this many (default 20)")},
        "read_only": True,
    },
    "resume": {
        "title": "Resume a run",
        "description": "Continue a run from its journal, effects already done are not repeated. Only when a "
        "person has recorded a decision about what it waits on, or its receipt's retry class is `resume` "
        "(interrupted); otherwise refused, saying where a person decides.",
        "args": {"run": Arg("string", "the run id (or a unique prefix, or the operation key)", True), **_BUDGETS},
        "read_only": False,
    },
}


def _effect_items(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    items = (receipt.get("effects") or {}).get("items") or []
    return [{k: i.get(k) for k in ("seq", "command", "status", "summary")} for i in items]


# The agent's keys live under their own prefix: a key the agent names is no more the operator asking than a
# key a script names (docs/policy.md, "Keys a script chooses"). Without it an agent could continue the
# operator's own operation K with its own script, or complete K first so that the operator's later
# `dal run --key K` is skipped.
AGENT_KEYS = "mcp:"


def _key(key: str) -> str:
    """The operation key of the agent's `key`: `mcp:<key>` (a key given with the prefix already, as results
    show it, is taken as it is). It must be one a script could choose (not DAL's own `job:` and `schedule:`
    keys, which would take the operator's later keyless job or schedule slot: docs/workers.md)."""
    from dal.runner.opkeys import script_key_problem

    if (problem := script_key_problem(key)) is not None:
        raise ToolFailure(f"key: {problem}")
    return key if key.startswith(AGENT_KEYS) else AGENT_KEYS + key


def _mine(receipt: dict[str, Any]) -> bool:
    return (receipt.get("key") or "").startswith(AGENT_KEYS)


RECENT_SCAN = 500  # receipts looked through for the agent's newest runs (the store lists all runs' newest first)


class DalTools:
    """The tools of one `dal mcp` server: its workspace, store, ceiling and console URL are the operator's."""

    def __init__(self, workspace: Path, ceiling: Ceiling, *, store: str | None = None,
                 console_url: str | None = None) -> None:
        self.workspace = workspace
        self.ceiling = ceiling
        self.store = store
        self.console_url = console_url.rstrip("/") if console_url else None
        self._lock = threading.Lock()  # one acting call at a time: the agent waits for each, as for a shell

    # -- dispatch -------------------------------------------------------------------------------------

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run tool `name`; raises BadArguments, ToolFailure or Widening with a message for the agent."""
        import dal.api as api

        tool = TOOLS.get(name)
        if tool is None:
            raise BadArguments(f"unknown tool {name!r}; the tools are: " + ", ".join(TOOLS))
        args = check(name, tool["args"], arguments)
        try:
            if tool["read_only"]:  # reads need no turn: they answer while a run goes on
                return getattr(self, "tool_" + name)(args)
            with self._lock:
                return getattr(self, "tool_" + name)(args)
        except (api.DalUsageError, api.DalStoreError, ValueError) as e:
            raise ToolFailure(f"{name}: {str(e).replace(WAIT_HINT, AGENT_WAIT_HINT)}") from None

    # -- where a person decides -----------------------------------------------------------------------

    def where_to_decide(self, receipt: dict[str, Any]) -> dict[str, Any]:
        rid = receipt["run_id"]
        held = [i for i in _effect_items(receipt) if i["status"] == "pending_approval"]
        seq = held[-1]["seq"] if held else None
        flag = f" --effect {seq}" if seq is not None else ""
        if receipt.get("external_effect") == "pending_approval":
            cli = [f"dal approve {rid}{flag}", f"dal deny {rid}{flag}"]
        else:
            cli = [f"dal resolve {rid} --as done|failed|retry"]
        out: dict[str, Any] = {"cli": cli, "workspace": str(self.workspace)}
        if self.console_url:
            out["console"] = f"{self.console_url}/runs/{rid}"
        return out

    def summary(self, receipt: dict[str, Any], output: str | None = None) -> dict[str, Any]:
        """What an agent needs of a receipt: the outcome, the effects, the next move; the full receipt is the
        resource `dal://runs/<id>`."""
        from dal.receipts.nextstep import Continuer, run_next
        from dal.receipts.render import render

        rid = receipt["run_id"]
        # The agent resumes with its tool, a worker a queued job's run (`submit`); a person decides what waits.
        agent = Continuer(job=self._job_of(receipt).job, front="mcp")
        err = receipt.get("error")
        out: dict[str, Any] = {
            "run_id": rid,
            "status": receipt["status"],
            "retry": receipt.get("retry"),
            "key": receipt.get("key"),
            "blocker": receipt.get("blocker"),
            "external_effect": receipt.get("external_effect"),
            "error": ({"kind": err.get("kind"), "message": err.get("message"), "line": err.get("line"),
                       "column": err.get("column")} if isinstance(err, dict) else err),
            "result": receipt.get("result"),
            "effects": _effect_items(receipt),
            "receipt": f"dal://runs/{rid}",
            "next": run_next(receipt, by=agent),
            "rendered": render(receipt, by=agent),
        }
        if output is not None:
            out["output"] = output[-TEXT_TAIL:]
        if receipt["status"] == "waiting":
            out["decide"] = self.where_to_decide(receipt)
            then = (f"a worker continues job {agent.job} (the decision makes it ready again): nothing to call"
                    if agent.job is not None else f"call `resume` with run {rid} (or `run` with the same key)")
            out["note"] = ("a person decides this, not you: nothing that waits has run. Once a decision is "
                           f"recorded, {then}.")
        return out

    # -- the store --------------------------------------------------------------------------------------

    def _job_of(self, receipt: dict[str, Any]) -> Any:
        """Who continues the run of `receipt` besides the agent: the queue's open job of its key, if any."""
        from dal.receipts.nextstep import Continuer
        from dal.receipts.store import StoreError

        if not receipt.get("key") or receipt.get("status") in ("completed", "skipped"):
            return Continuer()
        try:
            db = self._open()
            if db is None:
                return Continuer()
            with db:
                from dal.runner.decisions import open_job

                return Continuer.of_job(open_job(db, receipt["key"]))
        except StoreError:
            return Continuer()

    def _open(self) -> Any:
        """The run store, read-only; None when it does not exist yet."""
        from dal.receipts.location import StoreLocation, open_store
        from dal.receipts.store import NoStore

        location = StoreLocation.parse(self.store, self.workspace)
        try:
            return open_store(location, readonly=True)
        except NoStore:
            return None

    def _operation(self, key: str) -> tuple[dict[str, Any] | None, Any, bool]:
        """The newest run of `key` (None: none yet), what the store keeps of how it started, and whether a
        person recorded a decision on it since."""
        from dal.effects.policy import PolicyError
        from dal.runner.spec import SpecError
        from dal.runner.stored import StoredRun

        db = self._open()
        if db is None:
            return None, None, False
        with db:
            newest = db.newest_run_of_key(key)
            if newest is None:
                return None, None, False
            row = db.run_row(newest["run_id"])
            decided = bool(db.approvals(newest["run_id"]))
        try:
            return newest, StoredRun.of(row), decided
        except (PolicyError, SpecError) as e:
            raise ToolFailure(f"run {newest['run_id']} of key {key!r}: its stored specification cannot be read "
                              f"({e}); nothing was run") from None

    def _receipt(self, ref: str) -> dict[str, Any]:
        """The receipt of the agent's run `ref` names (`latest`: its newest). A run of another operation is
        refused: its output may hold what the agent's policy does not let it read (an operator's run that
        read outside the agent's roots), so the agent sees only its own runs."""
        import dal.api as api

        ref = ref.strip()
        if ref == "latest":
            mine = self.recent_runs(1)
            if not mine:
                raise ToolFailure("no runs of dal mcp's yet (its keys begin with mcp:)")
            return mine[0]
        r: dict[str, Any] | None = None
        if not ref.startswith(("run_", AGENT_KEYS)):
            try:  # the agent's own key, as `run` took it
                r = self._find_receipt(AGENT_KEYS + ref)
            except (api.DalUsageError, ToolFailure):
                r = None
        if r is None:
            r = self._find_receipt(ref)
        if not (r.get("key") or "").startswith(AGENT_KEYS):
            raise ToolFailure(f"refused: run {r['run_id']} is a run of operation {r.get('operation')!r}, which dal mcp "
                              f"did not start (its keys begin with {AGENT_KEYS}): the agent sees and resumes only its "
                              f"own runs; this one is the operator's (`dal receipt show {r['run_id']}`)")
        return r

    def _find_receipt(self, ref: str) -> dict[str, Any]:
        """The receipt `ref` names; for a run whose process died before writing one, the receipt its journal
        gives (status `died`, as `dal receipt show` shows it)."""
        import dal.api as api
        from dal.receipts.store import RunNotFound
        from dal.runner.deadrun import crashed_receipt
        from dal.runner.liveness import run_alive

        try:
            return api.receipt(ref, workspace=self.workspace, store=self.store).to_dict()
        except api.DalUsageError:
            db = self._open()
            if db is None:
                raise
            with db:
                try:
                    row = db.run_row(db.find_run(ref)["run_id"])
                except RunNotFound:
                    row = None
                if row is None or row.get("status") != "running":
                    raise
                if run_alive(row, db):
                    raise ToolFailure(f"run {row['run_id']} is still running (process {row.get('pid')}): no receipt "
                                      "until it ends") from None
                receipt = crashed_receipt(db, row, workspace=self.workspace, blocker=(
                    f"the process running it ({row.get('pid')}) died before writing its receipt; its journal says "
                    "what ran. `resume` (or `run` with its key) continues from the journal"))
            return {**receipt, "status": "died"}

    def _stored_budgets(self, stored: Any) -> dict[str, Any]:
        spec = getattr(stored, "spec", None)
        return {name: getattr(spec, name, None) for name in BUDGETS} if spec is not None else {}

    # -- the tools --------------------------------------------------------------------------------------

    def _script(self, args: dict[str, Any]) -> tuple[str | Path, str]:
        """The script to run (a path inside the workspace, or the source text) and its text."""
        if (args["script"] is None) == (args["path"] is None):
            raise BadArguments("give the script's text as `script` or a .dal file as `path` (one of them)")
        if args["script"] is not None:
            return args["script"], args["script"]
        # The agent's scripts may swap the name for a symlink at any moment: the file is opened once, by
        # descriptor, below the workspace (dal/core/readbelow.py), and that text is what is checked.
        rel = args["path"]
        path = Path(os.path.normpath(self.workspace / rel))
        if not rel.endswith(".dal"):
            raise ToolFailure(f"no such script: {rel} (a .dal file inside {self.workspace})")
        try:
            return path, read_text_below(self.workspace, rel, hide=HIDDEN_STATE)
        except NotBelow as e:
            if e.hidden:
                raise ToolFailure(f"path {rel!r} is in DAL's own state ({e.strerror}): not a script of the "
                                  "workspace") from None
            if e.leads_out:
                raise ToolFailure(f"path {rel!r} is outside the workspace {self.workspace} ({e.strerror}): dal mcp "
                                  "runs scripts of its workspace only") from None
            raise ToolFailure(f"cannot read {rel}: {e.strerror}") from None
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ToolFailure(f"no such script: {rel} (a .dal file inside {self.workspace})") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ToolFailure(f"cannot read {rel}: {e}") from None

    def _continuing(self, key: str, narrowed: Any, asked: bool) -> tuple[dict[str, Any] | None, bool, Any]:
        """What key `key` already holds: its newest run, whether a decision was recorded since, and its
        stored spec. A key that continues an operation runs under that operation's stored policy: refused
        when it is wider than this server's (or than the policy the agent asked for)."""
        newest, stored, decided = self._operation(key)
        if newest is None or newest["status"] in ("completed", "skipped"):
            return newest, decided, stored
        self.ceiling.check_stored(stored.policy, newest["run_id"])
        if asked:
            from dal.effects.policy.narrowing import beyond

            if wider := beyond(stored.policy, narrowed):
                raise Widening(f"refused: key {key!r} continues the operation of run {newest['run_id']}, which runs "
                               f"under its stored policy; it allows {'; '.join(wider)} beyond the policy asked for "
                               "here. Use a new key to run under a narrower policy; nothing was run")
        return newest, decided, stored

    def tool_run(self, args: dict[str, Any]) -> dict[str, Any]:
        import dal.api as api

        script, _text = self._script(args)
        narrowed = self.ceiling.narrow(args["policy"])
        key = _key(args["key"])
        newest, decided, stored = self._continuing(key, narrowed, bool(args["policy"]))
        if newest is not None and newest["status"] == "waiting" and not decided:
            receipt = api.receipt(newest["run_id"], workspace=self.workspace, store=self.store).to_dict()
            out = self.summary(receipt)
            out["new_run"] = False
            out["note"] = (f"key {key!r} already waits for a person in run {newest['run_id']} and no decision has "
                           "been recorded: nothing was run again. " + out["note"])
            return out
        budgets = self.ceiling.budgets_for(args, self._stored_budgets(stored) if newest is not None else None)
        r = api.run(script, key=key, policy=narrowed, workspace=self.workspace, store=self.store,
                    args=args["args"], **budgets)
        out = self.summary(r.to_dict(), r.output)
        out["new_run"] = True
        return out

    def tool_submit(self, args: dict[str, Any]) -> dict[str, Any]:
        from dal.mcp.submit import submit

        script, text = self._script(args)
        narrowed = self.ceiling.narrow(args["policy"])
        key = _key(args["key"])
        newest, decided, stored = self._continuing(key, narrowed, bool(args["policy"]))
        if newest is not None and newest["status"] == "waiting" and not decided:
            receipt = self._receipt(newest["run_id"])
            return {"submitted": False, "run_id": newest["run_id"], "decide": self.where_to_decide(receipt),
                    "reason": f"key {key!r} waits for a person in run {newest['run_id']} and no decision has been "
                    "recorded: nothing submitted (a worker would only stop at the same place again)"}
        budgets = self.ceiling.budgets_for(args, self._stored_budgets(stored) if newest is not None else None)
        budgets.pop("effect_timeout")
        return submit(script, text, key=key, policy=narrowed, workspace=self.workspace, store=self.store,
                      args=args["args"], newest=newest, **budgets)

    def tool_check(self, args: dict[str, Any]) -> dict[str, Any]:
        import dal.api as api

        script, text = self._script(args)
        name = str(script) if isinstance(script, Path) else "<script>"
        diags = api.check(text, filename=name)
        errors = sum(d.severity == "error" for d in diags)
        return {"ok": errors == 0, "errors": errors, "warnings": len(diags) - errors,
                "diagnostics": [{"severity": d.severity, "kind": d.kind, "message": d.message, "file": d.file,
                                 "line": d.line, "column": d.column, "rendered": d.rendered} for d in diags]}

    def tool_check_command(self, args: dict[str, Any]) -> dict[str, Any]:
        from dal.effects import check_command
        from dal.runner.build import SpecError, build_spec
        from dal.runner.inforce import checked_policy

        narrowed = self.ceiling.narrow(args["policy"])
        try:  # as a run of this server would check it: its store and receipts hidden
            spec = build_spec(None, workspace=self.workspace, store=self.store, policy=narrowed)
        except SpecError as e:
            raise ToolFailure(f"check_command: {e}") from None
        policy, _note = checked_policy(spec)
        d = check_command(args["command"], policy)
        verdict = "deny" if not d.allowed else ("approval required" if d.approval_required else "allow")
        return {"decision": verdict, "reason": d.reason, "class": d.effect_class, "idempotent": d.idempotent,
                "reads": list(d.reads), "writes": list(d.writes), "policy": policy.source,
                "note": "approval required: a run would wait for a person before this command runs"
                if d.allowed and d.approval_required else None}

    def tool_show_receipt(self, args: dict[str, Any]) -> dict[str, Any]:
        r = self._receipt(args["run"])
        return {**self.summary(r), "full": r}

    def tool_list_waiting(self, args: dict[str, Any]) -> dict[str, Any]:
        import dal.api as api

        receipts = [r.to_dict() for r in api.list_receipts(workspace=self.workspace, store=self.store, waiting=True,
                                                           limit=None)]
        out = []
        for d in [d for d in receipts if _mine(d)][: args["limit"] or 20]:
            decided = False
            if (db := self._open()) is not None:
                with db:
                    decided = bool(db.approvals(d["run_id"]))
            out.append({"run_id": d["run_id"], "key": d.get("key"), "status": d["status"], "blocker": d.get("blocker"),
                        "decision_recorded": decided, "decide": self.where_to_decide(d),
                        "receipt": f"dal://runs/{d['run_id']}"})
        return {"waiting": out, "count": len(out)}

    def tool_resume(self, args: dict[str, Any]) -> dict[str, Any]:
        import dal.api as api

        r = self._receipt(args["run"])
        key = r.get("key") or ""
        if not key.startswith(AGENT_KEYS):
            raise ToolFailure(f"refused: run {r['run_id']} is a run of operation {r.get('operation')!r}, which dal mcp "
                              f"did not start (its keys begin with {AGENT_KEYS}): only the operator continues it "
                              f"(`dal resume {r['run_id']}`); nothing was resumed")
        newest, stored, decided = self._operation(key)
        if newest is None or newest["run_id"] != r["run_id"]:
            later = newest["run_id"] if newest is not None else None
            raise ToolFailure(f"run {r['run_id']} is not the newest run of its operation"
                              + (f" (that is {later}, {newest['status']}): resume that one" if later else ""))
        if not ((r.get("retry") == "escalate" and decided) or r.get("retry") == "resume"):
            if r["status"] == "waiting":
                where = self.where_to_decide(r)
                there = f"at {where['console']} or " if "console" in where else ""
                raise ToolFailure(f"refused: run {r['run_id']} waits for a person ({r.get('blocker')}) and no decision "
                                  f"has been recorded; a person decides {there}with `{where['cli'][0]}`; nothing "
                                  "was resumed")
            raise ToolFailure(f"refused: run {r['run_id']} is {r['status']} with retry class {r.get('retry')!r}: "
                              "dal mcp resumes a run only when a person decided what it waits on or its retry "
                              f"class is 'resume'; see its receipt (dal://runs/{r['run_id']})")
        self.ceiling.check_stored(stored.policy, r["run_id"])
        budgets = self.ceiling.budgets_for(args, self._stored_budgets(stored))
        done = api.resume(r["run_id"], workspace=self.workspace, store=self.store, **budgets)
        return self.summary(done.to_dict(), done.output)

    # -- resources ------------------------------------------------------------------------------------

    def receipt_json(self, run_id: str) -> str:
        """The resource `dal://runs/<run_id>`: the receipt as `dal receipt show --json` holds it."""
        import dal.api as api
        from dal.core.jsontext import dumps

        try:
            return dumps(self._receipt(run_id), indent=2)
        except (api.DalUsageError, api.DalStoreError) as e:
            raise ToolFailure(str(e)) from None

    def recent_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The agent's newest runs (those of its `mcp:` keys), newest first."""
        import dal.api as api

        try:
            rows = api.list_receipts(workspace=self.workspace, store=self.store, limit=RECENT_SCAN)
        except (api.DalUsageError, api.DalStoreError):
            return []
        return [d for d in (r.to_dict() for r in rows) if _mine(d)][:limit]
