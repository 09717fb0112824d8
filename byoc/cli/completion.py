"""``byoc completion SHELL``: a tab-completion script for the command line.

The script is generated from byoc's own argument parser by shtab (an optional extra,
``completion``), so it completes exactly the commands, options and choices that exist;
file arguments complete file names. It is static: regenerate it after an upgrade.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError

SHELLS = ("bash", "zsh", "tcsh")
EPILOG = """\
examples:
  byoc completion bash > ~/.local/share/bash-completion/completions/byoc
  byoc completion zsh > ~/.zfunc/_byoc        # with fpath+=(~/.zfunc) before compinit
  eval "$(byoc completion bash)"              # this shell only

Needs shtab: pip install 'byoc-codegen[completion]'.
"""


def add_commands(sub, parents) -> None:
    p = sub.add_parser(
        "completion",
        parents=parents,
        help="print a tab-completion script for bash, zsh or tcsh",
        description="Print a shell script that completes byoc's commands, options and file names.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(run=_cmd_completion)


def completes_files(action: argparse.Action) -> argparse.Action:
    """Mark ``action`` (a positional path argument) as completing file names."""
    action.complete = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}  # type: ignore[attr-defined]
    return action


def _cmd_completion(args: argparse.Namespace) -> int:
    try:
        import shtab
    except ImportError:
        raise UsageError(
            "byoc completion needs the shtab package", hint="pip install 'byoc-codegen[completion]'"
        ) from None
    from . import parser

    sys.stdout.write(shtab.complete(parser(), shell=args.shell))
    return 0
