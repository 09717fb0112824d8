"""The ``engine`` codegen kind: a C++ module driving a spec's third-party engine, and
the engine's header; the entry is :mod:`.generate`."""
