"""Building a graph's IR from its statement records (:class:`GraphEmitter`): each
graph or region body fed, in source order, into a FunctionBuilder."""

from __future__ import annotations

from functools import partial

from lark import Token

from byoc.builder import OP, FunctionBuilder
from byoc.catalog import Catalog
from byoc.errors import GraphError, Location
from byoc.ir import Function

from .graph_records import Assign, Call, Const, Ref, Region
from .graph_statements import add_statements, locate_in_call
from .lark_support import SourceLines
from .weights_file import WeightsFile, no_weights_file


class GraphEmitter:
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
