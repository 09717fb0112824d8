"""A c_source spec's support code: the ``support:`` key, C files beside the spec.

A backend whose kernels share much C (a library's glue, a vendor SDK's) keeps it in
real C files next to its YAML, in the spec's own folder (``my_specs/npu/`` holding
``npu.yaml``, ``npu_support.h`` and ``npu_support.c``), rather than in a YAML string:

.. code-block:: yaml

    support: [npu_support.h, npu_support.c]

* Every ``.h`` file is a header that each generated module includes (``#include
  "npu_support.h"``, in the listed order): the types and declarations the macros use.
* Every ``.c`` file is compiled once per spec version, compiler and flags into a cached
  object that each module's library links (:func:`byoc.runtime.build.build_spec_module`).
  Its functions that the modules call need external linkage; declaring them with
  ``__attribute__((visibility("hidden")))`` keeps them out of the library's exports.

The files are data of the spec: they are read when the spec is loaded (their text is part
of the spec, of its cache key and of every build's), written beside the module by
``byoc gen``, and packed into bundles. A file's name must start with the backend's name
and an underscore, so that the support files of several backends in one build never
clash with each other or with a module (``npu.c``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from byoc.c_names import BYOC_SUPPORT_STEMS
from byoc.errors import Location, SpecError
from byoc.input_files import SPEC_LIMIT, read_limited
from byoc.warm_keys import file_status

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


SUFFIXES = {".h": "a header each module includes", ".c": "C compiled once into an object each module links"}
"""What a support file is, by its suffix."""


@dataclass(frozen=True, slots=True)
class SupportFile:
    """One file of a spec's ``support:`` list, read when the spec was loaded."""

    name: str
    """The file name, as the spec lists it and as the build and ``byoc gen`` write it."""
    text: str
    path: str = field(compare=False)
    """Where it was read from."""
    loc: Location | None = field(default=None, compare=False, repr=False)
    """The spec's list item that names it."""

    @property
    def is_header(self) -> bool:
        return self.name.endswith(".h")


def load_support(doc: YamlDoc, root: Any, backend: str) -> tuple[SupportFile, ...]:
    """The files of ``root["support"]``: plain file names in the spec file's directory,
    each ``<backend>_*.h`` or ``<backend>_*.c``, listed once, readable UTF-8 text within
    the spec size limit. A SpecError at the list item otherwise."""
    listed = doc.typed(root, "support", list, "support")
    files: list[SupportFile] = []
    for k, name in enumerate(listed):
        if not isinstance(name, str) or not name.strip():
            raise doc.error(
                "support: each item is a file name",
                listed,
                k,
                hint="support: [<backend>_support.h, <backend>_support.c]",
            )
        suffix = Path(name).suffix
        plain_file_name(doc, listed, k, "support file")
        if suffix not in SUFFIXES:
            kinds = "; ".join(f"{s}: {what}" for s, what in SUFFIXES.items())
            raise doc.error(f"support file {name!r} is neither C nor a header", listed, k, hint=kinds)
        if not name.startswith(f"{backend}_"):
            raise doc.error(
                f"support file {name!r} does not start with the backend's name, {backend}_",
                listed,
                k,
                hint=f"rename it {backend}_{name}, so that no two backends' files (nor a module, {backend}.c) share a name",
            )
        if Path(name).stem in BYOC_SUPPORT_STEMS:
            raise doc.error(
                f"support file {name!r} has the name of one of byoc's own support files",
                listed,
                k,
                hint=f"byoc writes {', '.join(BYOC_SUPPORT_STEMS)} (.h, .c) beside every module; rename it",
            )
        if any(f.name == name for f in files):
            raise doc.error(f"support file {name!r} is listed twice", listed, k)
        at = doc.at(listed, k)
        text, path = read_beside(doc, name, f"support file {name}", at)
        files.append(SupportFile(name, text, path, at))
    return tuple(files)


def read_spec_text(path: str | Path) -> str:
    """The text of a spec file; a SpecError located at its start if it cannot be read, is
    not a regular file, is larger than :data:`~byoc.input_files.SPEC_LIMIT` or is not UTF-8."""

    def error(message: str, hint: str | None = None) -> SpecError:
        return SpecError(message, Location(str(path), 1, 1), hint=hint)

    return _read_utf8(path, "spec file", error)


def read_beside(doc: YamlDoc, name: str, what: str, at: Location) -> tuple[str, str]:
    """The text and path of file ``name`` in the folder of the spec file ``doc``: a
    regular UTF-8 file within the spec size limit; a SpecError located ``at`` (the key
    that names it) otherwise."""
    path = Path(doc.path).resolve().parent / name

    def error(message: str, hint: str | None = None) -> SpecError:
        return SpecError(message, at, hint=hint or f"put {name} beside {Path(doc.path).name}")

    return _read_utf8(path, what, error), str(path)


def _read_utf8(path: str | Path, what: str, error) -> str:
    """The text of ``path``, a regular UTF-8 file within the spec size limit; ``error(message,
    hint)`` makes the SpecError raised otherwise."""
    raw = read_limited(path, what, SPEC_LIMIT, error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 ({exc.reason})") from None


def plain_file_name(doc: YamlDoc, node: Any, key: Any, what: str) -> str:
    """``node[key]`` as a plain file name (no directory), or a located SpecError."""
    name = node[key]
    if not isinstance(name, str) or not name.strip():
        raise doc.error(f"{what} must be a file name", node, key, value=True)
    if "/" in name or "\\" in name or name in (".", "..") or "\0" in name:
        raise doc.error(
            f"{what} {name!r} is not a plain file name",
            node,
            key,
            value=True,
            hint="files a spec reads sit in the spec file's own folder: name them without a directory",
        )
    return name


def file_beside(doc: YamlDoc, root: Any, key: str, what: str) -> tuple[str, str]:
    """The text and path of the file a value written as ``{file: NAME}`` names (a C
    source or a template too long to read in YAML): NAME beside the spec, read as
    :func:`read_beside` reads it, with errors located at the YAML that names it."""
    node = doc.mapping(root, key, what)
    doc.check_keys(node, f"{what}: a text read from a file", ("file",), ())
    name = plain_file_name(doc, node, "file", f"{what}: file")
    return read_beside(doc, name, f"{what}'s file {name}", doc.at(node, "file", value=True))


def sibling_statuses(spec_file: str | Path) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The regular files beside ``spec_file``, each with its status
    (:func:`byoc.warm_keys.file_status`: device, inode, size, modification and change
    times): part of the keys that cache a loaded spec, in the process and on disk, so
    that editing a file it reads (a support file, a template's ``{file: ...}``) loads
    the spec again."""
    folder = Path(spec_file).parent
    try:
        entries = sorted(p for p in folder.iterdir() if p.name != Path(spec_file).name)
    except OSError:
        return ()
    return tuple((p.name, status) for p in entries if (status := file_status(p)) is not None)


__all__: Sequence[str] = (
    "SUFFIXES",
    "SupportFile",
    "load_support",
    "plain_file_name",
    "read_beside",
    "read_spec_text",
    "sibling_statuses",
)
