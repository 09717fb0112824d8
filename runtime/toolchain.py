"""Which compiler builds an artifact, with which flags: a :class:`Toolchain`.

The compiler is the language's compiler variable when set (``$CC`` for C, ``$CXX`` for
C++: :data:`byoc.spec.languages.LANGUAGES` declares them), else the spec's; its flags
variable (``$CFLAGS``, ``$CXXFLAGS``) is appended to the spec's flags, so it wins. A
spec's flag templates are filled by its option values and the building CPU's x86-64
level. Used by :mod:`byoc.runtime.build`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from byoc.errors import BuildError
from byoc.spec.names import X86_64_LEVEL

from .cpu import x86_64_level

if TYPE_CHECKING:
    from byoc.spec.backend import CompileSettings


@dataclass(frozen=True, slots=True)
class Toolchain:
    """What compiles one artifact: the compiler command and its flags."""

    compiler: tuple[str, ...]
    flags: tuple[str, ...]
    language: str
    """A compiled language of :data:`byoc.spec.languages.LANGUAGES` (``c``, ``c++``)."""
    env_var: str
    """The environment variable that overrides the compiler (``CC``, ``CXX``)."""
    link: tuple[str, ...] = ()
    """Link flags after the sources (a backend's libraries: ``-L``, ``-Wl,-rpath``, ``-l``)."""


def toolchain(
    language: str,
    spec_compiler: str,
    std: str | None,
    flags: Sequence[str],
    env: Mapping[str, str] | None = None,
    link: Sequence[str] = (),
) -> Toolchain:
    """The toolchain for ``language``: its compiler variable (``$CC``, ``$CXX``) over
    ``spec_compiler``, then ``-std=<std>``, the spec's ``flags`` and its flags
    variable (``$CFLAGS``, ``$CXXFLAGS``); ``link`` goes after the sources."""
    from byoc.spec.languages import LANGUAGES

    lang = LANGUAGES.get(language)
    if lang is None or lang.compiler_env is None or lang.flags_env is None:
        compiled = ", ".join(name for name, x in LANGUAGES.items() if x.compiled)
        raise BuildError(f"{language!r} is not a compiled language", hint=f"byoc compiles {compiled}")
    env = os.environ if env is None else env
    override = env.get(lang.compiler_env, "").strip()
    compiler = tuple(shlex.split(override)) if override else (spec_compiler,)
    extra = tuple(shlex.split(env.get(lang.flags_env, "")))
    std_flag = (f"-std={std}",) if std else ()
    return Toolchain(compiler, std_flag + tuple(flags) + extra, lang.name, lang.compiler_env, tuple(link))


def spec_toolchain(
    settings: CompileSettings,
    values: Mapping[str, object],
    *,
    include_flags: Sequence[str] = (),
    link_flags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    source_bytes: int = 0,
) -> Toolchain:
    """The toolchain of a spec's ``compile:`` settings, its flag templates filled by
    ``values`` (see :func:`build_artifacts`), the libraries' flags included, and the
    ``large_flags`` where the main source has more than their ``above_bytes``."""
    if settings.compiler is None:
        raise BuildError(f"{settings.language} artifacts are interpreted, not compiled")
    level = x86_64_level()
    try:
        flags = settings.render_flags({**({X86_64_LEVEL: level} if level else {}), **values}, source_bytes)
    except KeyError as exc:
        raise BuildError(
            f"cannot render the compile flags: {exc.args[0]}",
            hint="pass spec.template_values(options) as the values",
        ) from None
    if level is None and any(f"${{{X86_64_LEVEL}}}" in flag for flag in flags):
        raise BuildError(
            f"the compile flags name ${{{X86_64_LEVEL}}}, but this is not an x86-64 Linux machine",
            hint="turn off the option that adds them (the fused spec's: --option host_isa=false)",
        )
    return toolchain(
        settings.language, settings.compiler, settings.std, (*include_flags, *flags), env, link_flags
    )
