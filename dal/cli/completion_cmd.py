"""`dal completion bash|zsh|fish`: a shell completion script generated from dal's own argparse tree.

The script is static (commands, flags, flag choices, which flags take a value), so completing costs no
Python start-up; only a RUN argument (approve, deny, resolve, resume, receipt show) asks `dal receipts
--json` for the recent run ids and operation keys, when that word is being completed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

SHELLS = ("bash", "zsh", "fish")


class _Node:
    """One (sub)command: its path (`dal receipt show`), subcommands, flags and what its positionals take."""

    def __init__(self, path: str, parser: argparse.ArgumentParser) -> None:
        self.path = path
        self.subs: dict[str, argparse.ArgumentParser] = {}
        self.flags: list[str] = []
        self.valued: list[str] = []  # flags followed by a value
        self.choices: dict[str, list[str]] = {}
        self.positional = ""  # "runs", "files", "choices" or "" (nothing)
        self.positional_choices: list[str] = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                self.subs.update(action.choices)
            elif action.option_strings:
                long = [o for o in action.option_strings if o.startswith("--")]
                self.flags.extend(long or action.option_strings)
                if action.nargs != 0:
                    self.valued.extend(action.option_strings)
                    if action.choices:
                        for o in action.option_strings:
                            self.choices[o] = [str(c) for c in action.choices]
            elif not self.positional:
                if action.dest == "ref":
                    self.positional = "runs"
                elif action.choices:
                    self.positional, self.positional_choices = "choices", [str(c) for c in action.choices]
                else:
                    self.positional = "files"


def _walk(parser: argparse.ArgumentParser) -> list[_Node]:
    nodes, todo = [], [("dal", parser)]
    while todo:
        path, p = todo.pop(0)
        node = _Node(path, p)
        nodes.append(node)
        todo.extend((f"{path} {name}", sub) for name, sub in node.subs.items())
    for node in nodes:  # `dal help COMMAND`
        if node.path == "dal help":
            node.positional, node.positional_choices = "choices", sorted(nodes[0].subs)
    return nodes


def _case(nodes: list[_Node], value: Any) -> str:
    """`case "$1" in "dal x") echo ...;; esac` over the nodes with a non-empty value."""
    arms = [f'        "{n.path}") echo "{text}" ;;' for n in nodes if (text := value(n))]
    return "    case \"$1\" in\n" + "\n".join(arms) + "\n    esac"


_BASH_BODY = r"""
# Recent run ids and operation keys, asked for only when a RUN argument is completed.
_dal_runs() {
    echo latest
    command dal receipts --json --limit 50 2>/dev/null \
        | sed -n -e 's/^ *"run_id": "\([^"]*\)".*/\1/p' -e 's/^ *"key": "\([^"]*\)".*/\1/p'
}

_dal_complete() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" node="dal" i w sub flag
    [ "$COMP_CWORD" -gt 0 ] && prev="${COMP_WORDS[COMP_CWORD-1]}"
    # Which (sub)command is being completed: the subcommand words before the cursor, skipping flags and
    # the values of flags that take one.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${COMP_WORDS[i]}"
        case "$w" in -*|=) continue ;; esac
        case " $(_dal_valued "$node") " in *" ${COMP_WORDS[i-1]} "*) continue ;; esac
        sub=""
        for s in $(_dal_subs "$node"); do [ "$s" = "$w" ] && sub="$s"; done
        [ -n "$sub" ] && node="$node $sub"
    done
    # --flag=VALUE: bash splits it into `--flag`, `=`, `VALUE`.
    flag="$prev"
    if [ "$prev" = "=" ] && [ "$COMP_CWORD" -gt 1 ]; then flag="${COMP_WORDS[COMP_CWORD-2]}"; fi
    if [ "$cur" = "=" ]; then flag="$prev"; cur=""; fi
    case " $(_dal_valued "$node") " in
        *" $flag "*)
            local choices
            choices="$(_dal_choices "$node" "$flag")"
            if [ -n "$choices" ]; then
                COMPREPLY=($(compgen -W "$choices" -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return 0 ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(_dal_flags "$node")" -- "$cur"))
        return 0
    fi
    local subs
    subs="$(_dal_subs "$node")"
    if [ -n "$subs" ]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
        return 0
    fi
    case "$(_dal_positional "$node")" in
        runs) COMPREPLY=($(compgen -W "$(_dal_runs)" -- "$cur")) ;;
        choices) COMPREPLY=($(compgen -W "$(_dal_positional_choices "$node")" -- "$cur")) ;;
        files) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
    return 0
}
complete -o filenames -o bashdefault -F _dal_complete dal
"""


def bash_script(parser: argparse.ArgumentParser) -> str:
    nodes = _walk(parser)

    def choices_fn() -> str:
        arms = []
        for n in nodes:
            for flag, values in n.choices.items():
                arms.append(f'        "{n.path}|{flag}") echo "{" ".join(values)}" ;;')
        return '    case "$1|$2" in\n' + "\n".join(arms) + "\n    esac"

    parts = [
        "# dal shell completion for bash (generated by `dal completion bash` from dal's own commands).",
        "# Install: echo 'eval \"$(dal completion bash)\"' >> ~/.bashrc",
        "_dal_subs() {\n" + _case(nodes, lambda n: " ".join(n.subs)) + "\n}",
        "_dal_flags() {\n" + _case(nodes, lambda n: " ".join(n.flags)) + "\n}",
        "_dal_valued() {\n" + _case(nodes, lambda n: " ".join(n.valued)) + "\n}",
        "_dal_choices() {\n" + choices_fn() + "\n}",
        "_dal_positional() {\n" + _case(nodes, lambda n: n.positional) + "\n}",
        "_dal_positional_choices() {\n" + _case(nodes, lambda n: " ".join(n.positional_choices)) + "\n}",
    ]
    return "\n".join(parts) + "\n" + _BASH_BODY


def zsh_script(parser: argparse.ArgumentParser) -> str:
    # zsh runs the bash script through its bash-completion layer: one generator, one behaviour.
    return ("# dal shell completion for zsh (generated by `dal completion zsh`).\n"
            "# Install: echo 'eval \"$(dal completion zsh)\"' >> ~/.zshrc\n"
            "autoload -U +X compinit && compinit\n"
            "autoload -U +X bashcompinit && bashcompinit\n"
            + bash_script(parser))


def fish_script(parser: argparse.ArgumentParser) -> str:
    nodes = _walk(parser)
    lines = [
        "# dal shell completion for fish (generated by `dal completion fish`).",
        "# Install: dal completion fish > ~/.config/fish/completions/dal.fish",
        "complete -c dal -f",
        "function __dal_runs",
        "    echo latest",
        "    command dal receipts --json --limit 50 2>/dev/null | "
        "sed -n -e 's/^ *\"run_id\": \"\\([^\"]*\\)\".*/\\1/p' -e 's/^ *\"key\": \"\\([^\"]*\\)\".*/\\1/p'",
        "end",
    ]
    for n in nodes:
        words = n.path.split()[1:]
        if not words:
            cond = "__fish_use_subcommand"
        else:
            cond = "; and ".join(f"__fish_seen_subcommand_from {w}" for w in words)
            if n.subs:
                cond += "; and not __fish_seen_subcommand_from " + " ".join(n.subs)
        for name in n.subs:
            lines.append(f"complete -c dal -n '{cond}' -a {name}")
        for flag in n.flags:
            opt = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
            extra = ""
            if flag in n.choices:
                extra = f" -x -a '{' '.join(n.choices[flag])}'"
            elif flag in n.valued:
                extra = " -r -F"
            lines.append(f"complete -c dal -n '{cond}' {opt}{extra}")
        if n.positional == "runs":
            lines.append(f"complete -c dal -n '{cond}' -x -a '(__dal_runs)'")
        elif n.positional == "choices":
            lines.append(f"complete -c dal -n '{cond}' -x -a '{' '.join(n.positional_choices)}'")
        elif n.positional == "files":
            lines.append(f"complete -c dal -n '{cond}' -F")
    return "\n".join(lines) + "\n"


def register(subparsers: Any, root: argparse.ArgumentParser) -> None:
    c = subparsers.add_parser(
        "completion", help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL on stdout. Install it with "
        "`eval \"$(dal completion bash)\"` in ~/.bashrc (zsh: ~/.zshrc), or "
        "`dal completion fish > ~/.config/fish/completions/dal.fish`.")
    c.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    c.set_defaults(func=lambda args: _cmd_completion(root, args.shell))


def _cmd_completion(root: argparse.ArgumentParser, shell: str) -> int:
    make = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[shell]
    sys.stdout.write(make(root))
    return 0
