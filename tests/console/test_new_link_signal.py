"""SIGUSR1 mints a new console link without the signal handler doing the work: a burst of signals, or one
that arrives while the server holds the sessions' lock, leaves the console serving with one live link. One
process of its own (its signal handlers are the point), run with a deadline so a hang fails."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import io, os, re, signal, time
from dal.console.security import Sessions
from dal.console.serve import _offer_new_links

sessions = Sessions()
first = sessions.token
out = io.StringIO()
_offer_new_links(sessions, "http://127.0.0.1:1", out)
for _ in range(3000):  # nested handlers: a RecursionError in whatever the main thread ran
    os.kill(os.getpid(), signal.SIGUSR1)
with sessions._lock:  # the server's thread inside login()/get() when the signal comes
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(1000):
        pass
deadline = time.monotonic() + 10
last = None
while time.monotonic() < deadline:
    links = re.findall(r"token=(\S+)", out.getvalue())
    if links and links[-1] == sessions.token:
        last = links[-1]
        time.sleep(0.2)
        links = re.findall(r"token=(\S+)", out.getvalue())
        if links[-1] == sessions.token:
            break
    time.sleep(0.05)
print("LINKS", len(links))
print("FIRST", sessions.login(first, "t") is not None)
print("LAST", sessions.login(links[-1], "t") is not None)
print("AGAIN", sessions.login(links[-1], "t") is not None)
"""


def test_a_burst_of_sigusr1_and_one_during_a_login_leave_one_live_link() -> None:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    got = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    assert int(got["LINKS"]) >= 1
    assert (got["FIRST"], got["LAST"], got["AGAIN"]) == ("False", "True", "False")


EARLY = r"""
import io, os, re, signal, time
from dal.console.security import Sessions
from dal.console.serve import _offer_new_links

sessions = Sessions()
out = io.StringIO()

def intro():  # the operator signals the moment the PID is printed
    out.write(f"first token={sessions.token}\n")
    os.kill(os.getpid(), signal.SIGUSR1)
    time.sleep(0.1)

_offer_new_links(sessions, "http://127.0.0.1:1", out, intro)
deadline = time.monotonic() + 10
while time.monotonic() < deadline and len(re.findall(r"token=(\S+)", out.getvalue())) < 2:
    time.sleep(0.05)
print(out.getvalue().replace("\n", " | "))
"""


def test_a_sigusr1_sent_as_soon_as_the_pid_is_printed_mints_a_link_instead_of_ending_the_console() -> None:
    p = subprocess.run([sys.executable, "-c", EARLY], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    first, second = (line.split("token=")[1].split()[0] for line in p.stdout.split(" | ") if "token=" in line)
    assert p.stdout.index("first") < p.stdout.index("a new link") and first != second
