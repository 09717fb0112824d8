"""Is a file a shared library this machine's loader can map? Checked before any
``dlopen`` of a library byoc did not just link itself (bundle members, build-cache
entries, a spec's required libraries), because the loader trusts the file: it maps
the ranges the program headers name, and a file cut short there dies of SIGBUS at the
first touch of a page past its end instead of failing to load.

The check reads the ELF header and the program header table (pure Python, ``struct``):
a 64-bit little-endian shared object (``ET_DYN``) for this machine's architecture
(x86-64 or AArch64), with a dynamic segment, whose program headers, segments and
section header table all lie within the file. Anything else is :class:`NotLoadable`
with a reason a person can act on. Other platforms are refused clearly.

This module never imports ``byoc.generator``.
"""

from __future__ import annotations

import os
import platform
import struct

ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1
ET_REL = 1
ET_DYN = 3
PT_LOAD = 1
PT_DYNAMIC = 2
MACHINES = {62: "x86-64", 183: "aarch64"}
"""The ``e_machine`` values byoc loads libraries for."""
MACHINE_NAMES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}
"""``platform.machine()`` -> its ``e_machine``."""
OTHER_MACHINES = {
    3: "x86 (32-bit)",
    8: "MIPS",
    20: "PowerPC",
    21: "PowerPC 64",
    40: "ARM (32-bit)",
    243: "RISC-V",
}
HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
"""Elf64_Ehdr: ident, type, machine, version, entry, phoff, shoff, flags, ehsize,
phentsize, phnum, shentsize, shnum, shstrndx."""
PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")
"""Elf64_Phdr: type, flags, offset, vaddr, paddr, filesz, memsz, align."""
MAX_PROGRAM_HEADERS = 4096
LINKER_SCRIPT_HINT = "a text file here is probably a linker script (GROUP / INPUT), not a library"


class NotLoadable(Exception):
    """The file is not a shared library this machine can load; the message says why."""


def this_machine() -> int:
    """The ``e_machine`` of this machine; NotLoadable on an architecture byoc does not load for."""
    machine = platform.machine().lower()
    if machine not in MACHINE_NAMES:
        raise NotLoadable(f"byoc loads native libraries on x86-64 and aarch64 only, not on {machine or '?'}")
    return MACHINE_NAMES[machine]


def check_shared_object(path: str | os.PathLike[str]) -> None:
    """Raise :class:`NotLoadable` unless ``path`` is a whole ELF shared object for this
    machine (see the module doc)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(HEADER.size)
            _check_header(head, size)
            (_, e_type, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = HEADER.unpack(
                head
            )
            if phnum == 0 or phnum > MAX_PROGRAM_HEADERS or phentsize < PROGRAM_HEADER.size:
                raise NotLoadable(
                    f"its program header table is malformed ({phnum} entries of {phentsize} bytes)"
                )
            table_end = phoff + phnum * phentsize
            if table_end > size:
                raise NotLoadable(_short("its program header table", table_end, size))
            f.seek(phoff)
            table = f.read(phnum * phentsize)
    except OSError as exc:
        raise NotLoadable(f"cannot read it: {exc.strerror or exc}") from None
    dynamic = False
    for k in range(phnum):
        p_type, _, offset, _, _, filesz, memsz, _ = PROGRAM_HEADER.unpack_from(table, k * phentsize)
        if p_type in (PT_LOAD, PT_DYNAMIC) and offset + filesz > size:
            raise NotLoadable(
                _short(f"its segment {k} (bytes {offset} to {offset + filesz})", offset + filesz, size)
            )
        if p_type == PT_LOAD and filesz > memsz:
            raise NotLoadable(f"its segment {k} is larger in the file than in memory")
        dynamic = dynamic or p_type == PT_DYNAMIC
    if shnum and shoff + shnum * shentsize > size:
        raise NotLoadable(_short("its section header table", shoff + shnum * shentsize, size))
    if not dynamic:
        raise NotLoadable("it has no dynamic segment, so it is not a shared library")


def check_object_file(path: str | os.PathLike[str]) -> None:
    """Raise :class:`NotLoadable` unless ``path`` is a whole ELF relocatable object
    (``.o``) for this machine: its header, and its section header table within it."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(HEADER.size)
    except OSError as exc:
        raise NotLoadable(f"cannot read it: {exc.strerror or exc}") from None
    _check_header(head, size, ET_REL)
    (_, _, _, _, _, _, shoff, _, _, _, _, shentsize, shnum, _) = HEADER.unpack(head)
    if shnum == 0 or shoff + shnum * shentsize > size:
        raise NotLoadable(_short("its section header table", shoff + shnum * shentsize, size))


def _check_header(head: bytes, size: int, wanted_type: int = ET_DYN) -> None:
    if not head.startswith(ELF_MAGIC):
        text = head[:64]
        is_text = bool(text) and all(b in b"\t\n\r" or 32 <= b < 127 for b in text)
        if size == 0:
            raise NotLoadable("it is empty")
        raise NotLoadable("it is not an ELF file" + (f" ({LINKER_SCRIPT_HINT})" if is_text else ""))
    if len(head) < HEADER.size:
        raise NotLoadable(_short("its ELF header", HEADER.size, size))
    if head[4] != ELFCLASS64:
        raise NotLoadable("it is a 32-bit library; this machine loads 64-bit ones")
    if head[5] != ELFDATA2LSB:
        raise NotLoadable("it is a big-endian library; this machine loads little-endian ones")
    _, e_type, machine, *_ = HEADER.unpack(head)
    wanted = this_machine()
    if machine != wanted:
        named = MACHINES.get(machine) or OTHER_MACHINES.get(machine) or f"machine {machine}"
        raise NotLoadable(f"it is built for {named}, and this machine is {MACHINES[wanted]}")
    if e_type != wanted_type:
        kinds = {
            ET_REL: "an object file (.o)",
            2: "an executable",
            ET_DYN: "a shared library",
            4: "a core dump",
        }
        raise NotLoadable(f"it is {kinds.get(e_type, f'ELF type {e_type}')}, not {kinds[wanted_type]}")


def _short(what: str, end: int, size: int) -> str:
    return f"it is truncated: {what} ends at byte {end}, past the end of the file ({size} bytes)"


def is_elf(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts with the ELF magic (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


__all__ = ["NotLoadable", "check_shared_object", "is_elf", "this_machine"]
