"""A Pygments lexer for DAL.

Registered as the `dal` entry point under `pygments.lexers`, so `pygmentize -l dal`, Sphinx and
MkDocs highlight DAL, and the REPL uses the same class through `PygmentsLexer`.

The lexer follows the terminals of `grammar/dal.lark` but is deliberately forgiving: it highlights
half-typed input (an unterminated string, a stray character) instead of failing, and it never raises.
It imports nothing from the interpreter so that loading it stays cheap for documentation tools.
"""

from __future__ import annotations

from typing import ClassVar

from pygments.lexer import RegexLexer, bygroups, default, words
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Whitespace,
)

__all__ = ["BUILTIN_NAMES", "KEYWORDS", "DalLexer"]

# Kept in step with dal.syntax.keywords and dal.builtins by tests/repl/test_lexer.py.
KEYWORDS: tuple[str, ...] = (
    "let", "fn", "if", "else", "while", "for", "in", "break", "continue", "return",
    "and", "or", "not", "true", "false", "null", "param",
)  # fmt: skip

BUILTIN_NAMES: tuple[str, ...] = (
    "run", "record", "append", "contains", "len", "keys", "values", "str", "int", "float",
    "split", "join", "trim", "replace", "startswith", "endswith", "range", "print", "now",
    "env", "operation", "finish", "fail", "json", "parse_json", "type", "lower", "upper", "lines",
    "find", "format", "abs", "round", "sum", "min", "max", "sort", "items", "get", "sleep", "write_file",
)  # fmt: skip

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# `\b` is wrong here: it treats non-ASCII letters as word characters, while DAL names are ASCII.
_END = r"(?![A-Za-z0-9_])"


class DalLexer(RegexLexer):
    """Lexer for DAL, a small language for agent tool loops."""

    name = "DAL"
    aliases: ClassVar[list[str]] = ["dal"]
    filenames: ClassVar[list[str]] = ["*.dal"]
    mimetypes: ClassVar[list[str]] = ["text/x-dal"]
    url = "https://github.com/dal-lang/dal"
    version_added = ""

    tokens: ClassVar[dict] = {
        "root": [
            (r"[ \t\f\r\n]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            # `fn name(` declares a function; an anonymous `fn(` is just the keyword.
            (r"(fn)([ \t\f\r\n]+)(" + _NAME + r")", bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (words(("let", "fn", "param"), suffix=_END), Keyword.Declaration),
            (words(("true", "false", "null"), suffix=_END), Keyword.Constant),
            (words(("and", "or", "not"), suffix=_END), Operator.Word),
            (
                words(("if", "else", "while", "for", "in", "break", "continue", "return"), suffix=_END),
                Keyword,
            ),
            (words(BUILTIN_NAMES, suffix=_END), Name.Builtin),
            (r"(\.)([ \t\f\r\n]*)(" + _NAME + r")", bygroups(Punctuation, Whitespace, Name.Attribute)),
            (_NAME, Name),
            (r"[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?", Number.Float),
            (r"[0-9]+[eE][+-]?[0-9]+", Number.Float),
            (r"[0-9]+", Number.Integer),
            (r'"', String.Double, "string"),
            (r"==|!=|<=|>=|<|>|=", Operator),
            (r"[-+*/%]", Operator),
            (r"[{}()\[\],:;.]", Punctuation),
            (r".", Error),
        ],
        "string": [
            (r'"', String.Double, "#pop"),
            (r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})', String.Escape),
            (r"\\", Error),  # an escape JSON does not know
            (r'[^"\\\x00-\x08\x0a-\x1f]+', String.Double),  # a raw tab is allowed, no other control character
            # DAL strings cannot hold a raw newline: the string ends here, unterminated.
            (r"\n", Whitespace, "#pop"),
            (r"[\x00-\x1f]", Error),
            default("#pop"),
        ],
    }

    @staticmethod
    def analyse_text(text: str) -> float:
        """Guess DAL from its most distinctive shapes (used by `pygmentize -g`)."""
        score = 0.0
        if "fn " in text and "let " in text:
            score += 0.2
        if "run(" in text or "record(" in text:
            score += 0.1
        return score
