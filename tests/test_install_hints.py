"""Issue 30: a hint to install an optional extra names it the way this copy of DAL was installed: the PyPI
name for a PyPI install, the clone for a user of a clone (who has no `dal-lang` on an index to get it from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dal.core import extras

REPO = Path(__file__).resolve().parents[1]


class _Dist:
    def __init__(self, text: str | None) -> None:
        self.text = text

    def read_text(self, name: str) -> str | None:
        return self.text


@pytest.mark.parametrize(("direct_url", "hint"), [
    (None, "pip install 'dal-lang[console]'"),  # from an index: no direct_url.json
    ({"url": "file:///home/ana/dal", "dir_info": {"editable": True}}, "pip install -e '/home/ana/dal[console]'"),
    ({"url": "file:///home/ana/my%20dal", "dir_info": {}}, "pip install '/home/ana/my dal[console]'"),
    ({"url": "https://example.com/dal.tar.gz", "archive_info": {}}, "pip install 'dal-lang[console]'"),
])
def test_the_hint_follows_how_dal_was_installed(monkeypatch: pytest.MonkeyPatch, direct_url, hint) -> None:
    import importlib.metadata

    text = json.dumps(direct_url) if direct_url is not None else None
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: _Dist(text))
    assert extras.install_hint("console") == hint


def test_this_checkouts_install_names_its_clone() -> None:
    # The tests run from a clone installed with `pip install '.[test]'` (README) or `-e`: the hint names it.
    assert extras.install_hint("mcp") in (f"pip install -e '{REPO}[mcp]'", f"pip install '{REPO}[mcp]'")
