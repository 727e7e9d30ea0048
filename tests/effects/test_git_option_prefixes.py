"""git's long options are matched the way git matches them (attack9 findings 02 and 06, issue 12).

git's parse-options takes any unambiguous prefix of a long option for it: `git stash push --al` is `--all` and
removed every untracked and ignored file, the run store with it; `git grep --untr` is `--untracked` and
searched `.dal/dal.db`. The model read only the full names there. Now every long option goes through one
helper (gitoptions.long_option) before any rule looks at it.

Measured against the git installed: its option tables (the helper's TABLE), every prefix git takes of each
option a rule of the model names, and the attacks themselves, executed with and without the wall next to the
run store and the policy.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from effects_workspace import no_bwrap_prefix

from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.classify import gitmodel, gitoptions
from dal.effects.classify.programs import Unsafe

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
walled = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
WALL_OR_NOT = pytest.mark.parametrize("wall", [
    pytest.param(True, marks=walled, id="wall"), pytest.param(False, id="no-wall (the test hook)")])


def _version() -> str:
    out = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout if shutil.which("git") else ""
    return out.split()[-1] if out else ""


git_239 = pytest.mark.skipif(not _version().startswith("2.39."), reason="the table was measured on git 2.39")


# -- measuring git (python tests/effects/test_git_option_prefixes.py prints the table gitoptions.py holds) --

# Actions whose options git parses in a table of their own.
ACTIONS = {
    "stash": "push save list show pop apply branch clear drop create store".split(),
    "worktree": "add move remove list prune lock unlock repair".split(),
    "bundle": "create verify list-heads unbundle".split(),
    "remote": "add rename remove set-head set-branches get-url set-url show prune update".split(),
}
# Options git parses in a second table the completion helper does not list (archive.c's parse_archive_args;
# annotate is blame, whose helper prints the diff options instead), measured under these names.
EXTRA = {
    "archive (archive.c)": ("archive", "--format= --prefix= --add-file= --add-virtual-file= --worktree-attributes "
                                       "--verbose --list".split()),
    "annotate (blame)": ("annotate", None),  # blame's words
}


def _git(repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=repo, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C", GIT_PAGER="cat", PAGER="cat")
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


def _words(repo: str, target: str) -> list[str] | None:
    """`git TARGET --git-completion-helper-all`: every long option of its parse-options table (hidden ones
    too), `NAME=` for one that takes a value, and `--no-NAME` for each that may be negated."""
    r = _git(repo, *target.split(), "--git-completion-helper-all")
    words = [w for w in r.stdout.split() if w != "--"]
    if r.returncode != 0 or not words or not all(w.startswith("--") for w in words):
        return None
    return words


_NOT_TAKEN = ("unknown option", "ambiguous option", "unrecognized argument", "unknown switch", "invalid option")


def _abbreviates(repo: str, sub: str, words: list[str]) -> bool:
    """Whether git takes a unique prefix of one of these options for it: its error then names the option
    in full (`option `all' takes no value`, `... requires a value`). A table parsed with KEEP_UNKNOWN_OPT
    (log, format-patch, cherry-pick) passes the prefix on, and the revision machinery refuses it."""
    names = [w[2:].rstrip("=") for w in words]
    for takes_value in (False, True):
        for w, n in zip(words, names, strict=True):
            p = n[:-1]
            if w.endswith("=") != takes_value or n.startswith("no-") or len(n) < 3:
                continue
            if sum(1 for m in names if m.startswith(p)) != 1:
                continue
            if takes_value:
                return f"`{n}'" in _git(repo, *sub.split(), f"--{p}").stderr  # "requires a value"
            return _git_takes(repo, sub.split(), p, n)
    return False


def _encode(words: list[str]) -> tuple[str, str]:
    """(positive names, those of them git has no `--no-` form of), as gitoptions.TABLE holds them."""
    names = [w[2:].rstrip("=") for w in words]
    spelled = set(names)
    positive = list(dict.fromkeys(n for n in names if not (n.startswith("no-") and n[3:] in spelled)))
    fixed = [n for n in positive if not n.startswith("no-") and "no-" + n not in spelled]
    return " ".join(positive), " ".join(fixed)


def measure_aliases(subcommands: list[str]) -> dict[str, dict[str, str]]:
    """`git SUB -h`'s "alias of --NAME" lines (and their actions')."""
    out: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as repo:
        _git(repo, "init", "-q")
        for s in subcommands:
            for target in [s, *(f"{s} {a}" for a in ACTIONS.get(s, ()))]:
                r = _git(repo, *target.split(), "-h")
                for alias, name in re.findall(r"--([a-z0-9-]+)\S*\s+alias of --([a-z0-9-]+)", r.stdout + r.stderr):
                    out.setdefault(s, {})[alias] = name
    return out


def measure(subcommands: list[str]) -> dict[str, tuple[bool, str, str]]:
    with tempfile.TemporaryDirectory() as repo:
        _git(repo, "init", "-q")
        _git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x")
        out: dict[str, tuple[bool, str, str]] = {}
        targets = [(t, t, None) for s in subcommands for t in [s, *(f"{s} {a}" for a in ACTIONS.get(s, ()))]]
        targets += [(name, sub, words) for name, (sub, words) in EXTRA.items()]
        for name, sub, words in targets:
            if words is None:
                words = _words(repo, "blame" if name == "annotate (blame)" else sub)
            if not words or sub == "rev-parse":  # rev-parse's options are not parse-options'
                continue
            out[name] = (_abbreviates(repo, sub, words), *_encode(words))
        return out


# -- the table is git's ----------------------------------------------------------------------------------


@git_239
def test_the_table_is_what_git_lists() -> None:
    """Every option table of every subcommand the model knows, and whether git takes abbreviations there."""
    assert measure(sorted(gitmodel.SUBCOMMANDS)) == gitoptions.TABLE
    assert measure_aliases(sorted(gitmodel.SUBCOMMANDS)) == gitoptions.ALIASES


# -- every prefix git takes of an option a rule names is that option for the model ------------------------

def _named_by_rules() -> dict[str, set[str]]:
    """subcommand -> the long options a rule of the model names: its deny, path and value tables, and every
    option a rule asks about (`p.has(...)`, `p.values(...)` in gitmodel.py)."""
    asked = set()
    source = Path(gitmodel.__file__).read_text()
    for call in re.findall(r"p\.(?:has|values)\(([^)]*)\)", source):
        asked |= {n for n in re.findall(r'"(--[a-z0-9-]+)"', call)}
    out: dict[str, set[str]] = {}
    for name, sub in gitmodel.SUBCOMMANDS.items():
        spelled = gitoptions.spellings(name)
        named = {*sub.deny, *sub.paths, *sub.values, *asked}
        out[name] = {n for n in named if n.startswith("--") and n[2:] in spelled and not n.startswith("--no-")}
    return out


def _target(sub: str, option: str) -> list[str]:
    """The git command line whose table holds `option` (an action's, for stash/worktree/bundle/remote)."""
    for key, (_, names, _) in gitoptions.TABLE.items():
        if key.split()[0] == sub and option in names.split():
            words = key.split()
            return words[:2] if len(words) == 2 and not words[1].startswith("(") else words[:1]
    return [sub]  # `--NAME` of an option named `no-NAME`


def _git_takes(repo: str, argv: list[str], prefix: str, option: str) -> bool:
    """Whether git reads `--PREFIX` as `--OPTION`: `--PREFIX=x --zzzz` fails on `zzzz` (taken, with a value),
    or names OPTION (`option `all' takes no value`), or fails on what the option does with x (archive's
    `--add-file`: "File not found: x"); nothing runs, since the parse fails either way."""
    err = _git(repo, *argv, f"--{prefix}=x", "--zzzz").stderr
    if f"`{option}'" in err or "`zzzz'" in err or "`--zzzz'" in err:
        return True
    return not err.startswith("usage:") and not any(s in err for s in _NOT_TAKEN)  # cherry-pick: usage alone


def test_every_prefix_git_takes_is_the_option_for_the_model() -> None:
    """For each option a rule names: every prefix of it that git takes as it, the model takes as it too;
    and a prefix git refuses (ambiguous, or not an abbreviation there) the model never reads as an option
    that a rule would let through in its place (it is denied, or left to git to refuse)."""
    checked = 0
    with tempfile.TemporaryDirectory() as repo:
        _git(repo, "init", "-q")
        _git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x")
        for sub, options in sorted(_named_by_rules().items()):
            exact = gitoptions.spellings(sub)
            for option in sorted(options):
                argv = _target(sub, option[2:])
                for k in range(len(option) - 1, 2, -1):
                    prefix = option[2:k]
                    if prefix in exact:
                        continue  # another option's own name: git takes that one
                    if not _git_takes(repo, argv, prefix, option[2:]):
                        break
                    try:
                        got = gitmodel._match(sub, gitmodel.SUBCOMMANDS[sub], "--" + prefix, attached=True)
                    except Unsafe as e:
                        if sub in ACTIONS and "any of" in str(e):
                            continue  # ambiguous over all the actions' options (denied), unique in one
                        shown = f"git {' '.join(argv)} takes --{prefix} for {option}"
                        raise AssertionError(f"{shown}; the model: {e}") from e
                    alias = gitoptions.ALIASES.get(sub, {}).get(option[2:])
                    assert got in (option, f"--{alias}"), (argv, prefix, option, got)
                    checked += 1
    assert checked > 300  # the dangerous ones among them: --all, --include-untracked, --untracked, --output...


@pytest.mark.parametrize(("command", "why"), [
    ("git stash push --al -q", "removes untracked files"),
    ("git stash --include-untr", "removes untracked files"),
    ("git stash save --a", "removes untracked files"),
    ("git stash push --in", "any of --include-untracked, --index"),
    ("git grep --untr -e tok", "run store"),
    ("git grep --no-ind tok .", "run store"),
    ("git clone --upload=x u d", "names a program to run"),
    ("git commit --gpg -m x", "runs gpg"),
    ("git add --pathspec-f=list", "any of --pathspec-file-nul, --pathspec-from-file"),
    ("git commit --no-v -m x", "any of --no-verbose, --no-verify"),
    ("git log --n", "any of"),
])
def test_policy_check_denies_every_spelling(tmp_path: Path, command: str, why: str) -> None:
    """`dal policy check`'s question, asked of the checker: the abbreviation is the option."""
    from dal.effects import check_command

    ws = tmp_path / "ws"
    (ws / ".dal").mkdir(parents=True)
    (ws / ".dal" / "dal.db").write_text("tok-1234\n")
    _git(str(ws), "init", "-q")
    decision = check_command(command, Policy.load(ws, allow_run=["git"]))
    assert not decision.allowed and why in decision.reason, decision


# -- the attacks, executed --------------------------------------------------------------------------------

_ENV = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "op", "GIT_AUTHOR_EMAIL": "op@e", "GIT_COMMITTER_NAME": "op",
        "GIT_COMMITTER_EMAIL": "op@e", "LC_ALL": "C"}
SECRET = "tok-83620114"


def operator(ws: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    env = {**_ENV, "HOME": str(ws.parent)}
    return subprocess.run(["git", *cmd], cwd=ws, env=env, capture_output=True, text=True, timeout=60)


def workspace(tmp_path: Path) -> Path:
    """A repository with the operator's untracked policy, a run store holding a secret, a nested store."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / "README").write_text("hello\n")
    operator(ws, "add", "README")
    operator(ws, "commit", "-qm", "init")
    (ws / "dal.toml").write_text('[run]\nallow = ["git"]\n')
    (ws / ".dal").mkdir()
    (ws / ".dal" / "dal.db").write_text(f"SQLite format 3 ... {SECRET} ...\n")
    (ws / "sub" / ".dal").mkdir(parents=True)
    (ws / "sub" / ".dal" / "dal.db").write_text("nested\n")
    return ws


def run(ws: Path, command: str, wall: bool):  # noqa: ANN201
    kw = {} if wall else {"use_sandbox": False, "unsandboxed_as_root": True}
    return run_effect(command, EffectContext(policy=Policy.load(ws, allow_run=["git"]), **kw))  # type: ignore[arg-type]


def intact(ws: Path) -> None:
    assert (ws / ".dal" / "dal.db").read_text().endswith(f"{SECRET} ...\n")
    assert (ws / "dal.toml").exists() and (ws / "sub" / ".dal" / "dal.db").exists()


@WALL_OR_NOT
@pytest.mark.parametrize("flags", ["--al", "--include-untr", "--a -q", "--all"])
def test_a_stash_of_untracked_files_under_any_spelling_leaves_the_store(tmp_path: Path, wall: bool, flags: str) -> None:
    ws = workspace(tmp_path)
    real = tmp_path / "real"
    shutil.copytree(ws, real, symlinks=True)
    operator(real, "stash", "push", *flags.split())  # git itself: the store and the policy are gone
    assert not (real / ".dal").exists() and not (real / "dal.toml").exists()
    r = run(ws, f"git stash push {flags}", wall)
    assert r.status == "denied" and "removes untracked files" in r.decision.reason, r
    intact(ws)


@WALL_OR_NOT
@pytest.mark.parametrize("command", ["git grep --untr -a -h -o -E 'tok-[0-9]+'",
                                     "git grep --no-ind -a -h -o -E 'tok-[0-9]+' ."])
def test_a_grep_of_untracked_files_under_any_spelling_does_not_print_the_store(
        tmp_path: Path, wall: bool, command: str) -> None:
    ws = workspace(tmp_path)
    real = subprocess.run(shlex.split(command), cwd=ws, capture_output=True, text=True, env={**_ENV, "HOME": "/"})
    assert SECRET in real.stdout  # git itself reads the store
    r = run(ws, command, wall)
    assert SECRET not in r.stdout + r.stderr
    assert r.status == "denied" and "run store" in r.decision.reason, r


@pytest.mark.parametrize("wall", [pytest.param(True, marks=walled, id="wall"), pytest.param(False, id="no-wall")])
def test_dal_run_of_the_reproduction(tmp_path: Path, wall: bool) -> None:
    """attack9 02 end to end: `dal run` of `git stash push --al -q` with the real store of an earlier run."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / "README").write_text("hello\n")
    operator(ws, "add", "README")
    operator(ws, "commit", "-qm", "init")
    dal = [sys.executable, "-m", "dal"]
    env = {**os.environ, "HOME": str(tmp_path)}
    (ws / "e.dal").write_text('run("echo earlier")\n')
    subprocess.run([*dal, "run", "--key", "earlier", "e.dal"], cwd=ws, env=env, capture_output=True, timeout=120)
    assert (ws / ".dal" / "dal.db").exists()
    (ws / "dal.toml").write_text('[run]\nallow = ["git"]\n')
    (ws / "s.dal").write_text('run("git stash push --al -q")\nrun("echo after")\n')
    prefix: list[str] = []
    flags = []
    if not wall:
        got = no_bwrap_prefix(tmp_path)
        if got is None:
            pytest.skip("needs root and unshare to hide bubblewrap")
        prefix, flags = got, ["--unsandboxed-as-root"]
    r = subprocess.run([*prefix, *dal, "run", *flags, "--key", "attack", "s.dal"], cwd=ws, env=env,
                       capture_output=True, text=True, timeout=120)
    assert "removes untracked files" in r.stdout + r.stderr, r.stdout + r.stderr
    assert (ws / ".dal" / "dal.db").exists() and (ws / "dal.toml").exists()
    listed = subprocess.run([*dal, "receipts"], cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert "earlier" in listed.stdout and "attack" in listed.stdout, listed.stdout


if __name__ == "__main__":
    from dal.effects.classify.gitmodel import SUBCOMMANDS

    for key, entry in measure(sorted(SUBCOMMANDS)).items():
        print(f"    {key!r}: {entry!r},")
    print(measure_aliases(sorted(SUBCOMMANDS)))
