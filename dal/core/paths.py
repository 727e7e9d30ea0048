"""The one place that knows where the grammar lives, in a checkout and inside the wheel."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # the `dal` folder


def grammar_path() -> Path:
    """Return the path of `dal.lark`.

    The wheel ships it as `dal/grammar/dal.lark`; a source checkout keeps it in the top-level
    `grammar/` folder beside the package.
    """
    shipped = _PACKAGE / "grammar" / "dal.lark"
    if shipped.is_file():
        return shipped
    return _PACKAGE.parent / "grammar" / "dal.lark"
