"""Library files as a linker sees them: the file that ``-l<name>`` looks for, and the
shared objects that a library file stands for (itself, or those that a GNU ld script
names). :mod:`.requirements` locates a spec's libraries with them, and a bundle's
loader checks that they are on this machine."""

from __future__ import annotations

import os
import re
import sys

LINKER_SCRIPT_DEPTH = 4
LINKER_SCRIPT_BYTES = 1 << 16


class NotFound(Exception):
    """A requirement is not installed here; the message says what is missing."""


def library_file(name: str) -> str:
    """The file a linker's ``-l<name>`` looks for on this platform."""
    return f"lib{name}.dylib" if sys.platform == "darwin" else f"lib{name}.so"


def shared_objects(path: str, lib_dirs: tuple[str, ...], depth: int = 0) -> tuple[str, ...]:
    """The shared objects that the library file ``path`` stands for: itself, or, when
    it is a GNU ld script (``GROUP`` / ``INPUT``, as glibc's ``libm.so`` and ``libc.so``
    are), the shared objects it names, followed as the linker follows them (``-lname``
    and relative names in ``lib_dirs`` and the script's directory; static archives are
    linked in, never loaded, so they are left out). Raises NotFound for a script that
    names none, or a file that is neither."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise NotFound(f"cannot read {path}: {exc.strerror or exc}") from None
    if head == b"\x7fELF":
        return (path,)
    if depth >= LINKER_SCRIPT_DEPTH:
        raise NotFound(f"the linker scripts from {path} nest more than {LINKER_SCRIPT_DEPTH} deep")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(LINKER_SCRIPT_BYTES)
    except (OSError, UnicodeDecodeError):
        raise NotFound(f"{path} is neither a shared library nor a linker script") from None
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    names = [
        word
        for group in re.findall(r"\b(?:GROUP|INPUT)\s*\(((?:[^()]|\([^()]*\))*)\)", text)
        for word in re.split(r"[\s,()]+", group)
        if word and word != "AS_NEEDED"
    ]
    out: list[str] = []
    here = os.path.dirname(path)
    for name in names:
        if name.startswith("-l"):
            candidates = [os.path.join(d, library_file(name[2:])) for d in lib_dirs]
        elif os.path.isabs(name.lstrip("=")):
            candidates = [name.lstrip("=")]
        else:
            candidates = [os.path.join(d, name) for d in (here, *lib_dirs)]
        found = next((c for c in candidates if os.path.isfile(c)), None)
        if found is None or found.endswith(".a"):
            continue  # a static archive is linked in; a missing AS_NEEDED one is not needed
        with open(found, "rb") as f:
            if f.read(8) == b"!<arch>\n":
                continue
        out += shared_objects(os.path.abspath(found), lib_dirs, depth + 1)
    if not out:
        raise NotFound(f"{path} is a linker script that names no shared library")
    return tuple(out)
