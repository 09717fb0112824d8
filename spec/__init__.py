"""byoc.spec: the op catalog and backend specs, as validated data.

- :func:`load_catalog` reads ``ops.yaml``, the op catalog; :func:`load_catalog_on_path`
  extends it by the ``ops.yaml`` of each spec directory on the search path.
- :func:`load_backend` finds ``<name>.yaml`` on the spec search path (``--spec-path``
  directories, then ``BYOC_SPEC_PATH``, then the shipped ``backends/``) and returns a
  validated :class:`BackendSpec`; :func:`list_backends` returns all of them.
- :func:`check_spec_file` validates one file of either shape (``byoc check``).

``spec/README.md`` is the reference of both formats.
"""

from .backend import BackendSpec, CompileSettings, LayerDef, MacroDef, OptionDef
from .backend_loader import load_backend_file
from .bindings import OpBinding
from .check import check_spec, check_spec_file, spec_files
from .codegen_kind import CodegenKind
from .kinds import KINDS
from .ops_loader import SHIPPED_OPS, USER_CATALOG, load_catalog, merge_catalogs
from .search import (
    ENV_VAR,
    SHIPPED_BACKENDS,
    catalog_files,
    find_backends,
    list_backends,
    load_backend,
    load_catalog_on_path,
    spec_dirs,
)

__all__ = [
    "ENV_VAR",
    "KINDS",
    "SHIPPED_BACKENDS",
    "SHIPPED_OPS",
    "USER_CATALOG",
    "BackendSpec",
    "CodegenKind",
    "CompileSettings",
    "LayerDef",
    "MacroDef",
    "OpBinding",
    "OptionDef",
    "catalog_files",
    "check_spec",
    "check_spec_file",
    "find_backends",
    "list_backends",
    "load_backend",
    "load_backend_file",
    "load_catalog",
    "load_catalog_on_path",
    "merge_catalogs",
    "spec_dirs",
    "spec_files",
]
