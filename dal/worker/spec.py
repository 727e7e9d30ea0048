"""What a job runs: the run's specification (dal.runner.spec.RunSpec, as JSON), and the one function that
runs one attempt of it.

`dal submit` builds the RunSpec with the same builder as `dal run` (the script's absolute path, the
workspace, the policy in force when the job was submitted and the flags it came from, the budgets and
effect limits, the receipts folder) and the job stores `RunSpec.to_json()`. The job's own fields stay in
the queue's row; the one a run needs (`--new-attempt` given while the key's newest run was X) is kept in
the spec's `extensions` as `new_attempt_of`. Every run of the job runs under that spec; a run that
continues an operation adopts the operation's stored policy as `dal resume` does (docs/policy.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dal.runner.spec import RunHooks, RunSpec, SpecError

# A takeover has waited for the key already (dal/worker/takeover.py); this covers a hand-over.
KEY_WAIT = 5.0


def make_spec(run: RunSpec, *, new_attempt_of: str | None = None) -> dict[str, Any]:
    """The JSON a job stores. `new_attempt_of`: `--new-attempt` given while the key's newest run was this
    one; the job's first run starts the operation over, and only while that run is still the newest."""
    extensions = {**run.extensions, "new_attempt_of": new_attempt_of}
    return run.evolve(key=None, new_attempt=new_attempt_of is not None, extensions=extensions).to_json()


def check_spec(data: Any) -> RunSpec:
    """`data` as a job's specification (a RunSpec's JSON); SpecError (the runner's: one kind of error for a
    specification DAL cannot run, damaged or from another version) naming what is wrong."""
    from dal.effects import PolicyError

    try:
        return RunSpec.from_json(data)
    except (SpecError, PolicyError) as e:
        raise SpecError(f"the job's run specification: {e}") from None


def request_for(spec: RunSpec, *, store: Path, key: str, fence: Any, new_attempt: bool = False,
                write: Any = None, notify: Any = None, lent: Any = None,
                check: Any = None) -> tuple[RunSpec, RunHooks]:
    """One run of a job: its spec under the job's key, in the worker's store, and the lease's fence passed
    down to the journal. `lent`: the job process's open connection to that store, which the run uses and
    leaves open; `check`: its cache of checked scripts (RunHooks)."""
    from dal.receipts.location import StoreLocation

    location = StoreLocation.parse(store, spec.workspace)
    if (spec.store.path == location.path if not (spec.store.is_file and location.is_file)
            else spec.store.file.resolve() == location.file.resolve()):
        location = spec.store  # as the operator chose it: the receipt's rerun names no --store it did not
    # KEY_WAIT is the worker's, not the operator's: the receipt's rerun command leaves it out.
    run = spec.evolve(key=key, store=location, new_attempt=new_attempt, wait=KEY_WAIT,
                      extensions={**spec.extensions, "host_wait": True})
    # The store keeps every job's receipt (`dal receipt show`, `dal job show`): files only when the job's spec
    # names a receipts folder (`dal submit --receipts DIR`).
    return run, RunHooks(write=write, notify=notify, fence=fence, store=lent, check=check,
                         receipt_files=spec.receipts is not None)


def run_spec(spec: RunSpec, **kw: Any) -> Any:
    """Run one attempt of a job: the runner's report (its receipt). Raises the runner's RunnerError for a
    problem outside the script (a busy key, an unusable store, a missing script)."""
    from dal.runner.runner import execute

    return execute(*request_for(spec, **kw))
