"""One builtin call that works long is stopped by --timeout and Ctrl-C, and its work is charged as steps.

`sort`, `min`, `max`, `contains`, `find` and `==` of long strings that differ only at the
end, `str()` of many long integers and `parse_json` of many long numbers did seconds to minutes of work
inside one step without looking at the clock, so `--timeout 2` took 12-100 s and a Ctrl-C during the
last such step was answered `completed`. These run the real `dal` command on such scripts (each would run
for tens of seconds to minutes without the fix) and assert that the run stops at its budget, in a bound
far below that, as `exhausted` or `interrupted`, with a receipt.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dal.eval.host import NullHost
from dal.eval.interpreter import Engine, check_source
from dal.eval.runtime import Runtime
from dal.syntax.template import POLL_EVERY, parse_template

DAL = Path(sys.executable).parent / "dal"
NO_STEP_LIMIT = "1000000000000000"
# Wall-clock bound for a run with --timeout 1: start-up, building the values (well under a second
# alone) and the receipt, on a machine shared by many test runs. Each script below runs far longer
# than this when its builtin does not poll.
BOUND = 20.0
AFTER_GO = 6.0  # from the start of the long call to the end of the run (it had under a second left)

LONG = 'let a = "x"\nfor i in range(26) { a = a + a }\n'  # 64 Mi characters
BIG_INT = "let b = 7\nfor i in range(11) { b = b * b }\nb = b * b * b * b\n"  # 6,924 digits
SCRIPTS = {
    # 512 strings of 64 Mi characters that differ at the end: ~4,600 comparisons of ~10 ms each
    "sort": LONG + 'let ys = [a + "b", a + "c"]\nfor i in range(8) { ys = ys + ys }\nprint("go")\nlet r = sort(ys)\n',
    "max": LONG + 'let ys = [a + "b", a + "c"]\nfor i in range(12) { ys = ys + ys }\nprint("go")\nlet r = max(ys)\n',
    # 4,096 comparisons of ~10 ms each
    "contains": LONG + 'let zs = [a + "b"]\nfor i in range(12) { zs = zs + zs }\nprint("go")\n'
    'let r = contains(zs, a + "c")\n',
    "find": LONG + 'let zs = [a + "b"]\nfor i in range(12) { zs = zs + zs }\nprint("go")\nlet r = find(zs, a + "c")\n',
    "equal": LONG + 'let zs = [a + "b"]\nfor i in range(12) { zs = zs + zs }\nlet ws = [a + "b"]\n'
    'for i in range(12) { ws = ws + ws }\nws[4095] = "z"\nprint("go")\nlet r = zs == ws\n',
    # 16,384 texts of a 6,924-digit integer, ~1.5 ms each
    "str": BIG_INT + 'let xs = [b]\nfor i in range(14) { xs = xs + xs }\nprint("go")\nlet s = str(xs)\n',
    # 8,192 numbers of 6,924 digits read back, ~1.5 ms each
    "parse_json": BIG_INT + 'let t = str(b)\nlet xs = [t]\nfor i in range(13) { xs = xs + xs }\n'
    'let text = "[" + join(xs, ",") + "]"\nprint("go")\nlet v = parse_json(text)\n',
}


@pytest.fixture(scope="module")
def dal_command() -> Path:
    if not DAL.exists():
        pytest.fail(f"{DAL} is missing: run `pip install -e .`")
    return DAL


def _receipt(cwd: Path, err: str) -> dict[str, Any]:
    m = re.search(r"receipt (\S+\.md)", err)
    assert m, err
    return json.loads((cwd / m.group(1)).with_suffix(".json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_timeout_stops_one_long_builtin_call(dal_command: Path, tmp_path: Path, name: str) -> None:
    (tmp_path / "s.dal").write_text(SCRIPTS[name], encoding="utf-8")
    more = ["--max-memory", "8G"] if name == "parse_json" else []  # one step may read 57 M characters
    p = subprocess.Popen([str(dal_command), "run", "--timeout", "1", "--max-steps", NO_STEP_LIMIT, *more, "s.dal"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline() == "go\n"  # the values are built: the long call starts now
    t = time.monotonic()
    out, err = p.communicate(timeout=300)
    took = time.monotonic() - t
    assert p.returncode == 4, err
    assert "error[budget]: time budget exhausted: the run took longer than 1s (--timeout)" in err
    assert "Traceback" not in err
    assert took < AFTER_GO, f"{name}: the run ended {took:.1f} s after its long call began"
    assert _receipt(tmp_path, err)["status"] == "exhausted"


def test_ctrl_c_stops_a_long_contains_at_once(dal_command: Path, tmp_path: Path) -> None:
    (tmp_path / "c.dal").write_text(SCRIPTS["contains"], encoding="utf-8")
    p = subprocess.Popen([str(dal_command), "run", "--max-steps", NO_STEP_LIMIT, "c.dal"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline() == "go\n"
    time.sleep(0.5)  # inside contains() now: 4,096 comparisons of ~10 ms
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    took = time.monotonic() - t
    assert p.returncode == 130, err
    assert re.search(r"^error\[interrupted\]: interrupted by SIGINT\n --> c\.dal:6:9", err, re.M), err
    assert took < BOUND / 2, f"SIGINT answered after {took:.1f} s"
    assert _receipt(tmp_path, err)["status"] == "interrupted"


def test_ctrl_c_during_the_last_step_is_not_answered_completed(dal_command: Path, tmp_path: Path) -> None:
    # The last statement writes 4 MiB to a pipe nobody reads yet: it is blocked inside that one step
    # when SIGINT comes, and finishes only once the pipe is read. The run must end interrupted.
    (tmp_path / "p.dal").write_text('let a = "x"\nfor i in range(22) { a = a + a }\nprint(a)\n', encoding="utf-8")
    p = subprocess.Popen([str(dal_command), "run", "p.dal"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    time.sleep(1.5)
    assert p.poll() is None, "the run should be blocked writing its output"
    p.send_signal(signal.SIGINT)
    out, err_bytes = p.communicate(timeout=120)
    err = err_bytes.decode()
    assert p.returncode == 130, err
    assert re.search(r"^error\[interrupted\]: interrupted by SIGINT\n --> p\.dal:3:1", err, re.M), err
    assert _receipt(tmp_path, err)["status"] == "interrupted"


def _steps(source: str, max_steps: int = 10**12) -> tuple[str, int]:
    checked, errors = check_source(source, "w.dal")
    assert checked is not None, errors
    rt = Runtime(max_steps=max_steps, host=NullHost(lambda s: None))
    outcome = Engine(rt).execute(checked)
    return outcome.status, rt.steps


def test_work_is_charged_as_the_docs_say() -> None:
    # docs/language.md, "Step accounting": a step per 4,096 units; a comparison of two strings longer
    # than 256 characters costs the shorter length; an integer of more than 1,000 digits written or
    # read costs digits² / 8. Compared with the same script on short values, which costs nothing more.
    def sort_of(n: int) -> str:
        return f'let a = "x"\nfor i in range(14) {{ a = a + a }}\nlet s = a[0:{n}]\nlet r = sort([s + "c", s + "b"])\n'

    base = _steps(sort_of(256))[1]  # 257 characters: one comparison of 257 units, under a step
    assert _steps(sort_of(8192))[1] == base + 2  # 8,193 characters: 2 steps
    assert _steps(sort_of(16384))[1] == base + 4  # 16,385

    def text_of(digits: int) -> str:
        return f'let b = int("{"7" * digits}")\nlet s = str(b)\n'

    base = _steps(text_of(1000))[1]
    # int() reads 2,000 digits, str() writes them: 2 x 2000²/8 units = 244 steps (122 each)
    assert _steps(text_of(2000))[1] == base + 2 * (2000 * 2000 // 8 // 4096)


def test_the_step_budget_binds_a_long_sort_and_the_count_is_the_same_every_time() -> None:
    source = 'let a = "x"\nfor i in range(20) { a = a + a }\nlet ys = [a + "b", a + "c"]\n' \
             'for i in range(4) { ys = ys + ys }\nlet r = sort(ys)\nprint("never")\n'
    first = _steps(source, max_steps=5000)
    assert first[0] == "exhausted"
    assert _steps(source, max_steps=5000) == first
    assert _steps(source)[0] == "completed"


def test_dal_check_reads_a_large_literal_template_in_time(dal_command: Path, tmp_path: Path) -> None:
    # 4 MB of `{{`: the old parser scanned to the end of the text at every brace (minutes).
    (tmp_path / "lit.dal").write_text('print(format("' + "{{" * (1 << 21) + '}}"))\n', encoding="utf-8")
    t = time.monotonic()
    p = subprocess.run([str(dal_command), "check", "lit.dal"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    took = time.monotonic() - t
    assert p.returncode == 0, p.stderr
    assert took < BOUND, f"dal check took {took:.1f} s"


def test_the_template_parser_polls_and_stops_when_told() -> None:
    text = "{{" * POLL_EVERY * 2 + "{}"
    calls = []
    pieces, count = parse_template(text, lambda: calls.append(1))
    assert count == 1 and pieces[-1] == 0
    assert len(calls) >= 3

    class Stop(Exception):
        pass

    def stop() -> None:
        raise Stop

    with pytest.raises(Stop):
        parse_template(text, stop)
