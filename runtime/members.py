"""A model's members by name, each made when it is first read.

A build knows every member it would save in a bundle, but running the model needs few
of them: a ``byoc run`` never reads its compiled library back from the cache (it is
loaded where it is) nor prints its source graph with its weights. For a model the size
of ResNet-50 those two cost a few hundred milliseconds a build: reading 100 MB of
library and writing 100 MB of weights into an archive. So a build hands such a member
over as a function that makes its bytes, which runs when the member is first read (a
bundle being saved, say), once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

Maker = Callable[[], bytes]


class Members(Mapping[str, bytes]):
    """Members by name: bytes, or a function of no arguments that makes them."""

    def __init__(self, items: Mapping[str, bytes | Maker]) -> None:
        self._items: dict[str, bytes | Maker] = dict(items._items if isinstance(items, Members) else items)

    def __getitem__(self, name: str) -> bytes:
        value = self._items[name]
        if callable(value):
            value = self._items[name] = value()
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def made(self, name: str) -> bool:
        """Whether member ``name`` holds its bytes yet (True for one given as bytes)."""
        return not callable(self._items[name])
