"""Hypothesis cases for every op of the catalog, each with an independently computed result.

``CASES[op](dtype)`` is a strategy of :class:`OpCase` (tests/catalog_cases_support.py): input
arrays, attributes (as the DSL writes them) and the expected result, computed from definitions:
Python's ``math`` per element, plain numpy array expressions, or the nested-loop definitions of
tests/reference_kernels_support.py (convolutions, pooling). The cases live in
tests/catalog_cases_{elementwise,conversions,networks,layout,indexing}.py; ``CASES`` names
exactly the ops of spec/ops.yaml (tests/test_catalog_ops.py checks), so a new op needs a case.
"""

from __future__ import annotations

from collections.abc import Callable

from catalog_cases_conversions import CONVERSION_CASES
from catalog_cases_elementwise import ELEMENTWISE_CASES
from catalog_cases_indexing import INDEXING_CASES
from catalog_cases_integer import INTEGER_CASES
from catalog_cases_layout import LAYOUT_CASES
from catalog_cases_networks import NETWORK_CASES
from catalog_cases_support import OpCase
from hypothesis import strategies as st

CASES: dict[str, Callable[[str], st.SearchStrategy[OpCase]]] = {
    **ELEMENTWISE_CASES,
    **CONVERSION_CASES,
    **NETWORK_CASES,
    **INTEGER_CASES,
    **LAYOUT_CASES,
    **INDEXING_CASES,
}
