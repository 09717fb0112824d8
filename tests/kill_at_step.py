"""Run the byoc CLI and SIGKILL it at its K-th file-system step inside byoc's atomic
writers: a deterministic "killed mid-way" for tests/test_faults_kills.py, with no hook
in byoc itself.

    python tests/kill_at_step.py K byoc-arguments...

Inside ``byoc.atomic.write_directory`` and ``write_file``, every call of os.open,
os.mkdir, os.fsync, os.chmod, os.replace, os.rename, os.unlink, os.rmdir, open,
shutil.rmtree and the atomic directory swap is a step; the process kills itself
just before step K. With K = 0 it runs to the end and prints ``steps: N`` to stderr.
``BYOC_TEST_NO_EXCHANGE=1`` disables the atomic swap (``renameat2``), so the
two-rename fallback is exercised.
"""

from __future__ import annotations

import builtins
import io
import os
import shutil
import signal
import sys

import byoc.atomic as atomic

KILL_AT = int(sys.argv[1])
state = {"active": 0, "count": 0}


def _step(fn):
    def wrapped(*args, **kwargs):
        if state["active"]:
            state["count"] += 1
            if state["count"] == KILL_AT:
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args, **kwargs)

    return wrapped


def _scope(fn):
    def wrapped(*args, **kwargs):
        state["active"] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            state["active"] -= 1

    return wrapped


for name in ("open", "mkdir", "fsync", "chmod", "replace", "rename", "unlink", "rmdir"):
    setattr(os, name, _step(getattr(os, name)))
builtins.open = io.open = _step(builtins.open)
shutil.rmtree = _step(shutil.rmtree)
if os.environ.get("BYOC_TEST_NO_EXCHANGE") == "1":
    atomic._exchange = lambda a, b: False
else:
    atomic._exchange = _step(atomic._exchange)
atomic.write_directory = _scope(atomic.write_directory)
atomic.write_file = _scope(atomic.write_file)

from byoc.cli import main  # noqa: E402  (after the patches: bundle.py imports write_file by name)

rc = main(sys.argv[2:])
print(f"steps: {state['count']}", file=sys.stderr)
sys.exit(rc)
