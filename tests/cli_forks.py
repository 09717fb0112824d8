"""Run the byoc CLI many times without paying, each time, for the interpreter's start
and byoc's imports (about 0.5 of the 0.8 s a bad-input case took): a small server
imports the CLI once, then forks a child per command, which runs ``python -m byoc``'s
own entry (``byoc/__main__.py``, through :func:`runpy.run_module`) in the command's
working directory, with /dev/null as its standard input and files as its output.

The child is a fresh process as far as the command can tell: nothing ran in the server
but imports, the environment is the one the server started with, and the exit status,
a signal that kills it, its streams and its time are what the test reads. Only its
peak memory is not its own (a forked child counts the pages it shares with the server),
so a command whose memory is measured runs in a process of its own instead
(tests/test_bad_inputs.py).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SERVER = r"""
import atexit, json, os, runpy, signal, sys, time, traceback

import byoc.cli  # noqa: F401 - what every command imports, once: each child forks from here


def read_request():
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(0, 65536)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def child(request):
    os.setpgid(0, 0)  # a timeout kills the command and what it started (gcc) together
    os.chdir(request["cwd"])
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = [request["module"], *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:  # what the interpreter does with it
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - an uncaught exception: the traceback and 1
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed or broken stream
                pass
        os._exit(code & 0xFF)


while (request := read_request()) is not None:
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(request)
    try:
        os.setpgid(pid, pid)
    except OSError:  # the child did it first, or has already exited
        pass
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > request["timeout"]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            done, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.005)
    reply = {
        "returncode": os.waitstatus_to_exitcode(status),
        "seconds": time.monotonic() - started,
        "max_rss_kb": usage.ru_maxrss,
    }
    os.write(1, (json.dumps(reply) + "\n").encode())
"""


@dataclass(frozen=True)
class Forked:
    returncode: int
    """The exit status, or minus the signal that killed the command."""
    stdout: str
    stderr: str
    seconds: float
    max_rss_kb: int
    """Not the command's own: it counts the pages the child shares with the server."""


class _Server:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )

    def run(self, args: list[str], cwd: Path, streams: Path, timeout: float, module: str) -> Forked:
        out, err = streams.with_suffix(".out"), streams.with_suffix(".err")
        request = {
            "module": module,
            "args": args,
            "cwd": str(cwd),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": timeout,
        }
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the CLI fork server ended (status {self.proc.wait()})")
        reply = json.loads(line)
        return Forked(
            reply["returncode"],
            out.read_text(encoding="utf-8", errors="replace"),
            err.read_text(encoding="utf-8", errors="replace"),
            reply["seconds"],
            reply["max_rss_kb"],
        )

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


class ForkServers:
    """``count`` servers, for as many commands at once: :meth:`run` takes a free one."""

    def __init__(self, count: int, env: dict[str, str], cwd: Path) -> None:
        self._free: queue.Queue[_Server] = queue.Queue()
        self._all = [_Server(env, cwd) for _ in range(count)]
        for server in self._all:
            self._free.put(server)

    def run(self, args: list[str], cwd: Path, streams: Path, timeout: float, module: str = "byoc") -> Forked:
        """Run ``python -m <module> *args`` in ``cwd`` (``byoc``: the CLI); its output goes
        to ``streams`` (.out, .err)."""
        server = self._free.get()
        try:
            return server.run(args, cwd, streams, timeout, module)
        finally:
            self._free.put(server)

    def close(self) -> None:
        for server in self._all:
            server.close()


@contextmanager
def fork_servers(count: int, env: dict[str, str], cwd: Path) -> Iterator[ForkServers]:
    servers = ForkServers(count, env, cwd)
    try:
        yield servers
    finally:
        servers.close()
