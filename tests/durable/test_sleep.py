"""`sleep(seconds)`: a wait that is not an effect. It counts in the receipt as time (`slept_ms`), ends at once
on Ctrl-C and SIGTERM, is refused when it would outlast `--timeout`, and a resumed run does not wait again
for the sleeps its journal holds. Real `dal` processes, real signals, real clocks."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DAL = [sys.executable, "-m", "dal"]


def _receipt(ws: Path) -> dict[str, Any]:
    newest = max((ws / ".dal" / "receipts").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    return json.loads(newest.read_text(encoding="utf-8"))


def _dal(ws: Path, *args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    t = time.monotonic()
    done = subprocess.run([*DAL, *args], cwd=ws, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - t


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".dal").mkdir(parents=True)
    return ws


def test_a_sleep_is_time_in_the_receipt_not_an_effect(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "poll.dal").write_text('let r = run("echo polled")\nsleep(0.3)\nsleep(0.2)\nprint(r)\n', encoding="utf-8")
    done, took = _dal(ws, "run", "poll.dal")
    assert (done.returncode, done.stdout) == (0, "polled\n"), done.stderr
    assert took >= 0.5
    assert "· 1 effects ·" in done.stderr or "· 1 effect ·" in done.stderr
    receipt = _receipt(ws)
    assert receipt["effects"]["count"] == 1 and [e["command"] for e in receipt["effects"]["items"]] == ["echo polled"]
    assert 500 <= receipt["slept_ms"] <= receipt["duration_ms"]
    md = (ws / ".dal" / "receipts" / f"{receipt['run_id']}.md").read_text(encoding="utf-8")
    took_shown = r"(\d+ ms|\d+(\.\d+)? s)"  # past a second under load, the duration is shown in seconds
    assert re.search(rf"- run: run_\S+ \(completed, \S+, {took_shown} \(slept \d+ ms\)\)", md), md
    shown, _ = _dal(ws, "receipt", "show", "latest")
    assert re.search(rf"{took_shown} \(slept \d+ ms\)", shown.stdout), shown.stdout


def test_a_sleep_that_would_outlast_the_timeout_is_refused_at_once(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "s.dal").write_text('print("before")\nsleep(30)\nprint("after")\n', encoding="utf-8")
    done, took = _dal(ws, "run", "--timeout", "5", "s.dal")
    assert done.returncode == 4 and done.stdout == "before\n"
    assert took < 4, "the run waited instead of stopping"
    assert "error[budget]: time budget exhausted: sleep(30) would outlast the run's 5s (--timeout), which has" in \
        done.stderr
    receipt = _receipt(ws)
    assert receipt["status"] == "exhausted" and receipt["slept_ms"] == 0


def test_a_sleep_within_the_timeout_runs(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "s.dal").write_text('sleep(0.2)\nprint("after")\n', encoding="utf-8")
    done, took = _dal(ws, "run", "--timeout", "5", "s.dal")
    assert (done.returncode, done.stdout) == (0, "after\n"), done.stderr
    assert took >= 0.2


def _signal_during_sleep(ws: Path, sig: signal.Signals) -> tuple[int, str, str, float]:
    (ws / "s.dal").write_text('print("sleeping")\nsleep(120)\nprint("never")\n', encoding="utf-8")
    p = subprocess.Popen([*DAL, "run", "s.dal"], cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline() == "sleeping\n"  # the script runs: it is in its sleep now or about to be
    time.sleep(0.3)
    t = time.monotonic()
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("the signal did not end the sleep") from None
    return p.returncode, out, err, time.monotonic() - t


def test_ctrl_c_ends_a_sleep_at_once(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    code, out, err, took = _signal_during_sleep(ws, signal.SIGINT)
    assert code == 130 and out == "", err
    assert took < 5
    assert "error[interrupted]" in err and "sleep(120)" in err and "Traceback" not in err
    receipt = _receipt(ws)
    assert receipt["status"] == "interrupted" and receipt["effects"]["count"] == 0
    assert 0 < receipt["slept_ms"] < 30_000


def test_sigterm_ends_a_sleep_at_once(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    code, _, err, took = _signal_during_sleep(ws, signal.SIGTERM)
    assert code == 143 and took < 5, err
    assert _receipt(ws)["status"] == "interrupted"


def test_a_resumed_run_does_not_wait_again_for_the_sleeps_it_replays(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "poll.dal").write_text(
        'operation("poll:1")\nlet a = run("echo first")\nprint(a)\nsleep(3)\nlet b = run("touch sent.txt")\n'
        'print("sent", b.ok)\n', encoding="utf-8")
    first, took = _dal(ws, "run", "--require-approval=touch", "poll.dal")
    assert first.returncode == 3 and first.stdout == "first\n", first.stderr
    assert took >= 3
    held = _receipt(ws)
    assert held["status"] == "waiting" and held["slept_ms"] >= 3000
    run_id = held["run_id"]
    assert _dal(ws, "approve", run_id, "--effect", "2")[0].returncode == 0
    resumed, took = _dal(ws, "resume", run_id)
    assert (resumed.returncode, resumed.stdout) == (0, "first\nsent true\n"), resumed.stderr
    # A second of start-up under a loaded machine is not a replayed sleep of 3 s.
    assert took < 3, "the resumed run waited again for a sleep its journal holds"
    receipt = _receipt(ws)
    assert receipt["status"] == "completed" and receipt["slept_ms"] == 0
    assert [(e["command"], e["replayed"]) for e in receipt["effects"]["items"]] == [
        ("echo first", True), ("touch sent.txt", False)]
    assert (ws / "sent.txt").exists()
