"""Prefix rules: a policy's decisions about commands that begin with given words (`[[rules]]` in dal.toml).

Each rule names a prefix of words (a position may hold alternatives), a decision and a justification a
person reads, and examples that must match and must not; the examples are checked when the policy loads,
so that a rule that does not say what its author meant is an error, not a surprise (as Codex's execpolicy
checks its `match` / `not_match`). The decisions, most severe first:

- `deny`: the command is refused, with the justification;
- `approve`: the command waits for a person's approval, with the justification;
- `allow`: the command runs without an approval its program would need (`require_approval`, a program's
  `approval = true`), and its program is allowed for the commands this prefix matches when the policy does
  not allow it by name. Everything else the check says still holds (paths, walls, classes).

A prefix longer than the program's name holds for the spellings it names: `git -C . push` does not begin
with `git push`. `deny` and `approve` therefore also match git's words with its global options left out
(`git -C . push` is `git push` to them), and a git command whose global options cannot be read matches
every git rule of theirs; `allow` matches only the words as written, so that a respelling never gains
anything. To hold every spelling, require approval for the program and allow the harmless prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dal.core.records import FrozenRecord

__all__ = ["DECISIONS", "PrefixRule", "parse_rules", "rule_words"]

DECISIONS = ("allow", "approve", "deny")
_KEYS = {"prefix", "decision", "justification", "match", "not_match"}


class PrefixRuleError(ValueError):
    """A rule that is malformed or whose examples disagree with it; the message says which and why."""


class PrefixRule(FrozenRecord):
    """One `[[rules]]` entry. `prefix`: for each position the words it accepts."""

    __slots__ = ("prefix", "decision", "justification", "match", "not_match")

    def __init__(self, prefix: tuple[tuple[str, ...], ...], decision: str, justification: str,
                 match: tuple[str, ...] = (), not_match: tuple[str, ...] = ()) -> None:  # fmt: skip
        init = object.__setattr__
        init(self, "prefix", prefix)
        init(self, "decision", decision)
        init(self, "justification", justification)
        init(self, "match", match)
        init(self, "not_match", not_match)

    @property
    def program(self) -> tuple[str, ...]:
        return self.prefix[0]

    def shown(self) -> str:
        return " ".join(w[0] if len(w) == 1 else "{" + ",".join(w) + "}" for w in self.prefix)

    def matches(self, argv: Sequence[str]) -> bool:
        """Whether the command `argv` (one simple command's words) is one this rule decides."""
        forms = [tuple(argv)]
        if self.decision != "allow":
            canon = rule_words(argv)
            if canon is None:  # words the rule cannot read past: a refusal or approval holds anyway
                return bool(argv) and argv[0] in self.program
            forms.append(canon)
        return any(len(f) >= len(self.prefix) and all(w in alts for w, alts in zip(f, self.prefix, strict=False))
                   for f in forms)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"prefix": [list(w) for w in self.prefix], "decision": self.decision,
                "justification": self.justification, "match": list(self.match), "not_match": list(self.not_match)}

    @classmethod
    def from_json(cls, data: Any) -> PrefixRule:
        return _rule(data, "the stored policy: prefix_rules")


# git's options before its subcommand (git.c, handle_options): those that take the next word, those that
# take `=VALUE` only, and the flags.
_GIT_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--super-prefix",
              "--config-env", "--list-cmds", "--attr-source"}  # fmt: skip
_GIT_FLAGS = {"-p", "-P", "--paginate", "--no-pager", "--bare", "--no-replace-objects", "--literal-pathspecs",
              "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks",
              "--no-advice", "--html-path", "--man-path", "--info-path", "--version", "--help"}  # fmt: skip


def rule_words(argv: Sequence[str]) -> tuple[str, ...] | None:
    """The words a deny or approve rule reads: git's with its global options left out (`git -C d push` is
    `git push`); None when they cannot be read past (an option git may take that is not known here)."""
    if not argv or argv[0] != "git":
        return tuple(argv)
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        name = word.split("=", 1)[0]
        if word in _GIT_FLAGS or (name in _GIT_VALUE and "=" in word and name.startswith("--")):
            i += 1
        elif word in _GIT_VALUE:
            i += 2
        elif word[:2] in ("-C", "-c") and len(word) > 2:  # -Cdir, -ckey=value
            i += 1
        else:
            return None
    return ("git", *argv[i:])


def parse_rules(raw: Any, source: str) -> tuple[PrefixRule, ...]:
    """The `[[rules]]` of a policy file, each checked against its own examples. Raises PrefixRuleError."""
    if not isinstance(raw, list):
        raise PrefixRuleError(f"{source}: rules: expected an array of tables ([[rules]])")
    return tuple(_rule(r, f"{source}: rules[{i}]") for i, r in enumerate(raw))


def _rule(data: Any, where: str) -> PrefixRule:
    import shlex

    if not isinstance(data, dict):
        raise PrefixRuleError(f"{where}: expected a table")
    for k in data:
        if k not in _KEYS:
            raise PrefixRuleError(f"{where}.{k}: unknown key (expected {', '.join(sorted(_KEYS))})")
    words = data.get("prefix")
    if not isinstance(words, list) or not words:
        raise PrefixRuleError(f"{where}.prefix: expected a list of words, the program first (\"git\", \"push\")")
    prefix = []
    for w in words:
        alts = w if isinstance(w, list) else [w]
        if not alts or not all(isinstance(a, str) and a for a in alts):
            raise PrefixRuleError(f"{where}.prefix: each word is a non-empty string or a list of them")
        prefix.append(tuple(alts))
    if any("/" in name for name in prefix[0]):
        raise PrefixRuleError(f"{where}.prefix: the program is a bare name")
    decision = data.get("decision")
    if decision not in DECISIONS:
        raise PrefixRuleError(f"{where}.decision: expected one of {', '.join(DECISIONS)}")
    why = data.get("justification")
    if not isinstance(why, str) or not why.strip():
        raise PrefixRuleError(f"{where}.justification: say why, for the person who reads the decision")
    examples = {}
    for key in ("match", "not_match"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(e, str) for e in value):
            raise PrefixRuleError(f"{where}.{key}: expected a list of commands")
        examples[key] = tuple(value)
    if not examples["match"]:
        raise PrefixRuleError(f"{where}.match: give at least one command the rule decides")
    rule = PrefixRule(tuple(prefix), decision, why.strip(), examples["match"], examples["not_match"])
    for key, want in (("match", True), ("not_match", False)):
        for example in examples[key]:
            try:
                argv = shlex.split(example)
            except ValueError as e:
                raise PrefixRuleError(f"{where}.{key}: {example!r}: {e}") from None
            if rule.matches(argv) != want:
                does = "does not match" if want else "matches"
                raise PrefixRuleError(f"{where}.{key}: the rule {rule.shown()!r} {does} {example!r}")
    return rule
