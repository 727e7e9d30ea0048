"""Issue 15, point 6: `dal completion bash` installs in a real bash and completes commands, flags, choices,
files and run ids (the script is sourced in bash and driven through COMP_WORDS, as readline drives it)."""

from __future__ import annotations

import json
import shlex

import pytest
from dalshell import Shell


def _complete(dal: Shell, *words: str) -> list[str]:
    """What bash offers for the command line `words` (the last one is the word being completed)."""
    script = (
        'eval "$(dal completion bash)"\n'
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        '_dal_complete\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = dal.sh(script)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_bash_completes_commands_subcommands_and_flags(dal: Shell) -> None:
    assert _complete(dal, "dal", "res") == ["resolve", "resume"]
    assert _complete(dal, "dal", "receipt", "") == ["show"]
    assert _complete(dal, "dal", "run", "--js") == ["--json"]
    # a flag of another command is not offered; the value of --max-steps is not mistaken for a command
    assert _complete(dal, "dal", "check", "--new") == []
    assert "--quiet" in _complete(dal, "dal", "run", "--max-steps", "5", "--q")
    assert _complete(dal, "dal", "help", "comp") == ["completion"]


def test_bash_completes_choices_of_flags_and_arguments(dal: Shell) -> None:
    assert _complete(dal, "dal", "--color", "a") == ["auto", "always"]
    assert _complete(dal, "dal", "run", "--color", "=", "n") == ["never"]  # --color=n, as bash splits it
    assert _complete(dal, "dal", "resolve", "latest", "--as", "") == ["done", "failed", "retry"]
    assert _complete(dal, "dal", "receipts", "--status", "di") == ["died"]
    assert _complete(dal, "dal", "completion", "") == ["bash", "zsh", "fish"]


def test_bash_completes_script_files_and_run_ids(dal: Shell) -> None:
    dal.write("hello.dal", 'print("hi")\n')
    assert _complete(dal, "dal", "run", "hel") == ["hello.dal"]
    assert _complete(dal, "dal", "approve", "") == ["latest"]  # no runs yet: still the word that always works
    dal.write("keyed.dal", 'operation("nightly-sync")\nprint("ok")\n')
    assert dal("run", "hello.dal").returncode == 0 and dal("run", "keyed.dal").returncode == 0
    ids = [r["run_id"] for r in json.loads(dal("receipts", "--json").stdout)["runs"]]
    assert sorted(_complete(dal, "dal", "receipt", "show", "run_")) == sorted(ids)
    assert _complete(dal, "dal", "resume", "night") == ["nightly-sync"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_a_script_naming_every_command(dal: Shell, shell: str) -> None:
    done = dal("completion", shell)
    assert done.returncode == 0
    for command in ("run", "receipts", "approve", "completion"):
        assert command in done.stdout
    if shell == "zsh":  # the bash script through zsh's bashcompinit: it must at least be valid shell
        assert dal.sh(f"dal completion {shell} | sed '/^autoload/d' | bash -n").returncode == 0


def test_unknown_shell_is_a_usage_error_with_a_suggestion(dal: Shell) -> None:
    done = dal("completion", "bsh")
    assert done.returncode == 2 and "did you mean bash?" in done.stderr
