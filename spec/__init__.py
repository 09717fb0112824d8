"""byoc.spec: the op catalog and backend specs, as validated data."""

from .ops_loader import SHIPPED_OPS, load_catalog

__all__ = ["SHIPPED_OPS", "load_catalog"]
