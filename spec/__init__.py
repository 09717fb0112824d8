"""byoc.spec: the op catalog and backend specs, as validated data.

- :func:`load_catalog` reads ``ops.yaml``, the op catalog; :func:`load_catalog_on_path`
  extends it by the ``ops.yaml`` of each spec directory on the search path.
- :func:`load_backend` finds ``<name>.yaml`` on the spec search path (``--spec-path``
  directories, then ``BYOC_SPEC_PATH``, then the shipped ``backends/``) and returns a
  validated :class:`BackendSpec`; :func:`list_backends` returns all of them.
- :func:`check_spec_file` validates one file of either shape (``byoc check``).

``spec/README.md`` is the reference of both formats.
"""

from importlib import import_module

_HOMES = {
    "BackendSpec": "backend",
    "CompileSettings": "backend",
    "LayerDef": "backend",
    "MacroDef": "backend",
    "OptionDef": "backend",
    "load_backend_file": "backend_loader",
    "OpBinding": "bindings",
    "check_spec": "check",
    "check_spec_file": "check",
    "spec_files": "check",
    "CodegenKind": "codegen_kind",
    "KINDS": "kinds",
    "SHIPPED_OPS": "ops_loader",
    "USER_CATALOG": "ops_loader",
    "load_catalog": "ops_loader",
    "merge_catalogs": "ops_loader",
    "ENV_VAR": "search",
    "SHIPPED_BACKENDS": "search",
    "catalog_files": "search",
    "find_backends": "search",
    "list_backends": "search",
    "load_backend": "search",
    "load_catalog_on_path": "search",
    "spec_dirs": "search",
}
"""Each public name -> its module. A name is imported when first used: a process whose
catalog and specs come validated from the disk cache (:mod:`.validated_cache`) never
imports the validators (about 20 ms of every command)."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


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
