"""The languages a codegen kind's artifact is written in, and how each is compiled.

:mod:`byoc.runtime.build` reads the compiler environment variables from here; the
spec loader reads the defaults and the ``std`` patterns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class Language:
    """A compile language: how the artifact of a kind is turned into code that runs."""

    name: str
    compiled: bool
    """False for data artifacts that byoc.runtime interprets (nothing is compiled)."""
    default_compiler: str | None = None
    compiler_env: str | None = None
    """The environment variable that overrides ``compile.compiler`` (CC, CXX)."""
    flags_env: str | None = None
    """The environment variable whose flags come after the spec's (CFLAGS, CXXFLAGS)."""
    default_std: str | None = None
    std_pattern: re.Pattern[str] | None = None


LANGUAGES: Mapping[str, Language] = MappingProxyType(
    {
        "c": Language(
            "c", True, "cc", "CC", "CFLAGS", "c99", re.compile(r"(c|gnu)(89|90|99|11|17|18|2x|23)\Z")
        ),
        "c++": Language(
            "c++",
            True,
            "c++",
            "CXX",
            "CXXFLAGS",
            "c++17",
            re.compile(r"(c|gnu)\+\+(11|14|17|20|2a|23|2b|26)\Z"),
        ),
        "examplejson": Language("examplejson", False),
        "json": Language("json", False),
    }
)
