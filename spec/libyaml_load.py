"""Reading a spec's YAML with libyaml's parser, where it reads it as ruamel's own does.

ruamel.yaml's round-trip reader, which keeps the line and column of every key and
value (:mod:`.yaml_doc` locates every error with them), is pure Python: reading
``spec/ops.yaml`` and one backend spec took 350-450 ms of the quick start's first
``byoc run`` on an empty cache, most of it. libyaml's parser (ruamel.yaml.clib) reads
the same text about ten times as fast. Its nodes carry the same marks, and ruamel's
round-trip constructor and version-aware resolver turn them into the same tree:
``CommentedMap`` and ``CommentedSeq`` with the same positions, quoted and block
scalars as the same string types, plain scalars resolved by YAML 1.2's rules.

It is used only where the two readers are known to agree, and ruamel's own reader
reads the rest, so that every document is read, and every error reported, as before:

* a text libyaml refuses, or that the constructor refuses (a duplicate key, an
  anchor defined twice, a character libyaml does not accept): ruamel's reader raises
  its own error;
* a document with an empty or null value: libyaml marks an empty value where its key
  ends, ruamel where the next token starts, and errors about such a value point there;
* a text with a ``%YAML`` directive: the resolver takes the version from ruamel's
  scanner, which this reader has not.

Comments are not kept (nothing reads them). Without ruamel.yaml.clib (another Python
than CPython), ruamel's reader reads everything.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.resolver import VersionedResolver

try:
    from ruamel.yaml.cyaml import CParser
except ImportError:  # no libyaml parser for ruamel here
    CParser = None


def libyaml_load(text: str) -> Any:
    """The document of ``text`` as ruamel's round-trip reader gives it (with quotes
    preserved), read by libyaml; None where this reader does not answer (see the
    module doc), and ruamel's own must read the text."""
    if CParser is None or "%YAML" in text:
        return None
    loader = _Loader(text)
    try:
        root = loader.get_single_data()
    except Exception:  # any complaint is ruamel's reader's to report, in its words
        return None
    finally:
        loader.dispose()
    if not isinstance(root, (CommentedMap, CommentedSeq)) or _has_empty_value(root):
        return None  # a scalar document is ruamel's reader's to refuse
    return root


if CParser is not None:

    class _Loader(CParser, RoundTripConstructor, VersionedResolver):
        """libyaml's parser and composer, with ruamel's round-trip constructor and
        YAML 1.2 resolver (as ruamel's own C loaders pair them)."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            self._parser = self._composer = self
            self.comment_handling = None
            RoundTripConstructor.__init__(self, preserve_quotes=True, loader=self)
            VersionedResolver.__init__(self, loadumper=self)


def _has_empty_value(root: Any) -> bool:
    """Whether a mapping or sequence in ``root`` holds None. Each is looked at once: an
    alias shares its anchor's object, and a document of nested aliases (a "billion
    laughs") has exponentially many paths to a few objects."""
    pending, seen = [root], {id(root)}
    while pending:
        node = pending.pop()
        values = node.values() if isinstance(node, CommentedMap) else node
        for value in values:
            if value is None:
                return True
            if isinstance(value, (CommentedMap, CommentedSeq)) and id(value) not in seen:
                seen.add(id(value))
                pending.append(value)
    return False
