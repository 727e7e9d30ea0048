"""The console in a real headless Chromium (Debian's, driven by Playwright; nothing downloaded): a person
logs in with the printed link, approves a waiting send with a note, says an uncertain append happened,
watches a worker finish both jobs, and filters the runs. Real `dal worker` and `dal console` processes,
real SQLite. The screenshots in docs/console.md are the ones this test takes."""

from __future__ import annotations

import os
from pathlib import Path

from console_helpers import APPEND, REPO, SEND, Server, Workspace

IMG = REPO / "docs" / "img"


def shot(page, name: str) -> None:
    """Save a screenshot for docs/console.md (only when DAL_CONSOLE_SCREENSHOTS=1: the committed ones
    are not rewritten by every test run)."""
    if os.environ.get("DAL_CONSOLE_SCREENSHOTS") == "1":
        IMG.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMG / name), full_page=True)


def test_decide_in_the_browser_and_watch_the_jobs_finish(workspace: Workspace, console: Server, browser,
                                                         tmp_path: Path) -> None:
    w = workspace
    w.write("send.dal", SEND)
    w.write("append.dal", APPEND)
    w.write("broken.dal", 'run("cat input.txt")\nfail("the figures look wrong")\n')
    w.write("ok.dal", 'run("cat input.txt")\n')
    for args in (("send.dal", "--key", "send", "--require-approval=tee"),
                 ("append.dal", "--key", "append", "--queue", "crashy"),
                 ("broken.dal", "--key", "figures"),
                 ("ok.dal", "--key", "ok")):
        r = w.dal("submit", *args)
        assert r.code == 0, r.err
    w.worker()
    w.worker("--queue", "crashy", DAL_TEST_CRASH_AT="after-exec:1")  # killed after the append ran
    jobs = w.jobs()
    assert {k: j["state"] for k, j in jobs.items()} == {"send": "waiting", "append": "waiting",
                                                        "figures": "parked", "ok": "done"}
    assert w.lines("app.txt") == ["once"] and w.lines("outbox.txt") == []

    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)  # a CSP violation, say

    # Log in: the token becomes a session cookie, and leaves the address bar.
    page.goto(console.login_url)
    assert page.url == f"{console.base}/waiting"
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["dal_console"]["httpOnly"] and cookies["dal_console"]["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script could read it
    send_run, append_run = w.waiting_run("send"), w.waiting_run("append")
    send = page.locator(f"#held-{send_run}-2")
    assert send.locator("code.command").inner_text() == "echo report | tee -a outbox.txt"
    assert send.locator("dd.class").inner_text() == "external"
    assert "cat input.txt" in send.locator("table.before").inner_text()  # what the script did before
    append = page.locator(f"#held-{append_run}-1")
    assert append.locator("code.command").inner_text() == "echo once >> app.txt"
    assert "no result recorded" in append.inner_text()
    assert "app.txt: exists, 5 bytes" in append.locator("ul.files").inner_text()  # what the disk shows
    shot(page, "console-waiting.png")

    # Approve the send with a note.
    send.locator("input[name=note]").fill("checked the recipients")
    send.locator("button[value=approved]").click()
    assert page.locator("h1").inner_text(timeout=5000) == "Recorded", page.content()
    text = page.locator("main").inner_text()
    assert f"approved effect 2 of run {send_run}: echo report | tee -a outbox.txt" in text
    assert "ana (console session" in text and "checked the recipients" in text
    shot(page, "console-decided.png")

    # Say the append happened (the file shows it did).
    page.goto(f"{console.base}/waiting")
    append = page.locator(f"#held-{append_run}-1")
    append.locator("input[name=note]").fill("app.txt has the line")
    append.locator("button[value='resolved:done']").click()
    said = page.locator("main").inner_text()
    assert f"resolved effect 1 of run {append_run} as done (it happened): echo once >> app.txt" in said, said
    assert "resolved:" not in said  # the stored label is DAL's, not a person's words

    # Blocked: the parked job with its blocker.
    page.goto(f"{console.base}/blocked")
    assert "the figures look wrong" in page.locator("article.parked").inner_text()
    shot(page, "console-blocked.png")

    # The queue before a worker runs: the decided jobs are ready again (a decision wakes its job).
    page.goto(f"{console.base}/queue")
    assert page.locator("section.jobs.ready tbody tr").count() == 2
    assert page.locator("section.jobs.waiting tbody tr").count() == 0
    shot(page, "console-queue.png")

    # A worker resumes both: the send runs once, the append is not run again.
    w.worker()
    w.worker("--queue", "crashy")
    assert w.lines("outbox.txt") == ["report"] and w.lines("app.txt") == ["once"]
    page.goto(f"{console.base}/queue")
    assert page.locator("section.jobs.ready tbody tr").count() == 0
    assert "done 3" in page.locator("p.counts").inner_text()
    page.goto(f"{console.base}/waiting")
    assert "No run waits for a person." in page.locator("main").inner_text()

    # The run page of the send's last run: the receipt as `dal receipt show` prints it, the journal and
    # the decision, naming who decided and from where.
    page.goto(f"{console.base}/runs?key=send")
    page.locator("table.runs tbody tr").first.locator("a").click()
    assert page.locator("strong.status").inner_text() == "completed"
    receipt = page.locator("pre.receipt").inner_text()
    rid = page.url.rsplit("/", 1)[1]
    cli = w.dal("receipt", "show", rid)
    assert receipt.strip() == cli.out.strip()
    assert "effect 2: approved by ana (console session" in receipt and "(checked the recipients)" in receipt
    journal = page.locator("table.journal").inner_text()  # the operation's, over both attempts
    assert "cat input.txt" in journal and "echo report | tee -a outbox.txt" in journal
    assert "effect 2: approved by ana (console session" in page.locator("ul.decisions").inner_text()
    shot(page, "console-run.png")

    # Filter the runs: by status, by retry class, by operation.
    page.goto(f"{console.base}/runs")
    page.select_option("select[name=status]", "failed")
    page.locator("form.filters button").click()
    assert "status=failed" in page.url
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 1 and "figures" in rows.first.inner_text()
    shot(page, "console-runs.png")
    page.select_option("select[name=status]", "")
    page.select_option("select[name=retry]", "escalate")
    page.locator("form.filters button").click()
    labels = page.locator("table.runs td.status").all_inner_texts()
    assert labels and set(labels) <= {"waiting", "resumed"}
    page.goto(f"{console.base}/runs?operation=app*")
    ops = page.locator("table.runs tbody tr td:nth-child(2)").all_inner_texts()
    assert ops and set(ops) == {"append"}
    assert errors == []


def test_a_second_browser_logs_in_with_a_new_link_the_operator_mints(workspace: Workspace, console: Server,
                                                                     browser) -> None:
    first = browser.new_context()
    page = first.new_page()
    page.goto(console.login_url)
    assert page.url == f"{console.base}/waiting"
    # A closed tab, a second browser: the printed link is spent.
    second = browser.new_context()
    other = second.new_page()
    other.goto(console.login_url)
    assert other.locator("h1").inner_text() == "Log in"
    assert "press Enter in the terminal where dal console runs" in other.locator("main").inner_text()
    # The operator presses Enter where the console runs; the new link logs the second browser in.
    other.goto(f"{console.base}/login?token={console.new_link()}")
    assert other.url == f"{console.base}/waiting"
    assert other.locator("h1").inner_text() != "Log in"
    page.reload()
    assert page.url == f"{console.base}/waiting" and page.locator("h1").inner_text() != "Log in"  # still in
