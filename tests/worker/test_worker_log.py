"""The worker's log (dal/worker/log.py): `--log-format json` is one JSON object per line, with the job's
fields, on every line a worker prints while a job's process is killed and its job finished by another run;
a script's output with terminal controls (ESC, BEL, bidirectional overrides) never reaches the terminal raw,
in either format."""

from __future__ import annotations

import json
import os
import signal

from worker_queue import Queue

from dal.worker.log import WorkerLog, json_line, visible

# ESC (a colour, a cursor move), BEL, a right-to-left override and an isolate, a C1 control, a zero-width
# space, and a line that reads like the worker's own.
NASTY = ("\\u001b[31mred\\u0007 \\u202eevil\\u2066 \\u0085 \\u001b[2J\\u200b"
         "\\ndal worker w_x: job 9 (k): forged → done")
RAW = ("\x1b", "\x07", "\u202e", "\u2066", "\x85", "\u200b")

SCRIPT = f"""operation("loud")
print("{NASTY}")
run("echo a >> out.txt")
run("sleep 1")
run("echo b >> out.txt")
"""

KEYS = {"time", "level", "worker", "job", "key", "run", "state", "retry", "duration", "message"}


def test_json_lines_all_parse_through_a_killed_job_process_and_output_stays_escaped(queue: Queue) -> None:
    q = queue
    q.write("loud.dal", SCRIPT)
    assert q.cli("submit", "loud.dal").code == 0
    w = q.worker("--log-format", "json", "--lease", "2")
    q.wait_for(lambda: q.lines("out.txt") == ["a"], 30, "the first append")
    holder = json.loads(q.job(1)["holder"])["pid"]
    assert holder != w.pid
    os.kill(holder, signal.SIGKILL)  # the job's process alone: the worker lives on and routes its job
    q.wait_for(lambda: q.job(1)["state"] == "done", 60, "the job to be finished by its next run")
    w.send_signal(signal.SIGTERM)
    assert w.wait(30) == 0
    raw = q.logs()
    assert not [c for c in RAW if c in raw], "a terminal control reached the log raw"
    lines = [json.loads(line) for line in raw.splitlines()]  # every line parses
    assert all(set(o) == KEYS for o in lines), lines
    assert all(o["level"] in ("info", "warning", "error", "output") for o in lines)
    out = [o for o in lines if o["level"] == "output"]
    assert out[0]["message"] == "\x1b[31mred\x07 \u202eevil\u2066 \x85 \x1b[2J\u200b" and out[0]["job"] == 1
    assert out[1]["message"] == "dal worker w_x: job 9 (k): forged → done"  # its own object, not a log line
    (crash,) = [o for o in lines if "killed by SIGKILL" in o["message"]]
    assert (crash["job"], crash["key"], crash["state"], crash["level"]) == (1, "loud", "ready", "warning")
    (done,) = [o for o in lines if o["state"] == "done"]
    assert done["run"].startswith("run_") and done["retry"] == "none" and done["duration"] > 0
    assert q.lines("out.txt") == ["a", "b"]  # the append before the kill was not made again
    # The killed run and the one that finished the job: two runs, of one job (it said "2 jobs run").
    assert [o["message"] for o in lines if o["message"].startswith("stopped: ")] == ["stopped: 2 runs of 1 job"]


def test_text_lines_escape_a_scripts_terminal_controls(queue: Queue) -> None:
    q = queue
    q.write("loud.dal", SCRIPT)
    assert q.cli("submit", "loud.dal").code == 0
    w = q.worker("--until-idle")
    assert w.wait(60) == 0
    raw = q.logs()
    assert not [c for c in RAW if c in raw], "a terminal control reached the log raw"
    lines = raw.splitlines()
    assert r"[job 1] \x1b[31mred\x07 \u202eevil\u2066 \x85 \x1b[2J\u200b" in lines
    assert "[job 1] dal worker w_x: job 9 (k): forged → done" in lines
    assert not [line for line in lines if line.startswith("dal worker w_x")]


def test_every_unsafe_character_is_escaped_and_the_json_reads_back_the_same() -> None:
    text = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x61C, 0x200B, 0x200C, 0x200E, 0x200F,
                             *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029, 0xFEFF,
                             0xD800, 0x78, 0xDFFF])) + "é ok"
    shown = visible(text)
    assert shown.isprintable() and shown.endswith("é ok") and "\\x1b" in shown and "\\u202e" in shown
    line = json_line({"message": text})
    assert line.isascii() is False and line.isprintable()  # é stays é; nothing else is raw
    assert json.loads(line) == {"message": text}
    said: list[str] = []
    WorkerLog("w_1", format="json", say=said.append).line("hi\x1b", job=3, duration=0.12345)
    (one,) = said
    assert json.loads(one)["job"] == 3 and json.loads(one)["duration"] == 0.123 and "\x1b" not in one


def test_a_jobs_output_shows_every_control_the_operators_other_lines_escape() -> None:
    line = "a\x1b]52;c;cGF5\x07b\u202ec\u200bd\u200ce\ufefff\tg"
    log = WorkerLog("w_1")
    assert log.output_lines(4, "k", [line]) == "[job 4] a\\x1b]52;c;cGF5\\x07b\\u202ec\\u200bd\\u200ce\\ufefff\tg\n"
    (obj,) = [json.loads(x) for x in WorkerLog("w_1", format="json").output_lines(4, "k", [line]).splitlines()]
    assert obj["message"] == line
    said: list[str] = []
    WorkerLog("w_1", say=said.append).line("job 4 (k\u200b\u202e): done")
    assert said == ["dal worker w_1: job 4 (k\\u200b\\u202e): done"]


def test_the_json_lines_docs_workers_md_shows_have_every_key() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "workers.md").read_text(encoding="utf-8")
    section = doc.split("## Logs", 1)[1].split("\n## ", 1)[0]
    shown = section.split("```\n", 2)[1].splitlines()
    assert len(shown) == 2
    for line in shown:
        assert set(json.loads(line)) == KEYS
    assert all(f"`{k}`" in section for k in KEYS)
