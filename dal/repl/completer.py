"""Completion for the REPL: the names in scope, builtins with their signatures, keywords, meta-commands."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from dal.repl.lexer import BUILTIN_NAMES, KEYWORDS
from dal.syntax.ast import PARAM_TYPES

_IDENT_AT_END = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_PARAM_TYPE_AT = re.compile(r"(?:^|[\s;])param\s+[A-Za-z_][A-Za-z0-9_]*\s*:\s*$")


def builtins_table() -> dict[str, Any] | None:
    """The interpreter's builtin table (name -> Builtin with .signature and .doc), if importable."""
    for module in ("dal.eval.builtins", "dal.builtins"):
        try:
            return importlib.import_module(module).BUILTINS
        except (ImportError, AttributeError):
            continue
    return None


@lru_cache(maxsize=1)
def builtin_signatures() -> dict[str, tuple[str, str]]:
    """name -> (signature, first line of its doc), from the interpreter's table when it is there."""
    table_of = builtins_table()
    if table_of is None:  # the lexer's list keeps completion useful without the interpreter
        return {name: (f"{name}(...)", "") for name in BUILTIN_NAMES}
    table: dict[str, tuple[str, str]] = {}
    for name, b in table_of.items():
        doc = (getattr(b, "doc", "") or "").strip()
        table[name] = (getattr(b, "signature", "") or f"{name}(...)", doc.splitlines()[0] if doc else "")
    return table


def inside_string_or_comment(text: str) -> bool:
    """Whether the end of `text` is inside a string or a comment (both end with their line)."""
    line = text.rsplit("\n", 1)[-1]
    in_string = False
    i = 0
    while i < len(line):
        ch = line[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "#":
            return True
        i += 1
    return in_string


class DalCompleter(Completer):
    """Completes DAL code, and `:commands` at the start of an input."""

    def __init__(self, names: Callable[[], Iterable[str]], meta_commands: dict[str, str],
                 fields: Callable[[str], Iterable[str]] | None = None) -> None:
        self._names = names
        self._meta = meta_commands
        self._fields = fields  # name -> the keys of the map it holds (Tab after `state.`)
        self._paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if text.lstrip().startswith(":") and "\n" not in text:
            yield from self._complete_meta(text.lstrip(), complete_event)
            return
        if inside_string_or_comment(text):
            return
        m = _IDENT_AT_END.search(text)
        prefix = m.group() if m else ""
        before = text[: len(text) - len(prefix)]
        if before.endswith("."):
            yield from self._complete_field(before[:-1], prefix)
            return
        if before[-1:].isdigit():
            return  # a number
        if _PARAM_TYPE_AT.search(before):  # `param name: ` takes one of the argument types
            for kind in PARAM_TYPES:
                if kind.startswith(prefix) and (complete_event.completion_requested or kind != prefix):
                    yield Completion(kind, -len(prefix), display_meta="argument type")
            return
        if not prefix and not complete_event.completion_requested:
            return
        yield from self._complete_word(prefix, complete_event.completion_requested)

    def _complete_field(self, before: str, prefix: str) -> Iterator[Completion]:
        """After `name.`: the keys of the map `name` holds now (a field of a field is not looked into)."""
        owner = _IDENT_AT_END.search(before)
        if self._fields is None or owner is None or before[: owner.start()].endswith("."):
            return
        try:
            keys = list(self._fields(owner.group()))
        except Exception:  # completion must never break the prompt
            return
        for key in keys:
            if key.startswith(prefix) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                yield Completion(key, -len(prefix), display_meta="field")

    def _complete_word(self, prefix: str, requested: bool) -> Iterator[Completion]:
        def fits(name: str) -> bool:
            # While typing, offering the word already typed is only noise.
            return name.startswith(prefix) and (requested or name != prefix)

        try:
            defined = sorted(set(self._names()))
        except Exception:  # completion must never break the prompt
            defined = []
        seen: set[str] = set()
        for name in defined:
            if fits(name) and name not in KEYWORDS:
                seen.add(name)
                yield Completion(name, -len(prefix), display_meta="defined")
        for name, (signature, _doc) in sorted(builtin_signatures().items()):
            if fits(name) and name not in seen:
                yield Completion(name, -len(prefix), display_meta=signature)
        for name in KEYWORDS:
            if fits(name):
                yield Completion(name, -len(prefix), display_meta="keyword")

    def _complete_meta(self, text: str, complete_event: CompleteEvent) -> Iterator[Completion]:
        command, sep, arg = text.partition(" ")
        if not sep:
            for name, summary in self._meta.items():
                if name.startswith(command):
                    yield Completion(name, -len(command), display_meta=summary)
        elif command == ":load":
            yield from self._paths.get_completions(Document(arg.lstrip()), complete_event)
        elif command == ":help":
            word = arg.lstrip()
            for name in [*sorted(builtin_signatures()), *KEYWORDS]:
                if name.startswith(word):
                    yield Completion(name, -len(word))
