"""Validated op catalogs and backend specs, kept in byoc's disk cache.

Parsing a spec file's YAML is cached already (:mod:`.yaml_doc`); checking the parsed
tree and building a :class:`~byoc.catalog.Catalog` or a
:class:`~byoc.spec.backend.BackendSpec` from it cost every process 45 ms for the
shipped op catalog and 40 to 50 ms per backend (together, a quarter of the quick
start's warm ``byoc run``). The built object is kept, pickled (kind ``validated``),
under a key of:

* byoc's code stamp (:func:`byoc.warm_keys.code_stamp`): the validators, the
  reference kernels and every shipped spec;
* the file's real path, and the status (:func:`byoc.warm_keys.file_status`: device,
  inode, size, modification and change times) of the file and of every file beside it
  (:func:`~byoc.spec.support.sibling_statuses`), which a backend spec reads its
  support files and templates from (any write changes a file's change time);
* for a backend spec, the key of the catalog it was checked against.

What is not kept: a spec that reads an environment variable (``${NAME}`` in its
``requires:`` directories, :func:`environment_value`), whose value is part of the
result, and anything that cannot be pickled. A spec with an error raises it in every
process, as before: only what validated is kept. A damaged or unreadable entry is
validated again, and replaced.

Three things in these objects do not pickle as they are, and are made again on load:
read-only mappings (``MappingProxyType``) are rebuilt by
:func:`~byoc.spec.bindings.frozen_map`; an op's reference, a closure, by the call
that made it (its ``rebuilt_by`` attribute, :func:`byoc.catalog.compile_reference`
and :func:`byoc.catalog.kernel_reference`); and a string that ruamel.yaml read as a
quoted or block scalar (a ``str`` subclass) loads as the plain ``str`` it is, so that
loading an entry does not import ruamel.yaml (the validators and ruamel.yaml are
imported only by a validation, :mod:`.yaml_doc` only where a document is read).
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

from byoc.disk_cache import cached, entry_key
from byoc.warm_keys import code_stamp, file_status

from .bindings import frozen_map
from .support import sibling_statuses

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
    and kept when it may be (:func:`byoc.disk_cache.cached` reads, checks and writes
    the entry)."""
    key = _key(what, path, extra)
    if key is None:  # the file is gone: its validation says so
        return make()
    reads: list[str] = []

    def validate() -> T:
        token = _ENVIRONMENT_READS.set(reads)
        try:
            return make()
        finally:
            _ENVIRONMENT_READS.reset(token)

    def dump(value: T) -> bytes | None:  # None: it read the environment, or does not pickle
        return None if reads else dumps(value)

    return cached(KIND, key, validate, dump=dump, expect=expect)


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
        if isinstance(obj, str) and type(obj) is not str:  # ruamel.yaml's quoted and block scalars
            return str, (str(obj),)
        if isinstance(obj, FunctionType):
            rebuilt_by = getattr(obj, "rebuilt_by", None)
            if rebuilt_by is not None:
                return rebuilt_by
        return NotImplemented


def _key(what: str, path: str | Path, extra: str) -> str | None:
    real = os.path.realpath(path)
    status = file_status(real)
    if status is None:
        return None
    beside = sibling_statuses(real)
    return entry_key(KIND, FORMAT, what, code_stamp(), real, extra, repr(status), repr(beside))
