"""What the pages say about runs the browser test does not make: a run whose process was killed (-9)
mid-effect is `died` in the list and on its page, with the receipt `dal receipt show` gives; a job whose
script handed it to a person shows its blocker and no form; bad filters are 400."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from console_helpers import Server, Workspace, login, request


def test_a_killed_run_is_died_with_the_receipt_receipt_show_gives(workspace: Workspace, console: Server) -> None:
    w = workspace
    w.write("slow.dal", 'run("echo a >> a.txt")\nrun("sleep 30")\n')
    p = subprocess.Popen([sys.executable, "-m", "dal", "run", "--key", "slow", "slow.dal"], cwd=w.ws, env=w.env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while not (w.ws / "a.txt").exists() or not _journaled(w, 2):
            assert time.monotonic() < end, "the run never reached its sleep"
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    rid = w.waiting_run("slow")
    cookie = login(console)
    r, page = request(console, "GET", "/runs?status=died", cookie=cookie)
    assert r.status == 200 and rid in page
    r, page = request(console, "GET", f"/runs/{rid}", cookie=cookie)
    assert r.status == 200 and '<strong class="status">died</strong>' in page
    cli = w.dal("receipt", "show", rid)
    assert cli.out.startswith(f"died  {rid}")
    import html

    shown = html.unescape(page.split('<pre class="receipt">', 1)[1].split("</pre>", 1)[0])
    assert shown.strip() == cli.out.strip()
    assert "echo a &gt;&gt; a.txt" in page and "sleep 30" in page  # the journal


def _journaled(w: Workspace, n: int) -> bool:
    from dal.receipts.store import Store, StoreError

    try:
        with Store(w.db, readonly=True) as s:
            runs = s.list_runs(limit=1)
            return bool(runs) and len([e for e in s.journal(runs[0]["run_id"]) if e["seq"] > 0]) >= n
    except StoreError:
        return False


def test_a_job_its_script_hands_to_a_person_shows_why_and_no_form(workspace: Workspace, console: Server) -> None:
    w = workspace
    w.write("own.dal", 'run("cat input.txt")\nfail({"retry": "escalate", "blocker": "a person must look at q3.csv"})\n')
    assert w.dal("submit", "own.dal", "--key", "own").code == 0
    w.worker()
    job = w.jobs()["own"]
    assert job["state"] == "waiting"
    cookie = login(console)
    r, page = request(console, "GET", "/waiting", cookie=cookie)
    assert r.status == 200 and "a person must look at q3.csv" in page and 'action="/decide"' not in page
    assert f"dal job retry {job['job_id']}" in page
    for bad in ("/runs?status=bogus", "/runs?retry=sometimes"):
        r, _ = request(console, "GET", bad, cookie=cookie)
        assert r.status == 400, bad
    r, _ = request(console, "GET", "/runs/run_nope", cookie=cookie)
    assert r.status == 404


def test_a_workspace_with_no_store_yet_says_so_and_creates_nothing(workspace: Workspace, console: Server) -> None:
    cookie = login(console)
    for path in ("/waiting", "/runs", "/queue", "/blocked"):
        r, page = request(console, "GET", path, cookie=cookie)
        assert r.status == 200 and "No runs yet" in page, path
    assert not (workspace.ws / ".dal").exists()  # pages only read: no store, no folder made
    # A decision posted with the session's own token (a stale tab) has no run to decide: nothing is made.
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    body = {"csrf": csrf.group(1), "run": "run_x", "effect": "1", "decision": "approved", "shown": "0" * 16}
    r, page = request(console, "POST", "/decide", cookie=cookie, body=body)
    assert r.status == 200 and "No runs yet" in page
    assert not (workspace.ws / ".dal").exists()


def test_an_uncertain_effect_is_timed_by_the_attempt_that_began_it(workspace: Workspace, console: Server) -> None:
    # The resume that holds the effect journals a hold of its own: the card named its time, as if the
    # effect had begun then, not when the killed attempt began it.
    w = workspace
    w.write("append.dal", 'run("echo once >> app.txt")\n')
    assert w.dal("run", "--key", "append", "append.dal", DAL_TEST_CRASH_AT="after-exec:1").code < 0
    killed = w.dal("receipts", "--json")
    import json

    first = json.loads(killed.out)["runs"][0]["run_id"]
    time.sleep(1.1)  # the hold a resume journals is a second or more later
    assert w.dal("run", "--key", "append", "append.dal").code == 3
    held = w.waiting_run("append")
    assert held != first
    cookie = login(console)
    r, page = request(console, "GET", "/waiting", cookie=cookie)
    assert r.status == 200
    card = page[page.index(f'id="held-{held}-1"'):]
    began = re.search(r"intent recorded (\S+) by run <a href=\"[^\"]+\">(run_\w+)</a>", card)
    assert began and began.group(2) == first, card[:2000]
    from dal.receipts.store import Store

    with Store(w.db, readonly=True) as s:
        assert began.group(1) == s.journal(first)[0]["intent_at"]
