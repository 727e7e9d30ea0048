"""Whether a REPL input is complete, decided by the grammar's own LALR parser.

An input is incomplete when the parser runs out of tokens while a block, list, map, call or
parenthesis is open. Anything else (a complete input or a real syntax error, an unterminated string
among them: a DAL string cannot span lines) is run, so the error shows at once.
"""

from __future__ import annotations

import threading

from dal.syntax.lalr import Parser, UnexpectedCharacters, UnexpectedToken

# The grammar's two entry points: a script and, for the REPL, a lone expression (`[1,` then `2]`).
_STARTS = ("start", "repl_expr")


def _parser() -> Parser:
    from dal.syntax.parser import recognizer

    return recognizer()


def warm_up() -> None:
    """Load the parser in the background, so that the first Enter does not wait for it."""

    def build() -> None:
        try:
            _parser()
        except Exception:
            pass  # is_complete() reports nothing either: the input simply runs

    threading.Thread(target=build, name="dal-parser-warm-up", daemon=True).start()


def is_complete(source: str) -> bool:
    """False while something is still open at the end of `source`."""
    if not source.strip():
        return True
    try:
        parser = _parser()
    except Exception:  # tables we cannot load: run the input and let the interpreter speak
        return True
    # Complete when one entry point accepts it; incomplete when none does and one ran out of input.
    outcomes = {_attempt(parser, source, start) for start in _STARTS if start in parser.starts}
    return "ok" in outcomes or "open" not in outcomes


def _attempt(parser: Parser, source: str, start: str) -> str:
    """ "ok", "open" (ran out of input with something open) or "error"."""
    try:
        parser.parse(source, start=start)
    except UnexpectedToken as e:
        return "open" if e.token.type == "$END" else "error"
    except UnexpectedCharacters:
        return "error"  # an unterminated `"` too: strings end on their line, so Enter cannot finish it
    except Exception:
        return "error"
    return "ok"
