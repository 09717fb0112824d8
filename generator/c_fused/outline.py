"""Loop nests of the ``c_fused`` codegen moved into functions of their own: a nest
whose outer loop runs on the module's thread pool (:mod:`byoc.generator.c_fused.pool`)
is outlined into a static function of one chunk of that loop, and a serial nest whose
code another one repeats into a function the body calls (below).

The nest's text is the serial one, except that its outer loop runs over
``[begin, end)`` (:func:`outer_loop`). :class:`Outliner` moves it, unchanged, into::

    typedef struct {            the arrays the nest reads and writes
      const float* in0;
      const float* fused_0_const_2;
      float* out0;
    } <sym>_loop<k>_args;
    static void <sym>_loop<k>_(void* args, int64_t begin, int64_t end) {
      const <sym>_loop<k>_args* a = (const <sym>_loop<k>_args*)args;
      const float* restrict in0 = a->in0;
      const float* restrict fused_0_const_2 = a->fused_0_const_2;
      float* restrict out0 = a->out0;
      <the nest>
    }

and the body keeps a call, ``byoc_parallel_for(<sym>_loop<k>_, &args, count)``. A nest
is self-contained: it reads the region's inputs, constants and the buffers of earlier
nests, and writes its outputs or buffers; its loop-invariant locals are its own,
computed once per chunk. So the arrays named in its code are all it needs. An array
the nest only reads through an index (a buffer an earlier nest wrote) is ``const`` in
the function, as the region's inputs are: a nest that reads the input and the same
nest reading a buffer are then one function (the first dense of a stack of equal
layers, which reads its float input directly rather than a staged copy).

**One function per distinct nest.** The large constants, too, reach the function
through its arguments (a local pointer of the constant's own name, which hides the
file-scope array), and equal small ones are one array (:func:`constant_names`): a
transformer's twelve layers then run the same nests on other arrays, and
each nest after the first whose text differs only in the names of its arrays and of
its values (``t509`` against ``t254``) calls the first one's function with its own
arrays, instead of a copy that gcc would compile again. BERT-base's 108 parallel nests
are 7 functions. The function keeps the text (and comments) of its first nest, and its
comment names the others.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from byoc.ir import Constant, Node

from ..c.text import block_comment, comment

_ARRAY = re.compile(r"\b(?:in|out|tmp)\d\w*\b")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_WORD = re.compile(r"\w+")
"""A C identifier or number: a pointer's name is used where it is one of the words."""
_VALUE = re.compile(r"t(\d+)(?=_|$)")
"""A value's C name (``t509``) at the start of a local's name (``t509_acc``)."""
_ASSIGNED = re.compile(r"\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)")
"""What follows an element that is written: an assignment, or an increment."""


FOLDED_ELEMENTS = 16
"""A constant of at most this many elements stays a file-scope array that every nest
indexes itself, so that gcc folds its values into the code (a power's exponent of 2
or 3 becomes multiplications: through a pointer, GPT-2's Gelu nests ran at half the
speed); equal ones are one array, so that the nests of a transformer's layers are
still the same code (above). A larger one reaches an outlined nest through
its arguments."""


def constant_names(sym: str, constants: Sequence[Constant]) -> list[str]:
    """The C array of each constant: ``<sym>_const_<j>``, or, for a constant of at most
    :data:`FOLDED_ELEMENTS` elements equal to an earlier one (dtype, shape and bytes),
    that one's."""
    first: dict[tuple, str] = {}
    names = []
    for j, c in enumerate(constants):
        name = f"{sym}_const_{j}"
        if c.values.size <= FOLDED_ELEMENTS:
            name = first.setdefault((c.type.dtype, c.type.shape, c.values.tobytes()), name)
        names.append(name)
    return names


def first_of_each(named: list[tuple[Constant, str]]) -> list[tuple[Constant, str]]:
    """``named`` (constant, C array) with each array once: its first constant (equal
    small constants share an array, :func:`constant_names`)."""
    seen: set[str] = set()
    return [(c, n) for c, n in named if not (n in seen or seen.add(n))]


def outer_loop(indent: str, var: str, step: int = 1) -> str:
    """The ``for`` over one chunk ``[begin, end)`` of an outer loop; with a ``step``, the
    chunk counts steps (the loop over blocks of ``step`` iterations)."""
    if step == 1:
        return f"{indent}for (int64_t {var} = begin; {var} < end; ++{var}) {{"
    return f"{indent}for (int64_t {var} = begin * {step}; {var} < end * {step}; {var} += {step}) {{"


def steps(extent: int, step: int = 1) -> int:
    """The iterations of an outer loop over ``extent`` in steps of ``step``."""
    return -(-extent // step)


def read_only(code: str, arrays: Sequence[str]) -> set[str]:
    """Those of ``arrays`` that ``code`` only reads: each use is an element read,
    ``name[...]`` not followed by an assignment. Any other use (the pointer itself passed
    on, or an element written) keeps the array writable."""
    reads = set(arrays)
    for m in re.finditer(r"\b(" + "|".join(map(re.escape, arrays)) + r")\b", code) if reads else ():
        end = _index_end(code, m.end())
        if end is None or _ASSIGNED.match(code, end):
            reads.discard(m.group(1))
    return reads


def _index_end(code: str, at: int) -> int | None:
    """The position after the bracketed index that starts at ``at``, or None."""
    if code[at : at + 1] != "[":
        return None
    depth = 0
    for k in range(at, len(code)):
        depth += {"[": 1, "]": -1}.get(code[k], 0)
        if depth == 0:
            return k + 1
    return None


def _canonical(code: str, arrays: Sequence[str]) -> tuple[str, list[str]]:
    """``code`` (comments removed) with its arrays and its values' names numbered by
    first use, and its arrays in that order: two nests that differ only in those names
    have the same text."""
    known = set(arrays)
    order: list[str] = []
    values: dict[str, str] = {}

    def word(m: re.Match[str]) -> str:
        w = m.group(0)
        if w in known:
            if w not in order:
                order.append(w)
            return f"@{order.index(w)}"
        v = _VALUE.match(w)
        if v is not None:
            return "%" + values.setdefault(v.group(1), str(len(values))) + w[v.end(1) :]
        return w

    return _WORD.sub(word, code), order


@dataclass
class _Outlined:
    name: str
    label: str
    count: int | None
    """The outer loop's chunks; None for a serial nest."""
    fields: list[str]
    """The first nest's arrays, in the order of the struct's fields."""
    by_use: list[str]
    """The same arrays in the order the code first names them."""
    lines: Sequence[str]
    others: list[str] = field(default_factory=list)
    """The labels of the other nests that call it."""
    reads: set[str] = field(default_factory=set)
    """The arrays of :attr:`fields` that the code only reads (``const`` in the function)."""


@dataclass(slots=True)
class Written:
    """One nest's text, before the body places it (:func:`~.nests.anchored_body`)."""

    label: str
    first: list[str]
    """The steps before it: its staged inputs' conversions and packing."""
    lines: list[str]
    fails: bool
    parallel: bool
    nodes: list[Node]
    """Empty for an empty nest (a comment, neither shared nor timed)."""
    key: tuple = ()
    """Its :meth:`Outliner.key`, for a shared one."""

    @property
    def shared(self) -> bool:
        """A serial nest that cannot fail: one whose code another repeats becomes a function."""
        return bool(self.nodes) and not self.parallel and not self.fails


class Outliner:
    """Outlines the parallel nests of one region ``sym``, and its serial nests whose
    code another one repeats (see the module doc)."""

    def __init__(
        self, sym: str, pointers: Mapping[str, str], clones: bool, constants: Mapping[str, str] | None = None
    ) -> None:
        self.sym = sym
        self.pointers = dict(pointers)
        """The C pointer type of each array the region's code names (``in0``: ``const float*``)."""
        self.constants = dict(constants or {})
        """The C pointer type of each constant's file-scope array (and of its panels')."""
        self.clones = clones
        self._made: list[_Outlined] = []
        self._by_text: dict[str, _Outlined] = {}

    @property
    def functions(self) -> list[str]:
        """The outlined functions, to be placed before the region's body."""
        return [self._text(f) for f in self._made]

    def key(
        self, lines: Sequence[str], count: int | None = None
    ) -> tuple[str, list[str], list[str], set[str]]:
        """The text by which two nests are the same code (their arrays and values
        renamed, with ``count``, their outer loop's chunks, or None for a serial nest),
        the nest's arrays (in the order of the struct's fields, and of first use), and
        those of its writable arrays that it only reads (``const`` in its function)."""
        code = _COMMENT.sub("", "\n".join(lines))
        words = set(_WORD.findall(code))  # one scan, not one per pointer (a model has hundreds)
        used = [c for c in self.pointers if c in words] + [c for c in self.constants if c in words]
        assert set(_ARRAY.findall(code)) <= set(self.pointers), "every array of a nest is known"
        text, by_use = _canonical(code, used)
        reads = read_only(code, [c for c in used if not self._type(c).startswith("const ")])
        types = "\n".join(self._type(c, c in reads) for c in by_use)
        return f"{count}\n{types}\n{text}", used, by_use, reads

    def __call__(self, label: str, lines: Sequence[str], count: int | None, known: tuple = ()) -> list[str]:
        """Outline the nest ``lines`` (outer loop by :func:`outer_loop`) of ``count``
        outer iterations; the statements that run it, in its place. With ``count``
        None, a serial nest whose code another serial nest repeats: a function the
        body calls itself. ``known``: its :meth:`key`, when the caller has it."""
        key, used, by_use, reads = known or self.key(lines, count)
        made = self._by_text.get(key)
        if made is None:
            kind = "loop" if count is not None else "nest"
            made = _Outlined(
                f"{self.sym}_{kind}{len(self._made)}_", label, count, used, by_use, lines, reads=reads
            )
            self._made.append(made)
            self._by_text[key] = made
            passed = used
        else:
            made.others.append(label.split(":", 1)[0])
            mine = dict(zip(made.by_use, by_use))  # the first nest's array -> this nest's
            passed = [mine[c] for c in made.fields]
        name = made.name
        if count is None:
            return [
                "  {",
                f"    {comment(f'{label}: the code of {name}, shared with the nests it names')}",
                f"    const {name}args args = {{{', '.join(passed)}}};",
                f"    {name}(&args);",
                "  }",
            ]
        return [
            "  {",
            f"    {comment(f'{label}: on the thread pool, in chunks of its outer loop ({name})')}",
            f"    {name}args args = {{{', '.join(passed)}}};",
            f"    byoc_parallel_for({name}, &args, {count});",
            "  }",
        ]

    def _type(self, array: str, read_only: bool = False) -> str:
        """The C pointer type of ``array``; ``const`` when the nest only reads it."""
        kind = self.pointers.get(array) or self.constants[array]
        return f"const {kind}" if read_only and not kind.startswith("const ") else kind

    def _text(self, made: _Outlined) -> str:
        name = made.name
        if made.count is None:
            note = [f"{name}: {made.label}; run by {self.sym}_ itself (serial)."]
            head = [
                f"static void {name}(const {name}args* a) {{",
            ]
        else:
            note = [
                f"{name}: {made.label}; one chunk [begin, end) of the {made.count} iterations of its outer loop,",
                f"run on the module's thread pool by {self.sym}_ (byoc_parallel_for).",
            ]
            head = [
                f"static void {name}(void* args, int64_t begin, int64_t end) {{",
                f"  const {name}args* a = (const {name}args*)args;",
            ]
        if made.others:
            also = f"Also runs {', '.join(made.others)}: the same code on their own arrays."
            note += textwrap.wrap(also, 100)
        return "\n".join(
            [
                block_comment(note),
                "typedef struct {",
                *(f"  {self._type(c, c in made.reads)} {c};" for c in made.fields),
                f"}} {name}args;",
                *(["byoc_simd_clones"] if self.clones else []),
                *head,
                *(f"  {self._type(c, c in made.reads)} restrict {c} = a->{c};" for c in made.fields),
                *made.lines,
                "}",
                "",
            ]
        )
