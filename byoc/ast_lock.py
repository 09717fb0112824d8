"""One lock for building Python ASTs from several threads.

Some CPython releases (3.11 among them) keep the recursion depth of the C-to-Python
AST conversion in interpreter-wide state, so two threads in ``ast.parse`` or
``ast.literal_eval`` at once can fail with "AST constructor recursion depth
mismatch" (CPython issue gh-106905). byoc parses Python expressions in two places
that threads can reach: Lark reads string literals of a ``.lark`` grammar with
``ast.literal_eval`` while it builds a parser (each thread builds its own), and the op
catalog compiles its numpy reference expressions with ``ast.parse``. Both hold this
lock while they do; neither is on a hot path.
"""

from __future__ import annotations

import threading

PYTHON_AST_LOCK = threading.Lock()
