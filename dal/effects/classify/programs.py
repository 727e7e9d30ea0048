"""Argument models of known programs: which arguments are paths read or written, which flags are unsafe.

Options are parsed the way GNU getopt does (clusters, `-oVALUE`, `--long=VALUE`, unique prefixes of long
options, `--` ends options, options after operands). An option the model does not know is denied rather
than guessed at: an unknown option might take a path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from dal.effects.classify.gitmodel import GitUse

__all__ = ["ArgUse", "ProgramModel", "MODELS", "DEFAULT_TOOLSET", "INTERPRETERS", "analyze"]

# Kinds of an option value: a plain value, a path read, a path written, or a flag (no value).
FLAG, VALUE, READ, WRITE, OPTIONAL = "flag", "value", "read", "write", "optional"


@attrs.frozen
class ArgUse:
    """What one simple command does with its arguments, as far as its model can tell."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    # Written without following a final symlink (rm, mv's source): the link itself is what changes.
    writes_nofollow: tuple[str, ...] = ()
    unsafe: str | None = None
    idempotent: bool = True
    # Writes descend into existing directories (cp -r): a symlink anywhere below a written directory
    # would be written through, so the checker walks those trees too.
    writes_into_trees: bool = False
    # Directories whose whole tree the program reads without following the symlinks inside it (grep -r,
    # diff -r --no-dereference): the checker walks them for files with other hard links.
    read_trees: tuple[str, ...] = ()
    # Base names of directories such a walk skips, as the program does (grep --exclude-dir NAME): exact
    # names only, never a script's pattern (`[^.]dal` reads differently in fnmatch and in glibc).
    tree_skips: tuple[str, ...] = ()
    # Names DAL itself leaves out of such a walk (a run store's `.dal`), and the option that tells the
    # program so (`--exclude-dir`): added to the rebuilt argv, so the check need not refuse the walk.
    leave_out: tuple[str, ...] = ()
    leave_out_option: str | None = None
    # Directories each of whose entries the program opens, following symlinks (diff DIR1 DIR2): each
    # entry is checked as a path read.
    read_entries: tuple[str, ...] = ()
    # (source, destination, how): the source -- a tree, or a symlink itself -- ends up at destination,
    # copied ("copy": its files are read) or renamed ("move"). The checker checks every name it will
    # have there, and where every symlink in it will point from its new place.
    places: tuple[tuple[str, str, str], ...] = ()
    # (link, target): symlinks the program makes, with the text they will hold (cp -s).
    links: tuple[tuple[str, str], ...] = ()
    git: GitUse | None = None  # git: what the checker must look at in the repository
    # Makes symlinks or hard links, or moves names, while it runs (cp -l/-s/-P/-r, mv): another stage of
    # the same pipeline, checked before this one started, could then write through what it made.
    changes_names: bool = False
    # The argv the executor runs in place of the script's spelling (rebuild): every option by its full
    # name with its value attached, `--` before the operands, so that the program reads each word the
    # way the check did. None: run as given (no options parsed: echo, test, find's expression).
    argv: tuple[str, ...] | None = None
    # (directory, whole tree or its entries only) where the program stats the target of each symlink it
    # finds and shows something of it (find -xtype, ls -lF): a link leading out must not tell the script
    # what lies outside.
    probes_links: tuple[tuple[str, bool], ...] = ()


class Unsafe(Exception):
    pass


@attrs.frozen
class Parsed:
    options: tuple[tuple[str, str | None], ...]  # (canonical name, value)
    operands: tuple[str, ...]
    literal: int = 0  # operands from this index on came after `--` (never taken for obsolete options)

    def has(self, *names: str) -> bool:
        return any(n in names for n, _ in self.options)

    def values(self, *names: str) -> list[str]:
        return [v for n, v in self.options if n in names and v is not None]


@attrs.frozen
class ProgramModel:
    name: str
    effect_class: str  # "read" or "local"
    short: Mapping[str, str] = attrs.field(factory=dict)  # char -> kind
    long: Mapping[str, str] = attrs.field(factory=dict)  # name -> kind
    unsafe: Mapping[str, str] = attrs.field(factory=dict)  # "-L" / "--dereference" -> why
    operands: str = "read"  # read | write | none
    raw: bool = False  # echo/printf/true: no option parsing, every argument is a string
    numeric_short: bool = False  # head -5, grep -3
    custom: Callable[[Parsed, Callable[[str], bool]], ArgUse] | None = None
    idempotent: Callable[[Parsed], bool] | bool = True
    # Obsolete forms the program still accepts (head -5c, tail +5, sort +1 -2), taken out or refused
    # before the GNU-style parse: (the arguments without them, the words taken out).
    obsolete: Callable[[tuple[str, ...]], tuple[tuple[str, ...], tuple[str, ...]]] | None = None


def _short(flags: str = "", **kinds: str) -> dict[str, str]:
    d = dict.fromkeys(flags, FLAG)
    d.update(kinds)
    return d


def _long(flags: str = "", **kinds: str) -> dict[str, str]:
    d = dict.fromkeys(flags.split(), FLAG)
    d.update({k.replace("_", "-"): v for k, v in kinds.items()})
    return d


def _parse(model: ProgramModel, args: tuple[str, ...]) -> Parsed:
    options: list[tuple[str, str | None]] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            literal = len(operands)
            operands.extend(args[i:])
            return Parsed(tuple(options), tuple(operands), literal)
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            full = _match_long(model, name)
            kind = model.long[full]
            if kind == FLAG and eq:
                raise Unsafe(f"option --{full} takes no value")
            if kind in (VALUE, READ, WRITE) and not eq:
                if i >= len(args):
                    raise Unsafe(f"option --{full} needs a value")
                value = args[i]
                i += 1
            options.append((f"--{full}", value if (eq or kind in (VALUE, READ, WRITE)) else None))
            _kinded(model, f"--{full}", kind, options[-1][1])
            continue
        if arg.startswith("-") and arg != "-":
            if model.numeric_short and arg[1:].isdigit():
                options.append(("-NUM", arg[1:]))
                continue
            j = 1
            while j < len(arg):
                ch = arg[j]
                kind = model.short.get(ch)
                if kind is None:
                    raise Unsafe(f"unknown option -{ch}")
                if kind == FLAG and ch.isdigit():  # uniq -12: one number (uniq.c reads a word's digits together)
                    k = j
                    while k < len(arg) and arg[k].isdigit():
                        k += 1
                    options.append((f"-{arg[j:k]}", None))
                    j = k
                    continue
                if kind == FLAG:
                    options.append((f"-{ch}", None))
                    _kinded(model, f"-{ch}", kind, None)
                    j += 1
                    continue
                value = arg[j + 1 :]
                if kind == OPTIONAL:  # -Iseconds: a value only when attached
                    options.append((f"-{ch}", value or None))
                    _kinded(model, f"-{ch}", kind, value)
                    break
                if not value:
                    if i >= len(args):
                        raise Unsafe(f"option -{ch} needs a value")
                    value = args[i]
                    i += 1
                options.append((f"-{ch}", value))
                _kinded(model, f"-{ch}", kind, value)
                break
            continue
        operands.append(arg)
    return Parsed(tuple(options), tuple(operands), len(operands))


def _kinded(model: ProgramModel, name: str, kind: str, value: str | None) -> None:
    why = model.unsafe.get(name)
    if why:
        raise Unsafe(f"{model.name} {name}: {why}")


def _match_long(model: ProgramModel, name: str) -> str:
    if name in model.long:
        return name
    hits = [n for n in model.long if n.startswith(name)] if name else []
    if len(hits) == 1:  # GNU accepts any unique prefix: --target means --target-directory
        return hits[0]
    if not hits:
        raise Unsafe(f"unknown option --{name}")
    raise Unsafe(f"ambiguous option --{name}")


def _path_values(model: ProgramModel, parsed: Parsed, kind: str) -> list[str]:
    out = []
    for name, value in parsed.options:
        if value is None:
            continue
        k = model.long.get(name[2:]) if name.startswith("--") else model.short.get(name[1:])
        if k == kind and (value != "-" or kind != READ):  # `sort -o -`, `-T -` name a file called `-`
            out.append(value)
    return out


def analyze(model: ProgramModel, argv: tuple[str, ...], is_dir: Callable[[str], bool]) -> ArgUse:
    """Return the paths `argv` reads and writes under `model`; `unsafe` says why it must be denied."""
    if model.raw:
        return ArgUse()
    try:
        args, taken = (argv[1:], ()) if model.obsolete is None else model.obsolete(argv[1:])
        parsed = _parse(model, args)
    except Unsafe as e:
        return ArgUse(unsafe=str(e))
    rebuilt = rebuild(model, argv[0], taken, parsed)
    reads = _path_values(model, parsed, READ)
    writes = _path_values(model, parsed, WRITE)
    idem = model.idempotent(parsed) if callable(model.idempotent) else model.idempotent
    if model.custom is not None:
        try:
            use = model.custom(parsed, is_dir)
        except Unsafe as e:
            return ArgUse(unsafe=str(e))
        return attrs.evolve(use, reads=tuple(reads) + use.reads, writes=tuple(writes) + use.writes,
                            idempotent=idem and use.idempotent, argv=rebuilt)  # fmt: skip
    # A `-` operand is standard input to the readers; to a writer it is a file named `-` (POSIX tee, mkdir,
    # rm), which may be a symlink leading anywhere, except to touch, which takes it for standard output.
    dash_is_stdio = model.operands == "read" or model.name == "touch"
    operands = [o for o in parsed.operands if o != "-" or not dash_is_stdio]
    if model.operands == "read":
        reads += operands
    elif model.operands == "write":
        writes += operands
    elif model.operands == "write_nofollow":
        return ArgUse(tuple(reads), tuple(writes), tuple(operands), idempotent=idem, argv=rebuilt)
    return ArgUse(tuple(reads), tuple(writes), idempotent=idem, argv=rebuilt)


def rebuild(model: ProgramModel, program: str, taken: tuple[str, ...], parsed: Parsed) -> tuple[str, ...]:
    """The argv that means to the program what `parsed` means to the check: each option by its full name
    (`--target-directory=D`, never the prefix `--t D`), a short option's value attached (`-oF`), every
    option before `--` and every operand after it, so that no word can be read as another option's value
    or as an option. `taken`: obsolete forms (head -5c, tail +5, sort +1 -2) the program reads only
    before its options, kept first; uniq's `+N` before `--` is an option (skip N characters)."""
    words = [program, *taken]
    operands = list(parsed.operands)
    if model.name == "uniq":
        plus = [i for i, o in enumerate(operands) if i < parsed.literal and _uniq_plus(o)]
        words += (operands[i] for i in plus)
        operands = [o for i, o in enumerate(operands) if i not in plus]
    for name, value in parsed.options:
        if value is None:
            words.append(name)
        elif name == "-NUM":
            words.append(f"-{value}")
        elif name.startswith("--"):
            words.append(f"{name}={value}")
        elif value == "" and model.short.get(name[1:]) != OPTIONAL:
            words += (name, "")  # `-d ''`: attached, `-d` would take the next word
        else:
            words.append(name + value)
    return (*words, "--", *operands)


# --- custom operand rules -------------------------------------------------------------------------

_TEST_UNARY_FILE = {
    "-b", "-c", "-d", "-e", "-f", "-g", "-G", "-h", "-k", "-L", "-N", "-O", "-p", "-r", "-s", "-S", "-u", "-w", "-x",
}
_TEST_BINARY_FILE = {"-ef", "-nt", "-ot"}


def _test_args(argv: tuple[str, ...]) -> ArgUse:
    args = list(argv[1:])
    if argv[0] == "[" and args and args[-1] == "]":
        args = args[:-1]
    reads: list[str] = []
    for i, a in enumerate(args):
        if a in _TEST_UNARY_FILE and i + 1 < len(args):
            reads.append(args[i + 1])
        elif a in _TEST_BINARY_FILE and 0 < i < len(args) - 1:
            reads += [args[i - 1], args[i + 1]]
    return ArgUse(reads=tuple(reads))


def _grep(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    operands = list(p.operands)
    if not p.has("-e", "--regexp", "-f", "--file") and operands:
        operands = operands[1:]  # the pattern
    recursive = p.has("-r", "--recursive") or any(
        "recurse".startswith(v) and v for v in p.values("-d", "--directories")
    )
    if not operands and recursive:
        operands = ["."]
    files = tuple(o for o in operands if o != "-")
    if not recursive:
        return ArgUse(reads=files)
    # grep -r follows the symlinks named on its command line, none of those it finds below them.
    return ArgUse(reads=files, read_trees=tuple(o for o in files if is_dir(o)), tree_skips=literal_names(
        p.values("--exclude-dir")), leave_out=(".dal",), leave_out_option="--exclude-dir")


def literal_names(patterns: list[str]) -> tuple[str, ...]:
    """The patterns that are exact names, which every matcher reads alike (`[^.]dal`, `*`, `a\\b`, `a/` are not)."""
    return tuple(g for g in patterns if g and not any(c in g for c in "*?[]\\/"))


def _copy_targets(p: Parsed, is_dir: Callable[[str], bool], verb: str) -> tuple[list[str], list[str]]:
    """Return (sources, written paths) of cp/mv, computing `DIR/name` when the target is a directory."""
    target_dir = p.values("-t", "--target-directory")
    operands = list(p.operands)
    if any("/" in s for s in p.values("-S", "--suffix")):
        raise Unsafe(f"{verb} --suffix with a slash writes the backup elsewhere")
    if len(target_dir) > 1:
        raise Unsafe(f"{verb} with more than one target directory")
    if target_dir:
        dest, sources, into = target_dir[0], operands, True
    else:
        if len(operands) < 2:
            return operands, []
        dest, sources = operands[-1], operands[:-1]
        into = not p.has("-T", "--no-target-directory") and (len(sources) > 1 or is_dir(dest))
    if not into:
        return sources, [dest]
    written = []
    if p.has("--parents"):
        for s in sources:
            written.append(_parents_target(dest, s, verb))
        return sources, written
    for s in sources:
        name = os.path.basename(s.rstrip("/")) or s
        # GNU cp (cp.c, do_copy): a source whose last component is `..` is copied to the target directory
        # itself, not to DIR/..; one ending in `.` lands in DIR/. -- the same directory. Either way the
        # source's entries appear directly in DEST.
        written.append(dest if verb == "cp" and name in (".", "..") else os.path.join(dest, name))
    return sources, written


def _parents_target(dest: str, source: str, verb: str) -> str:
    """`cp --parents SRC DIR` writes DIR/SRC -- the whole source name, a leading `/` dropped (DIR/ABS/SRC) --
    and makes every directory on the way. A `..` in SRC would make cp create directories under one name
    and then write through `..` somewhere else, so it is refused."""
    parts = [c for c in source.split("/") if c not in ("", ".")]
    if ".." in parts:
        raise Unsafe(f"{verb} --parents {source}: a source with `..` in it writes outside the names the check sees")
    if not parts:
        raise Unsafe(f"{verb} --parents {source}: no file name to copy")
    return os.path.join(dest, *parts)


def _parents_dirs(p: Parsed, written: list[str]) -> tuple[str, ...]:
    """The directories `cp --parents` creates on the way to each written path (DIR/a, DIR/a/b, ...)."""
    if not p.has("--parents"):
        return ()
    dest = (p.values("-t", "--target-directory") or [p.operands[-1] if p.operands else ""])[0]
    out: list[str] = []
    for w in written:
        rel = os.path.relpath(w, dest) if dest else w
        parts = rel.split("/")[:-1]
        out += (os.path.join(dest, *parts[: k + 1]) for k in range(len(parts)))
    return tuple(dict.fromkeys(out))


def _backups(p: Parsed, written: list[str]) -> tuple[str, ...]:
    """The backups cp and mv make of each destination they replace (-b, --backup[=CONTROL], or -S, which
    implies -b): DEST + suffix ("~", -S/--suffix; the environment's SIMPLE_BACKUP_SUFFIX is scrubbed), or
    DEST.~N~ when numbered. `cp -b --suffix=.toml notes.txt dal` would rename an existing `dal` to
    `dal.toml`, so each is a path written."""
    controls = [v for n, v in p.options if n in ("-b", "--backup")]
    suffixes = p.values("-S", "--suffix")
    if not controls and not suffixes:
        return ()
    last = next((c for c in reversed(controls) if c is not None), None)
    if last is not None and len(last) >= 2 and ("none".startswith(last) or "off".startswith(last)):
        return ()  # --backup=none / off: no backups, whatever -S says
    suffix = suffixes[-1] if suffixes else "~"
    return tuple(x for w in written for x in (w + suffix, w + ".~1~"))


def _cp_copies_links(p: Parsed) -> bool:
    """Whether cp copies a symlink named on its command line as a symlink (-P, -d, -a, or -r without
    -H/-L); the last of -H, -L, -P wins, as in GNU cp."""
    mode = None
    for name, _ in p.options:
        if name in ("-P", "--no-dereference", "-d", "-a", "--archive"):
            mode = "P"
        elif name in ("-H", "-L", "--dereference"):
            mode = "H"
    if mode is None:
        return p.has("-r", "-R", "--recursive")
    return mode == "P"


def _cp_idempotent(p: Parsed) -> bool:
    """Whether running the same cp twice leaves what running it once does (a retry, or a resume after an
    unknown outcome, runs it again). Not so for a recursive copy (the second `cp -r src dst` copies into
    dst/src once dst exists), a copy that makes backups (each run renames the last copy away, numbered
    backups grow), or one that makes links (-l, -s: the second fails, the name exists)."""
    if p.has("-r", "-R", "-a", "--recursive", "--archive", "-l", "--link", "-s", "--symbolic-link"):
        return False
    return not _backups(p, ["x"])


def _cp(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    sources, written = _copy_targets(p, is_dir, "cp")
    recursive = p.has("-r", "-R", "-a", "--recursive", "--archive")
    pairs = list(zip(sources, written, strict=False)) if len(sources) == len(written) else []
    made = _parents_dirs(p, written)
    if p.has("-s", "--symbolic-link"):  # makes symlinks whose text is the source as written
        return ArgUse(reads=tuple(sources), writes=(*made, *written, *_backups(p, written)),
                      links=tuple((w, s) for s, w in pairs), changes_names=True,
                      places=tuple((s, w, "copy") for s, w in pairs if recursive and is_dir(s)))  # fmt: skip
    linked: tuple[str, ...] = ()
    if p.has("-l", "--link"):  # the new name is the same file: a source is then writable through it
        if recursive:
            raise Unsafe("cp -l with -r/-a hard-links every file of a tree, and each would be writable through "
                         "its new name: copy the tree, or link files one by one")
        linked = tuple(sources)
    how = "copy" if _cp_copies_links(p) else "copy-deref"
    places = tuple((s, w, how) for s, w in pairs if recursive or how == "copy")
    return ArgUse(reads=tuple(sources), writes=(*made, *written, *linked, *_backups(p, written)),
                  writes_into_trees=recursive, places=places,
                  changes_names=how == "copy" or p.has("-l", "--link"))  # fmt: skip


def _mv(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    sources, written = _copy_targets(p, is_dir, "mv")
    pairs = zip(sources, written, strict=False) if len(sources) == len(written) else ()
    return ArgUse(reads=tuple(sources), writes=(*written, *_backups(p, written)), writes_nofollow=tuple(sources),
                  places=tuple((s, w, "move") for s, w in pairs), changes_names=True)  # fmt: skip


_UINTMAX = 2**64 - 1


def _uniq_plus(word: str) -> bool:
    return re.fullmatch(r"\+[0-9]+", word) is not None and int(word[1:]) <= _UINTMAX


def _uniq(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    """uniq [INPUT [OUTPUT]]. GNU uniq still takes the obsolete POSIX `+N` (skip N characters) anywhere
    before `--` -- `uniq +0 A B` reads A and writes B -- and `-N` (skip N fields), a digit option."""
    ops = [o for i, o in enumerate(p.operands) if not (i < p.literal and _uniq_plus(o))]
    reads = tuple(o for o in ops[:1] if o != "-")
    writes = tuple(o for o in ops[1:2] if o != "-")
    return ArgUse(reads=reads + tuple(ops[2:]), writes=writes)


def _diff(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    """diff's operands, and the paths it derives from directory operands (GNU diffutils, "Comparing
    Directories"): `diff FILE DIR` compares FILE with DIR/FILE's last component; two directories are
    compared entry by entry (following symlinks unless --no-dereference), or as whole trees with -r;
    --from-file=F / --to-file=F compare F with each operand in the same way."""
    recursive = p.has("-r", "--recursive")
    if recursive and not p.has("--no-dereference"):
        raise Unsafe("diff -r follows symlinks out of the tree; add --no-dereference")
    operands = list(p.operands)
    from_file, to_file = p.values("--from-file"), p.values("--to-file")
    if from_file:
        pairs = [(from_file[-1], o) for o in operands]
    elif to_file:
        pairs = [(o, to_file[-1]) for o in operands]
    else:
        pairs = [(operands[0], operands[1])] if len(operands) == 2 else []
    reads = [o for o in operands if o != "-"]
    trees: list[str] = []
    entries: list[str] = []
    for a, b in pairs:
        a_dir, b_dir = a != "-" and is_dir(a), b != "-" and is_dir(b)
        if a_dir and b_dir:
            (trees if recursive else entries).extend((a, b))
        elif a_dir:
            reads.append(os.path.join(a, os.path.basename(b.rstrip("/")) or b))
        elif b_dir:
            reads.append(os.path.join(b, os.path.basename(a.rstrip("/")) or a))
    if not trees:
        return ArgUse(reads=tuple(reads), read_entries=tuple(entries))
    # diff -x NAME leaves out every file and folder of that base name, as the walk does with tree_skips.
    skips = literal_names([*p.values("-x", "--exclude")])
    return ArgUse(reads=tuple(reads), read_trees=tuple(trees), read_entries=tuple(entries), tree_skips=skips,
                  leave_out=(".dal",), leave_out_option="--exclude")


def _date(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    for o in p.operands:
        if not o.startswith("+"):  # `date MMDDhhmm` sets the clock (and DAL may run as root)
            raise Unsafe(f"date {o}: only +FORMAT operands; anything else sets the clock")
    return ArgUse()


def _du(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    return ArgUse(reads=tuple(o for o in p.operands) or (".",))


def _ls(p: Parsed, is_dir: Callable[[str], bool]) -> ArgUse:
    operands = tuple(o for o in p.operands) or (".",)
    if not _ls_probes(p):
        return ArgUse(reads=operands)
    deep = p.has("-R", "--recursive")
    return ArgUse(reads=operands, probes_links=tuple((o, deep) for o in operands))


_LONG = ("-l", "-g", "-o", "-n", "--full-time", "--numeric-uid-gid", "--author")
_NO_COLOR = ("never", "no", "none", "auto", "tty", "if-tty")


def _ls_probes(p: Parsed) -> bool:
    """Whether ls stats the target of each symlink it lists and shows something of it: the colour of a
    dangling link (--color), or in a long listing the target's type (-F, -p, --file-type...: `link -> t/`)."""
    if any(n in ("--color", "--colour") and (v is None or v not in _NO_COLOR) for n, v in p.options):
        return True
    long = p.has(*_LONG) or any(v in ("long", "verbose") for v in p.values("--format"))
    marks = p.has("-F", "-p", "--classify", "--file-type") or any(
        v != "none" for v in p.values("--indicator-style"))
    return long and marks


_Taken = tuple[tuple[str, ...], tuple[str, ...]]


def _head_obsolete(args: tuple[str, ...]) -> _Taken:
    """GNU head takes `-NUM[bkmcqvlz]` as its first argument only (head -5c F: five bytes)."""
    if args and re.fullmatch(r"-[0-9]+[bkmcqvlz]*", args[0]):
        return args[1:], args[:1]
    return args, ()


def _tail_obsolete(args: tuple[str, ...]) -> _Taken:
    """GNU tail's `[+-][NUM][bcl][f]` (tail +5 F, tail -5c F, tail -3f F), taken only as the first argument
    and only with at most one file after it (tail.c, parse_obsolete_option); otherwise `+5` is a file."""
    n = len(args)
    if not (n == 1 or (n == 2 and not (args[1].startswith("-") and len(args[1]) > 1))
            or (2 <= n <= 3 and args[1] == "--")):  # fmt: skip
        return args, ()
    m = re.fullmatch(r"([+-])([0-9]*)([bcl]?)(f?)", args[0])
    if m is None or (m[1] == "-" and args[0] in ("-", "-c")):
        return args, ()
    if m[4]:
        raise Unsafe(f"tail {args[0]}: waits for ever")
    return args[1:], args[:1]  # rebuilt `tail +5 -- F`: tail.c takes it with `--` and one file after it


_SORT_POS = re.compile(r"\+[0-9]*(\.[0-9]*)?[bdfgiMhnRrV]*")
_SORT_VALUE_SHORT = "kStTo"


def _sort_obsolete(args: tuple[str, ...]) -> _Taken:
    """GNU sort's obsolete key `+POS1 -POS2` (sort +1 -2 F sorts on the second field): a valid +POS1
    followed by an argument starting with `-` and a digit is a key, not a file (sort.c)."""
    out: list[str] = []
    keys: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return (*out, *args[i:]), tuple(keys)
        if _SORT_POS.fullmatch(a) and i + 1 < len(args) and re.match(r"-[0-9]", args[i + 1]):
            keys += args[i : i + 2]
            i += 2
            continue
        out.append(a)
        i += 1
        # An option's separate value is never a key: skip it (sort -o +1 -2 writes the file `+1`).
        takes = (a.startswith("-") and not a.startswith("--") and len(a) > 1 and a[-1] in _SORT_VALUE_SHORT
                 and all(c not in _SORT_VALUE_SHORT for c in a[1:-1]))  # fmt: skip
        takes = takes or (a.startswith("--") and "=" not in a and any(
            n.startswith(a[2:]) for n in _SORT_VALUE_LONG) and len(a) > 2)
        if takes and i < len(args):
            out.append(args[i])
            i += 1
    return tuple(out), tuple(keys)


_SORT_VALUE_LONG = ("random-source", "sort", "batch-size", "compress-program", "files0-from", "key", "output",
                    "buffer-size", "field-separator", "temporary-directory", "parallel")  # fmt: skip


# find's expression language: primaries that are safe, how many arguments each takes, and which
# arguments are paths. Anything else (-exec, -delete, -fprint, -L, ...) is refused by name.
_FIND_PRIMARIES: dict[str, int] = {
    **dict.fromkeys(
        "-name -iname -path -ipath -wholename -iwholename -regex -iregex -type -xtype "
        "-maxdepth -mindepth -size -mtime -mmin -atime -amin -ctime -cmin -perm -user -group "
        "-uid -gid -links -inum -lname -ilname -printf -regextype -used -fstype".split(), 1,
    ),
    **dict.fromkeys(
        "-empty -print -print0 -prune -quit -depth -xdev -mount -readable -writable -executable "
        "-ls -true -false -not ! -a -and -o -or ( ) , -nouser -nogroup -daystart -noleaf "
        "-ignore_readdir_race -noignore_readdir_race".split(), 0,
    ),
}
_FIND_PATH_PRIMARIES = {"-newer": 1, "-anewer": 1, "-cnewer": 1, "-samefile": 1}
_FIND_UNSAFE = {
    "-exec": "runs a program", "-execdir": "runs a program", "-ok": "runs a program", "-okdir": "runs a program",
    "-delete": "deletes files", "-fprint": "writes a file", "-fprint0": "writes a file", "-fprintf": "writes a file",
    "-fls": "writes a file", "-follow": "follows symlinks out of the tree", "-L": "follows symlinks out of the tree",
    "-H": "follows symlinks", "-files0-from": "reads unchecked paths",
}


def _analyze_find(argv: tuple[str, ...]) -> ArgUse:
    args = list(argv[1:])
    i = 0
    while i < len(args) and args[i] in ("-P", "-H", "-L", "-O0", "-O1", "-O2", "-O3", "-D"):
        if args[i] in _FIND_UNSAFE:
            return ArgUse(unsafe=f"find {args[i]}: {_FIND_UNSAFE[args[i]]}")
        i += 2 if args[i] == "-D" else 1
    starts = []
    while i < len(args) and not (args[i].startswith("-") or args[i] in ("(", "!", ")", ",")):
        starts.append(args[i])
        i += 1
    reads = starts or ["."]
    probes = False
    while i < len(args):
        a = args[i]
        if a in _FIND_UNSAFE:
            return ArgUse(unsafe=f"find {a}: {_FIND_UNSAFE[a]}")
        if a in _FIND_PROBES or (a == "-printf" and i + 1 < len(args) and _printf_follows(args[i + 1])):
            probes = True
        if a in _FIND_PATH_PRIMARIES:
            if i + 1 >= len(args):
                return ArgUse(unsafe=f"find {a} needs a value")
            reads.append(args[i + 1])
            i += 2
            continue
        n = _FIND_PRIMARIES.get(a)
        if n is None:
            return ArgUse(unsafe=f"find: unknown or unsupported primary {a!r}")
        if n and i + n >= len(args):
            return ArgUse(unsafe=f"find {a} needs a value")
        i += 1 + n
    return ArgUse(reads=tuple(reads), probes_links=tuple((r, True) for r in (starts or ["."])) if probes else ())


# Primaries that look at what a symlink points to, not the link (find -P): the target's type (-xtype),
# access(2), which follows links (-readable, -writable, -executable).
_FIND_PROBES = frozenset(("-xtype", "-readable", "-writable", "-executable"))


def _printf_follows(fmt: str) -> bool:
    """Whether a -printf format has %Y (the type of a symlink's target; `%%Y` is a literal)."""
    return re.search(r"(?<!%)(%%)*%[-+ #0-9.]*Y", fmt) is not None


# --- the models -----------------------------------------------------------------------------------

_HV = "help version"
_CP_UNSAFE = {"-L": "follows symlinks out of the tree", "--dereference": "follows symlinks out of the tree"}
_HEAD_LONG = _long(f"quiet silent verbose zero-terminated {_HV}", bytes=VALUE, lines=VALUE)
_SUMS = ProgramModel(
    "sha256sum", "read", _short("btzw", c=FLAG),
    _long(f"binary tag text zero ignore-missing quiet status strict warn check {_HV}"),
    unsafe={
        "-c": "reads a list of paths that cannot be checked", "--check": "reads a list of paths that cannot be checked",
    },
)


def _models() -> dict[str, ProgramModel]:
    m: list[ProgramModel] = [
        ProgramModel("echo", "read", raw=True), ProgramModel("printf", "read", raw=True),
        ProgramModel("true", "read", raw=True), ProgramModel("false", "read", raw=True),
        ProgramModel("test", "read", raw=True), ProgramModel("[", "read", raw=True),
        ProgramModel("sleep", "read", raw=True), ProgramModel("seq", "read", raw=True),
        ProgramModel("pwd", "read", _short("LP"), _long(f"logical physical {_HV}"), operands="none"),
        ProgramModel(
            "basename", "read", _short("az", s=VALUE), _long(f"multiple zero {_HV}", suffix=VALUE), operands="none",
        ),
        ProgramModel("dirname", "read", _short("z"), _long(f"zero {_HV}"), operands="none"),
        ProgramModel(
            "cat", "read", _short("AbeEnstTuv"),
            _long(f"show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting {_HV}"),
        ),
        ProgramModel(
            "ls", "read", _short("aAbBcCdfFgGhHiklmnNopqQrRsStuUvxXZ1", I=VALUE, T=VALUE, w=VALUE, L=FLAG),
            _long(
                f"all almost-all author escape ignore-backups file-type full-time group-directories-first "
                f"no-group human-readable si dereference-command-line "
                f"dereference-command-line-symlink-to-dir inode kibibytes literal numeric-uid-gid "
                f"quote-name reverse recursive size context zero directory dereference {_HV}", block_size=VALUE,
                color=OPTIONAL, classify=OPTIONAL, format=VALUE, hide=VALUE, hyperlink=OPTIONAL, indicator_style=VALUE,
                ignore=VALUE, quoting_style=VALUE, sort=VALUE, time=VALUE, time_style=VALUE, tabsize=VALUE, width=VALUE,
            ),
            unsafe={"-L": "follows symlinks out of the tree", "--dereference": "follows symlinks out of the tree"},
            custom=_ls,
        ),
        ProgramModel(
            "grep", "read",
            _short(
                "EFGPiyvwxcLloqsbHhnTZzaIrUV", e=VALUE, f=READ, m=VALUE, A=VALUE, B=VALUE, C=VALUE, d=VALUE, D=VALUE,
                R=FLAG,
            ),
            _long(
                f"extended-regexp fixed-strings basic-regexp perl-regexp ignore-case no-ignore-case "
                f"word-regexp line-regexp null-data no-messages invert-match max-count byte-offset "
                f"line-number line-buffered with-filename no-filename only-matching quiet silent text "
                f"recursive dereference-recursive files-without-match files-with-matches count "
                f"initial-tab null binary {_HV}", regexp=VALUE, file=READ, label=VALUE, binary_files=VALUE,
                directories=VALUE, devices=VALUE, include=VALUE, exclude=VALUE, exclude_from=READ, exclude_dir=VALUE,
                before_context=VALUE, after_context=VALUE, context=VALUE, color=OPTIONAL, colour=OPTIONAL,
            )
            | {"max-count": VALUE},
            unsafe={
                "-R": "follows every symlink while recursing",
                "--dereference-recursive": "follows every symlink while recursing",
            },
            numeric_short=True, custom=_grep,
        ),
        ProgramModel(
            "wc", "read", _short("clmwL"),
            _long(f"bytes chars lines max-line-length words {_HV}", total=VALUE, files0_from=READ),
            unsafe={"--files0-from": "reads a list of paths that cannot be checked"},
        ),
        ProgramModel(
            "touch", "local", _short("acfhm", d=VALUE, t=VALUE, r=READ),
            _long(f"no-create no-dereference {_HV}", date=VALUE, reference=READ, time=VALUE), operands="write",
        ),
        ProgramModel(
            "mkdir", "local", _short("pv", m=VALUE), _long(f"parents verbose {_HV}", mode=VALUE), operands="write",
            idempotent=lambda p: p.has("-p", "--parents"),
        ),
        ProgramModel(
            "cp", "local", _short("abdfHilLnPpRrsuvxT", t=WRITE, S=VALUE),
            _long(
                f"archive attributes-only copy-contents force interactive link no-clobber no-dereference "
                f"parents recursive remove-destination strip-trailing-slashes symbolic-link "
                f"no-target-directory verbose one-file-system dereference {_HV}", backup=OPTIONAL, preserve=OPTIONAL,
                no_preserve=VALUE, reflink=OPTIONAL, sparse=VALUE, suffix=VALUE, target_directory=WRITE,
                update=OPTIONAL,
            ),
            unsafe=_CP_UNSAFE, custom=_cp, idempotent=_cp_idempotent,
        ),
        ProgramModel(
            "mv", "local", _short("bfinuvT", t=WRITE, S=VALUE),
            _long(
                f"force interactive no-clobber strip-trailing-slashes no-target-directory verbose {_HV}",
                backup=OPTIONAL, suffix=VALUE, target_directory=WRITE, update=OPTIONAL,
            ),
            custom=_mv, idempotent=False,
        ),
        ProgramModel(
            "rm", "local", _short("fiIrRdv"),
            _long(
                f"force one-file-system recursive dir verbose no-preserve-root {_HV}", interactive=OPTIONAL,
                preserve_root=OPTIONAL,
            ),
            unsafe={"--no-preserve-root": "removes /"}, operands="write_nofollow",
            idempotent=lambda p: p.has("-f", "--force"),
        ),
        ProgramModel("head", "read", _short("qvz", c=VALUE, n=VALUE), _HEAD_LONG, numeric_short=True,
                     obsolete=_head_obsolete),
        ProgramModel(
            "tail", "read", _short("qvzfF", c=VALUE, n=VALUE, s=VALUE),
            _HEAD_LONG | _long("retry", follow=OPTIONAL, pid=VALUE, sleep_interval=VALUE, max_unchanged_stats=VALUE),
            unsafe={"-f": "waits for ever", "-F": "waits for ever", "--follow": "waits for ever"}, numeric_short=True,
            obsolete=_tail_obsolete,
        ),
        ProgramModel(
            "sort", "read", _short("bdfgiMhnRrVcCmsuz", k=VALUE, t=VALUE, S=VALUE, T=WRITE, o=WRITE),
            _long(
                f"ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting "
                f"month-sort human-numeric-sort numeric-sort random-sort reverse version-sort debug merge "
                f"stable unique zero-terminated {_HV}", random_source=READ, sort=VALUE, batch_size=VALUE,
                check=OPTIONAL, compress_program=VALUE, files0_from=READ, key=VALUE, output=WRITE, buffer_size=VALUE,
                field_separator=VALUE, temporary_directory=WRITE, parallel=VALUE,
            ),
            unsafe={
                "--compress-program": "runs a program", "--files0-from": "reads a list of paths that cannot be checked",
            },
            obsolete=_sort_obsolete,
        ),
        ProgramModel(
            "uniq", "read",
            _short("cdDiuz0123456789", f=VALUE, s=VALUE, w=VALUE),  # -N: the obsolete "skip N fields"
            _long(
                f"count repeated unique ignore-case zero-terminated {_HV}", all_repeated=OPTIONAL, skip_fields=VALUE,
                group=OPTIONAL, skip_chars=VALUE, check_chars=VALUE,
            ),
            custom=_uniq,
        ),
        ProgramModel(
            "diff", "read",
            _short(
                "abBcdeEfinNpqrstTuwy", C=VALUE, U=VALUE, D=VALUE, F=VALUE, I=VALUE, S=VALUE, x=VALUE, X=READ, W=VALUE,
                l=FLAG,
            ),
            _long(
                f"normal brief report-identical-files ed rcs side-by-side left-column "
                f"suppress-common-lines show-c-function expand-tabs initial-tab suppress-blank-empty "
                f"recursive no-dereference new-file unidirectional-new-file ignore-file-name-case "
                f"no-ignore-file-name-case ignore-case ignore-tab-expansion ignore-trailing-space "
                f"ignore-space-change ignore-all-space ignore-blank-lines text strip-trailing-cr minimal "
                f"speed-large-files paginate {_HV}", context=OPTIONAL, unified=OPTIONAL, width=VALUE,
                show_function_line=VALUE, label=VALUE, tabsize=VALUE, exclude=VALUE, exclude_from=READ,
                starting_file=VALUE, from_file=READ, to_file=READ, ignore_matching_lines=VALUE, old_line_format=VALUE,
                new_line_format=VALUE, unchanged_line_format=VALUE, line_format=VALUE, old_group_format=VALUE,
                new_group_format=VALUE, changed_group_format=VALUE, unchanged_group_format=VALUE, horizon_lines=VALUE,
                color=OPTIONAL, palette=VALUE, ifdef=VALUE,
            ),
            unsafe={"-l": "runs pr", "--paginate": "runs pr"}, custom=_diff,
        ),
        ProgramModel(
            "stat", "read", _short("Lft", c=VALUE),
            _long(f"dereference file-system terse {_HV}", format=VALUE, printf=VALUE, cached=VALUE),
        ),
        ProgramModel(
            "tee", "local", _short("aip"), _long(f"append ignore-interrupts {_HV}", output_error=OPTIONAL),
            operands="write", idempotent=lambda p: not p.has("-a", "--append"),
        ),
        ProgramModel(
            "tr", "read", _short("cCdst"), _long(f"complement delete squeeze-repeats truncate-set1 {_HV}"),
            operands="none",
        ),
        ProgramModel(
            "cut", "read", _short("nsz", b=VALUE, c=VALUE, d=VALUE, f=VALUE),
            _long(
                f"complement only-delimited zero-terminated {_HV}", bytes=VALUE, characters=VALUE, delimiter=VALUE,
                fields=VALUE, output_delimiter=VALUE,
            ),
        ),
        ProgramModel(
            "date", "read", _short("uR", d=VALUE, r=READ, f=READ, I=OPTIONAL, s=VALUE),
            _long(
                f"utc universal rfc-email debug {_HV}", date=VALUE, reference=READ, file=READ, iso_8601=OPTIONAL,
                rfc_3339=VALUE, set=VALUE,
            ),
            unsafe={"-s": "sets the clock", "--set": "sets the clock"}, custom=_date,
        ),
        ProgramModel(
            "realpath", "read", _short("emqsLPz"),
            _long(
                f"canonicalize-existing canonicalize-missing quiet strip no-symlinks logical physical zero {_HV}",
                relative_to=READ, relative_base=READ,
            ),
        ),
        ProgramModel(
            "readlink", "read", _short("femnqsvz"),
            _long(
                f"canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent verbose zero {_HV}"
            ),  # fmt: skip
        ),
        ProgramModel(
            "du", "read", _short("0abchHklmPsSx", d=VALUE, B=VALUE, t=VALUE, X=READ, L=FLAG),
            _long(
                f"null all apparent-size bytes total dereference-args human-readable si summarize "
                f"separate-dirs one-file-system count-links no-dereference dereference {_HV}", max_depth=VALUE,
                block_size=VALUE, threshold=VALUE, exclude=VALUE, exclude_from=READ, files0_from=READ, time=OPTIONAL,
                time_style=VALUE, inodes=FLAG,
            ),
            unsafe={
                "-L": "follows symlinks out of the tree", "--dereference": "follows symlinks out of the tree",
                "--files0-from": "reads a list of paths that cannot be checked",
            },
            custom=_du,
        ),
        ProgramModel("paste", "read", _short("sz", d=VALUE), _long(f"serial zero-terminated {_HV}", delimiters=VALUE)),
        ProgramModel(
            "comm", "read", _short("123z"),
            _long(f"check-order nocheck-order total zero-terminated {_HV}", output_delimiter=VALUE),
        ),
    ]
    for name in ("sha256sum", "sha1sum", "sha512sum", "md5sum", "b2sum"):
        m.append(attrs.evolve(_SUMS, name=name))
    return {x.name: x for x in m}


MODELS: dict[str, ProgramModel] = _models()

# Models that need their own code rather than option tables (git's is in gitmodel.py).
SPECIAL: dict[str, Callable[[tuple[str, ...]], ArgUse]] = {"find": _analyze_find, "test": _test_args, "[": _test_args}
MODEL_CLASSES = {"find": "read", "git": "local"}

# The default toolset: read-only and workspace-local programs whose models are complete enough to trust.
DEFAULT_TOOLSET: frozenset[str] = frozenset(MODELS) | {"find"}

# Programs that run other programs or code: never allowed unless a policy names them.
INTERPRETERS: frozenset[str] = frozenset(
    "sh bash dash zsh ksh mksh fish csh tcsh busybox python python3 python2 perl ruby node nodejs deno "
    "bun php lua tclsh awk gawk mawk nawk sed ed vi vim env xargs timeout nohup sudo su doas command exec "
    "eval source . builtin nice ionice chroot setsid stdbuf unbuffer script strace ltrace gdb watch "
    "parallel make ssh "
    "time trap".split()
)


def model_class(name: str) -> str | None:
    if name in MODELS:
        return MODELS[name].effect_class
    return MODEL_CLASSES.get(name)


def analyze_argv(argv: tuple[str, ...], is_dir: Callable[[str], bool]) -> ArgUse | None:
    """Analyse `argv` with the model of its program; None when DAL has no model for it (curl, wget and any
    program allowed by name: the wall holds them)."""
    name = argv[0]
    if name == "git":
        from dal.effects.classify.gitmodel import analyze_git  # only when a policy allows git and a command uses it

        return analyze_git(argv, is_dir)
    special = SPECIAL.get(name)
    if special is not None:
        return special(argv)
    model = MODELS.get(name)
    return None if model is None else analyze(model, argv, is_dir)
