"""What `dal run` gives a script, given to a REPL session: `run()` under the policy, loop receipts.

`Session` (dal/repl/session.py) evaluates but, at the time of writing, leaves `run()` unconfigured and
keeps no loop receipts. Until it does, the REPL attaches the runner's own pieces to the session's
runtime: an `EffectHandler` (same policy check and executor as `dal run`, no journal) and a
`LoopRecorder`. `Session.reset()` makes a new runtime, so `attach()` runs again after every reset.
"""

from __future__ import annotations

from typing import Any


class SessionWiring:
    """Attaches effects and a loop recorder to a session's runtime; one recorder for the whole session."""

    def __init__(self, session: Any, context: Any = None) -> None:
        self.session = session
        self.context = context  # dal.effects.EffectContext, or None: run() stays unavailable
        self.recorder: Any = None
        self.effect_handlers: list[Any] = []
        import time

        from dal.receipts.ids import utc_timestamp

        self.t0 = time.monotonic()
        self.started_at = utc_timestamp()
        try:
            from dal.runner.recorder import LoopRecorder
        except ImportError:
            LoopRecorder = None  # noqa: N806
        if LoopRecorder is not None:
            self.recorder = LoopRecorder()

    def attach(self) -> None:
        """Wire the session's current runtime (call after creating or resetting the session)."""
        rt = getattr(self.session, "rt", None)
        if rt is None:
            return
        if self.recorder is not None and getattr(rt, "recorder", None) is None:
            rt.recorder = self.recorder
        if self.context is not None:
            rt.getenv = self.context.policy.getenv  # env() sees what the policy names, as in `dal run`
        if self.context is not None and getattr(rt, "effects", None) is None:
            from dal.runner.effects import EffectHandler

            handler = EffectHandler(rt, self.context)
            rt.effects = handler
            rt.observe = handler.observe
            self.effect_handlers.append(handler)

    def loop_receipts(self) -> list[dict[str, Any]] | None:
        """Every loop receipt of this session, oldest first; None when receipts are unavailable."""
        own = getattr(self.session, "loop_receipts", None)  # a Session that keeps its own wins
        if own is not None:
            return list(own() if callable(own) else own)
        if self.recorder is None:
            return None
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

    from dal.receipts.files import write_receipt_files
    from dal.receipts.ids import new_run_id, utc_timestamp
    from dal.receipts.retry import derive_retry
    from dal.receipts.store import Store
    from dal.runner.runner import SCHEMA, artifact_of

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
    receipt = {
        "schema": SCHEMA,
        "run_id": new_run_id(),
        "operation": "repl",
        "key": None,
        "script": {"path": "<repl>", "sha256": hashlib.sha256(b"").hexdigest()},
        "workspace": str(ws),
        "status": status,
        "attempted_at": started,
        "finished_at": utc_timestamp(),
        "duration_ms": round((time.monotonic() - getattr(wiring, "t0", time.monotonic())) * 1000, 3),
        "steps": {"used": session.steps_used, "budget": session.max_steps},
        "effects": {"count": len(items), "budget": None, "items": items[:200], "omitted": max(0, len(items) - 200)},
        "artifacts": [artifact_of(ws, p) for p in writes],
        "external_effect": external,
        "retry": derive_retry(status, external_effect=external),
        "blocker": None,
        "error": None,
        "result": {"inputs": inputs},
        "loops": wiring.loop_receipts() or [],
        "loops_omitted": 0,
        "attempts": None,
        "previous_run": None,
        "skipped_of": None,
    }
    if wiring.context is not None:
        from dal.runner.inforce import receipt_policy

        receipt["policy"] = receipt_policy(wiring.context.policy, None, [])
    with Store(spec.store.file) as db:
        db.save_receipt(receipt)
    _, md = write_receipt_files(receipt, spec.receipts_dir(), workspace=ws)
    return md
