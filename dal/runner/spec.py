"""`RunSpec`: one immutable description of a run — what runs, where, under which policy, with which budgets,
store and receipts folder — and `RunHooks`, what the host lends a run that is not data.

A front end builds the spec once (dal/runner/build.py: the CLI's flags, the API's keywords, `dal test`'s
options and the REPL all go through `build_spec`), the runner executes it (`dal.runner.runner.execute`),
and the store keeps it with the run (`to_json`, versioned), so that `dal resume` runs the same script the
same way (`resume_spec`: the stored spec plus the operator's overrides). docs/architecture.md shows where
each part lives.

Every field is plain data: absolute paths, numbers, the Policy (itself JSON: Policy.to_json). A value left
None means "the default" and stays None in the spec, so that a resume under a policy whose `[limits]` set
the effect timeout keeps using the policy's value, not a number frozen at the start (the defaults are in
dal/core/defaults.py; `effective_*` says what applies).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dal.core import defaults
from dal.core.records import FrozenRecord
from dal.effects.context import EffectContext
from dal.effects.policy import Policy
from dal.receipts.location import StoreLocation

SPEC_VERSION = 1

# The additive policy flags: what the operator's command line (or the API's policy dict, or `dal test`'s
# `policy` option) adds to the policy file or, for a later run of an operation, to its stored policy.
POLICY_FLAGS = ("allow_run", "allow_read", "allow_write", "allow_net", "require_approval", "allow_env")


def arg_text(value: Any) -> str:
    """A script argument's value as the command line gives it (`name=TEXT`): the text reads back as the
    same value for the argument's declared type (dal/eval/args.py)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else repr(value)


class SpecError(ValueError):
    """A run cannot be specified as asked (a bad budget, a missing script, a policy that does not load);
    the message names the option at fault. Front ends report it as a usage error."""


def _flags(flags: Any) -> dict[str, Any]:
    """The policy flags as canonical data: lists of strings, `allow_net` a boolean, empty ones left out."""
    out: dict[str, Any] = {}
    for k in POLICY_FLAGS:
        v = (flags or {}).get(k)
        if not v:
            continue
        out[k] = bool(v) if k == "allow_net" else ([v] if isinstance(v, str) else [str(x) for x in v])
    return out


class RunSpec(FrozenRecord):
    """How one run is specified. See the module doc; `to_json`/`from_json` round-trip every field."""

    __slots__ = (
        "script", "filename", "cwd", "workspace", "workspace_how", "store", "receipts", "policy", "policy_file",
        "policy_flags", "policy_origin", "max_steps", "max_effects", "timeout", "max_memory", "effect_timeout",
        "max_output", "max_stored_output", "require_sandbox", "use_sandbox", "unsandboxed_as_root", "key",
        "new_attempt", "resume", "wait", "extensions",
    )

    def __init__(
        self,
        script: str,  # absolute path of the script file (the API keeps inline source as a file: .dal/scripts/)
        workspace: str,  # absolute, resolved
        store: StoreLocation,
        policy: Policy,  # the policy the run starts from (the runner adopts an operation's stored one)
        *,
        filename: str | None = None,  # the script as diagnostics name it (as given); default: `script`
        cwd: str = "",  # where the run was started from (the command line's relative paths)
        workspace_how: str = "--workspace",  # how the workspace was chosen (dal.runner.workspace.Found.how)
        receipts: str | None = None,  # absolute folder of <run_id>.json/.md; None: WORKSPACE/.dal/receipts
        policy_file: str | None = None,  # the policy file the operator named (absolute), None: found or none
        policy_flags: dict[str, Any] | None = None,  # the additive flags given (POLICY_FLAGS)
        policy_origin: str = "options",  # options (file and flags) | object (a Policy handed in by a host)
        max_steps: int = defaults.MAX_STEPS,
        max_effects: int | None = None,
        timeout: float | None = None,  # seconds for the whole run; None: no limit
        max_memory: int = defaults.MAX_MEMORY,
        effect_timeout: float | None = None,  # None: the policy in force's [limits] timeout, else the default
        max_output: int | None = None,  # None: the policy in force's [limits] max_output, else the default
        # Command output the run may journal; None: $DAL_RUN_STORE_LIMIT, else [limits], else the default.
        max_stored_output: int | None = None,
        require_sandbox: bool = False,
        use_sandbox: bool = True,  # False: the test hook that runs commands without the wall
        unsandboxed_as_root: bool = False,
        key: str | None = None,
        new_attempt: bool = False,
        resume: str | None = None,  # the run id `dal resume` continues
        wait: float | None = None,  # seconds to wait for a busy key
        extensions: dict[str, Any] | None = None,  # room for later fields: "args" (the script's arguments), jobs
    ) -> None:
        init = object.__setattr__
        init(self, "script", script)
        init(self, "filename", filename if filename is not None else script)
        init(self, "cwd", cwd)
        init(self, "workspace", workspace)
        init(self, "workspace_how", workspace_how)
        init(self, "store", store)
        init(self, "receipts", receipts)
        init(self, "policy", policy)
        init(self, "policy_file", policy_file)
        init(self, "policy_flags", _flags(policy_flags))
        init(self, "policy_origin", policy_origin)
        init(self, "max_steps", max_steps)
        init(self, "max_effects", max_effects)
        init(self, "timeout", timeout)
        init(self, "max_memory", max_memory)
        init(self, "effect_timeout", effect_timeout)
        init(self, "max_output", max_output)
        init(self, "max_stored_output", max_stored_output)
        init(self, "require_sandbox", require_sandbox)
        init(self, "use_sandbox", use_sandbox)
        init(self, "unsandboxed_as_root", unsandboxed_as_root)
        init(self, "key", key)
        init(self, "new_attempt", new_attempt)
        init(self, "resume", resume)
        init(self, "wait", wait)
        init(self, "extensions", dict(extensions or {}))

    @property
    def args(self) -> dict[str, Any]:
        """The script's arguments (`extensions["args"]`): as given (text or typed values) until the runner
        binds them to the script's `param`s, then every argument's value, defaults included (what the
        store keeps, a resume restores and `command_line` repeats)."""
        return dict(self.extensions.get("args") or {})

    def __hash__(self) -> int:  # dicts inside: hashed by what identifies the run
        return hash((type(self).__qualname__, self.script, self.workspace, self.key, self.resume))

    # --- what applies --------------------------------------------------------------------------------

    def receipts_dir(self) -> Path:
        """Where this run's receipt files go."""
        return Path(self.receipts) if self.receipts is not None else Path(self.workspace, ".dal", "receipts")

    @staticmethod
    def effective_effect_timeout(value: float | None, policy: Policy) -> float:
        """A command's timeout: the option, else the policy in force's `[limits] timeout`, else the default."""
        return value or policy.timeout or defaults.EFFECT_TIMEOUT

    @staticmethod
    def effective_max_output(value: int | None, policy: Policy) -> int:
        """Bytes kept of a command's output: the option, else the policy's `[limits] max_output`, else the
        default."""
        return value or policy.max_output or defaults.MAX_OUTPUT

    # --- stored with the run ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Every field as plain JSON, with the version of this layout."""
        return {
            "version": SPEC_VERSION,
            "script": self.script,
            "filename": self.filename,
            "cwd": self.cwd,
            "workspace": self.workspace,
            "workspace_how": self.workspace_how,
            "store": self.store.to_json(),
            "receipts": self.receipts,
            "policy": self.policy.to_json(),
            "policy_file": self.policy_file,
            "policy_flags": dict(self.policy_flags),
            "policy_origin": self.policy_origin,
            "max_steps": self.max_steps,
            "max_effects": self.max_effects,
            "timeout": self.timeout,
            "max_memory": self.max_memory,
            "effect_timeout": self.effect_timeout,
            "max_output": self.max_output,
            "max_stored_output": self.max_stored_output,
            "require_sandbox": self.require_sandbox,
            "use_sandbox": self.use_sandbox,
            "unsandboxed_as_root": self.unsandboxed_as_root,
            "key": self.key,
            "new_attempt": self.new_attempt,
            "resume": self.resume,
            "wait": self.wait,
            "extensions": dict(self.extensions),
        }

    @classmethod
    def from_json(cls, data: Any) -> RunSpec:
        """The spec `to_json` described. Raises SpecError naming the field when the data is not one (a
        damaged store row), PolicyError when its policy is not."""
        if not isinstance(data, dict):
            raise SpecError("the stored run spec is not an object")
        if data.get("version") != SPEC_VERSION:
            raise SpecError(f"the stored run spec has version {data.get('version')!r}, not {SPEC_VERSION} (stored "
                            "by another version of DAL?)")

        def want(name: str, kinds: tuple[type, ...], optional: bool = False) -> Any:
            v = data.get(name)
            if (v is None and optional) or (isinstance(v, kinds) and not (isinstance(v, bool) and bool not in kinds)):
                return v
            raise SpecError(f"the stored run spec: {name}: {v!r} is not a {' or '.join(k.__name__ for k in kinds)}")

        num = (int, float)
        args = (data.get("extensions") or {}).get("args") if isinstance(data.get("extensions"), dict) else None
        if args is not None and not (isinstance(args, dict) and all(
                isinstance(k, str) and isinstance(v, str | int | float) for k, v in args.items())):
            raise SpecError(f"the stored run spec: extensions.args: {args!r} is not a map of names to values")
        try:
            store = StoreLocation.from_json(data.get("store"))
        except ValueError as e:
            raise SpecError(f"the stored run spec: store: {e}") from None
        return cls(
            want("script", (str,)),
            want("workspace", (str,)),
            store,
            Policy.from_json(data.get("policy")),
            filename=want("filename", (str,)),
            cwd=want("cwd", (str,)),
            workspace_how=want("workspace_how", (str,)),
            receipts=want("receipts", (str,), True),
            policy_file=want("policy_file", (str,), True),
            policy_flags=want("policy_flags", (dict,)),
            policy_origin=want("policy_origin", (str,)),
            max_steps=want("max_steps", (int,)),
            max_effects=want("max_effects", (int,), True),
            timeout=want("timeout", num, True),
            max_memory=want("max_memory", (int,)),
            effect_timeout=want("effect_timeout", num, True),
            max_output=want("max_output", (int,), True),
            max_stored_output=want("max_stored_output", (int,), True),  # absent: stored before it existed
            require_sandbox=want("require_sandbox", (bool,)),
            use_sandbox=want("use_sandbox", (bool,)),
            unsandboxed_as_root=want("unsandboxed_as_root", (bool,)),
            key=want("key", (str,), True),
            new_attempt=want("new_attempt", (bool,)),
            resume=want("resume", (str,), True),
            wait=want("wait", num, True),
            extensions=want("extensions", (dict,)),
        )

    # --- the command line that runs it again -------------------------------------------------------

    def command_line(self, *, keep_new_attempt: bool = False) -> list[str] | None:
        """`dal run ...` with the flags that reproduce this run from its directory (`cwd`), as argv; None
        when no command line can (the policy was handed in as an object by a host). `--new-attempt` only
        with `keep_new_attempt` (a run that ran nothing: the next one must start over as well)."""
        if self.policy_origin != "options":
            return None
        argv = ["dal", "run"]
        if self.key is not None:
            argv += ["--key", self.key]
        if self.new_attempt and keep_new_attempt:
            argv.append("--new-attempt")
        if self.workspace_how == "--workspace":
            argv += ["--workspace", self._here(self.workspace)]
        if self.policy_file is not None:
            argv += ["--policy", self._here(self.policy_file)]
        for k in POLICY_FLAGS:
            v = self.policy_flags.get(k)
            if k == "allow_net":
                argv += ["--allow-net"] if v else []
            elif v:
                argv.append(f"--{k.replace('_', '-')}={','.join(v)}")
        if self.max_steps != defaults.MAX_STEPS:
            argv += ["--max-steps", str(self.max_steps)]
        if self.max_effects is not None:
            argv += ["--max-effects", str(self.max_effects)]
        if self.timeout is not None:
            argv += ["--timeout", f"{self.timeout:g}"]
        if self.max_memory != defaults.MAX_MEMORY:
            argv += ["--max-memory", str(self.max_memory)]
        if self.effect_timeout is not None:
            argv += ["--effect-timeout", f"{self.effect_timeout:g}"]
        if self.max_stored_output is not None:
            argv += ["--max-stored-output", str(self.max_stored_output)]
        if self.require_sandbox:
            argv.append("--require-sandbox")
        if self.unsandboxed_as_root:
            argv.append("--unsandboxed-as-root")
        if self.store.origin == "given":
            argv += ["--store", self._here(self.store.path)]
        if self.receipts is not None:
            argv += ["--receipts", self._here(self.receipts)]
        if self.wait is not None and not self.extensions.get("host_wait"):  # a worker's own wait: not a flag
            argv += ["--wait", f"{self.wait:g}"]
        # The script as the operator named it: a job's run reads a kept copy of its text (.dal/scripts/), which
        # is not what to run again.
        script = self.filename if not os.path.isabs(self.filename) else self._here(self.filename)
        argv.append(script if not script.startswith("-") else "./" + script)
        argv += [f"{name}={arg_text(value)}" for name, value in self.args.items()]
        return argv

    def _here(self, path: str) -> str:
        """`path` as the command line from `cwd` names it: relative when it is below `cwd`."""
        if self.cwd and (path == self.cwd or path.startswith(self.cwd.rstrip("/") + "/")):
            return os.path.relpath(path, self.cwd)
        return path


class RunHooks(FrozenRecord):
    """What the host lends a run that is not part of its description: where the script's output goes,
    who hears about loop exits and notices, whether the runner takes SIGINT and SIGTERM, a job's lease
    (`fence`: dal worker's runs journal only while it holds), `dal test`'s hooks (scripted effect
    results, a simulated crash), and what a host that runs many runs keeps between them (`store`: an open
    run store; `check`: a cache of checked scripts; `receipt_files`: whether to copy a receipt the store
    holds to files)."""

    __slots__ = ("write", "on_loop_receipt", "notify", "handle_signals", "fake", "simulate_crash", "fence",
                 "on_denied", "store", "check", "receipt_files")

    def __init__(
        self,
        write: Callable[[str], Any] | None = None,  # the script's output; None: stdout
        on_loop_receipt: Callable[[dict[str, Any]], None] | None = None,
        notify: Callable[[str], Any] | None = None,  # what the operator should know (stderr in the CLI)
        handle_signals: bool = True,  # Ctrl-C and SIGTERM stop the script (only in the main thread)
        fake: Callable[..., Any] | None = None,  # dal test: (command, decision) -> EffectResult | None
        simulate_crash: tuple[str, int] | None = None,  # dal test: raise SimulatedCrash at (boundary, seq)
        fence: Any = None,  # a run of a job (dal worker): dal.receipts.jobs.Fence, checked by every intent
        on_denied: Callable[[Any], Any] | None = None,  # each run() the policy (or a person) denied: a DalError
        # An open store of the spec's store location that the run uses and leaves open (dal worker's job
        # processes keep one for all their runs); None: the run opens its own and closes it.
        store: Any = None,
        # (source, filename) -> (Checked | None, errors), as dal.eval.interpreter.check_source answers; None:
        # check_source. A host may answer from a cache of scripts it checked before (by their text).
        check: Callable[[str, str], Any] | None = None,
        # Whether the receipt is copied to <run_id>.json and .md once the store holds it. A job's run copies
        # it only when its spec names a receipts folder (docs/workers.md); a receipt the store could not take
        # is written to files whatever this says (they are then its only record).
        receipt_files: bool = True,
    ) -> None:
        init = object.__setattr__
        init(self, "write", write)
        init(self, "on_loop_receipt", on_loop_receipt)
        init(self, "notify", notify)
        init(self, "handle_signals", handle_signals)
        init(self, "fake", fake)
        init(self, "simulate_crash", simulate_crash)
        init(self, "fence", fence)
        init(self, "on_denied", on_denied)
        init(self, "store", store)
        init(self, "check", check)
        init(self, "receipt_files", receipt_files)


def effect_context(spec: RunSpec, policy: Policy) -> EffectContext:
    """How effects run under `policy`: a limit the run's options set wins, then the policy's `[limits]`."""
    return EffectContext(
        policy=policy,
        timeout=RunSpec.effective_effect_timeout(spec.effect_timeout, policy),
        max_output=RunSpec.effective_max_output(spec.max_output, policy),
        require_sandbox=spec.require_sandbox,
        use_sandbox=spec.use_sandbox,
        unsandboxed_as_root=spec.unsandboxed_as_root,
    )

