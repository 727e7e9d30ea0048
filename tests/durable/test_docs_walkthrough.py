"""docs/durability.md's walkthrough is what DAL prints: the commands it shows, run for real, print the
lines it shows (run ids, times and durations aside)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "durability.md"


def normalise(text: str) -> str:
    text = re.sub(r"run_\d{8}T\d{9}Z_[0-9a-f]{6}", "run_ID", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "TIME", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", "TIME", text)
    return re.sub(r"\b\d+(?:\.\d+)? m?s\b", "N ms", text)  # a loaded machine takes seconds


def block_after(doc: str, marker: str) -> str:
    rest = doc[doc.index(marker):]
    start = rest.index("```")
    body = rest[rest.index("\n", start) + 1:]
    return body[: body.index("```")]


def test_walkthrough_matches_what_dal_prints(durable) -> None:
    doc = DOC.read_text(encoding="utf-8")
    d = durable
    d.write("dal.toml", block_after(doc, "`dal.toml` classes `tee` as external"))
    d.write("publish.dal", block_after(doc, "`publish.dal`:"))
    assert d.run("run", "publish.dal", DAL_TEST_CRASH_AT="after-exec:2").code == -signal.SIGKILL
    shown = normalise(doc)
    steps = [
        ("run", "publish.dal"),
        ("receipts", "--waiting"),
        ("receipt", "show", "publish:2026-09-02"),
        ("resolve", "publish:2026-09-02", "--as", "done", "--note", "saw it in the outbox"),
        ("resume", "publish:2026-09-02"),
        ("receipt", "show", "latest"),
        ("run", "publish.dal"),
    ]
    for argv in steps:
        got = d.cli(*argv)
        assert f"$ dal {' '.join(a if ' ' not in a else repr(a).replace(chr(39), chr(34)) for a in argv)}" in doc
        # the docs show the workspace as /srv/blog
        for line in normalise((got.err + got.out).replace(str(d.ws.resolve()), "/srv/blog")).splitlines():
            if line.strip() and not line.startswith("RUN "):
                assert line.rstrip() in shown, (argv, line)
    assert d.lines("outbox.txt") == ["new article"]
