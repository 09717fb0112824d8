"""A DSL or ExampleJSON text's parse, remembered for the next process that reads it.

The quick start's warm ``byoc run`` found its build's record and its library in the
cache, and still parsed its graph file and, to load the model, the host graph: 14 ms
of parsing, and importing the Lark parsers, about a tenth of the whole run. The first
parse of a text keeps the Program it gave in the disk cache (kind ``parsed``, folder ``parsed-texts``), under a
key of the text's source key (:func:`byoc.build_records.text_source_key`: its SHA-256,
the name it was read by, the ExampleJSON tokens), byoc's code
(:func:`byoc.warm_keys.code_stamp`) and the op catalog it was checked against
(:func:`byoc.warm_keys.catalog_stamp`: the shipped and the user ``ops.yaml``).

Never remembered: a text with an error (the parse raises it in every process); a
Program with a constant read from a weights file (the file is read and its digest
checked on every parse, so a changed file is still reported); a text parsed with a
catalog built in code, which has no stamp.

This module imports no parser: a process whose texts are all remembered never loads
the grammars.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

from .disk_cache import cached, entry_key
from .ir import Program, weights_sources
from .warm_keys import catalog_stamp, code_stamp

KIND = "parsed-texts"
FORMAT = "1"


def parsed_text(source_key: str, catalog, parse: Callable[[], Program]) -> Program:
    """The Program that ``parse()`` gives for the text that ``source_key`` names
    (:func:`~byoc.build_records.text_source_key`), checked against ``catalog``: from the
    cache when an earlier process kept it, else parsed and kept (see the module doc)."""
    stamp = catalog_stamp(catalog)
    if stamp is None:
        return parse()
    key = entry_key("parsed-text", FORMAT, source_key, code_stamp(), stamp)
    return cached(KIND, key, parse, dump=_dump, expect=Program)


def _dump(program: Program) -> bytes | None:
    """``program`` pickled; None (not kept) when a constant comes from a weights file."""
    if weights_sources(program.functions):
        return None
    return pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
