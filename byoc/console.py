"""The ``byoc`` program (the console script, and ``python -m byoc``): :func:`byoc.cli.main`
run as one short process, with CPython's cyclic garbage collector set for one.

A warm ``byoc run`` of a small graph lasts about a quarter of a second, and the
collector took a fifth of it:

- the imports (byoc, numpy, tvm-ffi) make a few hundred thousand objects, modules,
  classes and functions that live as long as the process; young collections scanned
  them about a hundred times while they were being made;
- at exit, the interpreter's last collections walked every one of them again, 30-40 ms
  before the process could end.

So the imports run with the collector off, and what they made is then frozen: moved to
the permanent generation, which no collection scans. The command itself runs with the
collector as usual, over what it allocates. At the end everything left is frozen too,
and the final collections skip it: the operating system takes the memory back whole.
Nothing is lost by that: atexit handlers still run (logging's flush, the removal of
temporary directories), and byoc writes every file inside a ``with`` block, so no file
waits for a collection to be flushed.

Tests and programs that embed byoc call :func:`byoc.cli.main` itself, which leaves the
collector as they set it.
"""

from __future__ import annotations

import gc


def run() -> int:
    """Run the command in ``sys.argv``; its exit status."""
    gc.disable()
    try:
        from .cli import main
    finally:
        gc.freeze()
        gc.enable()
    try:
        return main()
    finally:
        gc.freeze()
