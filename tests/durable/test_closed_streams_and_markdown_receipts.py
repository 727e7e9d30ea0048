"""Closed standard streams end in no traceback (a, e), and the
markdown receipt carries no HTML tag or inline link a script wrote (b)."""

from __future__ import annotations

import subprocess
import sys


def _bash(d, line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=d.ws, env=d.env(), capture_output=True, text=True, timeout=120)


def test_a_closed_stdin_is_no_script_on_stdin(durable) -> None:
    r = _bash(durable, f"{sys.executable} -m dal run - <&-")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "stdin is closed: no script" in r.stderr


def test_a_closed_stdout_still_runs_and_records(durable) -> None:
    d = durable
    d.write("e.dal", 'run("echo a >> c.txt")\nprint("to nowhere")\n')
    for args in ("run e.dal", "run --json --key e2 e.dal"):
        r = _bash(d, f"{sys.executable} -m dal {args} >&-")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert d.lines("c.txt") == ["a", "a"]
    assert [x["status"] for x in d.receipts()] == ["completed", "completed"]


def test_the_markdown_receipt_holds_no_markup_a_script_wrote(durable) -> None:
    d = durable
    d.write("s.dal", 'fail({"blocker": "see <img src=x onerror=alert(1)> [approve](javascript:alert(1)) '
                     '</a> <!-- c -->", "retry": "inspect"})\n')
    d.cli("run", "s.dal")
    md = next((d.ws / ".dal" / "receipts").glob("*.md")).read_text()
    assert "<img" not in md and "</a" not in md and "<!--" not in md and "](" not in md, md
    assert "&lt;img src=x onerror=alert(1)>" in md and "[approve]\\(javascript:alert(1))" in md
