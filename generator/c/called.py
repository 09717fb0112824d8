"""Which of byoc's C helpers a generated text names: the casts, bitcasts, element
conversions and op helpers that :func:`byoc.generator.c.dtypes.support_text` then
writes for it, and only those.

Every pattern starts with its literal text, ``byoc_...``, which the regex engine looks
for directly; :func:`named` keeps the matches that start a word, as a leading ``\\b``
would. With the ``\\b`` in the pattern the engine tries every position instead: 60 times
slower on a module of large constant arrays (30 ms a pattern on ResNet-50's 1.8 MB of
C, in every build, cached or not).
"""

from __future__ import annotations

import re

from byoc.ir import DTYPES

CAST_CALL = re.compile(r"byoc_cast_([a-z0-9]+)_([a-z0-9]+)\b")
"""A cast function named in generated text (called, or passed to a macro):
``byoc_cast_float32_int8``."""

BITCAST_CALL = re.compile(r"byoc_bitcast_([a-z0-9]+)_([a-z0-9]+)\b")
"""A bitcast function named in generated text: ``byoc_bitcast_float32_int32``."""

CONVERSION_NAME = re.compile(r"byoc_(load|store)_([a-z0-9]+)\b")
"""A conversion macro named in generated text: ``byoc_load_float16`` (an element of the
dtype as its compute type), ``byoc_store_bfloat16`` (a compute value as the storage
type). A macro spec passes them to its kernels (``p_LOAD_: "byoc_load_${in0_dtype}"``)."""


def named(pattern: re.Pattern[str], text: str) -> list[tuple[str, ...]]:
    """The groups of each match of ``pattern`` (one of the name patterns of this
    module) in ``text`` that starts a word (see the module doc)."""
    return [
        m.groups() for m in pattern.finditer(text) if m.start() == 0 or not _WORD.match(text, m.start() - 1)
    ]


_WORD = re.compile(r"\w")


def casts_in(text: str, call: re.Pattern[str] = CAST_CALL) -> list[tuple[str, str]]:
    """The (from, to) pairs of the cast functions ``text`` calls (``call``: the bitcast
    functions with :data:`BITCAST_CALL`), sorted."""
    pairs = {(a, b) for a, b in named(call, text) if a in DTYPES and b in DTYPES}
    return sorted(pairs, key=lambda p: (DTYPES.index(p[0]), DTYPES.index(p[1])))


HELPER_CALL = re.compile(r"byoc_(mod|fmod|shift_LEFT|shift_RIGHT|saturate)_([a-z0-9]+)\(")
"""A call of an op helper in generated text: ``byoc_mod_int32(``, ``byoc_shift_LEFT_uint8(``,
``byoc_saturate_int8(``."""


def helpers_in(text: str) -> list[tuple[str, str]]:
    """The (helper, dtype) pairs of the op helpers ``text`` calls, sorted."""
    found = {(h, d) for h, d in named(HELPER_CALL, text) if d in DTYPES}
    order = ("mod", "fmod", "shift_LEFT", "shift_RIGHT", "saturate")
    return sorted(found, key=lambda p: (order.index(p[0]), DTYPES.index(p[1])))
