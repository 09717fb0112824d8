"""Verbosity of the command line: ``-v``/``-q`` on every command, and where byoc's
log records go.

Inside, byoc logs through the standard :mod:`logging` module, under the ``byoc``
logger (``byoc.building``, ``byoc.runtime.build``, ...); as a library it adds no
handler, so an application that embeds byoc decides what it sees. The command line
attaches one handler to standard error:

==========  =================================================================
(default)   warnings and errors; progress of a long compilation on a terminal
``-v``      also each stage and its time, the placement, each compilation
``-vv``     also debug detail: compiler command lines, cache hits and misses
``-q``      errors only, and no progress lines
==========  =================================================================
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

LOGGER = "byoc"


def add_verbosity_arguments(p: argparse.ArgumentParser, dest_prefix: str = "") -> None:
    """``-v`` (repeatable) and ``-q`` on ``p``; the top-level parser stores them
    under ``dest_prefix`` so that a subcommand's own default cannot overwrite them."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        dest=f"{dest_prefix}verbose",
        action="count",
        default=0,
        help="say more on standard error: -v each stage with its time, -vv also compiler commands and cache use",
    )
    group.add_argument(
        "-q",
        "--quiet",
        dest=f"{dest_prefix}quiet",
        action="store_true",
        help="errors only: no warnings, and no progress lines during a long compilation "
        "(none are written when standard error is not a terminal)",
    )


def verbosity(args: argparse.Namespace) -> int:
    """-1 for quiet, 0 by default, 1 and 2 for -v and -vv (given before or after the command)."""
    if getattr(args, "quiet", False) or getattr(args, "global_quiet", False):
        return -1
    return min(2, getattr(args, "verbose", 0) + getattr(args, "global_verbose", 0))


@contextmanager
def logging_to_stderr(level: int) -> Iterator[None]:
    """While inside, byoc's records at ``level`` (see :func:`verbosity`) and above go
    to standard error; after, the ``byoc`` logger is as it was (``main`` may run many
    times in one process, a test's or an embedding program's)."""
    logger = logging.getLogger(LOGGER)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("byoc: %(message)s" if level < 2 else "byoc: [%(name)s] %(message)s")
    )
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel({-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(level, logging.DEBUG))
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def progress_printer(args: argparse.Namespace):
    """Where a long compilation reports progress: standard error when it is a terminal
    (or -v is given) and -q is not; else nowhere."""
    level = verbosity(args)
    if level < 0 or (level == 0 and not sys.stderr.isatty()):
        return None

    def show(line: str) -> None:
        sys.stderr.write(f"byoc: {line}\n")
        sys.stderr.flush()

    return show
