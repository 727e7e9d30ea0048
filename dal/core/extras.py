"""How to install one of DAL's optional extras, said the way this copy of DAL was installed: from PyPI,
`pip install 'dal-lang[console]'`; from a clone (`pip install .` or `-e .`, which pip records in the
distribution's direct_url.json, PEP 610), the same command naming the clone, which is where a user of a
clone gets the extra from."""

from __future__ import annotations

import json
from urllib.parse import unquote, urlparse

from dal.core.shellword import sh_quote

DIST = "dal-lang"


def install_hint(extra: str) -> str:
    """`pip install ...` for the optional extra `extra` (console, mcp, postgres, schedule, metrics)."""
    source = _installed_from()
    if source is None:
        return f"pip install {sh_quote(f'{DIST}[{extra}]')}"
    path, editable = source
    return f"pip install {'-e ' if editable else ''}{sh_quote(f'{path}[{extra}]')}"


def _installed_from() -> tuple[str, bool] | None:
    """(the folder DAL was installed from, editable) for an install from a local folder, else None."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        text = distribution(DIST).read_text("direct_url.json")
    except (ImportError, PackageNotFoundError, OSError):
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
        url = urlparse(data["url"])
    except (ValueError, KeyError, TypeError):
        return None
    if url.scheme != "file" or "vcs_info" in data or "archive_info" in data:
        return None
    return unquote(url.path), bool((data.get("dir_info") or {}).get("editable"))
