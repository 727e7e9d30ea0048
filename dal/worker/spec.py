"""What a job runs: the run specification stored with it (JSON), and the one function that runs it.

Until the run specification of issue 14 (RunSpec) lands, a job keeps what `dal run` needs to rebuild the
run: the script's absolute path, the workspace, the policy in force when the job was submitted (the
whole Policy, as the store keeps an operation's policy) and the flags it came from, the budgets and
effect limits. Every run of the job runs under that policy; a run that continues an operation adopts the
operation's stored policy as `dal resume` does (docs/policy.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPEC_VERSION = 1


class SpecError(Exception):
    """A stored job specification DAL cannot run (damaged, or from another version)."""


def make_spec(
    *,
    script: Path,
    workspace: Path,
    policy: Any,  # dal.effects.Policy: the policy in force at submit
    policy_args: dict[str, Any],
    max_steps: int,
    max_effects: int | None = None,
    timeout: float | None = None,
    max_memory: int | None = None,
    effect_timeout: float | None = None,
    require_sandbox: bool = False,
    unsandboxed_as_root: bool = False,
    receipts: Path | None = None,
    new_attempt_of: str | None = None,
) -> dict[str, Any]:
    """The JSON a job stores. `new_attempt_of`: `--new-attempt` given while the key's newest run was this
    one; the job's first run starts the operation over, and only while that run is still the newest."""
    return {
        "v": SPEC_VERSION,
        "script": str(Path(script).resolve()),
        "workspace": str(Path(workspace).resolve()),
        "receipts": str(Path(receipts).resolve()) if receipts is not None else None,
        "policy": policy.to_json(),
        "policy_args": policy_args,
        "max_steps": max_steps,
        "max_effects": max_effects,
        "timeout": timeout,
        "max_memory": max_memory,
        "effect_timeout": effect_timeout,
        "require_sandbox": require_sandbox,
        "unsandboxed_as_root": unsandboxed_as_root,
        "new_attempt": new_attempt_of is not None,
        "new_attempt_of": new_attempt_of,
    }


def check_spec(spec: Any) -> dict[str, Any]:
    """`spec` as a job's specification; SpecError naming what is wrong."""
    if not isinstance(spec, dict) or spec.get("v") != SPEC_VERSION:
        raise SpecError(f"the job's run specification is not version {SPEC_VERSION} (written by another DAL?)")
    for name in ("script", "workspace"):
        if not isinstance(spec.get(name), str) or not spec[name]:
            raise SpecError(f"the job's run specification has no {name}")
    if not isinstance(spec.get("max_steps"), int):
        raise SpecError("the job's run specification has no step budget")
    return spec


def request_for(spec: dict[str, Any], *, store: Path, key: str, fence: Any, new_attempt: bool = False,
                write: Any = None, notify: Any = None) -> Any:
    """The runner's request for one run of a job: its script under its stored policy, under its key, in the
    worker's store, with the lease's fence passed down to the journal."""
    from dal.effects import Policy, PolicyError
    from dal.runner.runner import RunRequest

    check_spec(spec)
    try:
        policy = Policy.from_json(spec["policy"])
    except PolicyError as e:
        raise SpecError(str(e)) from None
    extra = {"max_memory": spec["max_memory"]} if spec.get("max_memory") else {}
    return RunRequest(
        script=Path(spec["script"]),
        workspace=Path(spec["workspace"]),
        policy=policy,
        max_steps=spec["max_steps"],
        max_effects=spec.get("max_effects"),
        timeout=spec.get("timeout"),
        effect_timeout=spec.get("effect_timeout"),
        key=key,
        store=store,
        receipts_dir=Path(spec["receipts"]) if spec.get("receipts") else None,
        require_sandbox=bool(spec.get("require_sandbox")),
        unsandboxed_as_root=bool(spec.get("unsandboxed_as_root")),
        wait=5.0,  # a takeover has waited for the key already (dal/worker/takeover.py); this covers a hand-over
        policy_args=dict(spec.get("policy_args") or {}),
        new_attempt=new_attempt,
        write=write,
        notify=notify,
        fence=fence,
        **extra,
    )


def run_spec(spec: dict[str, Any], **kw: Any) -> Any:
    """Run one attempt of a job: the runner's report (its receipt). Raises the runner's RunnerError for a
    problem outside the script (a busy key, an unusable store, a missing script), SpecError for a
    specification DAL cannot read."""
    from dal.runner.runner import execute

    return execute(request_for(spec, **kw))
