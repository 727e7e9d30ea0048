"""What `dal run` gives a script, given to a REPL session: `run()` under the policy, loop receipts.

`Session` (dal/session.py) evaluates but, at the time of writing, leaves `run()` unconfigured and
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
