"""examples/send_report.dal end to end, as its header comment tells a user to run it."""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_send_report_waits_for_approval_then_sends_once(durable) -> None:
    d = durable
    shutil.copy(EXAMPLES / "send_report.dal", d.ws)
    shutil.copy(EXAMPLES / "send_report.toml", d.ws / "dal.toml")  # as the example's header says
    first = d.cli("run", "send_report.dal")
    assert first.code == 3
    assert "review `cat drafts/q3.md | tee -a outbox/mail.txt`" in first.err
    assert not (d.ws / "outbox" / "mail.txt").exists()
    assert d.cli("approve", "report:2026-q3", "--note", "figures checked").code == 0
    resumed = d.cli("resume", "report:2026-q3")
    assert resumed.code == 0, resumed
    assert d.lines("outbox/mail.txt") == ["# Q3 report", "revenue: 1.2M", "costs: 0.9M"]
    assert d.latest()["result"] == {"sent": "drafts/q3.md", "figures": 2}
    again = d.cli("run", "send_report.dal")
    assert again.code == 0 and d.latest()["status"] == "skipped"
    assert len(d.lines("outbox/mail.txt")) == 3
    d.check_store()
