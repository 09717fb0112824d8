"""Validated op catalogs and backend specs, kept in byoc's disk cache.

Parsing a spec file's YAML is cached already (:mod:`.yaml_doc`); checking the parsed
tree and building a :class:`~byoc.catalog.Catalog` or a
:class:`~byoc.spec.backend.BackendSpec` from it cost every process 45 ms for the
shipped op catalog and 40 to 50 ms per backend (together, a quarter of the quick
start's warm ``byoc run``). The built object is kept, pickled (kind ``validated``),
under a key of:

* byoc's code stamp (:func:`byoc.warm_keys.code_stamp`): the validators, the
  reference kernels and every shipped spec;
* the file's real path, and the status (size, modification and change times) of the
  file and of every file beside it, which a backend spec reads its support files and
  templates from (any write changes a file's change time);
* for a backend spec, the key of the catalog it was checked against.

What is not kept: a spec that reads an environment variable (``${NAME}`` in its
``requires:`` directories, :func:`environment_value`), whose value is part of the
result, and anything that cannot be pickled. A spec with an error raises it in every
process, as before: only what validated is kept. A damaged or unreadable entry is
validated again, and replaced.

Two things in these objects do not pickle as they are, and are made again on load:
read-only mappings (``MappingProxyType``) are rebuilt by
:func:`~byoc.spec.bindings.frozen_map`, and an op's reference, a closure, by the
call that made it (its ``rebuilt_by`` attribute, :func:`byoc.catalog.compile_reference`
and :func:`byoc.catalog.kernel_reference`).
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from types import FunctionType, MappingProxyType
from typing import TypeVar

from byoc.disk_cache import entry_key, read_entry, write_entry
from byoc.warm_keys import code_stamp

from .bindings import frozen_map

KIND = "validated"
FORMAT = "1"
T = TypeVar("T")
_ENVIRONMENT_READS: ContextVar[list[str] | None] = ContextVar("environment_reads", default=None)


def environment_value(name: str) -> str:
    """The environment variable ``name``, which the validation under way reads: its
    result depends on it, and is not kept."""
    reads = _ENVIRONMENT_READS.get()
    if reads is not None:
        reads.append(name)
    return os.environ[name]


def validated(what: str, path: str | Path, extra: str, make: Callable[[], T], expect: type) -> T:
    """The object that ``make`` validates from the spec file ``path`` (``what``: a
    catalog or a backend spec), from the disk cache when an earlier process kept it
    under the same key (see the module doc; ``extra`` joins the key); otherwise made,
    and kept when it may be."""
    key = _key(what, path, extra)
    if key is not None:
        data = read_entry(KIND, key)
        if data is not None:
            try:
                found = pickle.loads(data)
                if isinstance(found, expect):
                    return found
            except Exception:  # damaged, or made by code that is gone: validated again
                pass
    reads: list[str] = []
    token = _ENVIRONMENT_READS.set(reads)
    try:
        value = make()
    finally:
        _ENVIRONMENT_READS.reset(token)
    if key is not None and isinstance(value, expect) and not reads:
        data = dumps(value)
        if data is not None:
            write_entry(KIND, key, data)
    return value


def dumps(value: object) -> bytes | None:
    """``value`` pickled, its read-only mappings and references made again on load;
    None when something in it does not pickle."""
    out = io.BytesIO()
    try:
        _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception:  # something that does not pickle: validated in every process
        return None
    return out.getvalue()


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if type(obj) is MappingProxyType:
            return frozen_map, (dict(obj),)
        if isinstance(obj, FunctionType):
            rebuilt_by = getattr(obj, "rebuilt_by", None)
            if rebuilt_by is not None:
                return rebuilt_by
        return NotImplemented


def _key(what: str, path: str | Path, extra: str) -> str | None:
    real = os.path.realpath(path)
    statuses = [_status(real)]
    if statuses[0] is None:
        return None
    try:
        with os.scandir(os.path.dirname(real)) as found:
            beside = sorted(e.path for e in found if e.is_file() and e.path != real)
    except OSError:
        return None
    statuses += [f"{os.path.basename(full)}:{_status(full)}" for full in beside]
    return entry_key(KIND, FORMAT, what, code_stamp(), real, extra, *map(str, statuses))


def _status(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
