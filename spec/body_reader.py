"""What reads a graph body written in a backend spec (a pattern's ``match``, its
``lowering``): the builder interface of :func:`~byoc.grammar.graph_parser.parse_body`,
for statements of ops only, with no constant and no region."""

from __future__ import annotations

from byoc.errors import GraphError
from byoc.ir import ANON_PREFIX


class BodyReader:
    """Receives a spec body's statements from the DSL's parser; a subclass keeps its
    ``add_node`` calls. ``what`` names the body in errors (``a pattern``), ``no_constant``
    hints at what to write instead of a constant."""

    backend = None
    composite = None
    what = "a spec's body"
    no_constant = ""

    def __init__(self) -> None:
        self._anon = 0

    def anonymous(self) -> str:
        self._anon += 1
        return f"{ANON_PREFIX}{self._anon}"

    def one_output(self, outputs, loc) -> str:
        """The one name a statement of a spec body binds."""
        if len(outputs) != 1:
            raise GraphError(f"{self.what}'s op binds one name", loc)
        return outputs[0]

    def add_constant(self, name, type_, values, loc, source=None) -> None:
        raise GraphError(f"{self.what} cannot define a constant", loc, hint=self.no_constant or None)

    def add_region(self, outputs, body, loc) -> None:
        raise GraphError(f"{self.what} cannot hold a region or a composite", loc)
