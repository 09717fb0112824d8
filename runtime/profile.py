"""Profiling a run: where the time of one graph run goes (``Model.profile``, ``byoc run
--profile``).

A :class:`Profile` holds one event per span of the run, each on ``CLOCK_MONOTONIC``
(``time.monotonic_ns``) in nanoseconds:

- ``run``: the executor's run of the graph (its steps; not copying inputs in or
  outputs out);
- ``region``: each call of an offloaded function, timed by the graph executor around
  the call (argument conversion and checks included);
- ``host op``: each host function the host graph runs (connected host ops are fused
  into one, as TVM fuses them), timed the same way;
- ``kernel``: each kernel call inside a region, timed by the generated code of a
  library built with profiling (byoc generator/c/profile.py): for ``c_source``, each
  kernel call of the body; for ``c_fused``, each loop nest; for ``engine``, the run of
  the layer graph. Interpreted modules (``json``, ``examplejson``) have none.

:meth:`Profile.table` renders the time per name, kind and backend, and
:meth:`Profile.to_chrome_trace` writes the events as a Chrome trace (complete events,
``"ph": "X"``, times in microseconds), which Perfetto and ``chrome://tracing`` open.

This module never imports ``byoc.generator``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .executor import GraphExecutor
from .interface import Module
from .module import LibraryModule

KINDS = ("run", "region", "kernel", "host op")


@dataclass(frozen=True, slots=True)
class Event:
    """One timed span: ``start`` and ``end`` in CLOCK_MONOTONIC nanoseconds."""

    name: str
    kind: str
    """One of :data:`KINDS`."""
    backend: str | None
    """The backend that ran it; None for the run and the host ops."""
    start: int
    end: int
    thread: int
    """The native id of the thread that made the call."""
    args: Mapping[str, str] = field(default_factory=dict)
    """What the trace shows beside it: the region of a kernel, where it came from, ..."""

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Row:
    """The events of one name, kind and backend, added up (a line of :meth:`Profile.table`)."""

    name: str
    kind: str
    backend: str | None
    calls: int
    total: int
    """Nanoseconds."""
    share: float
    """Of the run's time."""
    depth: int = 0
    """1 for a kernel, listed under its region."""

    @property
    def mean(self) -> float:
        return self.total / self.calls


@dataclass(frozen=True)
class Profile:
    """One profiled run of graph ``graph``: its events, in order of start, and outputs."""

    graph: str
    events: tuple[Event, ...]
    outputs: tuple[np.ndarray, ...]
    dropped: int = 0
    """Kernel events a library recorded but could not keep (its buffer was full)."""

    @property
    def run(self) -> Event:
        """The run of the graph, which every other event lies within."""
        return next(e for e in self.events if e.kind == "run")

    def of_kind(self, kind: str) -> list[Event]:
        """The events of ``kind`` (one of :data:`KINDS`), in order of start."""
        return [e for e in self.events if e.kind == kind]

    def rows(self) -> list[Row]:
        """The events added up per name, kind and backend: regions and host ops by total
        time, each region followed by its kernels by total time."""
        groups: dict[tuple[str, str, str | None], list[Event]] = {}
        for e in self.events:
            if e.kind != "run":
                groups.setdefault((e.name, e.kind, e.backend), []).append(e)
        whole = max(self.run.duration, 1)

        def row(key: tuple[str, str, str | None], depth: int = 0) -> Row:
            events = groups[key]
            total = sum(e.duration for e in events)
            return Row(*key, len(events), total, total / whole, depth)

        kernels: dict[str, list[Row]] = {}
        top: list[Row] = []
        for key, events in groups.items():
            if key[1] == "kernel":
                kernels.setdefault(events[0].args["region"], []).append(row(key, 1))
            else:
                top.append(row(key))
        out: list[Row] = []
        for r in sorted(top, key=lambda r: -r.total):
            out.append(r)
            out += sorted(kernels.get(r.name, ()), key=lambda k: -k.total) if r.kind == "region" else ()
        return out

    def table(self) -> str:
        """The time per region, kernel and host op, as a text table."""
        head = ("name", "kind", "backend", "calls", "total", "per call", "share")
        lines = [head] + [
            (
                "  " * r.depth + r.name,
                r.kind,
                r.backend or "host",
                str(r.calls),
                _time(r.total),
                _time(r.mean),
                f"{100 * r.share:.1f}%",
            )
            for r in self.rows()
        ]
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        right = {3, 4, 5, 6}
        text = [
            "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths)))
            for line in lines
        ]
        regions = sum(e.duration for e in self.events if e.kind in ("region", "host op"))
        summary = (
            f"graph {self.graph}: run {_time(self.run.duration)}; regions and host ops "
            f"{_time(regions)} ({100 * regions / max(self.run.duration, 1):.1f}%)"
        )
        if self.dropped:
            summary += f"; {self.dropped} kernel event(s) dropped (a library's buffer was full)"
        return "\n".join([summary, *(line.rstrip() for line in text)])

    def chrome_trace(self) -> dict[str, Any]:
        """The events as a Chrome trace (:func:`chrome_trace`)."""
        return chrome_trace([self])

    def to_chrome_trace(self, path: str | Path) -> Path:
        """Write :meth:`chrome_trace` to ``path`` (atomically); open it in Perfetto
        (ui.perfetto.dev) or ``chrome://tracing``."""
        return write_chrome_trace([self], path)


def chrome_trace(profiles: Sequence[Profile]) -> dict[str, Any]:
    """The events of ``profiles`` as one Chrome trace, the format ONNX Runtime's
    profiler writes: ``{"traceEvents": [...]}`` of complete events (``"ph": "X"``),
    ``ts`` and ``dur`` in microseconds from the start of the first run, ``cat`` the
    kind (run, region, kernel, host op), ``tid`` the calling thread."""
    t0 = min((p.run.start for p in profiles), default=0)
    pid = os.getpid()
    events = [
        {
            "name": e.name,
            "cat": e.kind,
            "ph": "X",
            "ts": (e.start - t0) / 1000,
            "dur": e.duration / 1000,
            "pid": pid,
            "tid": e.thread,
            "args": {**({"backend": e.backend} if e.backend else {}), **e.args},
        }
        for p in profiles
        for e in p.events
    ]
    dropped = {p.graph: p.dropped for p in profiles}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"dropped_kernel_events": dropped}}


def write_chrome_trace(profiles: Sequence[Profile], path: str | Path) -> Path:
    """Write :func:`chrome_trace` of ``profiles`` to ``path``, atomically."""
    from byoc.atomic import write_file

    write_file(path, json.dumps(chrome_trace(profiles), indent=1) + "\n")
    return Path(path)


def _time(ns: float) -> str:
    if ns < 1e6:
        return f"{ns / 1e3:.1f} us"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def profile_run(
    executor: GraphExecutor, inputs: Mapping[str, Any], backends: Mapping[int, str | None]
) -> Profile:
    """Run ``executor`` once on ``inputs`` with profiling; ``backends`` maps the ``id``
    of each of its modules to its backend (None: the host)."""
    libraries = {
        id(m): m for m in executor.step_modules if isinstance(m, LibraryModule) and m.profiling
    }.values()
    for library in libraries:
        library.read_profile()  # forget what earlier calls recorded
    timings: list[tuple[int, int]] = []
    outputs, (start, end) = executor.timed_call(timings, **inputs)
    thread = threading.get_native_id()
    events = [Event(executor.name, "run", None, start, end, thread)]
    for (name, module), (begin, finish) in zip(_steps(executor), timings):
        kind = "host op" if module.kind == "host" else "region"
        backend = backends.get(id(module))
        events.append(Event(name, kind, backend, begin, finish, thread, {"module": module.kind}))
    dropped = 0
    for library in libraries:
        sites, rows, recorded = library.read_profile()
        dropped += recorded - len(rows)
        events += _kernels(sites, rows, library.backend, events)
    events.sort(key=lambda e: (e.start, -e.end))
    return Profile(executor.name, tuple(events), outputs, dropped)


def _steps(executor: GraphExecutor) -> list[tuple[str, Module]]:
    return [(name, module) for (_, _, name), module in zip(executor.steps, executor.step_modules)]


def _kernels(
    sites: Sequence[tuple[str, str, str]], rows: np.ndarray, backend: str | None, calls: Sequence[Event]
) -> list[Event]:
    """The kernel events of one library, each on the thread of the region call whose
    span holds it (the call that ran it)."""
    spans: dict[str, list[Event]] = {}
    for e in calls:
        if e.kind == "region":
            spans.setdefault(e.name, []).append(e)
    out = []
    for site, start, end in rows.tolist():
        function, name, where = sites[site]
        holder = next((c for c in spans.get(function, ()) if c.start <= start and end <= c.end), None)
        thread = holder.thread if holder is not None else threading.get_native_id()
        out.append(Event(name, "kernel", backend, start, end, thread, {"region": function, "source": where}))
    return out
