"""The Python embedding API: what the `dal` command line does, as functions.

    import dal
    receipt = dal.run("examples/article_loop.dal", workspace="/srv/job", key="article-draft:2026-09-02")
    if receipt.status == "waiting":
        dal.approve(receipt.run_id, workspace="/srv/job")
        receipt = dal.resume(receipt.run_id, workspace="/srv/job")

A script's own failure is never an exception: the receipt says what happened (`status`, `error`,
`retry`, `blocker`). Exceptions are for misuse only: `DalUsageError` for bad arguments or an unknown
run, `DalStoreError` for a store that cannot be read or written.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import attrs

from dal.core.errors import DalError

__all__ = [
    "resolve_effect",
    "DalStoreError",
    "DalUsageError",
    "Diagnostic",
    "Receipt",
    "approve",
    "check",
    "deny",
    "interrupt_runs",
    "list_receipts",
    "resume",
    "run",
]


class DalUsageError(ValueError):
    """The API was called wrongly: a bad argument, a missing script, an unknown run, a busy key."""


class DalStoreError(RuntimeError):
    """The run store cannot be opened, read or written; the message names the file and what to do."""


@attrs.frozen
class Receipt:
    """A run receipt (`dal.receipt/v1`): the schema's fields as attributes, the dict as `.data`."""

    data: dict[str, Any] = attrs.field(repr=False)
    output: str = attrs.field(default="", repr=False)  # what the script printed (for dal.run)

    def __getattr__(self, name: str) -> Any:
        data = object.__getattribute__(self, "data")
        if name in data:
            return data[name]
        raise AttributeError(f"a receipt has no field {name!r}")

    def __repr__(self) -> str:
        d = self.data
        return f"Receipt(run_id={d['run_id']!r}, status={d['status']!r}, retry={d['retry']!r})"

    def to_dict(self) -> dict[str, Any]:
        """A copy of the receipt's dict (`dal.receipt/v1`)."""
        return dict(self.data)

    def to_json(self, indent: int | None = 2) -> str:
        """The receipt as JSON text, as `<run_id>.json` holds it (lone surrogates as their escapes). It used
        to return the dict, which `to_dict()` now does (docs/api.md)."""
        from dal.core.jsontext import dumps

        return dumps(self.data, indent=indent)

    def to_markdown(self) -> str:
        from dal.receipts.markdown import render_markdown

        return render_markdown(self.data)

    def render(self) -> str:
        """The human rendering `dal receipt show` prints, with the suggested next move."""
        from dal.receipts.render import render

        return render(self.data)


@attrs.frozen
class Diagnostic:
    severity: str  # "error" | "warning"
    kind: str
    message: str
    file: str
    line: int
    column: int
    rendered: str


def check(source: str, *, filename: str = "<string>") -> list[Diagnostic]:
    """Parse and resolve `source` without running it: every error and warning, located."""
    from dal.core.diagnostics import render
    from dal.eval.interpreter import check_source

    if not isinstance(source, str):
        raise DalUsageError("check() takes the script's text as a string")
    warnings: list[DalError] = []
    _checked, errors = check_source(source, filename, warnings=warnings)
    out = []
    for sev, items in (("error", errors), ("warning", warnings)):
        for e in items:
            out.append(Diagnostic(sev, e.kind, e.message, e.filename or filename, e.span.line, e.span.column,
                                  render(e, False, severity=sev)))
    return out


def _policy_options(policy: Any) -> dict[str, Any]:
    """The builder's policy keywords for run()'s `policy`: a Policy, a dict of flags (and `file`), a TOML
    file path, or None (the workspace's dal.toml or the default)."""
    from dal.effects import Policy

    if policy is None:
        return {}
    if isinstance(policy, Policy):
        return {"policy": policy}
    if isinstance(policy, dict):
        flags = {k: v for k, v in policy.items() if k != "file"}
        return {"policy_file": policy.get("file"), "policy_flags": flags}
    if isinstance(policy, str | os.PathLike):
        return {"policy_file": policy}
    raise DalUsageError("policy must be a dal.effects.Policy, a dict of policy flags, or a TOML file path")


def _workspace(workspace: str | os.PathLike[str] | None) -> Path:
    """`workspace`, else the one found from the current directory as `dal run` finds it (the nearest
    folder with a dal.toml or a .dal/ folder, else the current directory)."""
    from dal.runner.workspace import find_workspace

    ws = find_workspace(workspace).path
    if not ws.is_dir():
        raise DalUsageError(f"workspace {workspace} is not a directory")
    return ws


def _location(store: str | os.PathLike[str] | None, ws: Path) -> Any:
    from dal.receipts.location import StoreLocation, StoreLocationError

    try:
        return StoreLocation.parse(store, ws)
    except StoreLocationError as e:
        raise DalUsageError(str(e)) from None


def run(
    source_or_path: str | os.PathLike[str],
    *,
    key: str | None = None,
    policy: Any = None,
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    receipts_dir: str | os.PathLike[str] | None = None,
    max_steps: int | None = None,
    max_effects: int | None = None,
    timeout: float | None = None,
    effect_timeout: float | None = None,
    filename: str | None = None,
    new_attempt: bool = False,
    max_memory: int | str | None = None,
    unsandboxed_as_root: bool = False,
    args: dict[str, Any] | None = None,
) -> Receipt:
    """Run a script (a path to a `.dal` file, or its source text) and return its receipt.

    `args`: the script's arguments (its `param` declarations), name to value: a value of the declared type
    (`str`, `int`, `float` — an int does —, `bool`), or text read as the command line's `name=value` is. A
    bad, unknown or missing argument rejects the run before anything runs (`status` "rejected", `error`
    located at the declaration); the values are recorded in `receipt.args`, and a resume uses them again.

    `policy`: a `dal.effects.Policy`, a dict of flags (`allow_run`, `allow_read`, `allow_write`,
    `allow_net`, `require_approval`, `allow_env`, and `file` for a TOML path), or a TOML path; None: the
    workspace's dal.toml or the default. A run that continues an operation (its `key` has a waiting,
    interrupted or failed run) runs under the policy the operation started with, plus the flags given.
    `effect_timeout`: seconds per command (None: the policy's `[limits] timeout`, else 30).
    What the script prints is captured in `receipt.output`. Nothing about the script's own outcome
    raises: read `receipt.status`. `new_attempt=True` starts the key's operation over (`--new-attempt`).
    `max_memory`: the memory budget, in bytes or as `"512M"` / `"2G"` (default 1G, as `--max-memory`).
    Running as root without a working bubblewrap wall, every command is refused unless
    `unsandboxed_as_root=True` (as `dal run --unsandboxed-as-root`). Every keyword is the `dal run` flag of
    the same name: the run is specified by the same builder (dal/runner/build.py).
    """
    from dal.runner.build import SpecError, build_spec

    ws = _workspace(workspace)
    script: Any = None
    source = None
    if isinstance(source_or_path, os.PathLike) or (
        isinstance(source_or_path, str) and source_or_path.endswith(".dal") and "\n" not in source_or_path
    ):
        script = Path(source_or_path)
        if not script.is_file():
            raise DalUsageError(f"no such script: {script}")
    elif isinstance(source_or_path, str):
        from dal.core.jsontext import surrogate_at

        at = surrogate_at(source_or_path)
        if at is not None:  # it could not be kept as a UTF-8 file, as a script file holding one could not be read
            line = source_or_path.count("\n", 0, at) + 1
            esc = f"\\u{ord(source_or_path[at]):04x}"
            raise DalUsageError(f"the script is not valid Unicode text: a lone surrogate ({esc}) on line {line}; "
                                f'write it as the escape "{esc}" inside a string')
        source = source_or_path
    else:
        raise DalUsageError("run() takes a path to a .dal script or the script's source text")
    try:
        spec = build_spec(
            script, source=source, filename=filename, workspace=ws, store=store, receipts=receipts_dir,
            **_policy_options(policy), max_steps=max_steps, max_effects=max_effects, timeout=timeout,
            max_memory=max_memory, effect_timeout=effect_timeout, key=key, new_attempt=new_attempt,
            unsandboxed_as_root=unsandboxed_as_root, args=args,
        )
    except SpecError as e:
        raise DalUsageError(str(e)) from None
    return _execute(spec)


def _execute(spec: Any) -> Receipt:
    """One run through the runner, its output captured; runner problems become the API's exceptions."""
    from dal.runner.runner import RunnerError, execute
    from dal.runner.spec import RunHooks

    buf = io.StringIO()
    try:
        report = execute(spec, RunHooks(write=buf.write, handle_signals=False))
    except RunnerError as e:
        _raise_for(e)
    if report.store_problem:
        # The run ended but the store did not record it: the receipt files hold it, the journal is intact.
        raise DalStoreError(f"{report.store_problem}. Next: {report.next_step}")
    return Receipt(report.receipt, buf.getvalue())


def _raise_for(e: Exception) -> Any:
    text = str(e)
    if "store" in text.lower():
        raise DalStoreError(text) from None
    raise DalUsageError(text) from None


def _open(store: str | os.PathLike[str] | None, workspace: str | os.PathLike[str] | None, readonly: bool) -> Any:
    from dal.receipts.location import open_store
    from dal.receipts.store import NoStore, StoreError

    ws = _workspace(workspace)
    try:
        return open_store(_location(store, ws), readonly=readonly)
    except NoStore as e:
        raise DalUsageError(str(e)) from None
    except StoreError as e:
        raise DalStoreError(str(e)) from None


def list_receipts(
    *,
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    status: str | None = None,
    operation: str | None = None,
    waiting: bool = False,
    limit: int | None = 50,
) -> list[Receipt]:
    """Stored run receipts, newest first (runs that died before writing one are left out)."""
    from dal.receipts.store import StoreError

    try:
        with _open(store, workspace, readonly=True) as db:
            rows = db.list_runs(status=status, operation=operation, waiting=waiting, limit=limit)
            out = []
            for row in rows:
                data = db.get_run(row["run_id"])
                if data:
                    out.append(Receipt(data))
            return out
    except DalUsageError as e:
        if "no runs yet" in str(e):
            return []
        raise
    except StoreError as e:
        raise DalStoreError(str(e)) from None


def receipt(
    ref: str, *, workspace: str | os.PathLike[str] | None = None, store: str | os.PathLike[str] | None = None
) -> Receipt:
    """One receipt by run id, unique prefix, operation key, or `latest` (as `dal receipt show`)."""
    from dal.receipts.store import RunNotFound, StoreError

    try:
        with _open(store, workspace, readonly=True) as db:
            return Receipt(db.find(ref))
    except RunNotFound as e:
        raise DalUsageError(str(e)) from None
    except StoreError as e:
        raise DalStoreError(str(e)) from None


def _decide(
    run_id: str, decision: str, effect: int | None, note: str | None, who: str | None,
    workspace: Any, store: Any, old_run_gone: bool = False,
) -> dict[str, Any]:
    from dal.receipts.store import StoreError
    from dal.runner.decisions import DecisionRefused, decide

    try:
        with _open(store, workspace, readonly=False) as db:
            return decide(db, run_id, decision, effect=effect, note=note, who=who, old_run_gone=old_run_gone).row
    except DecisionRefused as e:
        raise DalUsageError(str(e)) from None
    except StoreError as e:
        raise DalUsageError(str(e)) if "no run" in str(e).lower() else DalStoreError(str(e)) from None


def approve(
    run_id: str, *, effect: int | None = None, note: str | None = None, who: str | None = None,
    workspace: str | os.PathLike[str] | None = None, store: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Approve the waiting effect of a run (or effect number `effect`); `resume` then executes it once."""
    return _decide(run_id, "approved", effect, note, who, workspace, store)


def deny(
    run_id: str, *, effect: int | None = None, note: str | None = None, who: str | None = None,
    workspace: str | os.PathLike[str] | None = None, store: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Deny the waiting effect; on `resume` the script receives a `denied` result for it."""
    return _decide(run_id, "denied", effect, note, who, workspace, store)


def resolve_effect(
    run_id: str, outcome: str, *, effect: int | None = None, note: str | None = None, who: str | None = None,
    workspace: str | os.PathLike[str] | None = None, store: str | os.PathLike[str] | None = None,
    old_run_gone: bool = False,
) -> dict[str, Any]:
    """Say what happened to an effect whose outcome is unknown: `done`, `failed` or `retry`. Of an effect a run
    that lost its key lock was executing, `failed` and `retry` need `old_run_gone=True`: the person made sure
    that run no longer runs (docs/durability.md)."""
    if outcome not in ("done", "failed", "retry"):
        raise DalUsageError("outcome must be done, failed or retry")
    return _decide(run_id, f"resolved:{outcome}", effect, note, who, workspace, store, old_run_gone)


def resume(
    run_id: str,
    *,
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    policy: dict[str, Any] | None = None,
    max_steps: int | None = None,
    max_effects: int | None = None,
    timeout: float | None = None,
    max_memory: int | str | None = None,
    effect_timeout: float | None = None,
    receipts_dir: str | os.PathLike[str] | None = None,
    require_sandbox: bool = False,
    unsandboxed_as_root: bool = False,
) -> Receipt:
    """Continue the operation of a run that has not completed (waiting, interrupted, died, failed or
    exhausted): replay its journal, continue from the first open effect.

    Everything the run was started with is restored from the store — script, workspace, receipts folder,
    budgets, effect limits, `require_sandbox` — unless given here, and the policy is the one stored with its
    operation: the policy file is not read again. `policy` may add to it, as a dict of flags (`allow_run`,
    `allow_read`, `allow_write`, `allow_net`, `require_approval`, `allow_env`); what they add is recorded in
    the receipt (`policy.added`). `require_sandbox=True` can only narrow; `unsandboxed_as_root` is never
    taken from the run (say it again here, as for run())."""
    from dal.receipts.store import StoreError
    from dal.runner.build import SpecError, resume_spec
    from dal.runner.spec import POLICY_FLAGS

    if policy is not None and (not isinstance(policy, dict) or set(policy) - set(POLICY_FLAGS)):
        raise DalUsageError(
            "resume() runs under the policy stored with the operation; `policy` may only add to it, as a dict "
            f"of flags ({', '.join(POLICY_FLAGS)}); start a new operation to use another policy or file"
        )
    ws = _workspace(workspace)
    location = _location(store, ws)
    try:
        with _open(store, ws, readonly=True) as db:
            run = db.find_run(run_id)
    except StoreError as e:
        raise DalUsageError(str(e)) from None
    try:
        spec = resume_spec(run, store=location, policy_flags=policy, receipts=receipts_dir, max_steps=max_steps,
                           max_effects=max_effects, timeout=timeout, max_memory=max_memory,
                           effect_timeout=effect_timeout, require_sandbox=require_sandbox,
                           unsandboxed_as_root=unsandboxed_as_root)
    except SpecError as e:
        raise DalUsageError(str(e)) from None
    if not spec.script or not Path(spec.script).is_file():
        raise DalUsageError(f"the script of run {run['run_id']} is gone: {spec.script or '(none recorded)'}")
    return _execute(spec)


def interrupt_runs(reason: str = "SIGTERM") -> int:
    """Stop every run this process is executing, in any thread, as SIGTERM stops `dal run`: each stops at
    its next step (a command under way gets its grace, DAL_STOP_GRACE, then is stopped) and its `run` or
    `resume` call returns an `interrupted` receipt, which `resume` continues. For a host that runs scripts
    off its main thread (a server's worker threads), where DAL cannot take the process's signals itself.
    Returns how many runs were asked to stop; a run that starts later is not stopped."""
    from dal.runner import inflight

    return inflight.interrupt_all(reason)
