"""``.byoc`` bundles: one file that holds everything a built program needs to run.

A bundle is a zip archive with a ``manifest.json`` and plain members:

* ``manifest.json``: a :class:`~byoc.runtime.manifest.Manifest` (format, version,
  graphs, modules, and every member's size and sha256);
* the host graphs (``<graph>.graph.json``) and host functions (``<graph>.host.graph``);
* each backend's module: compiled libraries (``lib<backend>.so``) with their
  generated sources, or the JSON / ExampleJSON text the interpreters run;
* the constants: small ones inside the artifacts that use them (C arrays in the
  sources and libraries, ``const_values`` in JSON modules, literals in host
  functions); large ones as binary members (``.bin`` files that a library's sources
  ``.incbin`` and its library holds, ``.npz`` archives beside JSON modules, host
  functions and the source graph), stored uncompressed, since deflate gains little
  on floating-point weights and costs seconds per hundred megabytes.

Reading checks everything before anything runs: the bundle is a regular file of at
most :data:`~byoc.input_files.BUNDLE_LIMIT` bytes; no two members share a name; no
member expands beyond its limit or like a zip bomb, and none gives more bytes than it
declares (:mod:`byoc.input_files`); the manifest is at most
:data:`~byoc.input_files.MANIFEST_LIMIT` bytes and names no key twice; then the
archive's integrity, the format and version, that member names are plain file names (no ``../``), that
every listed member exists with its recorded size and sha256, and that no member
is unlisted. A problem is a :class:`~byoc.errors.RuntimeFailure` naming it.

Trust: a bundle carries native code that byoc loads into the process. Only load
bundles you would run as a program.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

from byoc.atomic import write_file
from byoc.errors import RuntimeFailure
from byoc.input_files import (
    BUNDLE_LIMIT,
    BUNDLE_MEMBER_LIMIT,
    MANIFEST_LIMIT,
    check_member_size,
    check_zip_members,
    read_limited,
    read_member,
)

from .manifest import MANIFEST, Manifest

MAX_MEMBER_BYTES = BUNDLE_MEMBER_LIMIT
BINARY_SUFFIXES = (".bin", ".npz")
"""Members holding constants' values, stored without compression."""
MEMBER_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*\Z")


def write_bundle(path: str | Path, manifest: Manifest, members: Mapping[str, bytes]) -> None:
    """Write ``members`` and the manifest recording their sizes and digests, atomically."""
    for name in members:
        _check_name(name)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_info(MANIFEST), manifest.with_members(members).to_json())
        for name, data in sorted(members.items()):
            info = _info(name)
            if name.endswith(BINARY_SUFFIXES):
                info.compress_type = zipfile.ZIP_STORED
            archive.writestr(info, data)
    write_file(path, buffer.getvalue())


def read_bundle(path: str | Path) -> tuple[Manifest, dict[str, bytes]]:
    """The manifest and every member of a bundle, verified; raises RuntimeFailure."""
    where = str(path)
    raw = read_limited(path, f"bundle {where}", BUNDLE_LIMIT, RuntimeFailure)
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        infos = check_zip_members(archive, where, BUNDLE_LIMIT, BUNDLE_MEMBER_LIMIT, RuntimeFailure)
        found = {info.filename: info for info in infos}
        if MANIFEST not in found:
            raise RuntimeFailure(
                f"{where} has no {MANIFEST}", hint="is this a .byoc bundle written by `byoc build`?"
            )
        check_member_size(found[MANIFEST], where, MANIFEST_LIMIT, RuntimeFailure)
        manifest = Manifest.from_json(read_member(archive, found[MANIFEST], where, RuntimeFailure), where)
        listed = manifest.members
        for name in found:
            if name != MANIFEST and name not in listed:
                raise RuntimeFailure(f"{where}: member {name!r} is not listed in the manifest")
        members: dict[str, bytes] = {}
        for name, record in listed.items():
            _check_name(name, where)
            if name not in found:
                raise RuntimeFailure(f"{where}: the manifest lists {name!r}, but the bundle lacks it")
            if found[name].file_size != record.size or record.size > MAX_MEMBER_BYTES:
                raise RuntimeFailure(f"{where}: member {name!r} has the wrong size")
            data = read_member(archive, found[name], where, RuntimeFailure)
            if hashlib.sha256(data).hexdigest() != record.sha256:
                raise RuntimeFailure(
                    f"{where}: member {name!r} fails its sha256 check; the bundle is corrupt"
                )
            members[name] = data
    except RuntimeFailure:
        raise
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        OSError,
        ValueError,
        KeyError,
        TypeError,
        zlib.error,  # corrupt deflate data
        NotImplementedError,  # a corrupt compression method or zip version
        RuntimeError,  # a corrupt flag that marks a member encrypted
    ) as exc:
        raise RuntimeFailure(
            f"{where} is not a valid byoc bundle ({type(exc).__name__}: {exc})",
            hint="the file is truncated or corrupt; rebuild it with `byoc build`",
        ) from None
    return manifest, members


def _check_name(name: str, where: str = "bundle") -> None:
    if not isinstance(name, str) or not MEMBER_NAME.match(name) or name == MANIFEST:
        raise RuntimeFailure(
            f"{where}: invalid member name {name!r}", hint="member names are plain file names"
        )


def _info(name: str) -> zipfile.ZipInfo:
    """A member with a fixed timestamp and mode, so the same content gives the same bytes."""
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info
