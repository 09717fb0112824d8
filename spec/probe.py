"""A backend's ``probe:``: dtypes it computes only where the machine and its library do.

A library may compute a type on some CPUs and not on others (the shipped oneDNN spec's
16-bit floats need AVX-512 or newer). A spec lists such dtypes under ``probe:`` with a C
function that asks the library::

    probe:
      doc: Why these dtypes depend on the machine.
      dtypes: [float16, bfloat16]      # a subset of the spec's dtypes
      source: |
        #include <string.h>
        #include <vendor/api.h>
        int byoc_probe(const char* dtype) { ... return 1 when it is computed here ... }

The source may also be a C file beside the spec, ``source: {file: vendor_probe.c}``.

Automatic partitioning (``--backend``) compiles the source as the spec compiles its
modules (its ``compile:`` settings and ``requires:`` libraries), loads it and calls
``byoc_probe`` once per listed dtype that a graph uses (once per process and spec): a
node of a dtype the probe says no to goes to the next backend, as one of a dtype the
spec does not list would. A build refuses an explicit ``@backend { ... }`` region of
such a dtype before compiling it; ``byoc gen`` writes it as on any machine.

This module validates the key; ``byoc.runtime.probe`` runs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from byoc.errors import Location

from .support import file_beside
from .yaml_doc import YamlDoc

PROBE_FUNCTION = "byoc_probe"
"""The C function a probe's source defines: ``int byoc_probe(const char* dtype)``,
non-zero when the machine computes ``dtype`` (a byoc dtype name, such as ``"float16"``)."""

PROBE_KEYS = (("doc", "dtypes", "source"), ())

_DEFINITION = re.compile(r"\bint\s+" + PROBE_FUNCTION + r"\s*\(\s*const\s+char\s*\*\s*[A-Za-z_]\w*\s*\)\s*\{")


@dataclass(frozen=True, slots=True)
class Probe:
    """The dtypes of a backend that only some machines compute, and how to ask."""

    dtypes: tuple[str, ...]
    source: str
    """C source defining :data:`PROBE_FUNCTION`."""
    doc: str
    loc: Location | None = field(default=None, compare=False, repr=False)
    path: str | None = field(default=None, compare=False, repr=False)
    """The file the source was read from (``source: {file: NAME}``), for compiler errors."""


def load_probe(doc: YamlDoc, root: Any, dtypes: tuple[str, ...]) -> Probe:
    """The ``probe:`` mapping of a backend spec whose dtypes are ``dtypes``, validated."""
    what = "probe"
    node = doc.mapping(root, "probe", what)
    doc.check_keys(node, what, *PROBE_KEYS)
    text = doc.typed(node, "doc", str, f"{what}: doc").strip()
    if not text:
        raise doc.error(
            f"{what}: doc must say why these dtypes depend on the machine", node, "doc", value=True
        )
    seq = doc.typed(node, "dtypes", list, f"{what}: dtypes")
    if not seq:
        raise doc.error(f"{what}: dtypes must list at least one dtype", node, "dtypes", value=True)
    for i, d in enumerate(seq):
        if d not in dtypes:
            raise doc.error(
                f"{what}: dtype {d!r} is not one of the backend's dtypes",
                seq,
                i,
                hint=f"the backend's dtypes: {', '.join(dtypes)}; a probe only narrows them",
            )
        if d in seq[:i]:
            raise doc.error(f"{what}: dtype {d!r} is listed twice", seq, i)
    path = None
    if isinstance(node.get("source"), dict):  # {file: NAME}: the C in a file beside the spec
        source, path = file_beside(doc, node, "source", f"{what}: source")
    else:
        source = doc.typed(node, "source", str, f"{what}: source")
    if not _DEFINITION.search(source):
        raise doc.error(
            f"{what}: source does not define {PROBE_FUNCTION}",
            node,
            "source",
            value=True,
            hint=f"define `int {PROBE_FUNCTION}(const char* dtype) {{ ... }}`, non-zero for a dtype "
            "this machine computes",
        )
    ordered = tuple(d for d in dtypes if d in seq)
    return Probe(ordered, source, text, loc=doc.at(root, "probe"), path=path)
