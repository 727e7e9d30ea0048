"""Run one test script: a fresh workspace, the test builtins, a pass/fail verdict with a located diagnostic.

The test builtins live in their own table (`TEST_BUILTINS`: the global builtins plus the test ones), handed
to `check_source` and `Engine`; `dal run` never sees them. Workflows started by `invoke` and `resume` go
through `dal.runner.execute` exactly as `dal run` would, with two test hooks on the request: `fake` (scripted
results for matching commands, after the policy and approval gates) and `simulate_crash` (an in-process
crash right after an effect's result or intent is journaled).
"""

from __future__ import annotations

import fnmatch
import inspect
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from dal.core import defaults
from dal.core.digest import sha256
from dal.core.errors import DalError, DalRuntimeError, DalTypeError
from dal.core.readbelow import (
    HIDDEN_STATE,
    NotBelow,
    UnreadableScript,
    read_below,
    read_script,
    read_text_below,
    root_of,
)
from dal.effects import EffectContext, EffectResult, Policy
from dal.effects.policy.narrowing import beyond, capped  # the ceiling of every invoke's policy (dal mcp uses it too)
from dal.eval.builtins import BUILTINS
from dal.eval.interpreter import Engine, check_source
from dal.eval.runtime import Runtime
from dal.eval.values import Builtin, dal_eq, dal_repr, display, to_json_value, type_name
from dal.runner.host import RunHost

TEST_SUFFIX = ".test.dal"
DEFAULT_GLOBS = ("tests/**/*.test.dal", "examples/tests/*.test.dal")


class AssertionFailed(DalError):
    """`assert` or `assert_eq` found something false: the test fails here."""

    kind = "assert"


# --- the session one test script runs in ---------------------------------------------------------


@attrs.define
class Fake:
    pattern: str
    results: list[dict[str, Any]]
    used: int = 0

    def next(self) -> dict[str, Any]:
        r = self.results[min(self.used, len(self.results) - 1)]
        self.used += 1
        return r


class TestSession:
    """What the test builtins share while one test script runs."""

    __test__ = False  # not a pytest class

    def __init__(self, test_path: Path, workspace: Path, allow_env: Iterable[str] = (),
                 unsandboxed_as_root: bool = False, ceiling: Policy | None = None) -> None:
        self.test_path = test_path
        # What the operator gave `dal test` (its command line, else the project's dal.toml): the policy of
        # every workflow the test invokes may only be narrower. The test script is as untrusted as any.
        self.ceiling = ceiling
        self.unsandboxed_as_root = unsandboxed_as_root  # `dal test --unsandboxed-as-root`
        # The test's folder by name: its own name may have been swapped for a symlink, which must not move it.
        self.test_dir = Path(os.path.abspath(test_path)).parent
        self.workspace = workspace
        self.allow_env = list(allow_env)  # `dal test --allow-env`: added to every policy the test builds
        self.store = workspace / ".dal" / "dal.db"
        self.fakes: list[Fake] = []
        self.started: set[str] = set()  # the runs this test started (resume() takes only these)

    # fakes ---------------------------------------------------------------------------------------

    def fake_for(self, command: str, decision: Any) -> EffectResult | None:
        """The scripted result for `command` (the newest matching `fake` wins), or None: run it for real."""
        for f in reversed(self.fakes):
            if fnmatch.fnmatchcase(command, f.pattern):
                data = f.next()
                timed_out = bool(data.get("timeout", False))
                code = None if timed_out else int(data.get("code", 0))
                status = "timeout" if timed_out else ("completed" if code == 0 else "failed")
                return EffectResult(
                    command=command,
                    status=status,
                    code=code,
                    stdout=str(data.get("stdout", "")),
                    stderr=str(data.get("stderr", "")),
                    decision=attrs.evolve(decision, reason=f"{decision.reason}; faked by dal test "
                                                           f"(pattern {json.dumps(f.pattern)})"),
                    timeout_s=30.0 if timed_out else None,
                )
        return None

    def _key_of(self, run_id: str, default: str | None) -> str | None:
        """The key a crashed run ran under (set by `key` or by the script's own `operation("K")`)."""
        return _key_of_run(self.store, run_id, default)

    # workflow runs -----------------------------------------------------------------------------------

    def policy_options(self, option: Any) -> dict[str, Any]:
        """The builder's policy keywords for an `invoke` option: null (the workspace's dal.toml or the
        default), a TOML path relative to the test file, or a map of flags (`allow_run`, `allow_read`,
        `allow_write`, `allow_net`, `require_approval`, `allow_env`, and `file` for a TOML path); the
        test's own --allow-env is added to each."""
        env = {"allow_env": list(self.allow_env)} if self.allow_env else {}
        if option is None:
            return {"policy_flags": env}
        if isinstance(option, str):
            return {"policy_file": self.test_dir / option, "policy_flags": env}
        if isinstance(option, dict):
            flags = dict(option)
            file = flags.pop("file", None)
            known = {"allow_run", "allow_read", "allow_write", "allow_net", "require_approval", "allow_env"}
            bad = sorted(set(flags) - known)
            if bad:
                raise DalRuntimeError(f"unknown policy flag {json.dumps(bad[0])}: use "
                                      + ", ".join(sorted(known | {'file'})))
            for k, v in flags.items():
                if k == "allow_net":
                    if type(v) is not bool:
                        raise DalTypeError(f"policy flag `allow_net` needs a boolean, got {type_name(v)}")
                elif not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                    raise DalTypeError(f"policy flag `{k}` needs a list of strings, got {type_name(v)}")
            if file is not None and not isinstance(file, str):
                raise DalTypeError(f"policy `file` needs a string, got {type_name(file)}")
            flags["allow_env"] = [*flags.get("allow_env", []), *self.allow_env]
            return {"policy_file": (self.test_dir / file) if file else None, "policy_flags": flags}
        raise DalTypeError(f"the `policy` option needs a map of flags or a TOML path, got {type_name(option)}")

    def invoke(self, script: Path, text: str, *, key: str | None, policy: Any, max_steps: int | None,
               max_effects: int | None, crash: tuple[str, int] | None,
               args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a workflow as `dal run` would: specified by the same builder, in the test's workspace, running
        `text` (what read_workflow read), whatever the file holds later."""
        from dal.runner.build import SpecError, build_spec, pin_script

        options = self.policy_options(policy)
        file = options.get("policy_file")
        digest = self.check_policy_file(file) if file is not None else None
        try:
            spec = build_spec(script, workspace=self.workspace, store=self.store, key=key, max_steps=max_steps,
                              max_effects=max_effects, unsandboxed_as_root=self.unsandboxed_as_root,
                              args=args, **options)
        except SpecError as e:
            if file is not None and str(file) in str(e):
                from dal.core.shellword import sh_quote

                # Not the parser's words: they quote the file's keys and values (docs/testing.md).
                raise DalRuntimeError(f"the policy file {file} this invoke names is not a valid policy",
                                      help=f"see why with `dal policy check --policy {sh_quote(file)}`") from None
            raise DalRuntimeError(str(e)) from None
        if digest is not None and spec.policy.file_sha256 != digest:  # built from other bytes than checked
            raise DalRuntimeError(f"the policy file {file} this invoke names changed while it was read: not used")
        if self.ceiling is not None and (wider := beyond(spec.policy, self.ceiling)):
            what = "; ".join(wider) if file is None else f"more ({len(wider)} difference(s); the file is not quoted)"
            raise DalRuntimeError(
                f"the policy this invoke asks for allows {what}, which `dal test` was not given "
                f"({self.ceiling.source}): a test may only narrow the policy of the workflows it invokes",
                help="the operator grants more on dal test's command line (--allow-run, --allow-read, "
                "--allow-write, --allow-net, --require-approval, --allow-env, --policy FILE)")
        if self.ceiling is not None:
            spec = spec.evolve(policy=capped(spec.policy, self.ceiling))
        return self.start(pin_script(spec, text), key, crash)

    def project_roots(self) -> list[str]:
        """Where a test may name files: its project (the workspace of its folder), the folder `dal test` runs
        in, and the read roots of the ceiling."""
        from dal.runner.workspace import find_workspace

        # The folder `dal test` runs in first: a path below it is walked from it, so that no folder on the way
        # can be a symlink that leads elsewhere.
        roots = [os.path.realpath(os.getcwd()), str(find_workspace(None, start=self.test_dir).path.resolve())]
        if self.ceiling is not None:
            roots += [r for r in self.ceiling.read_roots if r != self.ceiling.workspace]
        return roots

    def read_workflow(self, path: Path) -> str:
        """The text of a workflow an invoke names, read once by descriptor below the test's project (the test
        script is as untrusted as any, and what runs elsewhere may have swapped the name for a symlink)."""
        roots = self.project_roots()
        below = root_of(path, roots)
        if below is None:
            raise DalRuntimeError(f"the workflow script {path} is outside the test's project ({roots[1]}) and the "
                                  "read roots dal test was given: not read",
                                  help="keep a test's workflows in its project; paths are relative to the test file")
        try:
            return read_text_below(*below, hide=HIDDEN_STATE)
        except NotBelow as e:
            if e.hidden:
                raise DalRuntimeError(f"the workflow script {path} is in DAL's own state ({e.strerror}): not "
                                      "read") from None
            if e.leads_out:
                raise DalRuntimeError(f"the workflow script {path} leads outside {below[0]}: not read") from None
            raise DalRuntimeError(f"cannot read the workflow script {path}: {e.strerror}") from None
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise DalRuntimeError(f"no such workflow script: {path} (paths are relative to the test file)") from None
        except UnicodeDecodeError as e:
            raise DalRuntimeError(f"{path} is not UTF-8 text (invalid byte at offset {e.start})") from None
        except OSError as e:
            raise DalRuntimeError(f"cannot read the workflow script {path}: {e.strerror}") from None

    def check_policy_file(self, file: Path) -> str | None:
        """A policy file an invoke names must lie in the test's project (the workspace of its folder, or the
        folder `dal test` runs in) or a read root of the ceiling: refused before it is read, so that a test
        cannot probe files elsewhere (docs/testing.md, "The policy ceiling"). Read here once, by descriptor
        below that folder: the sha256 of its bytes, which the policy built from it must have (None: it
        cannot be read, which building the spec then reports)."""
        roots = self.project_roots()
        outside = DalRuntimeError(f"the policy file {file} this invoke names is outside the test's project "
                                  f"({roots[1]}) and the read roots dal test was given: not read",
                                  help="keep a test's policy files in its project")
        below = root_of(file, roots)
        if below is None:
            raise outside
        try:
            return sha256(read_below(*below, hide=HIDDEN_STATE)).hexdigest()
        except NotBelow as e:
            if e.leads_out or e.hidden:
                raise outside from None
            raise DalRuntimeError(f"cannot read the policy file {file} this invoke names: {e.strerror}") from None
        except OSError:
            return None

    def resume(self, run_id: str, *, max_steps: int | None, crash: tuple[str, int] | None) -> dict[str, Any]:
        """Continue a run as `dal resume RUN` would: its stored spec, with this test's overrides."""
        from dal.receipts.location import StoreLocation
        from dal.receipts.store import Store, StoreError
        from dal.runner.build import SpecError, resume_spec

        location = StoreLocation.parse(self.store, self.workspace)
        try:
            with Store(location.file, readonly=True) as db:
                row = db.run_row(run_id)
            if row is None:
                raise DalRuntimeError(f"run {run_id} is not in the test's store")
            spec = resume_spec(row, store=location, max_steps=max_steps,
                               unsandboxed_as_root=self.unsandboxed_as_root)
        except (StoreError, SpecError) as e:
            raise DalRuntimeError(str(e)) from None
        return self.start(spec, None, crash)

    def start(self, spec: Any, key: str | None, crash: tuple[str, int] | None) -> dict[str, Any]:
        from dal.runner.effects import SimulatedCrash
        from dal.runner.runner import RunnerError, execute
        from dal.runner.spec import RunHooks

        buf = io.StringIO()
        hooks = RunHooks(write=buf.write, handle_signals=False, fake=self.fake_for, simulate_crash=crash)
        try:
            report = execute(spec, hooks)
        except SimulatedCrash as c:
            self.started.add(c.run_id)
            return {
                "run_id": c.run_id,
                "status": "crashed",
                "key": self._key_of(c.run_id, key),
                "crash": {"effect": c.seq, "boundary": c.boundary},
                "output": buf.getvalue(),
            }
        except RunnerError as e:
            raise DalRuntimeError(str(e)) from None
        data: dict[str, Any] = json.loads(json.dumps(report.receipt))
        self.started.add(data["run_id"])
        data["output"] = buf.getvalue()
        return data


def _key_of_run(store: Path, run_id: str, default: str | None) -> str | None:
    from dal.receipts.store import Store, StoreError

    try:
        with Store(store, readonly=True) as db:
            row = db.run_row(run_id) or {}
    except StoreError:
        return default
    return row.get("key") or default


class _TestHost(RunHost):
    """The host of a test script: its own run() calls (fixtures) and the session the test builtins share."""

    def __init__(self, session: TestSession, **kw: Any) -> None:
        super().__init__(**kw)
        self.session = session


def _session(rt: Runtime) -> TestSession:
    host = rt.host
    assert isinstance(host, _TestHost)
    return host.session


# --- the test builtins -----------------------------------------------------------------------------

TEST_BUILTINS: dict[str, Builtin] = dict(BUILTINS)
TEST_ONLY: list[str] = []


def _test_builtin(signature: str, min_args: int, max_args: int | None = -1) -> Callable[[Any], Any]:
    def deco(impl: Callable[..., Any]) -> Callable[..., Any]:
        name = signature.split("(", 1)[0]
        hi = min_args if max_args == -1 else max_args
        TEST_BUILTINS[name] = Builtin(name, impl, min_args, hi, signature, inspect.cleandoc(impl.__doc__ or ""))
        TEST_ONLY.append(name)
        return impl

    return deco


def _opts(value: Any, fn: str, known: Iterable[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise DalTypeError(f"`{fn}` takes its options as a map, got {type_name(value)}")
    known = tuple(known)
    for k in value:
        if k not in known:
            raise DalRuntimeError(f"`{fn}` has no option {json.dumps(k)}; its options are: " + ", ".join(known))
    return value


def _pos_int(opts: dict[str, Any], name: str, fn: str) -> int | None:
    v = opts.get(name)
    if v is None:
        return None
    if type(v) is not int or v <= 0:
        raise DalTypeError(f"`{fn}` option `{name}` needs a positive integer, got {dal_repr(v)}")
    return v


def _crash(opts: dict[str, Any], fn: str) -> tuple[str, int] | None:
    after, before = _pos_int(opts, "crash_after", fn), _pos_int(opts, "crash_before", fn)
    if after is not None and before is not None:
        raise DalRuntimeError(f"`{fn}`: give `crash_after` or `crash_before`, not both")
    if after is not None:
        return ("after-result", after)
    if before is not None:
        return ("after-intent", before)
    return None


@_test_builtin("assert(condition, message)", 1, 2)
def _assert(rt: Runtime, args: list[Any], span: Any) -> None:
    """Fail the test here unless `condition` is true (it must be a boolean).

    Example:
        assert(r.status == "completed", "the draft should be verified")
    """
    cond = args[0]
    if type(cond) is not bool:
        raise DalTypeError(f"`assert` needs a boolean condition, got {type_name(cond)}")
    if not cond:
        msg = args[1] if len(args) > 1 else None
        raise AssertionFailed("assertion failed" + (f": {display(msg)}" if msg is not None else ""))


@_test_builtin("assert_eq(actual, expected, message)", 2, 3)
def _assert_eq(rt: Runtime, args: list[Any], span: Any) -> None:
    """Fail the test here unless `actual` equals `expected` (structural equality, as `==`); the message
    shows both values in DAL literal form.

    Example:
        assert_eq(r.loops[0].clause, "state.status == \\"pending\\"")
    """
    actual, expected = args[0], args[1]
    if not dal_eq(actual, expected):
        note = f" ({display(args[2])})" if len(args) > 2 else ""
        raise AssertionFailed(f"assert_eq failed{note}: actual {_short(actual)}, expected {_short(expected)}")


def _short(v: Any, limit: int = 400) -> str:
    text = dal_repr(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_FAKE_KEYS = {"stdout": str, "stderr": str, "code": int, "timeout": bool}
_NAMES = {str: "a string", int: "an integer", bool: "a boolean"}


@_test_builtin("fake(pattern, result)", 2)
def _fake(rt: Runtime, args: list[Any], span: Any) -> None:
    """Script the result of every command that matches the glob `pattern` (the whole command string,
    `*` matches anything) in workflows this test invokes or resumes. The command still passes the policy
    and the approval gate; instead of executing, it returns `result`: `{"stdout": "...", "code": 0}`,
    `{"code": 1, "stderr": "..."}` or `{"timeout": true}`. A list of results is used in turn, its last one
    repeating. The newest matching `fake` wins; unmatched commands run for real.

    Example:
        fake("mkdir *", {"code": 1, "stderr": "mkdir: Permission denied"})
    """
    pattern, result = args
    if type(pattern) is not str:
        raise DalTypeError(f"`fake` needs a glob pattern string first, got {type_name(pattern)}")
    results = result if type(result) is list else [result]
    if not results:
        raise DalRuntimeError("`fake` needs at least one result")
    for r in results:
        if type(r) is not dict:
            raise DalTypeError(f"`fake` results are maps like {{\"stdout\": \"...\", \"code\": 0}}, got {type_name(r)}")
        for k, v in r.items():
            want = _FAKE_KEYS.get(k)
            if want is None:
                raise DalRuntimeError(f"a fake result has no field {json.dumps(k)}; its fields are: "
                                      + ", ".join(_FAKE_KEYS))
            if type(v) is not want:
                raise DalTypeError(f"fake result field `{k}` needs {_NAMES[want]}, got {type_name(v)}")
    _session(rt).fakes.append(Fake(pattern, [dict(r) for r in results]))


_INVOKE_OPTIONS = ("key", "crash_after", "crash_before", "policy", "max_steps", "max_effects", "args")


@_test_builtin("invoke(script, options)", 1, 2)
def _invoke(rt: Runtime, args: list[Any], span: Any) -> dict[str, Any]:
    """Run a workflow script (path relative to the test file) in the test's workspace, as `dal run`
    would, and return its run receipt as a map (plus `output`: what it printed). Options: `key`,
    `policy` (a map of flags such as `{"require_approval": ["tee"]}`, or a TOML path), `max_steps`,
    `max_effects`, `args` (the script's arguments, a map such as `{"to": "ann", "times": 2}`), `crash_after`
    N (killed right after effect N's result was journaled) or `crash_before` N (killed after effect N's
    intent, before it ran). A crashed run has no receipt: `invoke` returns
    `{"run_id": ..., "status": "crashed", "crash": {"effect": N, ...}}`.

    Example:
        let r = invoke("../article_loop.dal", {"key": "draft", "crash_after": 2})
    """
    s = _session(rt)
    script = args[0]
    if type(script) is not str:
        raise DalTypeError(f"`invoke` needs a script path string, got {type_name(script)}")
    opts = _opts(args[1] if len(args) > 1 else None, "invoke", _INVOKE_OPTIONS)
    key = opts.get("key")
    if key is not None and type(key) is not str:
        raise DalTypeError(f"`invoke` option `key` needs a string, got {type_name(key)}")
    crash = _crash(opts, "invoke")
    max_steps, max_effects = _pos_int(opts, "max_steps", "invoke"), _pos_int(opts, "max_effects", "invoke")
    s.policy_options(opts.get("policy"))  # a bad option is the test's error, before the script is looked for
    path = s.test_dir / script
    text = s.read_workflow(path)
    script_args = opts.get("args")
    if script_args is not None and type(script_args) is not dict:
        raise DalTypeError(f"`invoke` option `args` needs a map of argument names to values, got "
                           f"{type_name(script_args)}")
    return s.invoke(path, text, key=key, policy=opts.get("policy"), max_steps=max_steps, max_effects=max_effects,
                    crash=crash, args=script_args)


@_test_builtin("resume(run_id, options)", 1, 2)
def _resume(rt: Runtime, args: list[Any], span: Any) -> dict[str, Any]:
    """Resume a waiting, interrupted or crashed run this test started (as `dal resume RUN`) with the
    policy it was invoked with; return the new run's receipt. Options: `crash_after`, `crash_before`,
    `max_steps`.

    Example:
        let r2 = resume(r.run_id)
    """
    s = _session(rt)
    run_id = _run_id(args[0], "resume")
    opts = _opts(args[1] if len(args) > 1 else None, "resume", ("crash_after", "crash_before", "max_steps"))
    if run_id not in s.started:
        raise DalRuntimeError(f"run {run_id} was not started by this test (invoke it first)")
    return s.resume(run_id, max_steps=_pos_int(opts, "max_steps", "resume"), crash=_crash(opts, "resume"))


def _run_id(v: Any, fn: str) -> str:
    if type(v) is dict and type(v.get("run_id")) is str:
        return v["run_id"]  # a receipt map works too
    if type(v) is not str:
        raise DalTypeError(f"`{fn}` needs a run id (or a receipt), got {type_name(v)}")
    return v


def _decide(rt: Runtime, args: list[Any], fn: str) -> dict[str, Any]:
    from dal.receipts.store import Store, StoreError
    from dal.runner.decisions import DecisionRefused, decide

    s = _session(rt)
    run_id = _run_id(args[0], fn)
    note = args[1] if len(args) > 1 else None
    if note is not None and type(note) is not str:
        raise DalTypeError(f"`{fn}` takes a note string second, got {type_name(note)}")
    try:
        with Store(s.store) as db:
            row = decide(db, run_id, {"approve": "approved", "deny": "denied"}[fn], note=note, who="dal test").row
    except (DecisionRefused, StoreError) as e:
        raise DalRuntimeError(str(e)) from None
    return to_json_value(json.loads(json.dumps(row, default=str)))


@_test_builtin("approve(run_id, note)", 1, 2)
def _approve(rt: Runtime, args: list[Any], span: Any) -> dict[str, Any]:
    """Approve the effect a waiting run holds (as `dal approve RUN`); `resume` then executes it once.

    Example:
        approve(r.run_id, "figures checked")
    """
    return _decide(rt, args, "approve")


@_test_builtin("deny(run_id, note)", 1, 2)
def _deny(rt: Runtime, args: list[Any], span: Any) -> dict[str, Any]:
    """Deny the effect a waiting run holds (as `dal deny RUN`); on `resume` the script gets a `denied`
    result for it.

    Example:
        deny(r.run_id)
    """
    return _decide(rt, args, "deny")


@_test_builtin("resolve(run_id, outcome, effect)", 2, 3)
def _resolve(rt: Runtime, args: list[Any], span: Any) -> dict[str, Any]:
    """Say what happened to an effect of unknown outcome that a waiting run holds (as `dal resolve RUN
    --as done|failed|retry`): `"done"` (it happened: the resume does not run it and the script gets a
    completed result), `"failed"` (it did not: the script gets a failed result) or `"retry"` (run it
    again). `effect` picks one by number; by default the run's held effect.

    Example:
        resolve(held.run_id, "done")
    """
    from dal.receipts.store import RunNotFound, Store, StoreError

    s = _session(rt)
    run_id = _run_id(args[0], "resolve")
    outcome = args[1]
    if outcome not in ("done", "failed", "retry"):
        raise DalRuntimeError(f"`resolve` needs \"done\", \"failed\" or \"retry\", got {dal_repr(outcome)}")
    effect = args[2] if len(args) > 2 else None
    if effect is not None and type(effect) is not int:
        raise DalTypeError(f"`resolve` takes an effect number third, got {type_name(effect)}")
    try:
        with Store(s.store) as db:
            data = db.find(run_id)
            held = [i for i in data["effects"]["items"] if i["status"] == "uncertain"
                    and (effect is None or i["seq"] == effect)]
            if data.get("status") != "waiting" or not held:
                raise DalRuntimeError(f"run {data['run_id']} ({data.get('status')}) holds no effect of unknown "
                                      "outcome" + (f" numbered {effect}" if effect is not None else ""))
            row = db.record_approval(data["run_id"], held[-1]["seq"], f"resolved:{outcome}", who="dal test")
    except (RunNotFound, StoreError) as e:
        raise DalRuntimeError(str(e)) from None
    return json.loads(json.dumps(row, default=str))


@_test_builtin("receipt(ref)", 1)
def _receipt(rt: Runtime, args: list[Any], span: Any) -> dict[str, Any]:
    """The stored receipt of a run: a run id, an operation key (its newest run) or `"latest"`, as
    `dal receipt show`. A crashed run gets its receipt (status `interrupted`) when the next invocation
    of its key finds it.

    Example:
        let first = receipt(crashed.run_id)
    """
    from dal.receipts.store import Store, StoreError

    s = _session(rt)
    ref = _run_id(args[0], "receipt")
    try:
        with Store(s.store, readonly=True) as db:
            return json.loads(json.dumps(db.find(ref)))
    except StoreError as e:
        raise DalRuntimeError(str(e)) from None


# --- running one test script ---------------------------------------------------------------------


@attrs.define
class TestResult:
    __test__ = False  # not a pytest class
    path: Path
    passed: bool
    duration: float
    error: DalError | None = None  # the failing assertion or error, located in the test script
    message: str | None = None  # a failure with no location (fail(...), a broken test file)
    output: str = ""  # what the test script printed
    workspace: Path | None = None  # kept with --keep


def run_test_file(path: Path, *, keep: bool = False, max_steps: int = defaults.MAX_STEPS,
                  allow_env: Iterable[str] = (), unsandboxed_as_root: bool = False,
                  policy_file: Path | None = None, policy_flags: dict[str, Any] | None = None) -> TestResult:
    """Run one test script in a fresh temporary workspace (removed afterwards unless `keep`). `allow_env`:
    variables env() may read, in the test script and in every workflow it invokes (`--allow-env`);
    `unsandboxed_as_root`: `dal test --unsandboxed-as-root`. `policy_file` (else the dal.toml of the test's
    project, if any) and `policy_flags` (`dal test --allow-run` ...): the ceiling of every invoke's policy."""
    t0 = time.monotonic()
    try:
        source = _read_test(path)
    except UnreadableScript as e:
        return TestResult(path, False, 0.0, message=str(e))
    except OSError as e:  # finding the test's project
        return TestResult(path, False, 0.0, message=f"cannot read {path}: {e.strerror}")
    checked, errors = check_source(source, str(path), builtins=TEST_BUILTINS)
    if errors:
        return TestResult(path, False, time.monotonic() - t0, error=errors[0])
    workspace = Path(tempfile.mkdtemp(prefix="dal-test-")).resolve()
    buf = io.StringIO()
    try:
        from dal.effects import PolicyError
        from dal.runner.effects import EffectHandler

        try:
            ceiling = Policy.load(workspace, policy_file or _project_policy(path), **(policy_flags or {}),
                                  allow_env=allow_env)
        except PolicyError as e:
            return TestResult(path, False, time.monotonic() - t0, message=f"the policy dal test was given: {e}")
        # The test's own run() calls (fixtures) run for real under the workspace's policy, unjournaled.
        own = Policy.load(workspace, allow_env=allow_env)
        host = _TestHost(TestSession(path, workspace, allow_env, unsandboxed_as_root, ceiling=ceiling),
                         write=buf.write, getenv=own.getenv)
        rt = Runtime(max_steps=max_steps, host=host)
        host.attach(EffectHandler(rt, EffectContext(policy=own, unsandboxed_as_root=unsandboxed_as_root)))
        outcome = Engine(rt, TEST_BUILTINS).execute(checked)  # type: ignore[arg-type]
    finally:
        if not keep:
            shutil.rmtree(workspace, ignore_errors=True)
    took = time.monotonic() - t0
    kept = workspace if keep else None
    if outcome.status == "completed":
        return TestResult(path, True, took, output=buf.getvalue(), workspace=kept)
    if outcome.error is not None:
        return TestResult(path, False, took, error=outcome.error, output=buf.getvalue(), workspace=kept)
    if outcome.ended_by == "fail":
        msg = "the test called fail(" + (display(outcome.result) if outcome.result is not None else "") + ")"
    elif outcome.status == "waiting" and outcome.wait is not None:
        msg = f"the test's own run() stopped for a person: {outcome.wait.reason}"
    else:
        msg = f"the test ended as {outcome.status}"
    return TestResult(path, False, took, message=msg, output=buf.getvalue(), workspace=kept)


def _read_test(path: Path) -> str:
    """A test script's text. Below the folder `dal test` runs in or the test's project a script run there may
    have swapped the name for a symlink, and what is read shows in the test's report: it is read by
    descriptor, never leaving that folder; a test the operator named elsewhere is read as named."""
    from dal.runner.workspace import find_workspace

    start = os.path.dirname(os.path.abspath(path))
    return read_script(path, (os.getcwd(), str(find_workspace(None, start=start).path)))


def _project_policy(test: Path) -> Path | None:
    """The dal.toml of the project the test belongs to (the nearest workspace from its folder up)."""
    from dal.runner.workspace import find_workspace

    found = find_workspace(None, start=os.path.dirname(os.path.abspath(test))).path / "dal.toml"
    return found if found.is_file() else None


class NoTests(Exception):
    """A path given to `dal test` does not exist, or nothing matched."""


def discover(paths: list[Path], root: Path | None = None) -> list[Path]:
    """The test scripts to run: each file given, every `*.test.dal` under each folder given, or by default
    `tests/**/*.test.dal` and `examples/tests/*.test.dal` under `root` (the current folder)."""
    found: list[Path] = []
    if not paths:
        base = root or Path()
        for pattern in DEFAULT_GLOBS:
            found.extend(p for p in sorted(base.glob(pattern)) if p.is_file())
    for p in paths:
        if p.is_dir():
            found.extend(sorted(q for q in p.rglob("*" + TEST_SUFFIX) if q.is_file()))
        elif p.is_file():
            found.append(p)
        else:
            raise NoTests(f"no such test script or folder: {p}")
    seen: set[Path] = set()
    out = []
    for p in found:
        r = p.resolve()
        if r not in seen:
            seen.add(r)
            out.append(p)
    return out
