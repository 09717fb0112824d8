"""Libraries a backend's generated code needs: the ``requires:`` key of a backend spec.

A requirement names the headers the generated code includes and the shared
libraries it links against, says where to find them (``from:``) and how to install
them. Everything about a library is data; this module knows four ways of finding
one, none of them specific to a library:

``python_module``
    an importable module that reports its directories, through functions or
    string attributes named by ``include_dir`` and ``lib_dir``;
``python_distributions``
    installed Python distributions whose files (``importlib.metadata.files``) hold
    the headers and libraries, wherever the wheels put them (site-packages or the
    environment's data directories);
``pkg_config``
    a ``pkg-config`` package: its ``-I`` and ``-L`` directories;
``dirs``
    directories given in the spec, ``include`` and ``lib``: absolute, or relative
    to the spec file's directory, with ``${NAME}`` replaced by the environment
    variable ``NAME`` (:func:`_spec_dirs`), resolved when the spec is loaded.

Headers and libraries are also looked for in the system's default directories,
which need no flags. :meth:`Requirement.locate` returns a :class:`Linkage`: the
``-I`` flags for compiling and the ``-L``, ``-Wl,-rpath`` and ``-l`` flags for
linking, so that the built library loads without ``LD_LIBRARY_PATH``.

A bundle records each requirement (:meth:`Requirement.record`, the YAML as JSON); loading
it locates them again on its machine (:func:`requirements_from_record`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from byoc.errors import Location, UsageError

from .bindings import frozen_map
from .shared_libraries import NotFound, library_file, shared_objects
from .validated_cache import environment_value

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

FINDERS: Mapping[str, str] = {
    "python_module": "an importable module reporting its directories (include_dir, lib_dir)",
    "python_distributions": "installed Python distributions whose files hold the headers and libraries",
    "pkg_config": "a pkg-config package",
    "dirs": "directories given in the spec (include, lib): absolute, relative to the spec file, ${ENV}",
}
"""The ways of finding a requirement: the key of ``from:`` that selects one -> what it is."""
FINDER_KEYS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "python_module": (("python_module",), ("include_dir", "lib_dir")),
    "python_distributions": (("python_distributions",), ()),
    "pkg_config": (("pkg_config",), ()),
    "dirs": (("dirs",), ()),
}
"""Each finder's (required, optional) keys of ``from:``."""
REQUIREMENT_KEYS = (("headers", "libraries", "install", "from"), ("doc", "environment"))
PKG_CONFIG_TIMEOUT = 30
ENV_REFERENCE = re.compile(r"\$\{([^}]*)\}?")
"""``${NAME}`` in a ``dirs`` entry (an unclosed one matches too, to be refused)."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def default_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The compiler's and loader's default (include, lib) directories: found there, a
    header or library needs no flag."""
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    libs = [
        "/usr/local/lib",
        *(f"{p}/{arch}" for p in ("/usr/lib", "/lib") if arch),
        "/usr/lib64",
        "/usr/lib",
    ]
    return ("/usr/local/include", "/usr/include"), tuple(libs)


@dataclass(frozen=True, slots=True)
class Linkage:
    """Where a located requirement is: the directories that need flags, and the files."""

    include_dirs: tuple[str, ...]
    lib_dirs: tuple[str, ...]
    libraries: tuple[str, ...]
    """``-l`` names, in link order."""
    files: tuple[str, ...]
    """The shared library files the libraries stand for, as absolute paths, in link
    order: one per library, or those a library's linker script names (glibc's
    ``libm.so`` is the text ``GROUP ( .../libm.so.6 AS_NEEDED ( ... ) )``)."""

    @property
    def compile_flags(self) -> tuple[str, ...]:
        return tuple(f"-I{d}" for d in self.include_dirs)

    @property
    def link_flags(self) -> tuple[str, ...]:
        dirs = tuple(f for d in self.lib_dirs for f in (f"-L{d}", f"-Wl,-rpath,{d}"))
        return dirs + tuple(f"-l{name}" for name in self.libraries)


def compile_flags(linkages: Iterable[Linkage]) -> list[str]:
    """The flags that compile a module against every library of ``linkages`` (their ``-I``)."""
    return [f for linkage in linkages for f in linkage.compile_flags]


def link_flags(linkages: Iterable[Linkage]) -> list[str]:
    """The flags that link a module with every library of ``linkages``, in their order."""
    return [f for linkage in linkages for f in linkage.link_flags]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One library a backend needs (one entry of ``requires:``)."""

    name: str
    headers: tuple[str, ...]
    """Header paths as the generated code includes them (``mylib.h``, ``vendor/mylib/api.h``)."""
    libraries: tuple[str, ...]
    """Library names as ``-l`` takes them (``mylib`` for ``libmylib.so``)."""
    install: str
    """How to install it: the hint of every error about it."""
    finder: str
    """A key of :data:`FINDERS`."""
    where: Mapping[str, Any]
    """The ``from:`` mapping, as plain data."""
    doc: str = ""
    loc: Location | None = field(default=None, compare=False, repr=False)
    environment: Mapping[str, str] = field(default_factory=frozen_map)
    """Variables the library reads when it loads (``environment:``): :meth:`apply_environment`."""

    def apply_environment(self) -> dict[str, str]:
        """Set each variable of :attr:`environment` that the process does not set, before
        any load of the library (which reads them at its first); those set, by name."""
        applied = {name: value for name, value in self.environment.items() if name not in os.environ}
        os.environ.update(applied)
        return applied

    def record(self) -> dict[str, Any]:
        """The requirement as a bundle's manifest holds it: the YAML mapping as JSON,
        one entry of the module's ``requires`` object (name -> this)."""
        out: dict[str, Any] = {
            "headers": list(self.headers),
            "libraries": list(self.libraries),
            "install": self.install,
            "from": {k: list(v) if isinstance(v, tuple) else v for k, v in self.where.items()},
        }
        if self.doc:
            out["doc"] = self.doc
        if self.environment:
            out["environment"] = dict(self.environment)
        return out

    def locate(self) -> Linkage:
        """Find the headers and libraries on this machine; raises :class:`NotFound`."""
        include_dirs, lib_dirs = _FIND[self.finder](self)
        default_inc, default_lib = default_dirs()
        inc = [_dir_holding(h, include_dirs, default_inc, "header") for h in self.headers]
        lib = [_dir_holding(library_file(n), lib_dirs, default_lib, "library") for n in self.libraries]
        found = (os.path.join(d, library_file(n)) for d, n in zip(lib, self.libraries))
        files = tuple(
            dict.fromkeys(f for path in found for f in shared_objects(path, (*lib_dirs, *default_lib)))
        )
        return Linkage(_flagged(inc, default_inc), _flagged(lib, default_lib), self.libraries, files)

    def check(self, backend: str) -> Linkage:
        """:meth:`locate`, with a missing library as a UsageError at the requirement."""
        try:
            return self.locate()
        except NotFound as exc:
            raise UsageError(
                f"backend {backend} needs {self.name}, which is not installed: {exc}",
                self.loc,
                hint=self.install,
            ) from None


def _dir_holding(name: str, dirs: tuple[str, ...], defaults: tuple[str, ...], what: str) -> str:
    """The first of ``dirs``, then ``defaults``, that holds the file ``name``."""
    for d in (*dirs, *defaults):
        if os.path.isfile(os.path.join(d, name)):
            return os.path.abspath(d)
    searched = ", ".join(dirs) if dirs else "the default directories"
    raise NotFound(f"{what} {name} is in none of {searched}")


def _flagged(dirs: list[str], defaults: tuple[str, ...]) -> tuple[str, ...]:
    """The directories, in order and once each, that are not defaults (those need flags)."""
    return tuple(dict.fromkeys(d for d in dirs if d not in defaults))


# -------------------------------------------------------------------------- finders


def _python_module(req: Requirement) -> tuple[tuple[str, ...], tuple[str, ...]]:
    module_name = req.where["python_module"]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise NotFound(f"cannot import the Python module {module_name} ({exc})") from None

    def directory(key: str) -> tuple[str, ...]:
        if key not in req.where:
            return ()
        value = getattr(module, req.where[key], None)
        try:
            value = value() if callable(value) else value
        except Exception as exc:  # a module's own function: report whatever it raises
            raise NotFound(f"{module_name}.{req.where[key]}() failed: {exc}") from None
        if not isinstance(value, (str, os.PathLike)):
            raise NotFound(f"{module_name}.{req.where[key]} does not give a directory")
        return (os.fspath(value),)

    return directory("include_dir"), directory("lib_dir")


def _python_distributions(req: Requirement) -> tuple[tuple[str, ...], tuple[str, ...]]:
    paths: list[str] = []
    for name in req.where["python_distributions"]:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise NotFound(f"the Python distribution {name} is not installed") from None
        paths += (os.path.normpath(dist.locate_file(f)) for f in dist.files or ())
    include = [_strip(p, h) for h in req.headers for p in paths if p.endswith(os.sep + os.path.normpath(h))]
    libs = [
        os.path.dirname(p) for n in req.libraries for p in paths if os.path.basename(p) == library_file(n)
    ]
    # shortest first: `include/api.h` before `include/vendor/mylib/api.h` for api.h
    return tuple(sorted(dict.fromkeys(include), key=len)), tuple(sorted(dict.fromkeys(libs), key=len))


def _strip(path: str, header: str) -> str:
    return path[: -len(os.path.normpath(header)) - 1]


def _pkg_config(req: Requirement) -> tuple[tuple[str, ...], tuple[str, ...]]:
    package = req.where["pkg_config"]
    tool = shutil.which("pkg-config")
    if tool is None:
        raise NotFound("pkg-config is not installed")
    try:
        proc = subprocess.run(
            [tool, "--cflags-only-I", "--libs-only-L", package],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PKG_CONFIG_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotFound(f"cannot run pkg-config: {exc}") from None
    if proc.returncode != 0:
        raise NotFound(f"pkg-config knows no package {package}")
    words = proc.stdout.split()
    return tuple(w[2:] for w in words if w.startswith("-I")), tuple(
        w[2:] for w in words if w.startswith("-L")
    )


def _dirs(req: Requirement) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(req.where["dirs"].get("include", ())), tuple(req.where["dirs"].get("lib", ()))


_FIND = {
    "python_module": _python_module,
    "python_distributions": _python_distributions,
    "pkg_config": _pkg_config,
    "dirs": _dirs,
}


# -------------------------------------------------------------------------- loading


def load_requirements(doc: YamlDoc, root: Any) -> dict[str, Requirement]:
    """The ``requires:`` mapping of a backend spec (name -> requirement), validated."""
    node = doc.mapping(root, "requires", "requires")
    out: dict[str, Requirement] = {}
    for name in node:
        doc.identifier(node, name, name, "a requirement name", at_value=False)
        out[str(name)] = _requirement(doc, node, name)
    return out


def _requirement(doc: YamlDoc, node: Any, name: str) -> Requirement:
    what = f"requirement {name}"
    rnode = doc.mapping(node, name, what)
    doc.check_keys(rnode, what, *REQUIREMENT_KEYS)
    headers = _names(doc, rnode, "headers", what, empty=True)
    libraries = _names(doc, rnode, "libraries", what, empty=True)
    for i, lib in enumerate(libraries):
        if "/" in lib or lib.startswith("lib") and lib.endswith((".so", ".a", ".dylib")):
            raise doc.error(
                f"{what}: library {lib!r} is not a name as -l takes it",
                rnode["libraries"],
                i,
                hint="write `m` for libm.so, `mylib` for libmylib.so",
            )
    for i, header in enumerate(headers):
        if os.path.isabs(header) or ".." in header.split("/"):
            raise doc.error(
                f"{what}: header {header!r} must be a relative path, as #include names it",
                rnode["headers"],
                i,
            )
    if not headers and not libraries:
        raise doc.error(
            f"{what} names no headers and no libraries", rnode, hint="list `headers` or `libraries`"
        )
    install = doc.typed(rnode, "install", str, f"{what}: install").strip()
    if not install:
        raise doc.error(f"{what}: install must say how to install it", rnode, "install", value=True)
    finder, where = _from(doc, rnode, what)
    text = doc.typed(rnode, "doc", str, f"{what}: doc").strip() if "doc" in rnode else ""
    environment = _environment(doc, rnode, what) if "environment" in rnode else {}
    return Requirement(
        str(name),
        headers,
        libraries,
        install,
        finder,
        frozen_map(where),
        text,
        loc=doc.at(node, name),
        environment=frozen_map(environment),
    )


def _environment(doc: YamlDoc, rnode: Any, what: str) -> dict[str, str]:
    """``environment:``: variable name -> value, each value a string or an integer."""
    enode = doc.mapping(rnode, "environment", f"{what}: environment")
    out: dict[str, str] = {}
    for key in enode:
        if not isinstance(key, str) or not ENV_NAME.match(key):
            raise doc.error(
                f"{what}: environment: {key!r} is not the name of an environment variable",
                enode,
                key,
                hint="names are letters, digits and _, not starting with a digit (GOMP_SPINCOUNT)",
            )
        value = enode[key]
        if isinstance(value, bool) or not isinstance(value, (str, int)) or "\0" in str(value):
            raise doc.error(
                f"{what}: environment: {key}: the value must be a string or an integer, got {value!r}",
                enode,
                key,
                value=True,
                hint='quote it: GOMP_SPINCOUNT: "10000"',
            )
        out[key] = str(value)
    return out


def _from(doc: YamlDoc, rnode: Any, what: str) -> tuple[str, dict[str, Any]]:
    fnode = doc.mapping(rnode, "from", f"{what}: from")
    chosen = [k for k in fnode if k in FINDERS]
    if len(chosen) != 1:
        listed = "; ".join(f"{k} ({v})" for k, v in FINDERS.items())
        raise doc.error(
            f"{what}: from must name exactly one way of finding it, not {len(chosen)}",
            rnode,
            "from",
            hint=f"one of: {listed}",
        )
    finder = chosen[0]
    doc.check_keys(fnode, f"{what}: from {finder}", *FINDER_KEYS[finder])
    where: dict[str, Any] = {}
    if finder == "python_distributions":
        where[finder] = _names(doc, fnode, finder, what)
    elif finder == "dirs":
        dnode = doc.mapping(fnode, "dirs", f"{what}: dirs")
        doc.check_keys(dnode, f"{what}: dirs", (), ("include", "lib"))
        where[finder] = {k: _spec_dirs(doc, dnode, k, f"{what}: dirs") for k in dnode}
    else:
        for key in fnode:
            where[str(key)] = doc.typed(fnode, key, str, f"{what}: {key}").strip()
            if not where[str(key)]:
                raise doc.error(f"{what}: {key} must not be empty", fnode, key, value=True)
    return finder, where


def _spec_dirs(doc: YamlDoc, dnode: Any, key: str, what: str) -> tuple[str, ...]:
    """The directories of ``dirs: {key: [...]}``, absolute: each entry with every
    ``${NAME}`` replaced by the environment variable ``NAME`` (unset is an error at the
    entry), and then, if relative, taken from the spec file's directory. A bundle
    records them so, the directories the build linked against."""
    seq = dnode[key]
    base = os.path.dirname(os.path.abspath(doc.path))
    out = []
    for i, entry in enumerate(_names(doc, dnode, key, what)):
        for found in ENV_REFERENCE.finditer(entry):
            name = found.group(1)
            if not found.group(0).endswith("}") or not ENV_NAME.match(name):
                raise doc.error(
                    f"{what}: {entry!r}: {found.group(0)!r} is not a reference to an environment variable",
                    seq,
                    i,
                    hint="write ${NAME}, NAME letters, digits and _ (${NPU_SDK}/lib)",
                )
            if name not in os.environ:
                raise doc.error(
                    f"{what}: {entry!r} names the environment variable {name}, which is not set",
                    seq,
                    i,
                    hint=f"set {name} to the directory it stands for (export {name}=/opt/...), "
                    "or write the directory in full",
                )
        expanded = ENV_REFERENCE.sub(lambda m: environment_value(m.group(1)), entry)
        if not expanded:
            raise doc.error(f"{what}: {entry!r} is empty once expanded", seq, i)
        out.append(os.path.normpath(os.path.join(base, expanded)))
    return tuple(out)


def _names(doc: YamlDoc, node: Any, key: str, what: str, *, empty: bool = False) -> tuple[str, ...]:
    seq = doc.typed(node, key, list, f"{what}: {key}")
    if not seq and not empty:
        raise doc.error(f"{what}: {key} must list at least one entry", node, key, value=True)
    seen: set[str] = set()
    for i, item in enumerate(seq):
        if not isinstance(item, str) or not item.strip() or item != item.strip():
            raise doc.error(f"{what}: {key} entries must be non-empty strings, got {item!r}", seq, i)
        if item in seen:
            raise doc.error(f"{what}: {key} lists {item!r} twice", seq, i)
        seen.add(item)
    return tuple(str(s) for s in seq)


def requirements_from_record(record: Mapping[str, Any], where: str) -> tuple[Requirement, ...]:
    """The requirements a bundle recorded (name -> :meth:`Requirement.record`),
    validated by the spec loader (JSON is YAML); raises SpecError located in ``where``."""
    from .yaml_doc import YamlDoc  # ruamel.yaml: imported when a bundle is read, not by every run

    doc = YamlDoc(where, json.dumps({"requires": dict(record)}, indent=1))
    return tuple(load_requirements(doc, doc.root).values())
