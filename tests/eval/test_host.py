"""The host interface (dal/eval/host.py): everything a script does to the world goes through the host the
Runtime was built with, and `operation(key)` gets the host's verdict instead of an exception tunnel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dal.eval.host import PROCEED, NullHost, OperationVerdict
from dal.eval.interpreter import Engine, Outcome, check_source
from dal.eval.runtime import Runtime


class _Recording:
    """A host that answers from a script of its own and keeps a log of every call."""

    def __init__(self, verdict: OperationVerdict = PROCEED) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.out: list[str] = []
        self.verdict = verdict

    def run_effect(self, command: str, span: Any, argv: tuple[str, ...] | None = None) -> Any:
        self.calls.append(("run", command) if argv is None else ("run", argv))
        return f"ran {command}"

    def observe(self, what: str, produce: Callable[[], Any]) -> Any:
        self.calls.append(("observe", what))
        return produce()

    def getenv(self, name: str) -> str | None:
        return {"GREETING": "hello"}.get(name)

    def set_operation(self, key: str, span: Any) -> OperationVerdict:
        self.calls.append(("operation", key))
        return self.verdict

    def loop_exit(self, frame: Any, reason: str, clause: str | None, steps: int, ended_at: float,
                  snapshot: Callable[[], dict[str, Any]]) -> None:
        self.calls.append(("loop", (frame.site.header, reason, frame.iterations, snapshot())))

    def now(self) -> float:
        return 1234.5

    def write(self, text: str) -> Any:
        self.out.append(text)


def _execute(source: str, host: Any) -> Outcome:
    checked, errors = check_source(source, "host.dal")
    assert not errors, errors
    return Engine(Runtime(host=host)).execute(checked)  # type: ignore[arg-type]


def test_every_call_to_the_world_goes_to_the_host_it_was_built_with() -> None:
    host = _Recording()
    src = ('operation("k1")\nlet r = run("echo hi")\nprint(r, now(), env("GREETING"), env("OTHER"))\n'
           'let i = 0\nwhile i < 3 { i = i + 1 }\nrun(["ls", "-l", "a b"])\n')
    outcome = _execute(src, host)
    assert outcome.status == "completed", outcome.error
    assert host.out == ["ran echo hi 1234.5 hello null\n"]
    assert host.calls == [
        ("operation", "k1"),
        ("run", "echo hi"),
        ("observe", "now()"),
        ("observe", "env(GREETING)"),
        ("observe", "env(OTHER)"),
        ("loop", ("while i < 3", "condition", 3, {"i": 3})),
        ("run", ("ls", "-l", "a b")),  # run([...]) hands the host its words
    ]


def test_a_skip_verdict_ends_the_script_as_skipped_before_the_next_statement() -> None:
    host = _Recording(OperationVerdict(skip_of="run_earlier"))
    outcome = _execute('print("before")\noperation("done-key")\nprint("after")\nrun("rm -rf x")\n', host)
    assert (outcome.status, outcome.ended_by, outcome.result) == ("skipped", "skip", "run_earlier")
    assert host.out == ["before\n"]
    assert ("run", "rm -rf x") not in host.calls


def test_a_stop_verdict_stops_the_script_cleanly_with_the_hosts_reason() -> None:
    host = _Recording(OperationVerdict(stop="operation 'k' is being run by process 42"))
    outcome = _execute('print("before")\noperation("k")\nprint("after")\nrun("touch x")\n', host)
    assert (outcome.status, outcome.ended_by) == ("stopped", "stop")
    assert outcome.result == "operation 'k' is being run by process 42"
    assert outcome.error is None  # not the script's failure
    assert host.out == ["before\n"]
    assert [c for c in host.calls if c[0] == "run"] == []


def test_the_null_host_refuses_run_and_sees_no_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv("GREETING", "from the process")
    out: list[str] = []
    outcome = _execute('print(env("GREETING"))\noperation("k")\nprint("keyed")\nrun("echo hi")\n', NullHost(out.append))
    assert out == ["null\n", "keyed\n"]
    assert outcome.status == "failed" and outcome.error is not None
    assert "run() is not available here" in outcome.error.message
    assert (outcome.error.span.line, outcome.error.span.column) == (4, 1)


def test_the_runners_host_refuses_operation_after_the_first_effect(tmp_path: Any) -> None:
    from dal.effects import EffectContext, Policy
    from dal.runner.effects import EffectHandler
    from dal.runner.host import RunHost

    out: list[str] = []
    host = RunHost(write=out.append)
    rt = Runtime(host=host)
    host.attach(EffectHandler(rt, EffectContext(policy=Policy.load(tmp_path))))
    checked, errors = check_source('print(run("echo hi").stdout)\noperation("late")\nprint("after")\n', "h.dal")
    assert checked is not None, errors
    outcome = Engine(rt).execute(checked)
    assert out == ["hi\n\n"]  # stdout and print's newline
    assert outcome.status == "failed" and outcome.error is not None
    assert "operation(...) must come before the first run()" in outcome.error.message
