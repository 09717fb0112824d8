"""Lark's callbacks for the graph DSL (:class:`GraphReader`): each rule reduced to a
statement record of :mod:`.graph_records`, names and types checked as they are read."""

from __future__ import annotations

from lark import Token

from byoc.errors import GraphError, Location, ParseError
from byoc.ir import DTYPES, MAX_ELEMENTS, AttrValue, TensorType, shape_problem

from .graph_constants import MAX_INT_DIGITS, constant_values, integer_too_long, number_list
from .graph_records import Assign, Call, Const, Ref, Region, RegionParams, Return, WeightsDecl, WeightsRef


class GraphReader:
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
        return Const(type_, constant_values(type_, values, loc, self._loc), loc)

    def const_values(self, c):
        if len(c) == 1 and type(c[0]) is list:  # a NUMBER_LIST
            return c[0]
        return [v for v in c if v is not None]

    def NUMBER_LIST(self, tok):
        """The numbers of ``[n, n, ...]``: see :func:`~.graph_constants.number_list`."""
        return number_list(tok, self._loc)

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
            raise integer_too_long(tok, self._loc(tok))
        return int(tok)

    def SIGNED_FLOAT(self, tok):
        return float(tok)


def _name_of(tok: Token) -> str:
    """The name of a NAME_EQ token (``axis =``)."""
    return tok.value[:-1].rstrip()


def _as_expr(reader: GraphReader, item):
    return Ref(str(item), reader._loc(item)) if isinstance(item, Token) else item


def _expr_loc(reader: GraphReader, item) -> Location:
    return reader._loc(item) if isinstance(item, Token) else item.loc


def _string(reader: GraphReader, tok: Token) -> str:
    """The text of a STRING token, its escapes decoded."""
    try:
        return bytes(tok.value[1:-1], "utf-8").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise ParseError(f"bad escape in string: {exc.reason}", reader._loc(tok)) from None


def _attr_value(reader: GraphReader, value) -> AttrValue:
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
