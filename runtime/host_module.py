"""Host functions: the ops the host graph runs itself, read back from the
``<graph>.host.graph`` DSL text the generator writes, and evaluated with the op
catalog's numpy references."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np

from byoc.build_records import text_source_key
from byoc.catalog import Catalog
from byoc.errors import RuntimeFailure
from byoc.ir import Function, Program
from byoc.parsed_texts import parsed_text
from byoc.reference import evaluate

from .interface import PackedFunction, Signature


class HostModule:
    """The host functions of one host graph."""

    kind = "host"

    def __init__(
        self,
        text: str,
        catalog: Catalog,
        *,
        file: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """``files`` holds the weights file of the text's large constants by name (a
        bundle's members)."""
        self.text = text
        # the key of byoc.api.parse_source's texts; "" names no file
        source = text_source_key(text.encode("utf-8", "surrogatepass"), "graph", file or "", None)
        program = parsed_text(source, catalog, partial(_parse, text, catalog, file, files))
        self.functions: dict[str, Function] = {fn.name: fn for fn in program.functions}
        self.catalog = catalog

    def symbols(self) -> tuple[str, ...]:
        return tuple(self.functions)

    def signature(self, symbol: str) -> Signature:
        fn = self._function(symbol)
        return Signature(tuple(p.type for p in fn.params), fn.output_types)

    def get_function(self, symbol: str) -> PackedFunction:
        fn = self._function(symbol)
        names = [p.name for p in fn.params]
        n_in = len(names)

        def run(*args: np.ndarray) -> None:
            if len(args) != n_in + len(fn.outputs):
                raise RuntimeFailure(
                    f"{symbol}: expected {n_in + len(fn.outputs)} arguments, got {len(args)}"
                )
            results = evaluate(fn, dict(zip(names, args[:n_in])), self.catalog)
            for out, value in zip(args[n_in:], results):
                np.copyto(out, value)

        return run

    def _function(self, symbol: str) -> Function:
        try:
            return self.functions[symbol]
        except KeyError:
            raise RuntimeFailure(
                f"no host function {symbol!r}", hint=f"known: {', '.join(self.functions)}"
            ) from None


def _parse(text: str, catalog: Catalog, file: str | None, files: Mapping[str, bytes] | None) -> Program:
    from byoc.grammar.graph_parser import parse_graph  # only when the parse is not remembered

    return parse_graph(text, catalog, file=file, weights_files=files)
