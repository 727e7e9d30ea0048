"""Coarse tables for the programs that run only inside a wall (issue 27): curl, wget and git.

They are not option models. What curl and wget read and write is held by the wall (its roots, its read-only
and undone names, its seccomp filter), not predicted here; the check classes them (`local`, `external`
when the network is allowed; never idempotent: a gap costs a person's decision, never a double run) and
refuses early, with a reason a person can act on, the few options that run code, read options the check
cannot show, or reach a daemon through a socket, which the wall would refuse or could not explain.

git's table says, per subcommand, its effect class, whether it reaches other repositories, whether it is
idempotent and whether it rewrites files of the work tree; a subcommand not in it is `external` and not
idempotent. What git reads and writes is the wall's and the git guard's to hold (gitguard.py observes and
puts back what git may change in its repository); the check refuses early only what runs another program
or points git elsewhere (GIT_DENY and gitmodel.py's per-subcommand deny lists).

A long option is matched as the programs match it, by any unique prefix, and a word that is a prefix of a
denied name counts as that option (curl and getopt refuse an ambiguous one anyway). A short option counts
wherever it appears in a cluster of letters, values included: a false refusal, never a miss.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = ["FETCHERS", "GIT", "GIT_DENY", "GitRow", "denial", "git_row"]

FETCHERS = frozenset({"curl", "wget"})

# (long name, short letter or "", why): refused outright.
_CURL_DENY = (
    ("config", "K", "reads options (and URLs, output files) from a file the check cannot show"),
    ("engine", "", "loads a crypto engine, a library of code"),
    ("metalink", "", "takes the files to fetch and write from a document the check cannot show"),
)
# Connecting to a socket is an act, not a read: only with the network allowed (the wall's seccomp filter
# refuses AF_UNIX connect while it is off).
_CURL_SOCKETS = ("unix-socket", "abstract-unix-socket")
_WGET_DENY = (
    ("config", "", "reads wgetrc commands (use_askpass runs a program) from a file the check cannot show"),
    ("use-askpass", "", "runs a program to ask for a password"),
    ("background", "b", "goes on in the background after the command ends"),
)
# wgetrc commands (`-e CMD`, `--execute=CMD`) that run a program, written without `_`/`-`, in lower case.
_WGETRC_RUNS = frozenset({"useaskpass"})


@attrs.frozen
class GitRow:
    """How DAL classes one git subcommand; the wall and the guard hold what it does."""

    effect: str = "local"  # the effect class: local, or external for a subcommand reaching other repositories
    network: bool = False
    idempotent: bool = False
    worktree: bool = False  # rewrites files of its work tree (checkout, merge, ...)


_READ = GitRow(idempotent=True)
_NET = GitRow(effect="external", network=True)
_TREE = GitRow(worktree=True)
GIT: dict[str, GitRow] = {
    **dict.fromkeys(
        "status log show whatchanged shortlog diff diff-tree diff-index diff-files range-diff blame annotate grep "
        "ls-files ls-tree cat-file rev-parse rev-list describe name-rev merge-base show-ref for-each-ref show-branch "
        "cherry count-objects check-ignore check-attr var version".split(), _READ),
    **dict.fromkeys("add commit branch tag reflog format-patch archive bundle worktree init notes".split(),
                    GitRow()),
    **dict.fromkeys("restore checkout switch reset stash merge rebase cherry-pick revert am apply rm mv "
                    "bisect".split(), _TREE),
    **dict.fromkeys("clone fetch push ls-remote remote".split(), _NET),
    "pull": GitRow(effect="external", network=True, worktree=True),
}
# Not known: it may be an alias or a `git-NAME` program; a person decides, and it is never run twice.
_UNKNOWN = GitRow(effect="external", network=True, worktree=True)

# Subcommands that run other programs, serve the repository or change what git itself runs.
GIT_DENY = {
    "config": "changes configuration, which can name programs to run", "daemon": "serves the repository",
    "instaweb": "starts a web server and a browser",
    "submodule": "runs nested repositories, whose URLs and hooks a script can choose",
    "filter-branch": "runs shell snippets", "filter-repo": "runs Python snippets", "difftool": "runs external tools",
    "mergetool": "runs external tools", "help": "runs man or a web browser", "web--browse": "runs a web browser",
    "send-email": "sends mail through a program", "imap-send": "talks to a mail server through a program",
    "credential": "talks to credential helpers", "credential-cache": "keeps credentials in a daemon",
    "credential-store": "reads and writes the credentials file",
    "maintenance": "registers the repository in the global configuration and schedules jobs",
    "upload-pack": "serves the repository", "receive-pack": "receives a push, running the repository's hooks",
    "shell": "runs the commands a remote sends",
    "clean": "removes untracked files, the policy and the run store among them",
}


def git_row(subcommand: str) -> GitRow:
    """The coarse class of `git SUBCOMMAND` (an unknown one is external and not idempotent)."""
    return GIT.get(subcommand, _UNKNOWN)


def denial(argv: Sequence[str], allow_net: bool) -> str | None:
    """Why curl or wget with the arguments `argv[1:]` is refused before it starts; None when the wall
    decides. Words after a `--` are operands (URLs) to both programs."""
    name = argv[0]
    words = list(argv[1:])
    if "--" in words:
        words = words[: words.index("--")]
    if name == "curl":
        deny = _CURL_DENY if allow_net else (*_CURL_DENY, *((s, "", _SOCKET) for s in _CURL_SOCKETS))
        return _denied(name, words, deny)
    if name == "wget":
        why = _denied(name, words, _WGET_DENY)
        return why or _wgetrc(words)
    return None


_SOCKET = ("connects to a socket, which talks to whatever daemon listens there (a read root is for reading "
           "files; allow the network with --allow-net to let it)")


def _denied(program: str, words: list[str], deny: Sequence[tuple[str, str, str]]) -> str | None:
    for word in words:
        if word.startswith("--") and len(word) > 2:
            typed = word[2:].split("=", 1)[0]
            for long, _, why in deny:
                if long.startswith(typed) and len(typed) >= min(3, len(long)):
                    return f"{program} --{long}: {why}"
        elif word.startswith("-") and len(word) > 1:
            for long, short, why in deny:
                if short and short in word[1:]:
                    return f"{program} -{short} (--{long}): {why}"
    return None


def _wgetrc(words: list[str]) -> str | None:
    """`-e CMD` / `--execute=CMD` (any prefix of it, any cluster ending in e) naming a command that runs a
    program."""
    for i, word in enumerate(words):
        command = None
        if word.startswith("--") and "execute".startswith(word[2:].split("=", 1)[0]) and len(word) > 3:
            command = word.split("=", 1)[1] if "=" in word else (words[i + 1] if i + 1 < len(words) else "")
        elif word.startswith("-") and not word.startswith("--") and "e" in word[1:]:
            rest = word[word.index("e", 1) + 1 :]
            command = rest or (words[i + 1] if i + 1 < len(words) else "")
        if command is not None:
            key = command.split("=", 1)[0].strip().lower().replace("_", "").replace("-", "")
            if key in _WGETRC_RUNS or not key:
                return f"wget -e {command}: the wgetrc command {key or '(none)'} runs a program"
    return None
