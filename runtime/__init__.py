"""byoc.runtime: build, load and run generated artifacts. Never imports byoc.generator,
so a saved bundle runs without the code generator."""

from __future__ import annotations

from .model import Model, load

__all__ = ["Model", "load"]
