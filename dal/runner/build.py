"""Building a RunSpec: the one builder every front end calls (`build_spec`), and the one that continues a
stored run (`resume_spec`).

`dal run`'s flags (dal/runner/options.py maps them), the Python API's keywords, `dal test`'s `invoke` and
`resume` and the REPL all describe a run with the same keywords, so they cannot disagree on a default, on
where the workspace and the store are, or on how the policy is built from its file and flags.

Which settings `dal resume` takes from the run and which the operator may override is the table in
docs/cli.md ("dal resume RUN"): the script, workspace, store, receipts folder, key, budgets, effect limits
and the policy in force are the run's; budgets and effect limits may be given again; policy flags only add
(docs/policy.md, "The policy in force"); `--require-sandbox` only narrows; `--unsandboxed-as-root` is never
the run's, the operator says it again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dal.core import defaults
from dal.core.jsontext import surrogate_at
from dal.core.readbelow import read_text_below
from dal.core.sizes import parse_size
from dal.effects.policy import Policy, PolicyError
from dal.receipts.location import StoreLocation, StoreLocationError
from dal.runner.spec import POLICY_FLAGS, RunSpec, SpecError
from dal.runner.stored import StoredRun
from dal.runner.workspace import find_workspace

__all__ = ["SpecError", "build_spec", "parse_memory", "resume_spec"]

SESSION = "<repl>"  # the script of an interactive session: there is no file
MIN_MEMORY = 16 << 20
def parse_memory(text: str, minimum: int = MIN_MEMORY) -> int:
    """A memory size (dal/core/sizes.py), at least `minimum` (16M). Raises ValueError saying what was
    expected."""
    try:
        return parse_size(text, minimum)
    except ValueError as e:
        if minimum == MIN_MEMORY and "at least" in str(e):
            raise ValueError(f"must be at least 16M, got {text}") from None
        raise


def _count(name: str, value: Any, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"{name} must be a positive integer, got {value!r}")
    return value


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise SpecError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _memory(value: Any) -> int:
    if value is None:
        return defaults.MAX_MEMORY
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SpecError('max_memory must be a number of bytes or a size such as "512M"')
    try:
        return parse_memory(str(value))
    except ValueError as e:
        raise SpecError(f"max_memory: {e}") from None


def _size(name: str, value: Any) -> int | None:
    """A size in bytes, given as a number or as text such as "64M"; None stays None (the default applies)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SpecError(f'{name} must be a number of bytes or a size such as "64M"')
    try:
        return parse_memory(str(value), minimum=1)
    except ValueError as e:
        raise SpecError(f"{name}: {e}") from None


def _policy_flags(flags: Mapping[str, Any] | None) -> dict[str, Any]:
    flags = dict(flags or {})
    bad = sorted(set(flags) - set(POLICY_FLAGS))
    if bad:
        raise SpecError(f"unknown policy flag {bad[0]!r}: the flags are {', '.join(POLICY_FLAGS)} (and `file`)")
    for k, v in flags.items():
        if k == "allow_net":
            if not isinstance(v, bool):
                raise SpecError(f"policy flag allow_net needs true or false, got {v!r}")
        elif not (isinstance(v, str) or (isinstance(v, list | tuple) and all(isinstance(x, str) for x in v))):
            raise SpecError(f"policy flag {k} needs a list of strings, got {v!r}")
    return flags


def _inline(source: str, workspace: str, filename: str | None) -> str:
    """Source text handed to a host API, kept as a content-addressed file in the workspace
    (`.dal/scripts/`), so that a resume runs exactly this script again."""
    import hashlib

    if filename is not None and (not isinstance(filename, str) or os.path.basename(filename) != filename
                                 or filename in ("", ".", "..") or "\x00" in filename):
        raise SpecError(f"filename {filename!r}: give a plain file name, without folders: the text is kept as "
                        "WORKSPACE/.dal/scripts/FILENAME")
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    name = filename or f"{digest}.dal"
    script = Path(workspace, ".dal", "scripts", name)
    script.parent.mkdir(parents=True, exist_ok=True)
    try:  # by descriptor below the workspace, as the runner reads it
        same = read_text_below(workspace, os.path.join(".dal", "scripts", name)) == source
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        from dal.core.fsutil import atomic_write_text

        atomic_write_text(script, source)
    return str(script)


# The spec's extension that pins a run to one text of its script (see pin_script; the runner checks it).
SCRIPT_DIGEST = "script_sha256"


def pin_script(spec: RunSpec, source: str) -> RunSpec:
    """`spec`, made to run exactly `source` — the text that was checked when a job was submitted or a
    schedule added — whatever the script file holds later: the text is kept content-addressed in the
    workspace's `.dal/scripts/` (which no script may write) and its sha256 goes into the spec, so the
    runner refuses a kept file that no longer has it. The spec's `filename` still names the script as the
    operator gave it (diagnostics, receipts)."""
    import hashlib

    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    path = _inline(source, spec.workspace, f"sha256-{digest}.dal")
    return spec.evolve(script=path, extensions={**spec.extensions, SCRIPT_DIGEST: digest})


def build_spec(
    script: str | os.PathLike[str] | None,
    *,
    source: str | None = None,
    filename: str | None = None,
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | StoreLocation | None = None,
    receipts: str | os.PathLike[str] | None = None,
    policy: Policy | None = None,
    policy_file: str | os.PathLike[str] | None = None,
    policy_flags: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    max_effects: int | None = None,
    timeout: float | None = None,
    max_memory: int | str | None = None,
    effect_timeout: float | None = None,
    max_output: int | None = None,
    max_stored_output: int | str | None = None,
    require_sandbox: bool = False,
    use_sandbox: bool = True,
    unsandboxed_as_root: bool = False,
    key: str | None = None,
    new_attempt: bool = False,
    wait: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
    notes: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    args: Mapping[str, Any] | None = None,
) -> RunSpec:
    """The spec of a new run. `script`: the script's path (None: an interactive session), or with `source`
    the name its text is kept under in `.dal/scripts/` (default: the text's digest). `workspace` None: the
    one found from `cwd` (dal/runner/workspace.py; a note about how it was found goes to `notes`).
    `policy`: a Policy a host built itself; otherwise the policy is built from `policy_file` (None:
    WORKSPACE/dal.toml when it exists) and `policy_flags`. Every other keyword is a setting of RunSpec
    (None: the default). Raises SpecError naming the option at fault."""
    here = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    found = find_workspace(workspace, start=here)
    ws = str(found.path)
    if not os.path.isdir(ws):
        raise SpecError(f"--workspace: {workspace} is not a directory")
    if notes is not None and (note := found.note()) is not None:
        notes.append(note)
    flags = _policy_flags(policy_flags)
    origin = "options"
    file_abs = os.path.abspath(os.path.join(here, os.fspath(policy_file))) if policy_file is not None else None
    if policy is None:
        try:
            policy = Policy.load(ws, file_abs, **flags)
        except PolicyError as e:
            raise SpecError(str(e)) from None
    else:
        if flags or policy_file is not None:
            raise SpecError("give a Policy, or a policy file and flags, not both")
        origin = "object"
    if source is not None:
        path = _inline(source, ws, filename)
        shown = path
    elif script is None:
        path = shown = SESSION
    else:
        shown = os.fspath(script)
        path = os.path.abspath(os.path.join(here, shown))
    try:
        location = StoreLocation.parse(store, ws, env=env, cwd=here)
    except StoreLocationError as e:
        raise SpecError(str(e)) from None
    if key is not None and not isinstance(key, str):
        raise SpecError(f"key must be a string, got {key!r}")
    given = _script_args(args)
    return RunSpec(
        path, ws, location, policy,
        filename=shown,
        cwd=here,
        workspace_how=found.how,
        receipts=os.path.abspath(os.path.join(here, os.path.expanduser(os.fspath(receipts))))
        if receipts is not None else None,
        policy_file=file_abs,
        policy_flags=flags,
        policy_origin=origin,
        max_steps=_count("max_steps", max_steps, defaults.MAX_STEPS),  # type: ignore[arg-type]
        max_effects=_count("max_effects", max_effects, None),
        timeout=_seconds("timeout", timeout),
        max_memory=_memory(max_memory),
        effect_timeout=_seconds("effect_timeout", effect_timeout),
        max_output=_count("max_output", max_output, None),
        max_stored_output=_size("max_stored_output", max_stored_output),
        require_sandbox=bool(require_sandbox),
        use_sandbox=bool(use_sandbox),
        unsandboxed_as_root=bool(unsandboxed_as_root),
        key=key,
        new_attempt=bool(new_attempt),
        wait=_seconds("wait", wait),
        extensions={"args": given} if given else None,
    )


_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _script_args(args: Mapping[str, Any] | None) -> dict[str, Any]:
    """The script's arguments as given: names as `param` spells them, each value text (read as the declared
    type reads it) or a string, number or boolean. Whether the script takes them is checked when it runs
    (dal/eval/args.py), with the script's own diagnostics."""
    if args is None:
        return {}
    if not isinstance(args, Mapping):
        raise SpecError(f"args must be a map of argument names to values, got {type(args).__name__}")
    out: dict[str, Any] = {}
    for name, value in args.items():
        if not isinstance(name, str) or not _ARG_NAME.fullmatch(name):
            raise SpecError(f"script argument {name!r}: a name is letters, digits and _, not starting with a digit")
        if not isinstance(value, str | int | float) or (isinstance(value, float) and value != value):
            raise SpecError(f"script argument {name}: {value!r} is not a string, a number or a boolean")
        if isinstance(value, str) and ("\x00" in value or surrogate_at(value) is not None):
            raise SpecError(f"script argument {name}: the value holds a NUL byte or is not valid Unicode text")
        out[name] = value
    return out


def _merged(base: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in more.items():
        if k == "allow_net":
            out[k] = bool(out.get(k)) or bool(v)
        elif v:
            out[k] = list(dict.fromkeys([*(out.get(k) or []), *([v] if isinstance(v, str) else v)]))
    return out


def _legacy_spec(row: dict[str, Any], stored: StoredRun, store: StoreLocation, flags: dict[str, Any],
                 here: str) -> RunSpec:
    """The spec of a run stored before specs were (its launch and flags), as `dal resume` rebuilt it."""
    launch = (stored.legacy or {}).get("launch", {})
    args = (stored.legacy or {}).get("args", {})
    cwd = str(launch.get("cwd") or here)

    def at(p: Any) -> str | None:
        return None if not p else os.path.normpath(os.path.join(cwd, str(p)))

    script = at(launch.get("script")) or at(row.get("script_path")) or ""
    if stored.policy is not None:
        ws, policy = stored.policy.workspace, stored.policy
    else:  # an older DAL kept only the flags: rebuild the policy from them (and the file), plus this command's
        ws = at(args.get("workspace")) or at(launch.get("workspace")) or here
        try:
            policy = Policy.load(ws, at(args.get("policy")), **_merged(
                {k: v for k, v in args.items() if k in POLICY_FLAGS}, flags))
        except PolicyError as e:
            raise SpecError(str(e)) from None
    return RunSpec(
        script, ws, store, policy,
        filename=row.get("script_path") or script,
        cwd=cwd,
        policy_file=at(args.get("policy")),
        policy_flags={k: v for k, v in args.items() if k in POLICY_FLAGS},
        max_steps=int(launch.get("max_steps") or defaults.MAX_STEPS),
        max_effects=int(launch["max_effects"]) if launch.get("max_effects") else None,
        timeout=launch.get("timeout") or None,
        max_memory=int(launch.get("max_memory") or defaults.MAX_MEMORY),
        effect_timeout=args.get("effect_timeout") or None,
        require_sandbox=bool(args.get("require_sandbox")),
    )


def resume_spec(
    row: dict[str, Any],
    *,
    store: StoreLocation,
    policy_flags: Mapping[str, Any] | None = None,
    receipts: str | os.PathLike[str] | None = None,
    max_steps: int | None = None,
    max_effects: int | None = None,
    timeout: float | None = None,
    max_memory: int | str | None = None,
    effect_timeout: float | None = None,
    max_output: int | None = None,
    max_stored_output: int | str | None = None,
    require_sandbox: bool = False,
    unsandboxed_as_root: bool = False,
    wait: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> RunSpec:
    """The spec that continues the run in `row` (`Store.run_row()`), found in `store`: the run's own,
    with what the operator gives here (see the module doc). Raises SpecError naming the run."""
    rid = row.get("run_id")
    here = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    added = _policy_flags(policy_flags)
    try:
        stored = StoredRun.of(row)
        base = stored.spec if stored.spec is not None else _legacy_spec(row, stored, store, added, here)
    except (PolicyError, SpecError) as e:
        raise SpecError(f"run {rid}: {e}; start a new operation") from None
    filename = base.filename
    if not os.path.isabs(filename) and here != base.cwd:
        # The same file, named as the run named it when that still works from here.
        filename = os.path.relpath(base.script, here) if base.script.startswith(here + os.sep) else base.script
    extensions = base.extensions
    if SCRIPT_DIGEST not in extensions and stored.sha256:
        # A resume runs the text the run ran, not whatever another script wrote into the file since: a
        # changed file is refused (the runner checks the digest).
        extensions = {**extensions, SCRIPT_DIGEST: stored.sha256}
    return base.evolve(
        extensions=extensions,
        filename=filename,
        cwd=here,
        store=store,
        receipts=os.path.abspath(os.path.join(here, os.fspath(receipts))) if receipts is not None else base.receipts,
        policy_flags=_merged(base.policy_flags, added),
        max_steps=_count("max_steps", max_steps, base.max_steps),
        max_effects=_count("max_effects", max_effects, base.max_effects),
        timeout=_seconds("timeout", timeout) or base.timeout,
        max_memory=_memory(max_memory) if max_memory is not None else base.max_memory,
        effect_timeout=_seconds("effect_timeout", effect_timeout) or base.effect_timeout,
        max_output=_count("max_output", max_output, base.max_output),
        max_stored_output=_size("max_stored_output", max_stored_output) or base.max_stored_output,
        require_sandbox=base.require_sandbox or bool(require_sandbox),
        unsandboxed_as_root=bool(unsandboxed_as_root),
        key=None,  # the run's key is the operation's: the runner takes it from the run
        new_attempt=False,
        resume=rid,
        wait=_seconds("wait", wait) if wait is not None else base.wait,
    )
