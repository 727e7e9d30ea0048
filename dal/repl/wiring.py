"""What `dal run` gives a script, given to a REPL session: `run()` under the policy, loop receipts.

The session builds every runtime (at start and after each `:reset`) through `SessionWiring.runtime`, with
the runner's host (dal/runner/host.py): an `EffectHandler` (same policy check and executor as `dal run`,
no journal), env() under the policy, and one `LoopRecorder` for the whole session.
"""

from __future__ import annotations

from typing import Any


class SessionWiring:
    """Hosts a session's runtimes: effects under `context`, one loop recorder for the whole session."""

    def __init__(self, session: Any, context: Any = None) -> None:
        import time

        from dal.receipts.ids import utc_timestamp
        from dal.runner.recorder import LoopRecorder

        self.session = session
        self.context = context  # dal.effects.EffectContext, or None: run() stays unavailable
        self.recorder = LoopRecorder()
        self.effect_handlers: list[Any] = []
        self.t0 = time.monotonic()
        self.started_at = utc_timestamp()

    def attach(self) -> None:
        """Make the session build its runtimes here (call once, before its first input)."""
        if getattr(self.session, "hosting", None) is not self:
            self.session.host_with(self)

    def runtime(self, max_steps: int, write: Any) -> Any:
        """A new runtime for the session, with its host."""
        from dal.eval.runtime import Runtime
        from dal.runner.host import RunHost

        getenv = self.context.policy.getenv if self.context is not None else None
        host = RunHost(write=write, recorder=self.recorder, getenv=getenv)
        rt = Runtime(max_steps=max_steps, host=host)
        if self.context is not None:
            from dal.runner.effects import EffectHandler

            handler = EffectHandler(rt, self.context)
            host.attach(handler)
            self.effect_handlers.append(handler)
        return rt

    def loop_receipts(self) -> list[dict[str, Any]]:
        """Every loop receipt of this session, oldest first."""
        return list(self.recorder.receipts())

    @property
    def effects_run(self) -> int:
        return sum(getattr(h, "count", 0) for h in self.effect_handlers)


def describe_policy(policy: Any) -> tuple[str, str]:
    """A one-line summary for the banner and a fuller text for `:policy`."""
    if policy is None:
        summary = "default (read and local tools inside the workspace, no network)"
        return summary, f"policy: {summary}"
    allowed = sorted(getattr(policy, "allowed", ()) or ())
    approval = sorted(getattr(policy, "approval", ()) or ())
    net = "network allowed" if getattr(policy, "allow_net", False) else "no network"
    source = getattr(policy, "source", "policy")
    summary = f"{source} ({len(allowed)} programs, {net}"
    summary += f", approval for {', '.join(approval)})" if approval else ")"
    lines = [
        f"policy:    {source}",
        f"workspace: {getattr(policy, 'workspace', '?')}",
        f"programs:  {', '.join(allowed) or '(none)'}",
        f"approval:  {', '.join(approval) or '(none)'}",
        f"reads:     {', '.join(getattr(policy, 'read_roots', ()) or ()) or '(none)'}",
        f"writes:    {', '.join(getattr(policy, 'write_roots', ()) or ()) or '(none)'}",
        f"network:   {'allowed' if getattr(policy, 'allow_net', False) else 'off'}",
        '`dal policy check "CMD"` (same flags) explains a single decision.',
    ]
    return summary, "\n".join(lines)


def save_session_receipt(session: Any, wiring: SessionWiring, spec: Any, status: str = "completed") -> Any:
    """Write one run receipt for the whole REPL session (its effects and loop receipts), so that the
    session shows in `dal receipts` like any run. Nothing is written (no .dal/, no run) for a session that
    called no run(): evaluating `1 + 1` touches nothing, so there is nothing to account for. Returns the
    receipt's markdown path, or None."""
    import hashlib
    import time
    from pathlib import Path

    from dal.receipts.build import artifact_of, run_receipt
    from dal.receipts.files import write_receipt_files
    from dal.receipts.ids import new_run_id, utc_timestamp
    from dal.receipts.location import open_store
    from dal.receipts.retry import derive_retry

    inputs = getattr(session, "_inputs", 0)
    handlers = wiring.effect_handlers
    items = [i for h in handlers for i in h.items]
    if not inputs or not any(getattr(h, "count", 0) for h in handlers):
        return None
    writes: dict[str, None] = {}
    for h in handlers:
        writes.update(h.writes)
    external = "performed" if any(h.external_performed for h in handlers) else "none"
    ws = Path(spec.workspace)
    started = getattr(wiring, "started_at", None) or utc_timestamp()
    policy = None
    if wiring.context is not None:
        from dal.runner.inforce import receipt_policy

        policy = {"policy": receipt_policy(wiring.context.policy, None, [])}
    receipt = run_receipt(
        run_id=new_run_id(),
        operation="repl",
        key=None,
        script_path="<repl>",
        script_sha256=hashlib.sha256(b"").hexdigest(),
        workspace=str(ws),
        status=status,
        attempted_at=started,
        finished_at=utc_timestamp(),
        duration_ms=round((time.monotonic() - getattr(wiring, "t0", time.monotonic())) * 1000, 3),
        steps_used=session.steps_used,
        steps_budget=session.max_steps,
        effects_count=len(items),
        effects_budget=None,
        items=items[:200],
        omitted=max(0, len(items) - 200),
        artifacts=[artifact_of(ws, p, wiring.context.policy.write_roots if wiring.context is not None else ())
                   for p in writes],
        external_effect=external,
        retry=derive_retry(status, external_effect=external),
        blocker=None,
        error=None,
        result={"inputs": inputs},
        loops=wiring.loop_receipts(),
        attempts=None,
        previous_run=None,
        skipped_of=None,
        **(policy or {}),
    )
    with open_store(spec.store) as db:
        db.save_receipt(receipt)
    _, md = write_receipt_files(receipt, spec.receipts_dir(), workspace=ws)
    return md
