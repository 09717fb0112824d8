"""Errors about an imported ONNX model name the model file and the ONNX node.

An ONNX model is imported as graph text that the user never sees (see
:mod:`byoc.onnx.model_import`); the parsed Program's values are located in that text,
``<m.onnx imported>:L:C``. :func:`locate_at_nodes` gives each of those locations the
node its line came from (a :class:`NodeLocation`), so that an error found later, when
the program is partitioned, generated or built, is reported as a parse error of the
text already is: against the model file and the node, by :func:`at_onnx_node`, and
with no location into a text that is nobody's file.

This module imports neither onnx nor numpy: the CLI calls :func:`at_onnx_node` on
every error it prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, is_dataclass, replace

from ..errors import ByocError, Location


@dataclass(frozen=True, slots=True)
class NodeLocation(Location):
    """A place in an imported model's text, with what it came from: ``model`` names the
    model file, ``origin`` the ONNX node (``ONNX node 3 (Conv 'conv1', opset 13)``), and
    ``statement`` is the text's line. Shown as a plain Location (generated sources cite
    it as ``<m.onnx imported>:L``)."""

    model: str = ""
    origin: str = ""
    statement: str = ""


def node_message(message: str, model: str, origin: str, statement: str) -> str:
    """``message`` about a line of an imported model's text, said of the model and node."""
    return f"{model}: {origin or 'the imported graph'}: {message}" + (
        f" (in the imported statement `{statement}`)" if statement else ""
    )


def at_onnx_node(exc: ByocError) -> ByocError:
    """``exc`` said of the ONNX model and node when it is located in an imported model's
    text (a :class:`NodeLocation`); ``exc`` itself otherwise."""
    loc = exc.location
    if not isinstance(loc, NodeLocation):
        return exc
    error = type(exc)(node_message(exc.message, loc.model, loc.origin, loc.statement), hint=exc.hint)
    error.__cause__ = exc.__cause__
    return error


def locate_at_nodes(program, file: str, model: str, origins: Sequence[str], text: str):
    """``program`` (a Program parsed from ``text``, named ``file``) with every location
    in ``file`` a :class:`NodeLocation` naming ``model`` and the node of its line
    (``origins[line - 1]``)."""
    lines = text.split("\n")
    made: dict[tuple[int, int], NodeLocation] = {}

    def relocate(loc):
        if type(loc) is not Location or loc.file != file:
            return loc
        key = (loc.line, loc.column)
        if key not in made:
            k = loc.line - 1
            origin = origins[k] if 0 <= k < len(origins) else ""
            statement = lines[k].strip() if 0 <= k < len(lines) else ""
            made[key] = NodeLocation(loc.file, loc.line, loc.column, model, origin, statement)
        return made[key]

    def walk(value):
        if isinstance(value, tuple):
            items = tuple(walk(v) for v in value)
            return value if all(a is b for a, b in zip(items, value)) else items
        if isinstance(value, Location):
            return relocate(value)
        if not is_dataclass(value) or isinstance(value, type):
            return value
        changed = {}
        for f in fields(value):
            if f.name in ("values", "source", "type", "types", "attrs", "shape"):
                continue  # arrays, weights references and types hold no locations
            old = getattr(value, f.name)
            new = walk(old)
            if new is not old:
                changed[f.name] = new
        return replace(value, **changed) if changed else value

    return walk(program)
