"""Issue 15, point 5: `latest` is the newest run for every command; the list, `show` and `--status` use
the same words (`died`, `resumed`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from dalshell import DAL, Shell


def _killed_keyed_run(dal: Shell) -> str:
    dal.write("slow.dal", 'operation("k1")\nrun("touch a")\nsleep(0.3)\nprint("slept")\n')
    # It waits for a file `go` (a read each tenth of a second): killed while it waits, its resume finds
    # `go` and ends, with the same script text (a resume runs only the text its run ran).
    dal.write("hang.dal", 'operation("k1")\nrun("touch a")\nlet i = 0\nwhile i < 600 {\n'
              '    if run("test -e go").ok { break }\n    sleep(0.1)\n    i = i + 1\n}\n'
              'print("resumed")\n')
    env = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    proc = subprocess.Popen([str(DAL), "run", "hang.dal"], cwd=dal.cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (dal.cwd / "a").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return json.loads(dal("receipts", "--json").stdout)["runs"][0]["run_id"]


def test_latest_names_the_killed_run_for_show_and_resume(dal: Shell) -> None:
    rid = _killed_keyed_run(dal)
    listed = dal("receipts")
    assert " died " in listed.stdout
    shown = dal("receipt", "show", "latest")
    assert shown.stdout.startswith(f"died  {rid}") and f"dal resume {rid}" in shown.stdout
    assert json.loads(dal("receipts", "--json", "--status", "died").stdout)["runs"][0]["run_id"] == rid
    approve = dal("approve", "latest")  # nothing waits for approval: refused, about that run, not "no runs"
    assert approve.returncode == 2 and rid in approve.stderr and "no finished runs" not in approve.stderr
    # the decision commands call it what the list calls it: died, not running, and say the way on
    for decide in (approve, dal("deny", "latest"), dal("resolve", "latest", "--as", "done")):
        assert f"run {rid} died" in decide.stderr and "running" not in decide.stderr, decide.stderr
        assert f"`dal resume {rid}` continues it" in decide.stderr
    dal.write("go", "")
    resumed = dal("resume", "latest")
    assert resumed.returncode == 0 and "resumed" in resumed.stdout, resumed.stderr
    later = dal("receipts", "--status", "resumed")
    assert rid in later.stdout and "resumed" in later.stdout
    assert rid not in dal("receipts", "--status", "interrupted").stdout  # it shows as resumed, not both
