"""Load a native library so that a bad one is an error, never a dead process.

:func:`load_now` first checks the file (:func:`~byoc.runtime.elf_check.check_shared_object`:
a whole ELF shared object for this machine, so a truncated one is not mapped past its
end), then opens it with ``RTLD_NOW``: the loader binds every undefined symbol before
``dlopen`` returns, so a symbol that none of its libraries defines is an ``OSError``
("undefined symbol: X") here, instead of the loader's "symbol lookup error" killing
the process (exit 127) at the first call that needs it. The failure becomes the
caller's error class (:class:`~byoc.errors.BuildError` after a build,
:class:`~byoc.errors.RuntimeFailure` when loading a bundle), naming the library, the
symbol and the spec's requirements, located at the first requirement when it has a
location.

The handle stays open (and ``tvm_ffi.load_module`` of the same path then finds the
library already loaded, relocated). This module never imports ``byoc.generator``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from byoc.errors import ByocError, Location, RuntimeFailure

from .elf_check import NotLoadable, check_shared_object

if TYPE_CHECKING:
    from byoc.spec.requirements import Requirement

log = logging.getLogger(__name__)
UNDEFINED = re.compile(r"(?:(?P<file>[^\s:][^:]*): )?undefined symbol: (?P<symbol>[^\s,()]+)")
REBUILD_HINT = "rebuild it; a library from another machine or byoc version may not load"
ISA_LEVEL = "CPU ISA level is lower than required"
"""glibc's refusal of a library marked (``-mneeded``) for an x86-64 level this CPU lacks."""
ISA_HINT = (
    "it was compiled for a newer x86-64 level than this CPU's (a build for the CPU that built it, "
    "the fused spec's option host_isa): rebuild it on this machine, or build it with "
    "--option host_isa=false for one library that runs on every x86-64 CPU"
)


def load_now(
    path: str | os.PathLike[str],
    *,
    what: str,
    requirements: Sequence[Requirement] = (),
    error: type[ByocError] = RuntimeFailure,
    located: bool = False,
    global_: bool = False,
) -> ctypes.CDLL:
    """Open ``path`` (``what`` names it in messages: "the library of backend x") with
    every symbol bound now; raise ``error`` when the file is not a loadable library or
    a symbol is missing. ``requirements`` are the spec's ``requires:`` it links
    against (named in the message; with ``located``, the first one's location is the
    error's); ``global_`` makes its symbols visible to libraries loaded later. The
    requirements' ``environment:`` variables are set first, where the process does not
    set them (:meth:`~byoc.spec.requirements.Requirement.apply_environment`): a library
    such as GNU OpenMP reads them when it is first loaded."""
    where = requirements[0].loc if requirements and located else None
    for req in requirements:
        for name, value in req.apply_environment().items():
            log.debug("%s=%s set for requirement %s (its spec's environment:)", name, value, req.name)
    try:
        check_shared_object(path)
    except NotLoadable as exc:
        raise error(f"cannot load {what} ({os.fspath(path)}): {exc}", where, hint=REBUILD_HINT) from None
    mode = os.RTLD_NOW | (os.RTLD_GLOBAL if global_ else os.RTLD_LOCAL)
    try:
        return ctypes.CDLL(os.fspath(path), mode=mode)
    except OSError as exc:
        raise _load_error(os.fspath(path), str(exc), what, requirements, error, where) from None


def _load_error(
    path: str,
    message: str,
    what: str,
    requirements: Sequence[Requirement],
    error: type[ByocError],
    where: Location | None,
) -> ByocError:
    libs = ", ".join(f"{r.name} ({', '.join(r.libraries) or 'headers only'})" for r in requirements)
    found = UNDEFINED.search(message)
    if found is None:
        hint = ISA_HINT if ISA_LEVEL in message else REBUILD_HINT
        return error(f"cannot load {what} ({path}): {message}", where, hint=hint)
    symbol, holder = found.group("symbol"), found.group("file")
    needs = f"{what} ({path})" if holder in (None, path) else f"{holder}, which {what} ({path}) loads,"
    if requirements:
        text = f"{needs} needs the symbol {symbol}, which none of its required libraries defines: {libs}"
        hint = (
            f"a required library that lacks {symbol} is not the one the spec expects (another library "
            f"or version under its name), or the spec's C names a function that does not exist; "
            f"install it as its spec says: {requirements[0].install}"
        )
    else:
        text = f"{needs} needs the symbol {symbol}, which no library it loads defines"
        hint = (
            f"the spec's C calls {symbol}: check its name, or list the library that defines it in `requires:`"
        )
    return error(text, where, hint=hint)
