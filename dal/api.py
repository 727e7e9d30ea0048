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

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)

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


def _policy(workspace: Path, policy: Any) -> Any:
    from dal.effects import Policy, PolicyError

    if policy is None:
        try:
            return Policy.load(workspace)
        except PolicyError as e:
            raise DalUsageError(str(e)) from None
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, dict):
        try:
            return Policy.load(workspace, policy.get("file"), **{k: v for k, v in policy.items() if k != "file"})
        except (PolicyError, TypeError) as e:
            raise DalUsageError(f"bad policy: {e}") from None
    if isinstance(policy, str | os.PathLike):
        try:
            return Policy.load(workspace, Path(policy))
        except PolicyError as e:
            raise DalUsageError(str(e)) from None
    raise DalUsageError("policy must be a dal.effects.Policy, a dict of policy flags, or a TOML file path")


_FLAG_KEYS = ("allow_run", "allow_read", "allow_write", "allow_net", "require_approval", "allow_env")


def _policy_args(policy: Any) -> dict[str, Any]:
    """The policy as flags, stored with the run so that `resume` rebuilds it."""
    if isinstance(policy, dict):
        args = {k: v for k, v in policy.items() if k != "file"}
        if policy.get("file"):
            args["policy"] = str(Path(policy["file"]).resolve())
        return args
    if isinstance(policy, str | os.PathLike):
        return {"policy": str(Path(policy).resolve())}
    return {}


def _workspace(workspace: str | os.PathLike[str] | None) -> Path:
    """`workspace`, else the one found from the current directory as `dal run` finds it (the nearest
    folder with a dal.toml or a .dal/ folder, else the current directory)."""
    from dal.runner.workspace import find_workspace

    ws = find_workspace(workspace).path
    if not ws.is_dir():
        raise DalUsageError(f"workspace {workspace} is not a directory")
    return ws


def _store(store: str | os.PathLike[str] | None, ws: Path) -> Path:
    from dal.runner.runner import default_store

    return Path(store) if store is not None else default_store(ws)


def run(
    source_or_path: str | os.PathLike[str],
    *,
    key: str | None = None,
    policy: Any = None,
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    receipts_dir: str | os.PathLike[str] | None = None,
    max_steps: int = 1_000_000,
    max_effects: int | None = None,
    timeout: float | None = None,
    effect_timeout: float | None = None,
    filename: str | None = None,
    new_attempt: bool = False,
    max_memory: int | str | None = None,
    unsandboxed_as_root: bool = False,
) -> Receipt:
    """Run a script (a path to a `.dal` file, or its source text) and return its receipt.

    `policy`: a `dal.effects.Policy`, a dict of flags (`allow_run`, `allow_read`, `allow_write`,
    `allow_net`, `require_approval`, `allow_env`, and `file` for a TOML path), or a TOML path; None: the
    workspace's dal.toml or the default. A run that continues an operation (its `key` has a waiting,
    interrupted or failed run) runs under the policy the operation started with, plus the flags given.
    `effect_timeout`: seconds per command (None: the policy's `[limits] timeout`, else 30).
    What the script prints is captured in `receipt.output`. Nothing about the script's own outcome
    raises: read `receipt.status`. `new_attempt=True` starts the key's operation over (`--new-attempt`).
    `max_memory`: the memory budget, in bytes or as `"512M"` / `"2G"` (default 1G, as `--max-memory`).
    Running as root without a working bubblewrap wall, every command is refused unless
    `unsandboxed_as_root=True` (as `dal run --unsandboxed-as-root`).
    """

    ws = _workspace(workspace)
    if isinstance(source_or_path, os.PathLike) or (
        isinstance(source_or_path, str) and source_or_path.endswith(".dal") and "\n" not in source_or_path
    ):
        path = Path(source_or_path)
        if not path.is_file():
            raise DalUsageError(f"no such script: {path}")
        script, source = path, None
    elif isinstance(source_or_path, str):
        from dal.core.jsontext import surrogate_at

        at = surrogate_at(source_or_path)
        if at is not None:  # it could not be kept as a UTF-8 file, as a script file holding one could not be read
            line = source_or_path.count("\n", 0, at) + 1
            esc = f"\\u{ord(source_or_path[at]):04x}"
            raise DalUsageError(f"the script is not valid Unicode text: a lone surrogate ({esc}) on line {line}; "
                                f'write it as the escape "{esc}" inside a string')
        # Source text is kept as a content-addressed file in the workspace, so that `resume` can replay
        # exactly this script later.
        import hashlib

        digest = hashlib.sha256(source_or_path.encode("utf-8")).hexdigest()[:16]
        script = ws / ".dal" / "scripts" / (filename or f"{digest}.dal")
        script.parent.mkdir(parents=True, exist_ok=True)
        if not script.exists() or script.read_text(encoding="utf-8") != source_or_path:
            from dal.core.fsutil import atomic_write_text

            atomic_write_text(script, source_or_path)
        source = None
    else:
        raise DalUsageError("run() takes a path to a .dal script or the script's source text")
    if not isinstance(max_steps, int) or max_steps <= 0:
        raise DalUsageError("max_steps must be a positive integer")
    return _execute(
        **_memory(max_memory),
        policy_args=_policy_args(policy),
        script=script,
        source=source,
        workspace=ws,
        policy=_policy(ws, policy),
        max_steps=max_steps,
        max_effects=max_effects,
        timeout=timeout,
        effect_timeout=effect_timeout,
        key=key,
        store=_store(store, ws),
        receipts_dir=Path(receipts_dir) if receipts_dir is not None else None,
        new_attempt=new_attempt,
        unsandboxed_as_root=unsandboxed_as_root,
    )


def _memory(max_memory: int | str | None) -> dict[str, int]:
    """`max_memory` as RunRequest takes it (nothing: the default)."""
    if max_memory is None:
        return {}
    import argparse

    from dal.runner.options import memory_size

    if isinstance(max_memory, bool) or not isinstance(max_memory, int | str):
        raise DalUsageError("max_memory must be a number of bytes or a size such as \"512M\"")
    try:
        return {"max_memory": memory_size(str(max_memory))}
    except argparse.ArgumentTypeError as e:
        raise DalUsageError(f"max_memory: {e}") from None


def _execute(**fields: Any) -> Receipt:
    """One run through the runner, its output captured; runner problems become the API's exceptions."""
    from dal.runner.runner import RunnerError, RunRequest, execute

    buf = io.StringIO()
    try:
        report = execute(RunRequest(write=buf.write, handle_signals=False, **fields))
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
    from dal.receipts.store import NoStore, Store, StoreError

    ws = _workspace(workspace)
    try:
        return Store(_store(store, ws), readonly=readonly)
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
    workspace: Any, store: Any,
) -> dict[str, Any]:
    from dal.receipts.store import StoreError
    from dal.runner.decisions import DecisionRefused, decide

    try:
        with _open(store, workspace, readonly=False) as db:
            return decide(db, run_id, decision, effect=effect, note=note, who=who).row
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
) -> dict[str, Any]:
    """Say what happened to an effect whose outcome is unknown: `done`, `failed` or `retry`."""
    if outcome not in ("done", "failed", "retry"):
        raise DalUsageError("outcome must be done, failed or retry")
    return _decide(run_id, f"resolved:{outcome}", effect, note, who, workspace, store)


def resume(
    run_id: str,
    *,
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    policy: dict[str, Any] | None = None,
    max_steps: int | None = None,
    max_memory: int | str | None = None,
    unsandboxed_as_root: bool = False,
) -> Receipt:
    """Continue the operation of a run that has not completed (waiting, interrupted, died, failed or
    exhausted): replay its journal, continue from the first open effect.

    The script, workspace and budgets are those the run was started with unless given here, and the
    policy is the one stored with its operation: the policy file is not read again. `policy` may add to
    it, as a dict of flags (`allow_run`, `allow_read`, `allow_write`, `allow_net`, `require_approval`,
    `allow_env`); what they add is recorded in the receipt (`policy.added`). `unsandboxed_as_root`
    is never taken from the run (say it again here, as for run())."""
    from dal.receipts.store import StoreError
    from dal.runner.decisions import launch_of
    from dal.runner.runner import find_run

    if policy is not None and (not isinstance(policy, dict) or set(policy) - set(_FLAG_KEYS)):
        raise DalUsageError(
            "resume() runs under the policy stored with the operation; `policy` may only add to it, as a dict "
            f"of flags ({', '.join(_FLAG_KEYS)}); start a new operation to use another policy or file"
        )
    ws = _workspace(workspace)
    try:
        with _open(store, ws, readonly=True) as db:
            run = find_run(db, run_id)
    except StoreError as e:
        raise DalUsageError(str(e)) from None
    try:
        launch = launch_of(run)
    except ValueError as e:
        raise DalUsageError(str(e)) from None
    script = launch.script
    if script is not None and not script.is_absolute() and not script.exists():
        script = ws / script
    if script is None or not script.is_file():
        raise DalUsageError(f"the script of run {run['run_id']} is gone: {script}")
    added = dict(policy or {})
    stored = launch.policy
    if stored is None:  # a run an older DAL started kept only its flags: rebuild from them
        args = {k: v for k, v in launch.policy_args.items() if k in _FLAG_KEYS}
        for k, v in added.items():
            args[k] = v if k == "allow_net" else [*(args.get(k) or []), *v]
        args["file"] = launch.policy_args.get("policy")
        stored = _policy(ws, args)
    return _execute(
        script=script,
        workspace=Path(stored.workspace),
        policy=stored,
        policy_args=added,
        max_steps=max_steps or launch.max_steps or 1_000_000,
        max_effects=launch.max_effects,
        timeout=launch.timeout,
        effect_timeout=launch.policy_args.get("effect_timeout"),
        store=_store(store, ws),
        resume=run["run_id"],
        **_memory(max_memory if max_memory is not None else launch.max_memory),
        unsandboxed_as_root=unsandboxed_as_root,
    )
