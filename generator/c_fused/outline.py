"""Parallel loop nests of the ``c_fused`` codegen: a nest whose outer loop runs on the
module's thread pool (:mod:`byoc.generator.c_fused.pool`) is outlined into a static
function of one chunk of that loop.

The nest's text is the serial one, except that its outer loop runs over
``[begin, end)`` (:func:`outer_loop`). :class:`Outliner` moves it, unchanged, into::

    typedef struct {            the arrays the nest reads and writes
      const float* in0;
      float* out0;
    } <sym>_loop<k>_args;
    static void <sym>_loop<k>_(void* args, int64_t begin, int64_t end) {
      const <sym>_loop<k>_args* a = (const <sym>_loop<k>_args*)args;
      const float* restrict in0 = a->in0;
      float* restrict out0 = a->out0;
      <the nest>
    }

and the body keeps a call, ``byoc_parallel_for(<sym>_loop<k>_, &args, count)``. A nest
is self-contained: it reads the region's inputs, constants (file-scope arrays) and the
buffers of earlier nests, and writes its outputs or buffers; its loop-invariant locals
are its own, computed once per chunk. So the arrays named in its code are all it needs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..c.text import block_comment, comment

_ARRAY = re.compile(r"\b(?:in|out|tmp)\d\w*\b")
_COMMENT = re.compile(r"/\*.*?\*/")
_WORD = re.compile(r"\w+")
"""A C identifier or number: a pointer's name is used where it is one of the words."""


def outer_loop(indent: str, var: str, step: int = 1) -> str:
    """The ``for`` over one chunk ``[begin, end)`` of an outer loop; with a ``step``, the
    chunk counts steps (the loop over blocks of ``step`` iterations)."""
    if step == 1:
        return f"{indent}for (int64_t {var} = begin; {var} < end; ++{var}) {{"
    return f"{indent}for (int64_t {var} = begin * {step}; {var} < end * {step}; {var} += {step}) {{"


def steps(extent: int, step: int = 1) -> int:
    """The iterations of an outer loop over ``extent`` in steps of ``step``."""
    return -(-extent // step)


class Outliner:
    """Outlines the parallel nests of one region ``sym`` (see the module doc)."""

    def __init__(self, sym: str, pointers: Mapping[str, str], clones: bool) -> None:
        self.sym = sym
        self.pointers = dict(pointers)
        """The C pointer type of each array the region's code names (``in0``: ``const float*``)."""
        self.clones = clones
        self.functions: list[str] = []
        """The outlined functions, to be placed before the region's body."""

    def __call__(self, label: str, lines: Sequence[str], count: int) -> list[str]:
        """Outline the nest ``lines`` (outer loop by :func:`outer_loop`) of ``count``
        outer iterations; the statements that run it, in its place."""
        name = f"{self.sym}_loop{len(self.functions)}_"
        code = _COMMENT.sub("", "\n".join(lines))
        words = set(_WORD.findall(code))  # one scan, not one per pointer (a model has hundreds)
        used = [c for c in self.pointers if c in words]
        assert set(_ARRAY.findall(code)) <= set(self.pointers), "every array of a nest is known"
        fields = [f"  {self.pointers[c]} {c};" for c in used]
        unpack = [f"  {self.pointers[c]} restrict {c} = a->{c};" for c in used]
        note = [
            f"{name}: {label}; one chunk [begin, end) of the {count} iterations of its outer loop,",
            f"run on the module's thread pool by {self.sym}_ (byoc_parallel_for).",
        ]
        self.functions.append(
            "\n".join(
                [
                    block_comment(note),
                    "typedef struct {",
                    *fields,
                    f"}} {name}args;",
                    *(["byoc_simd_clones"] if self.clones else []),
                    f"static void {name}(void* args, int64_t begin, int64_t end) {{",
                    f"  const {name}args* a = (const {name}args*)args;",
                    *unpack,
                    *lines,
                    "}",
                    "",
                ]
            )
        )
        return [
            "  {",
            f"    {comment(f'{label}: on the thread pool, in chunks of its outer loop ({name})')}",
            f"    {name}args args = {{{', '.join(used)}}};",
            f"    byoc_parallel_for({name}, &args, {count});",
            "  }",
        ]
