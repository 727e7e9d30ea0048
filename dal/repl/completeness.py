"""Whether a REPL input is complete, decided by the grammar's own LALR parser.

An input is incomplete when the parser runs out of tokens while a block, list, map, call or
parenthesis is open, or when the last line ends inside a string. Anything else (a complete input
or a real syntax error) is run, so the error shows at once.

Why not `Session.is_complete`: at the time of writing it parses with a two-start-rule Lark
instance without naming the start rule, which raises and reads as "complete" for every input.
"""

from __future__ import annotations

import functools
import threading

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from dal.paths import grammar_path

# The grammar's two entry points: a script and, for the REPL, a lone expression (`[1,` then `2]`).
_STARTS = ("start", "repl_expr")


_lock = threading.Lock()


@functools.cache
def _parser() -> Lark:
    with _lock:  # warm_up() may be building it in the background right now
        grammar = grammar_path().read_text(encoding="utf-8")
        starts = [s for s in _STARTS if f"\n{s}:" in f"\n{grammar}"]
        # cache=True keeps the LALR tables in the temp folder: the next start skips the build.
        return Lark(grammar, parser="lalr", lexer="basic", start=starts, cache=True)


def warm_up() -> None:
    """Build the parser in the background. Built lazily, the first Enter would freeze the prompt
    (and leave the terminal in raw mode, deaf to Ctrl-C) for the better part of a second."""

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
    except Exception:  # a grammar we cannot load: run the input and let the interpreter speak
        return True
    # Complete when one entry point accepts it; incomplete when none does and one ran out of input.
    outcomes = {_attempt(parser, source, start) for start in parser.options.start}
    return "ok" in outcomes or "open" not in outcomes


def _attempt(parser: Lark, source: str, start: str) -> str:
    """ "ok", "open" (ran out of input with something open) or "error"."""
    try:
        parser.parse(source, start=start)
    except UnexpectedEOF:
        return "open"
    except UnexpectedToken as e:
        return "open" if e.token.type == "$END" else "error"
    except UnexpectedCharacters as e:
        # A quote the lexer cannot match opens a string that runs to the end of the input.
        rest = source[e.pos_in_stream :]
        return "open" if rest.startswith('"') and "\n" not in rest else "error"
    except Exception:
        return "error"
    return "ok"
