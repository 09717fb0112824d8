"""Parse the graph DSL (``.graph``) into byoc IR.

Lark reduces rules bottom-up, so the callbacks below return small plain records
(:class:`Ref`, :class:`Call`, :class:`Assign`, ...) and only the ``graph`` rule
feeds them, in source order, into a :class:`~byoc.builder.FunctionBuilder`, which
resolves names, orders and types the nodes, and reports semantic errors. A
region's body goes to a nested builder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import ml_dtypes
import numpy as np
from lark import Token

from byoc.builder import OP, FunctionBuilder
from byoc.catalog import Catalog
from byoc.errors import GraphError, Location, ParseError
from byoc.gc_pause import full_collections_deferred
from byoc.ir import (
    DTYPES,
    MAX_ELEMENTS,
    MAX_NAME_LENGTH,
    AttrValue,
    Function,
    Program,
    TensorType,
    is_float,
    is_integer,
    shape_problem,
)

from .graph_statements import KEYWORDS, TERMINALS, add_statements, locate_in_call
from .lark_support import ReaderParser, SourceLines, check_name_lengths, decode, run_parser
from .weights_file import WeightsFile, no_weights_file

MAX_CONSTANT_ELEMENTS = 1 << 24
"""The most elements a constant written as literal values (``[0.5, 1, ...]``) may have.
Every literal is a token and a Python number while it is read, so a text that size is
hundreds of megabytes of parser objects; larger values belong in a weights file
(``weights["entry"]``), which is read as one array and has only the 2**48 limit of
every tensor type."""

DESCRIBE = {
    **{word.upper(): f"`{word}`" for word in KEYWORDS},
    "AT": "`@`",
    "NAME": "a name",
    "NAME_EQ": "`name =`",
    "SIMPLE_ASSIGNS": "",
    "INT": "an integer",
    "SIGNED_INT": "an integer",
    "SIGNED_FLOAT": "a number",
    "NONFINITE": "a number",
    "STRING": "a string",
    "DOT": "`.`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "COMMA": "`,`",
    "COLON": "`:`",
    "$END": "end of input",
}

_LONG_NAMES = re.compile(
    rf'#[^\n]*|"(?:[^"\\\n]|\\.)*"|(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]{{{MAX_NAME_LENGTH},}})'
)
"""Comments and strings (skipped), or a name longer than MAX_NAME_LENGTH (group 1)."""
MAX_INT_DIGITS = 40
"""Integer literals longer than this are out of range for every dtype (and Python's
int() refuses those above 4300 digits)."""


# ------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class Ref:
    name: str
    loc: Location


@dataclass(frozen=True, slots=True)
class Call:
    op: str
    args: tuple  # of Ref | Call
    attrs: tuple[tuple[str, AttrValue, Location], ...]
    loc: Location


@dataclass(frozen=True, slots=True)
class Const:
    type: TensorType
    values: tuple
    loc: Location
    entry: str | None = None  # an external constant: the weights file's entry
    entry_loc: Location | None = None


@dataclass(frozen=True, slots=True)
class WeightsRef:
    entry: str
    loc: Location


@dataclass(frozen=True, slots=True)
class WeightsDecl:
    file: str
    sha256: str
    file_loc: Location
    sha_loc: Location


@dataclass(frozen=True, slots=True)
class Region:
    backend: str
    symbol: str | None
    body: tuple
    loc: Location
    composite: str | None = None  # `@backend.pattern { ... }`: a composite inside a region
    params: tuple[tuple[str, Location], ...] | None = None  # `@backend(x, w) { ... }`


@dataclass(frozen=True, slots=True)
class RegionParams:
    names: tuple[tuple[str, Location], ...]


@dataclass(frozen=True, slots=True)
class Assign:
    targets: tuple[tuple[str, Location], ...]
    rhs: object  # Ref | Call | Const | Region
    loc: Location


@dataclass(frozen=True, slots=True)
class Return:
    values: tuple  # of Ref | Call
    loc: Location


# ---------------------------------------------------------------- callbacks


class _Reader:
    """Lark's callbacks for one parse (see :class:`~.lark_support.ReaderParser`)."""

    __slots__ = ("file",)

    def __init__(self, file: str | None) -> None:
        self.file = file

    def _loc(self, tok: Token) -> Location:
        return Location(self.file, tok.line, tok.column)

    def start(self, children):
        return children

    def weights_decl(self, c):
        keyword, file, word, digest = c
        for tok, want in ((keyword, "weights"), (word, "sha256")):
            if tok.value != want:
                raise ParseError(
                    f"unexpected name {tok.value!r}; expected `{want}`",
                    self._loc(tok),
                    hint='a weights declaration reads: weights "FILE.npz" sha256 "DIGEST"',
                )
        return WeightsDecl(_string(self, file), _string(self, digest), self._loc(file), self._loc(digest))

    def weights_ref(self, c):
        word, entry = c
        if word.value != "weights":
            raise ParseError(
                f"unexpected name {word.value!r} as a constant's values",
                self._loc(word),
                hint='give a number, [numbers] or weights["ENTRY"]',
            )
        return WeightsRef(_string(self, entry), self._loc(entry))

    def graph(self, c):
        keyword, name, *rest = c
        body = rest[-1]
        params = [p for p in rest[:-1] if p is not None]
        return ("graph", str(name), self._loc(name), params, body)

    def param(self, c):
        name, type_ = c
        return (str(name), type_, self._loc(name))

    def tensor_type(self, c):
        dtype, *dims = c
        if dtype not in DTYPES:
            raise ParseError(
                f"unknown dtype {str(dtype)!r}",
                self._loc(dtype),
                hint=f"byoc supports {', '.join(DTYPES)}",
            )
        shape = tuple(self._dim(d) for d in dims if d is not None)
        problem = shape_problem(shape)
        if problem is not None:
            raise GraphError(
                f"type {dtype}[{', '.join(map(str, shape))}] is too large: {problem}",
                self._loc(dtype),
                hint="byoc's tensors have at most 2**48 elements",
            )
        return TensorType(shape, str(dtype))

    def _dim(self, tok: Token) -> int:
        digits = tok.value.lstrip("0") or "0"
        if len(digits) > MAX_INT_DIGITS or int(digits) > MAX_ELEMENTS:
            shown = digits if len(digits) <= 24 else f"{digits[:20]}... ({len(digits):,} digits)"
            raise GraphError(
                f"dimension {shown} is larger than the limit of 2**48 elements",
                self._loc(tok),
                hint="byoc's tensors have at most 2**48 elements",
            )
        return int(digits)

    def body(self, c):
        return tuple(c)

    def assign(self, c):
        *names, last, rhs = c
        targets = [(str(n), self._loc(n)) for n in names]
        targets.append((_name_of(last), self._loc(last)))
        return Assign(tuple(targets), _as_expr(self, rhs), targets[0][1])

    def region(self, c):
        at, backend, *rest = c
        body = rest.pop()
        params = rest.pop() if rest and type(rest[-1]) is RegionParams else None
        symbol = str(rest[1]) if rest else None
        return Region(
            str(backend), symbol, body, self._loc(at), params=None if params is None else params.names
        )

    def region_params(self, c):
        return RegionParams(tuple((str(n), self._loc(n)) for n in c))

    def composite(self, c):
        at, backend, pattern, body = c
        return Region(str(backend), None, body, self._loc(at), str(pattern))

    def constant(self, c):
        keyword, type_, values = c
        loc = self._loc(keyword)
        if type(values) is WeightsRef:
            return Const(type_, (), loc, values.entry, values.loc)
        if type_.size > MAX_CONSTANT_ELEMENTS:
            raise GraphError(
                f"constant of type {type_} has {type_.size:,} elements; the limit for literal values "
                f"is {MAX_CONSTANT_ELEMENTS:,}",
                loc,
                hint='put large values in a weights file (`const T weights["entry"]`), '
                "or pass them as graph parameters",
            )
        dtype = type_.dtype
        values, spelled = self._literal_values(values, dtype)
        # The values are checked as written, before one value fills the tensor: a
        # constant with no elements (`const float32[0] 1e39`) is refused like any other.
        if dtype == "bool":
            number = next((v for v in values if type(v) is not bool), None)
            if number is not None:
                raise GraphError(
                    f"a bool constant takes true or false, not {number!r}",
                    loc,
                    hint="write true or false: 1 and 0 are numbers, not bools",
                )
        elif is_integer(dtype):
            if any(isinstance(v, float) for v in values):
                raise GraphError(f"{_article(dtype)} {dtype} constant takes integers only", loc)
            info = np.iinfo(dtype)
            low, high = int(info.min), int(info.max)
            bad = next((v for v in values if not low <= v <= high), None)
            if bad is not None:
                raise GraphError(
                    f"constant value {bad!r} is out of range for {dtype}",
                    loc,
                    hint=f"{dtype} values lie in [{low}, {high}]",
                )
        else:
            written, values = values, [float(v) for v in values]
            bad_at = out_of_range(values, dtype, spelled)
            if bad_at is not None:
                high = float(ml_dtypes.finfo(dtype).max)
                raise GraphError(
                    f"constant value {written[bad_at]!r} is out of range for {dtype}",
                    loc,
                    hint=f"{dtype} values lie in [{-high:.8g}, {high:.8g}]: a larger one rounds to "
                    "infinity (write inf or -inf for an infinity)",
                )
        if len(values) == 1 and type_.size != 1:
            values = values * type_.size  # a single value fills the tensor
        if len(values) != type_.size:
            raise GraphError(
                f"constant of type {type_} needs {type_.size} values, got {len(values)}",
                loc,
                hint="give one value per element in row-major order, or a single value to fill it",
            )
        if dtype == "bfloat16":
            return Const(type_, rounded(values, dtype), loc)
        return Const(type_, tuple(values), loc)

    def _literal_values(self, values: list, dtype: str) -> tuple[list, list[int]]:
        """The numbers of a constant's literals: a word (a NAME or NONFINITE token)
        becomes its bool, or the NaN or infinity it spells, if ``dtype`` takes it; and
        the indices of those NaNs and infinities (a number that overflows is no such)."""
        if not any(type(v) is Token for v in values):
            return values, []
        out, spelled = [], []
        for v in values:
            if type(v) is not Token:
                out.append(v)
                continue
            word = v.value
            if word in BOOL_LITERALS:
                if dtype != "bool":
                    raise GraphError(
                        f"{_article(dtype)} {dtype} constant takes numbers, not {word}",
                        self._loc(v),
                        hint="true and false are the values of bool constants; write 1 or 0 here",
                    )
                out.append(word == "true")
            elif word.lstrip("+-") in NONFINITE_LITERALS:
                if not is_float(dtype):
                    raise GraphError(
                        f"{_article(dtype)} {dtype} constant cannot hold {word}",
                        self._loc(v),
                        hint="nan, inf and -inf are values of float constants "
                        "(float16, bfloat16, float32, float64)",
                    )
                spelled.append(len(out))
                out.append(float(word))
            else:
                raise ParseError(
                    f"unexpected name {word!r} as a constant's values",
                    self._loc(v),
                    hint='give a number, [numbers], true/false (bool), nan/inf/-inf (float) or weights["ENTRY"]',
                )
        return out, spelled

    def const_values(self, c):
        if len(c) == 1 and type(c[0]) is list:  # a NUMBER_LIST
            return c[0]
        return [v for v in c if v is not None]

    def NUMBER_LIST(self, tok):
        """The numbers of ``[n, n, ...]`` (a NUMBER_LIST: digits, signs, points,
        exponents, commas and blank space only), each as SIGNED_INT or SIGNED_FLOAT reads
        it: an int unless it has a point or an exponent. ``int()`` and ``float()`` take
        exactly those spellings there, so they check them too; one they refuse is a
        ParseError at its column, and an integer too long for any dtype the GraphError
        SIGNED_INT gives."""
        items = tok.value[1:-1].split(",")
        if not items[-1].strip() and len(items) > 1:
            items.pop()  # a trailing comma
        elif items == [""] or items[-1].isspace():
            items = []  # `[]`
        try:
            if "." not in tok.value and "e" not in tok.value and "E" not in tok.value:
                values = list(map(int, items))
            else:
                values = [float(s) if "." in s or "e" in s or "E" in s else int(s) for s in items]
        except ValueError:
            values = None
        if values is None or (values and max(map(len, items)) > MAX_INT_DIGITS):
            self._number_list_error(tok, items)
        return values

    def _number_list_error(self, tok: Token, items: list[str]) -> None:
        """Raise the error of the first item of NUMBER_LIST ``tok`` that is no number
        (``1.2.3``, an empty one between two commas) or an integer too long."""
        offset = 1  # past "["
        for item in items:
            word = item.strip()
            start = offset + len(item) - len(item.lstrip())
            before = tok.value[:start]
            line = tok.line + before.count("\n")
            column = start + 1 - (before.rfind("\n") + 1) if "\n" in before else tok.column + start
            at = Token("NUMBER", word, tok.start_pos + start, line, column)
            if "." not in word and "e" not in word and "E" not in word and len(word) > MAX_INT_DIGITS:
                self.SIGNED_INT(at)  # raises
            try:
                float(word)
            except ValueError:
                raise ParseError(
                    f"{word!r} is not a number" if word else "a value is missing between two commas",
                    self._loc(at),
                    hint="a constant's values are numbers such as 1, -2.5 or 3e-4, separated by commas",
                ) from None
            offset += len(item) + 1
        raise AssertionError("no bad item in " + tok.value[:40])

    def return_stmt(self, c):
        keyword, *values = c
        return Return(tuple(_as_expr(self, v) for v in values if v is not None), self._loc(keyword))

    def call(self, c):
        name, *items = c
        args, attrs = [], []
        for item in items:
            if item is None:
                continue
            if type(item) is tuple:
                attrs.append(item)
            else:
                if attrs:
                    raise ParseError(
                        "a positional argument follows a keyword attribute",
                        _expr_loc(self, item),
                        hint="put the inputs first, then the attributes",
                    )
                args.append(_as_expr(self, item))
        return Call(str(name), tuple(args), tuple(attrs), self._loc(name))

    def kwarg(self, c):
        key, value = c
        return (_name_of(key), _attr_value(self, value), self._loc(key))

    def int_list(self, c):
        return tuple(int(v) for v in c if v is not None)

    def SIGNED_INT(self, tok):
        if len(tok) > MAX_INT_DIGITS:
            raise GraphError(
                f"integer literal of {len(tok):,} characters is out of range for every dtype",
                self._loc(tok),
                hint="integers are at most 64-bit",
            )
        return int(tok)

    def SIGNED_FLOAT(self, tok):
        return float(tok)


BOOL_LITERALS = ("true", "false")
"""The values of a bool constant (``const bool[2] [true, false]``)."""
NONFINITE_LITERALS = ("nan", "inf")
"""The words of a float constant's NaN and infinities: ``nan``, ``inf``, and with a
sign ``-inf``, ``+inf``, ``-nan`` (a NaN with its sign bit set)."""


def rounded(values, dtype: str) -> np.ndarray:
    """``values`` (numbers) rounded once, to nearest even, to the float ``dtype``.

    numpy rounds doubles to float16 and float32 directly, but ml_dtypes rounds a double
    to bfloat16 through float32, twice: ``1 + 2**-8 + 2**-40`` becomes ``1 + 2**-8`` in
    float32, a tie, and then 1.0 instead of the nearer ``1 + 2**-7``. Rounding to float32
    *to odd* first (an inexact result with an even last bit moved one unit towards the
    double) keeps the information a second rounding needs, so the bfloat16 is the
    double's nearest; overflow and subnormals come out the same way."""
    doubles = np.asarray(values, dtype=np.float64)
    if dtype != "bfloat16":
        with np.errstate(over="ignore"):
            return doubles.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        singles = doubles.astype(np.float32)
        bits = singles.view(np.uint32).copy()
        wide = singles.astype(np.float64)
        inexact = (wide != doubles) & ~np.isnan(doubles)
        move = inexact & (bits & 1 == 0)
        towards_zero = np.abs(wide) > np.abs(doubles)
        bits[move & towards_zero] -= np.uint32(1)
        bits[move & ~towards_zero] += np.uint32(1)
        return bits.view(np.float32).astype(ml_dtypes.bfloat16)


def out_of_range(values, dtype: str, spelled=()) -> int | None:
    """The index of the first of ``values`` that rounds to an infinity in the float
    ``dtype`` (it is beyond the largest finite value by half a unit in the last place
    or more), or None. Rounding decides, not ``finfo(dtype).max``: ``3.4028235e+38``,
    the shortest text of float32's largest value, is a little above it as a double and
    still a float32. The values at the indices ``spelled`` are NaNs and infinities written
    as such (``nan``, ``-inf``), in range; ``1e400`` is not (it overflows a double)."""
    bad = ~np.isfinite(rounded(values, dtype).astype(np.float64))
    bad[list(spelled)] = False
    return int(np.argmax(bad)) if bad.any() else None


def _article(word: str) -> str:
    """The article before a dtype's name: an int8, a uint8, a float32."""
    return "an" if word.startswith("int") else "a"


def _name_of(tok: Token) -> str:
    """The name of a NAME_EQ token (``axis =``)."""
    return tok.value[:-1].rstrip()


def _as_expr(reader: _Reader, item):
    return Ref(str(item), reader._loc(item)) if isinstance(item, Token) else item


def _expr_loc(reader: _Reader, item) -> Location:
    return reader._loc(item) if isinstance(item, Token) else item.loc


def _string(reader: _Reader, tok: Token) -> str:
    """The text of a STRING token, its escapes decoded."""
    try:
        return bytes(tok.value[1:-1], "utf-8").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise ParseError(f"bad escape in string: {exc.reason}", reader._loc(tok)) from None


def _attr_value(reader: _Reader, value) -> AttrValue:
    if isinstance(value, Token):
        if value.type == "STRING":
            return _string(reader, value)
        if value.value in ("true", "false"):
            return value.value == "true"
        raise ParseError(
            f"unexpected name {value.value!r} as an attribute value",
            reader._loc(value),
            hint="attribute values are numbers, strings, true/false or [int, ...]",
        )
    return value


# ------------------------------------------------------------------ building


class _Emitter:
    """Feeds statement records into builders, flattening nested calls."""

    def __init__(self, catalog: Catalog, file: str | None, source: str, weights: WeightsFile | None) -> None:
        self.catalog = catalog
        self.file = file
        self.source = source
        self.weights = weights
        self.locator = partial(locate_in_call, SourceLines(source))

    def function(self, name: str, loc: Location, params, body) -> Function:
        fb = FunctionBuilder(self.catalog, name, loc, source=self.source, locator=self.locator)
        for pname, ptype, ploc in params:
            fb.add_param(pname, ptype, ploc)
        return fb.finish(self.statements(fb, body))

    def statements(self, fb: FunctionBuilder, body) -> list[tuple[str, Location]]:
        """Add every statement of ``body`` to ``fb``; return the returned names."""
        for st in body:
            if type(st) is Token:
                add_statements(fb, st, self.file)
            elif type(st) is Assign:
                self.assign(fb, st)
            else:
                return [self.expr(fb, v) for v in st.values]
        raise AssertionError("the grammar ends every body with return")

    def assign(self, fb: FunctionBuilder, st: Assign) -> None:
        rhs = st.rhs
        names = tuple(n for n, _ in st.targets)
        if type(rhs) is Region:
            if rhs.composite is not None:
                _check_composite_scope(fb, rhs)
            body = FunctionBuilder(
                self.catalog,
                rhs.symbol,
                rhs.loc,
                source=self.source,
                backend=rhs.backend,
                locator=self.locator,
                composite=rhs.composite,
            )
            results = self.statements(body, rhs.body)
            if len(results) != len(names):
                raise GraphError(
                    f"the region returns {len(results)} value(s) but {len(names)} name(s) are bound",
                    st.loc,
                    hint="bind one name per returned value",
                )
            body.close_region(results, rhs.params)
            fb.add_region(names, body, st.loc)
            return
        if type(rhs) is Call:
            self.call(fb, rhs, names, st.loc)
        elif len(names) > 1:
            raise GraphError(
                f"only a region or an op of several outputs can bind several names; this binds {', '.join(names)}",
                st.targets[1][1],
                hint="bind one name here",
            )
        elif type(rhs) is Const and rhs.entry is not None:
            if self.weights is None:
                raise no_weights_file(rhs.entry_loc)
            values, source = self.weights.values(rhs.entry, rhs.type, rhs.entry_loc)
            fb.add_constant(names[0], rhs.type, values, st.loc, source)
        elif type(rhs) is Const:
            fb.add_constant(names[0], rhs.type, rhs.values, st.loc)
        else:
            raise GraphError(
                f"`{names[0]} = {rhs.name}` only renames a value",
                rhs.loc,
                hint=f"use {rhs.name} directly, or copy({rhs.name}) for a new tensor",
            )

    def expr(self, fb: FunctionBuilder, e) -> tuple[str, Location]:
        if type(e) is Ref:
            return e.name, e.loc
        return self.call(fb, e, None, e.loc), e.loc

    def call(self, fb: FunctionBuilder, c: Call, targets: tuple[str, ...] | None, loc: Location) -> str:
        """Add the node of call ``c``, bound to ``targets`` (None: a nested call, named
        anonymously); return its first output's name."""
        inputs = [self.expr(fb, a) for a in c.args]
        names = targets if targets is not None else (fb.anonymous(),)
        locs = [where for _, where in inputs]
        fb.add_node(
            names,
            c.op,
            tuple(n for n, _ in inputs),
            loc,
            attrs=c.attrs,
            locate=partial(_listed_location, locs, c.loc),
        )
        return names[0]


def _check_composite_scope(fb: FunctionBuilder, rhs: Region) -> None:
    """A composite ``@b.p { }`` sits directly inside a region of backend ``b``."""
    if fb.backend is None or fb.composite is not None:
        raise GraphError(
            f"composite @{rhs.backend}.{rhs.composite} is not directly inside a region",
            rhs.loc,
            hint=f"a composite runs inside its backend's region: put it in `@{rhs.backend} {{ ... }}`",
        )
    if fb.backend != rhs.backend:
        raise GraphError(
            f"composite @{rhs.backend}.{rhs.composite} is inside a region of backend {fb.backend}",
            rhs.loc,
            hint=f"a composite of {rhs.backend} runs inside an @{rhs.backend} region",
        )


def _listed_location(inputs: list[Location], op: Location, i: int) -> Location:
    return op if i == OP else inputs[i]


# ------------------------------------------------------------------- public

_parser = ReaderParser("graph.lark", _Reader, TERMINALS)


def parse_graph(
    data: str | bytes,
    catalog: Catalog,
    *,
    file: str | None = None,
    weights_files: Mapping[str, bytes] | None = None,
) -> Program:
    """Parse DSL text (or bytes) into a Program, one Function per ``graph``.
    ``weights_files`` holds weights files by name in memory (a bundle's members),
    looked up before the file system."""
    text = decode(data, file)
    check_name_lengths(text, file, _LONG_NAMES)
    records = run_parser(partial(_parser.parse, reader=_Reader(file)), text, file, DESCRIBE)
    weights = None
    if records and type(records[0]) is WeightsDecl:
        decl = records.pop(0)
        try:
            weights = WeightsFile(decl.file, decl.sha256, file, decl.file_loc, decl.sha_loc, weights_files)
        except (GraphError, ParseError) as exc:
            raise exc.with_source(text) from None
    if not records:
        raise ParseError(
            "no graph found",
            Location(file, 1, 1),
            hint="start with `graph main(x: float32[4]) { ... }`",
            source=text,
        )
    emitter = _Emitter(catalog, file, text, weights)
    functions: list[Function] = []
    seen: dict[str, Location] = {}
    try:
        with full_collections_deferred():
            for _, name, loc, params, body in records:
                if name in seen:
                    raise GraphError(
                        f"duplicate graph name {name!r}", loc, hint=f"first defined at {seen[name]}"
                    )
                seen[name] = loc
                functions.append(emitter.function(name, loc, params, body))
    except GraphError as exc:
        raise exc.with_source(text) from None
    except RecursionError:
        raise ParseError("the text nests too deeply to parse", Location(file, 1, 1), source=text) from None
    return Program(tuple(functions))


BODY_HEADER = "graph body() {"
"""What :func:`parse_body` puts before a body, on the body's first line."""


def parse_body(
    text: str, builder, catalog: Catalog, *, file: str | None = None
) -> list[tuple[str, Location]]:
    """Parse ``text``, the body of a graph (statements, then ``return ...``), into
    ``builder``, which offers the :class:`~byoc.builder.FunctionBuilder` methods that
    statements call (``add_node``, ``anonymous``, ``add_constant``); return the returned
    names. Backend specs read a pattern's ops this way (one grammar for graphs and
    patterns). Locations are the body's own lines; on the first line, columns count
    from :data:`BODY_HEADER`, which the body is parsed after.
    """
    wrapped = f"{BODY_HEADER}{text}\n}}\n"
    records = run_parser(partial(_parser.parse, reader=_Reader(file)), wrapped, file, DESCRIBE)
    if len(records) != 1 or type(records[0]) is not tuple:
        raise ParseError(
            "expected the statements of one graph body",
            Location(file, 1, len(BODY_HEADER) + 1),
            hint="write statements and a `return`, without `graph`, `weights` or an unmatched `}`",
        )
    _, _, _, _, body = records[0]
    return _Emitter(catalog, file, wrapped, None).statements(builder, body)
