"""The bad-input corpus (tests/data/bad/cases.yaml and cases_*.yaml): every case runs the CLI in a
process of its own and must fail cleanly: exit status 2, no traceback, no signal, the
error's kind first, its message, and ``--> FILE:LINE:COLUMN`` where the input has
lines. The cases run in parallel, once per test session: most in a child forked from a
server that has imported the CLI (tests/cli_forks.py), those whose memory, time or
standard input matter (and one plain case in :data:`SAMPLED`, whose times are what a
time limit counts from) as ``python -m byoc`` of their own."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import pytest
from cli_forks import fork_servers
from conftest import DATA, EXAMPLES
from ruamel.yaml import YAML

from byoc.errors import BuildError, GraphError, ParseError, RuntimeFailure, SpecError, UsageError

BAD = DATA / "bad"
CASE_FILES = (BAD / "cases.yaml", *sorted(BAD.glob("cases_*.yaml")))
"""The corpus: cases.yaml, then one file per theme (options, special files, ...)."""
FIXTURE_MODULES = ("make_fixtures", *sorted(p.stem for p in BAD.glob("fixtures_*.py")))
"""make_fixtures.py, then one fixture module per theme; each has a ``FIXTURES`` dict."""
KINDS = {
    cls.__name__: cls.title
    for cls in (ParseError, GraphError, SpecError, UsageError, BuildError, RuntimeFailure)
}
ARGPARSE = "argparse"
SURFACES = (
    "graph",
    "examplejson",
    "spec",
    "cli",
    "npz",
    "bundle",
    "onnx",
    "option",
    "special_file",
    "bomb",
    "native",
)
"""The surfaces tests/RELIABILITY.md counts; the last four have no default argv."""
DEFAULT_ARGV = {
    "graph": ["parse", "{file}"],
    "examplejson": ["parse", "{file}"],
    "spec": ["check", "{file}"],
    "npz": ["run", "g.graph", "--inputs", "{file}"],
    "bundle": ["run", "{file}"],
    "onnx": ["import", "{file}"],
}
FIELDS = {
    "id",
    "surface",
    "file",
    "make",
    "input",
    "argv",
    "error",
    "at",
    "at_file",
    "message",
    "max_rss_mb",
    "within_s",
    "stdin",
}
TIMEOUT = 120
STDINS = (None, "pipe", "zero")
"""A case's ``stdin``: /dev/null (None), an open pipe that no one writes to, /dev/zero."""


@dataclass(frozen=True)
class BadCase:
    id: str
    surface: str
    error: str
    message: str
    argv: tuple[str, ...]
    file: str | None = None
    make: str | None = None
    input: str | None = None
    at: tuple[int, int] | None = None
    at_file: str | None = None
    max_rss_mb: int | None = None
    """The CLI's peak resident memory must stay under this (bombs)."""
    within_s: float | None = None
    """The CLI must have failed within this many seconds (special files)."""
    stdin: str | None = None
    """The CLI's standard input: ``pipe`` (a pipe kept open that no one writes to) or
    ``zero`` (``/dev/zero``); default: ``/dev/null``."""


@dataclass(frozen=True)
class Fixtures:
    FIXTURES: dict


def load_make_fixtures() -> Fixtures:
    """Every fixture module's ``FIXTURES``, merged (a name defined twice is an error).
    The modules are imported with tests/data/bad on ``sys.path``, so a theme's module
    may import the ``make_*.py`` modules for their helpers."""
    merged: dict = {}
    if str(BAD) not in sys.path:
        sys.path.insert(0, str(BAD))
    for name in FIXTURE_MODULES:
        module = importlib.import_module(name)
        clash = set(merged) & set(module.FIXTURES)
        assert not clash, f"{name}.py redefines fixtures {sorted(clash)}"
        merged.update(module.FIXTURES)
    return Fixtures(merged)


def load_cases() -> list[BadCase]:
    """Every case of the corpus files, checked for well-formedness."""
    raws = []
    for case_file in CASE_FILES:
        raws += YAML(typ="safe", pure=True).load(case_file.read_text(encoding="utf-8"))["cases"]
    cases = []
    for raw in raws:
        unknown = set(raw) - FIELDS
        assert not unknown, f"{raw.get('id')}: unknown fields {unknown}"
        surface = raw["surface"]
        assert surface in SURFACES, raw["id"]
        assert raw["error"] in KINDS or raw["error"] == ARGPARSE, raw["id"]
        argv = raw.get("argv") or DEFAULT_ARGV.get(surface)
        assert argv, f"{raw['id']}: a case of surface {surface} states its argv"
        assert raw.get("stdin") in STDINS, f"{raw['id']}: stdin is one of {sorted(map(str, STDINS))}"
        file = raw.get("file")
        cases.append(
            BadCase(
                id=raw["id"],
                surface=surface,
                error=raw["error"],
                message=str(raw["message"]),
                argv=tuple(str(a) for a in argv),
                file=file,
                make=raw.get("make"),
                input=raw.get("input") or (Path(file).name if file else None),
                at=tuple(raw["at"]) if raw.get("at") else None,
                at_file=raw.get("at_file"),
                max_rss_mb=raw.get("max_rss_mb"),
                within_s=raw.get("within_s"),
                stdin=raw.get("stdin"),
            )
        )
    return cases


ID_LINE = re.compile(r"^[ \t]*- \{?id: ([^,\s}]+)", re.M)
"""A case's first line: collection reads the ids alone (:func:`case_ids`), and the
corpus is parsed when a test needs its cases (parsing it took a second of every
collection); test_corpus_size_and_ids checks the two agree."""


def case_ids() -> list[str]:
    return [m.group(1) for f in CASE_FILES for m in ID_LINE.finditer(f.read_text(encoding="utf-8"))]


@functools.cache
def cases() -> tuple[BadCase, ...]:
    return tuple(load_cases())


@functools.cache
def by_id() -> Mapping[str, BadCase]:
    """Each case by its id, made once (every item and each time limit looks cases up)."""
    return MappingProxyType({c.id: c for c in cases()})


def command(case: BadCase) -> list[str]:
    return [
        sys.executable,
        "-m",
        "byoc",
        *(a.replace("{file}", case.input or "").replace("{examples}", str(EXAMPLES)) for a in case.argv),
    ]


def materialise(case: BadCase, directory: Path, fixtures) -> None:
    """Put the case's files into its (fresh) working directory."""
    directory.mkdir(parents=True)
    if case.file is not None:
        source = BAD / case.file
        if source.is_dir():
            shutil.copytree(source, directory / source.name)
        else:
            shutil.copyfile(source, directory / source.name)
    if case.make is not None:
        fixtures.FIXTURES[case.make](directory)


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    max_rss_mb: float
    """Peak resident memory of the CLI process (``wait4``'s ``ru_maxrss``)."""
    seconds: float
    forked: bool = False
    """Run in a child of the fork server (tests/cli_forks.py): its time leaves out the
    interpreter's start and the imports, and its peak memory is not its own."""


SAMPLED = 16
"""One plain case in this many runs as a process of its own too, for :func:`_usual_seconds`."""


def own_process(case: BadCase, k: int) -> bool:
    """Whether case ``k`` (of the selected, in order) runs as ``python -m byoc`` of its
    own: a measured memory or time, a special standard input, or a sampled plain case."""
    return (
        case.max_rss_mb is not None or case.within_s is not None or case.stdin is not None or k % SAMPLED == 0
    )


LAUNCHER = """
import os, signal, sys
report = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
os.write(report, str(usage.ru_maxrss).encode())
os.close(report)
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and writes its peak memory (``wait4``'s ``ru_maxrss``, KiB) to the fd
it is given, then ends as the command ended (its exit status, or its signal). Linux
keeps a process's peak across ``exec`` and counts the memory of the process it forked
from, so a command forked straight from a test worker that has grown (a sweep, TVM)
would report the worker's size; forked from this small launcher, it reports its own."""


def _run(case: BadCase, directory: Path, env: dict[str, str]) -> Outcome:
    """Run the case's command; its own peak memory comes from ``wait4`` on its pid (in
    :data:`LAUNCHER`), so that cases running in parallel threads do not mix their
    figures and the test worker's own size does not count."""
    writer = None  # the write end of a ``stdin: pipe``, held open until the CLI exits
    if case.stdin == "pipe":
        reader, writer = os.pipe()
        stdin = reader
    elif case.stdin == "zero":
        stdin = os.open("/dev/zero", os.O_RDONLY)
    else:
        stdin = subprocess.DEVNULL
    report, report_w = os.pipe()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(report_w), *command(case)],
            cwd=directory,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(report_w,),
            start_new_session=True,  # a timeout kills the launcher and the command together
        )
    finally:
        os.close(report_w)
        if stdin != subprocess.DEVNULL:
            os.close(stdin)
    with ThreadPoolExecutor(max_workers=2) as readers:
        stdout, stderr = readers.submit(proc.stdout.read), readers.submit(proc.stderr.read)
        deadline = started + TIMEOUT
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.monotonic() - started
        if writer is not None:
            os.close(writer)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out, err = stdout.result(), stderr.result()
    proc.stdout.close()
    proc.stderr.close()
    with os.fdopen(report, "rb") as f:
        measured = f.read()
    return Outcome(
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        int(measured) / 1024 if measured else usage.ru_maxrss / 1024,  # killed: the launcher's
        seconds,
    )


@pytest.fixture(scope="session")
def outcomes(request, tmp_path_factory) -> dict[str, Outcome]:
    """Run every selected case at once, in parallel subprocesses, once per run: the
    first worker that needs them runs them, under a lock in the run's shared temporary
    folder, and leaves the outcomes there for the other (pytest-xdist may hand the
    cases to both, and a module-scoped fixture ran them again each time a worker came
    back to the module: three times in one run of the whole suite, where one pass over
    the 532 cases had taken 462 s of a worker)."""
    selected = {
        item.callspec.params["case_id"]
        for item in request.session.items
        if getattr(item, "callspec", None) is not None
        and item.function is test_bad_input
        and "case_id" in item.callspec.params
    }
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    key = hashlib.sha256("\n".join(sorted(selected)).encode()).hexdigest()[:16]
    saved = shared / f"bad-input-outcomes-{key}.pickle"
    with open(shared / f"bad-input-outcomes-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if saved.exists():
            return pickle.loads(saved.read_bytes())
        found = _run_cases(selected, tmp_path_factory)
        saved.with_suffix(".part").write_bytes(pickle.dumps(found))
        saved.with_suffix(".part").rename(saved)
        return found


def _run_cases(selected: set[str], tmp_path_factory) -> dict[str, Outcome]:
    root = tmp_path_factory.mktemp("bad")
    env = {k: v for k, v in os.environ.items() if k not in ("BYOC_SPEC_PATH", "LD_PRELOAD")}
    env["BYOC_CACHE_DIR"] = str(root / "cache")
    fixtures = load_make_fixtures()
    work = []
    for case in cases():
        if case.id in selected:
            directory = root / case.id
            materialise(case, directory, fixtures)
            work.append((case, directory))
    workers = max(2, min(8, os.cpu_count() or 2))
    streams = root / "_streams"
    streams.mkdir()
    with fork_servers(workers, env, root) as servers, ThreadPoolExecutor(max_workers=workers) as pool:

        def run(k: int, case: BadCase, directory: Path) -> tuple[str, Outcome]:
            if own_process(case, k):
                return case.id, _run(case, directory, env)
            got = servers.run(command(case)[3:], directory, streams / case.id, TIMEOUT)
            return case.id, Outcome(
                got.returncode, got.stdout, got.stderr, got.max_rss_kb / 1024, got.seconds, forked=True
            )

        return dict(pool.map(lambda item: run(item[0], *item[1]), enumerate(work)))


@pytest.mark.xdist_group("bad_inputs")  # one worker runs them all: `outcomes` runs every case at once
@pytest.mark.parametrize("case_id", case_ids())
def test_bad_input(case_id: str, outcomes: dict[str, Outcome]):
    case = by_id()[case_id]
    out = outcomes[case.id]
    shown = f"$ {' '.join(command(case)[3:])}\n--- exit {out.returncode}, stderr:\n{out.stderr[-3000:]}"
    assert out.returncode >= 0, f"killed by signal {-out.returncode}\n{shown}"
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout, shown
    assert out.returncode == 2, shown
    lines = out.stderr.splitlines()
    assert lines, shown
    if case.error == ARGPARSE:
        assert lines[0].startswith("usage: byoc"), shown
        assert re.search(r"^byoc( \w+)?: error: ", out.stderr, re.M), shown
    else:
        assert lines[0].startswith(f"{KINDS[case.error]}: "), shown
    assert case.message in out.stderr, shown
    if case.at is not None or case.at_file is not None:
        where = re.escape(case.at_file or case.input or "")
        line_col = f"{case.at[0]}:{case.at[1]}" if case.at else r"\d+:\d+"
        pattern = rf"^  --> (?:.*/)?{where}:{line_col}$"
        assert re.search(pattern, out.stderr, re.M), f"no location matching {pattern!r}\n{shown}"
    else:
        assert "  --> " not in out.stderr, shown
    if case.max_rss_mb is not None:
        assert out.max_rss_mb < case.max_rss_mb, f"peak memory {out.max_rss_mb:.0f} MB\n{shown}"
    if case.within_s is not None:
        usual = _usual_seconds(outcomes)
        assert out.seconds - usual < case.within_s, (
            f"took {out.seconds:.1f} s, the usual case {usual:.1f} s\n{shown}"
        )


def _usual_seconds(outcomes: dict[str, Outcome]) -> float:
    """The median wall time of the batch's cases without a time limit that ran as
    processes of their own (:func:`own_process`): each starts the same interpreter on
    the same (shared, maybe loaded) machine at the same time, so a special-file case's
    limit counts beyond it. A CLI that hangs on a FIFO or reads
    /dev/zero forever takes :data:`TIMEOUT`, whatever the load."""
    times = sorted(o.seconds for k, o in outcomes.items() if by_id()[k].within_s is None and not o.forked)
    return times[len(times) // 2] if times else 0.0


# ------------------------------------------------------------------ the corpus itself


def test_corpus_size_and_ids():
    corpus = cases()
    assert len(corpus) >= 60
    assert len({c.id for c in corpus}) == len(corpus)
    assert case_ids() == [c.id for c in corpus]  # what collection read of the ids
    counts = {s: sum(c.surface == s for c in corpus) for s in SURFACES}
    assert all(n >= 5 for n in counts.values()), counts


def test_every_case_has_a_source_and_a_location_where_files_have_lines():
    fixtures = load_make_fixtures()
    for case in cases():
        assert case.file is not None or case.make is not None or case.surface == "cli", case.id
        if case.file is not None:
            assert (BAD / case.file).exists(), case.id
        if case.make is not None:
            assert case.make in fixtures.FIXTURES, case.id
        if case.surface in ("graph", "examplejson", "spec"):
            assert case.at is not None, f"{case.id}: text inputs have a line and column"


def test_every_committed_file_and_fixture_is_used():
    fixtures = load_make_fixtures()
    used_files = {c.file for c in cases() if c.file}
    committed = {
        str(p.relative_to(BAD))
        for p in BAD.rglob("*")
        if p.is_file()
        and p.parent != BAD
        and "__pycache__" not in p.parts  # Python's bytecode of the fixture modules, never committed
        and not any(str(p.relative_to(BAD)).startswith(f + "/") for f in used_files)
    }
    assert committed <= used_files, sorted(committed - used_files)
    assert set(fixtures.FIXTURES) == {c.make for c in cases() if c.make}, sorted(
        set(fixtures.FIXTURES) ^ {c.make for c in cases() if c.make}
    )
