"""Coarse tables for the programs that run only inside a wall (issue 27): curl and wget.

They are not option models. What curl and wget read and write is held by the wall (its roots, its read-only
and undone names, its seccomp filter), not predicted here; the check classes them (`local`, `external`
when the network is allowed; never idempotent: a gap costs a person's decision, never a double run) and
refuses early, with a reason a person can act on, the few options that run code, read options the check
cannot show, or reach a daemon through a socket, which the wall would refuse or could not explain.

A long option is matched as the programs match it, by any unique prefix, and a word that is a prefix of a
denied name counts as that option (curl and getopt refuse an ambiguous one anyway). A short option counts
wherever it appears in a cluster of letters, values included: a false refusal, never a miss.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FETCHERS", "denial"]

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
