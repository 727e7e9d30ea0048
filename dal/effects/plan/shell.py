"""Parse a shell command string into DAL's own command plan, or deny it.

tree-sitter-bash does the tokenising; this module accepts only an allowlist of what it produces
(simple commands of quoted or plain words, `&&`, `||`, `;`, `|`, and a few redirections) and turns
that into frozen plan objects. The executor runs the plan, never the string, so what was checked is
what runs. Everything else raises `ShellDenied` naming the construct.
"""

from __future__ import annotations

import functools
import re
import threading

import attrs
import tree_sitter

__all__ = ["CommandList", "Pipeline", "Redirect", "ShellDenied", "SimpleCommand", "parse_command"]


class ShellDenied(Exception):
    """The command uses syntax outside the allowlist; the message names the construct."""


@attrs.frozen
class Redirect:
    """One redirection. `fd` is 0, 1 or 2, or -1 for `&>`/`&>>` (stdout and stderr together).

    `op` is `<`, `>`, `>>` (a file `target`) or `>&` (duplicate `dup_fd` onto `fd`).
    """

    fd: int
    op: str
    target: str | None = None
    dup_fd: int | None = None


@attrs.frozen
class SimpleCommand:
    argv: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()


@attrs.frozen
class Pipeline:
    commands: tuple[SimpleCommand, ...]


@attrs.frozen
class CommandList:
    """Pipelines joined by `ops[i]` (one of `&&`, `||`, `;`) between `items[i]` and `items[i+1]`.

    Bash gives `&&` and `||` equal precedence, left to right, so a flat list runs exactly like bash.
    """

    items: tuple[Pipeline, ...]
    ops: tuple[str, ...] = ()

    def simple_commands(self) -> tuple[SimpleCommand, ...]:
        return tuple(c for p in self.items for c in p.commands)




def _bash_language() -> object:
    """tree-sitter-bash's grammar, from its compiled binding: the package's own __init__ imports
    importlib.resources (and through it tempfile, random, ...) for highlight queries DAL never reads."""
    from importlib.machinery import PathFinder
    from importlib.util import find_spec, module_from_spec

    package = find_spec("tree_sitter_bash")
    spec = PathFinder.find_spec("tree_sitter_bash._binding", package.submodule_search_locations) if package and \
        package.submodule_search_locations else None
    if spec is None or spec.loader is None:  # laid out otherwise: the usual import
        import tree_sitter_bash

        return tree_sitter_bash.language()
    binding = module_from_spec(spec)
    spec.loader.exec_module(binding)
    return binding.language()


_PARSER = tree_sitter.Parser(tree_sitter.Language(_bash_language()))

# tree-sitter-bash 0.25's scanner crashes the whole process (SIGSEGV) on some characters outside ASCII
# (`{` followed by U+B6220 does, one parse in three): a script must never be able to kill DAL, which would
# leave its run without a receipt. The parser therefore sees a shadow of the command in which every byte
# outside ASCII is `a`. That keeps every byte offset, and it is what bash sees anyway: to bash (and to
# DAL's plan) a character outside ASCII is a plain word character, never an operator, a quote or a blank.
# The text of every token is taken from the real command by those offsets (_text).
_NON_ASCII = re.compile(rb"[\x80-\xff]")
_source = threading.local()


def _shadow(src: bytes) -> bytes:
    return _NON_ASCII.sub(b"a", src) if not src.isascii() else src


def _text(node: tree_sitter.Node) -> bytes:
    """The real bytes of `node` (the tree was parsed from the ASCII shadow of `_source.src`)."""
    return _source.src[node.start_byte : node.end_byte]

# Names a user recognises, for constructs we refuse.
_CONSTRUCTS = {
    "command_substitution": "command substitution $(...)", "process_substitution": "process substitution <(...)",
    "simple_expansion": "variable expansion $VAR", "expansion": "parameter expansion ${...}",
    "arithmetic_expansion": "arithmetic expansion $((...))", "ansi_c_string": "ANSI-C quoting $'...'",
    "translated_string": 'locale quoting $"..."', "heredoc_redirect": "heredoc <<",
    "herestring_redirect": "here-string <<<", "subshell": "subshell (...)",
    "compound_statement": "command group { ...; }", "function_definition": "function definition",
    "for_statement": "for loop", "c_style_for_statement": "for loop", "while_statement": "while/until loop",
    "if_statement": "if statement", "case_statement": "case statement",
    "variable_assignment": "variable assignment or environment prefix", "variable_assignments": "variable assignment",
    "declaration_command": "declaration (export/local/declare)", "unset_command": "unset",
    "negated_command": "negation ! before a command",
    "comment": "comment #",
    "brace_expression": "brace expansion {a,b}", "arithmetic_command": "arithmetic command ((...))",
    "ERROR": "syntax error", "extglob_pattern": "extended glob",
}

_WORDLIKE = {"word", "raw_string", "string", "concatenation", "number"}
# Unquoted characters that mean an expansion or an operator to bash; a `word` node carrying one
# means tree-sitter and bash might disagree, so we refuse rather than guess.
_UNQUOTED_BAD = {
    "$": "variable expansion $", "`": "command substitution with backticks", "*": "glob *", "?": "glob ?",
    "[": "glob [...]", "]": "glob [...]", "{": "brace expansion {...}", "}": "brace expansion {...}",
    "(": "parenthesis", ")": "parenthesis", "<": "redirection", ">": "redirection", "&": "& operator",
    "|": "| operator", ";": "; operator", "\n": "newline",
}


def describe_error(node: tree_sitter.Node) -> str:
    if node.type == "command_substitution" and _text(node).startswith(b"`"):
        return "command substitution with backticks"
    if node.type == "test_command" and _text(node).startswith(b"[["):
        return "[[ ... ]] test"
    name = _CONSTRUCTS.get(node.type)
    if name:
        return name
    if not node.is_named:
        return f"operator {node.type!r}"
    return f"unsupported shell construct {node.type!r}"


def _deny(node: tree_sitter.Node) -> ShellDenied:
    return ShellDenied(describe_error(node))


# A word that bash treats like an assignment (`NAME=value`, also as a command's argument outside posix
# mode): bash expands an unquoted `~` right after its first `=` and after each `:`.
_ASSIGNMENT_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _tilde_expands(before: str) -> bool:
    """Whether bash would expand an unquoted `~` that follows `before`, the text of its word so far.

    Bash expands `~` only at the start of a word and, in assignment-like words, after `=` or `:`
    (`rm notes.md~` and `echo a~b` are literal). Conservative: after any `=` or `:` of such a word.
    """
    if not before:
        return True
    return before[-1] in "=:" and _ASSIGNMENT_LIKE.match(before) is not None


def _decode_unquoted(raw: str, before: str = "") -> str:
    """Decode an unquoted word fragment; `before` is the text of the same word ahead of it."""
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "~" and _tilde_expands(before + "".join(out)):
            raise ShellDenied("tilde expansion ~")
        if ch == "\\":
            if i + 1 >= len(raw):
                raise ShellDenied("trailing backslash")
            nxt = raw[i + 1]
            if nxt == "\n":
                raise ShellDenied("line continuation")
            out.append(nxt)
            i += 2
            continue
        bad = _UNQUOTED_BAD.get(ch)
        if bad:
            raise ShellDenied(bad)
        out.append(ch)
        i += 1
    return "".join(out)


def _decode_double(raw: str) -> str:
    # Inside "...", backslash escapes only $ ` " \ and newline; everything else is literal.
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw) and raw[i + 1] in '$`"\\\n':
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        if ch == "$":
            raise ShellDenied("variable expansion $ inside double quotes")
        if ch == "`":
            raise ShellDenied("command substitution with backticks")
        out.append(ch)
        i += 1
    return "".join(out)


def _word(node: tree_sitter.Node, before: str = "") -> str:
    """The text bash makes of a word node; `before` is what precedes it in the same word (glued parts)."""
    t = node.type
    text = _text(node).decode("utf-8", errors="surrogateescape")
    if t in ("word", "number"):
        return _decode_unquoted(text, before)
    if t == "raw_string":
        return text[1:-1]
    if t == "string":
        for child in node.children:
            if child.type != "string_content" and not (child.type == '"' and not child.is_named):
                raise _deny(child)
        # Decode the whole body: tree-sitter leaves newlines inside quotes out of string_content.
        return _decode_double(text[1:-1])
    if t == "concatenation":
        out = before
        for c in node.children:
            out += _word(c, out)
        return out[len(before):]
    raise _deny(node)


def _redirect(node: tree_sitter.Node) -> Redirect:
    if node.type != "file_redirect":
        raise _deny(node)
    fd: int | None = None
    ops: list[str] = []
    dests: list[tree_sitter.Node] = []
    for child in node.children:
        if child.type == "file_descriptor":
            fd = int(_text(child))
        elif not child.is_named:
            ops.append(child.type)
        else:
            dests.append(child)
    if len(ops) != 1 or len(dests) != 1:
        raise ShellDenied("redirection that cannot be analysed" if ops and dests else "incomplete redirection")
    op, dest = ops[0], dests[0]
    if op == ">&" and dest.type != "number":
        raise ShellDenied("redirection >&FILE (use &> FILE)")
    if op == ">&":
        target_fd = _text(dest).decode()
        if dest.type != "number" or target_fd not in ("1", "2"):
            raise ShellDenied(f"redirection >&{target_fd}")
        src = 1 if fd is None else fd
        if src not in (1, 2):
            raise ShellDenied(f"redirection of file descriptor {src}")
        return Redirect(fd=src, op=">&", dup_fd=int(target_fd))
    if op in ("&>", "&>>"):
        if fd is not None:
            raise ShellDenied(f"redirection {fd}{op}")
        return Redirect(fd=-1, op=">" if op == "&>" else ">>", target=_word(dest))
    if op == "<":
        if fd not in (None, 0):
            raise ShellDenied(f"redirection {fd}<")
        return Redirect(fd=0, op="<", target=_word(dest))
    if op in (">", ">>"):
        src = 1 if fd is None else fd
        if src not in (1, 2):
            raise ShellDenied(f"redirection of file descriptor {src}")
        return Redirect(fd=src, op=op, target=_word(dest))
    raise ShellDenied(f"redirection {op}")


def _program_name(node: tree_sitter.Node) -> str:
    # Only a plain unquoted, unescaped word may name a program: `\rm`, `'r'm` and `"rm"` are the
    # classic ways to dodge alias- and name-based filters.
    if node.child_count != 1 or node.children[0].type != "word":
        raise ShellDenied("quoted or computed program name")
    text = _text(node.children[0]).decode("utf-8", errors="surrogateescape")
    if "\\" in text:
        raise ShellDenied("backslash in program name")
    return _decode_unquoted(text)


def _simple(node: tree_sitter.Node) -> SimpleCommand:
    argv: list[str] = []
    redirects: list[Redirect] = []
    prev_end = -1  # end of the previous word: tokens glued to it are the same word to bash
    for child in node.children:
        glued = child.start_byte == prev_end
        if child.type == "command_name":
            argv.append(_program_name(child))
        elif child.type in _WORDLIKE:
            if not argv:
                raise _deny(child)
            if glued:
                if len(argv) == 1:
                    raise ShellDenied("quoted or computed program name")
                argv[-1] += _word(child, argv[-1])  # tree-sitter split one bash word, e.g. ''\`
            else:
                argv.append(_word(child))
        elif child.type == "file_redirect":
            if glued:
                raise ShellDenied("redirection glued to a word")
            redirects.append(_redirect(child))
        else:
            raise _deny(child)
        prev_end = child.end_byte if child.type in _WORDLIKE or child.type == "command_name" else -1
    if not argv:
        raise ShellDenied("command without a program")
    return SimpleCommand(tuple(argv), tuple(redirects))


def _test_tokens(node: tree_sitter.Node, out: list[tree_sitter.Node]) -> None:
    for child in node.children:
        if child.type in _WORDLIKE or child.type == "test_operator":
            out.append(child)
        elif child.type in ("unary_expression", "binary_expression"):
            _test_tokens(child, out)
        elif not child.is_named and child.type in ("!", "=", "==", "!="):
            out.append(child)
        else:
            raise _deny(child)


def _test_command(node: tree_sitter.Node) -> SimpleCommand:
    """`[ ... ]` gets its own node in tree-sitter; flatten it back into the argv `[` really sees."""
    if _text(node).startswith(b"[["):
        raise _deny(node)
    kids = node.children
    if len(kids) < 2 or kids[0].type != "[" or kids[-1].type != "]":
        raise _deny(node)
    tokens: list[tree_sitter.Node] = []
    for child in kids[1:-1]:
        if child.type in _WORDLIKE or child.type == "test_operator":
            tokens.append(child)
        elif child.type in ("unary_expression", "binary_expression"):
            _test_tokens(child, tokens)
        else:
            raise _deny(child)
    every = [kids[0], *tokens, kids[-1]]
    for a, b in zip(every, every[1:], strict=False):
        if a.end_byte >= b.start_byte:  # glued tokens: bash would read one word, tree-sitter two
            raise ShellDenied("test expression that cannot be analysed")
    argv = ["["]
    for tok in tokens:
        if tok.type == "test_operator" or not tok.is_named:
            argv.append(_decode_unquoted(_text(tok).decode("utf-8", errors="surrogateescape")))
        else:
            argv.append(_word(tok))
    argv.append("]")
    return SimpleCommand(tuple(argv))


def _flatten(node: tree_sitter.Node, out: list[SimpleCommand | str]) -> None:
    """Append `node` to `out` as a flat, in-order stream of simple commands and operators.

    tree-sitter-bash nests lists and pipelines with the wrong precedence (`a && b | c` comes out as
    `(a && b) | c`) and hangs `a && b > f` on the whole list. Bash's grammar for what we accept is
    flat -- pipelines of simple commands joined by `&&`/`||`/`;` -- so the token order alone fixes the
    meaning; `_assemble` rebuilds the plan from it with bash's precedence.
    """
    t = node.type
    if t in ("list", "pipeline"):
        for child in node.children:
            if child.is_named:
                _flatten(child, out)
            elif child.type in ("&&", "||", "|"):
                out.append(child.type)
            else:
                raise ShellDenied(f"operator {child.type}")
    elif t == "redirected_statement":
        body, *rest = node.children
        if body.type == "file_redirect" or not body.is_named:
            raise ShellDenied("redirection before the command")
        _flatten(body, out)
        last = out[-1] if out else None
        if not isinstance(last, SimpleCommand):
            raise _deny(node)
        # Redirections written after a command belong to the simple command just before them.
        out[-1] = SimpleCommand(last.argv, last.redirects + tuple(_redirect(c) for c in rest))
    elif t == "command":
        out.append(_simple(node))
    elif t == "test_command":
        out.append(_test_command(node))
    else:
        raise _deny(node)


def _assemble(tokens: list[SimpleCommand | str]) -> CommandList:
    """Rebuild `cmd (| cmd)* ((&& | || | ;) cmd (| cmd)*)*` from the flat token stream."""
    if tokens and tokens[-1] == ";":
        tokens = tokens[:-1]  # a trailing `;` ends the list
    items: list[Pipeline] = []
    ops: list[str] = []
    current: list[SimpleCommand] = []
    expect_command = True
    for tok in tokens:
        if isinstance(tok, SimpleCommand):
            if not expect_command:
                raise ShellDenied("newline separator")
            current.append(tok)
            expect_command = False
            continue
        if expect_command:
            raise ShellDenied(f"empty command before {tok}")
        expect_command = True
        if tok != "|":
            items.append(Pipeline(tuple(current)))
            ops.append(tok)
            current = []
    if expect_command:
        raise ShellDenied("empty command" if not tokens else f"command missing after {tokens[-1]}")
    items.append(Pipeline(tuple(current)))
    return CommandList(tuple(items), tuple(ops))


_NEWLINE_OUTSIDE_QUOTES = re.compile(rb"\n")


def _check_newlines(root: tree_sitter.Node, src: bytes) -> None:
    """Deny a newline outside quotes. Linear in the command: the quoted spans, sorted, are walked once
    alongside the newlines (a command of many quoted newlines must not make the check quadratic)."""
    if b"\n" not in src:
        return
    quoted: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in ("raw_string", "string"):
            quoted.append((n.start_byte, n.end_byte))
        else:
            stack.extend(n.children)
    quoted.sort()
    k = 0
    for m in _NEWLINE_OUTSIDE_QUOTES.finditer(src):
        pos = m.start()
        while k < len(quoted) and quoted[k][1] <= pos:
            k += 1  # spans ending before this newline cannot hold it, nor any later one
        if not (k < len(quoted) and quoted[k][0] <= pos):
            cont = pos > 0 and src[pos - 1 : pos] == b"\\"
            raise ShellDenied("line continuation" if cont else "newline separator")


@functools.lru_cache(maxsize=4096)
def _parse_cached(command: str) -> CommandList | str:
    try:
        return _parse(command)
    except ShellDenied as e:
        return str(e)


def _parse(command: str) -> CommandList:
    if "\x00" in command:
        raise ShellDenied("NUL byte")
    src = command.encode("utf-8", errors="surrogateescape")
    _source.src = src
    tree = _PARSER.parse(_shadow(src))
    root = tree.root_node
    if root.has_error:
        bad = _first_error(root)
        raise ShellDenied("syntax error" if bad is None else f"syntax error near {bad!r}")
    tokens: list[SimpleCommand | str] = []
    for child in root.children:
        if child.type == "comment":
            raise _deny(child)
        if child.is_named:
            _flatten(child, tokens)
        elif child.type == ";":
            tokens.append(";")
        else:
            raise ShellDenied(f"{child.type} separator" if child.type == "&" else describe_error(child))
    plan = _assemble(tokens)
    _check_newlines(root, src)
    _check_coverage(root, src)
    return plan


_ATOMIC = {"word", "number", "raw_string", "string", "file_descriptor", "test_operator", "variable_name"}


def _check_coverage(root: tree_sitter.Node, src: bytes) -> None:
    """Every byte must belong to a token or be a blank between tokens.

    tree-sitter silently skips some text (an escaped blank starting a word, for one); bash does not.
    A gap holding anything but spaces and tabs means the parse is not what bash sees.
    """
    pos = 0
    stack = [root]
    while stack:
        n = stack.pop()
        if n.child_count and n.type not in _ATOMIC:
            stack.extend(reversed(n.children))
            continue
        gap = src[pos : n.start_byte]
        if gap.strip(b" \t"):
            raise ShellDenied(f"text the parser skipped: {gap.decode('utf-8', errors='replace').strip()!r}")
        pos = max(pos, n.end_byte)
    if src[pos:].strip(b" \t"):
        raise ShellDenied("trailing text the parser skipped")


def _first_error(root: tree_sitter.Node) -> str | None:
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            return _text(n).decode("utf-8", errors="replace")[:20]
        stack.extend(reversed(n.children))
    return None


def parse_command(command: str) -> CommandList:
    """Parse `command` into a plan; raise `ShellDenied` naming the first construct outside the allowlist."""
    result = _parse_cached(command)
    if isinstance(result, str):
        raise ShellDenied(result)
    return result
