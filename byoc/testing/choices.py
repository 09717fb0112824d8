"""The random choices a :class:`~byoc.testing.draft.Draft` makes: :class:`NumpyChoices` (a
seeded numpy generator, what ``byoc sweep`` uses) or a test's own (tests/test_e2e_random_catalog.py
draws through hypothesis, which shrinks a failing graph)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

T = TypeVar("T")


class Choices(Protocol):
    """The random choices a :class:`Draft` makes."""

    def integers(self, low: int, high: int) -> int:
        """An integer in ``low..high`` (both included)."""

    def choice(self, items: Sequence[T]) -> T:
        """One of ``items`` (not empty)."""

    def permutation(self, items: Sequence[T]) -> list[T]:
        """``items`` in a random order."""

    def subset(self, items: Sequence[T], min_size: int, max_size: int | None = None) -> list[T]:
        """Distinct ``items``, at least ``min_size`` and at most ``max_size``, in a random order."""


class NumpyChoices:
    """:class:`Choices` from a numpy generator (seeded: the same seed draws the same)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integers(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high + 1))

    def choice(self, items: Sequence[T]) -> T:
        return items[int(self.rng.integers(len(items)))]

    def permutation(self, items: Sequence[T]) -> list[T]:
        return [items[k] for k in self.rng.permutation(len(items))]

    def subset(self, items: Sequence[T], min_size: int, max_size: int | None = None) -> list[T]:
        high = len(items) if max_size is None else min(max_size, len(items))
        return self.permutation(items)[: self.integers(min_size, high)]
