"""Whether byoc can import an ONNX model: ONNX's checker (its pass remembered per file),
the model's opset against the range byoc's op table is written for, its inputs' and
outputs' kinds and types, and its strings as UTF-8; and the ``onnx`` package itself,
an optional dependency, with the hint to install it."""

from __future__ import annotations

from ..errors import GraphError, ParseError, UsageError
from ..ir import DTYPES

INSTALL_HINT = "install the ONNX extra: pip install 'byoc-codegen[onnx]'"


def require_onnx(purpose: str = "importing ONNX models"):
    """The ``onnx`` module, or a UsageError saying how to install it for ``purpose``."""
    try:
        import onnx
    except ImportError:
        raise UsageError(f"{purpose} needs the onnx package", hint=INSTALL_HINT) from None
    return onnx


MIN_OPSET = 6
"""The oldest ONNX opset byoc's op table is written for: 6, that of the PyTorch exports in
ONNX's backend test data, whose ``broadcast``/``axis`` attributes and per-channel PRelu
slopes it handles; opsets 1-5 differ further (``consumed_inputs``, Concat's optional
axis), so an older model imports only when none of its ops changed since."""


def max_opset() -> int:
    """The newest ONNX opset byoc imports: the newest that the installed onnx package
    defines, whose checker, shape inference and reference evaluator (folding) the
    import relies on; a newer one may have changed an op's meaning."""
    onnx = require_onnx()
    return int(onnx.defs.onnx_opset_version())


def _check_old_opset(model, opset: int, where: str) -> None:
    """A model of an opset before :data:`MIN_OPSET` imports when each op of the default
    domain it uses is defined at its opset as at MIN_OPSET (Not, Relu at opset 1 do):
    then byoc's handlers, written for MIN_OPSET and newer, read it right. The first op
    whose definition changed in between is refused, by name."""
    from onnx import defs

    for k, node in enumerate(model.graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            then = defs.get_schema(node.op_type, opset).since_version
            later = defs.get_schema(node.op_type, MIN_OPSET).since_version
        except Exception:  # an op unknown at one of the two: the checker or the op table says so
            continue
        if then != later:
            raise GraphError(
                f"{where} uses ONNX opset {opset}; byoc imports opset {MIN_OPSET} and newer, and node {k} "
                f"({node.op_type} {node.name!r}) was redefined in opset {later}",
                hint="convert it first: onnx.version_converter.convert_version(model, 13)",
            )


def check_model(model, where: str, data: bytes | None = None, digest: str | None = None):
    """``model`` if ONNX's checker accepts it and byoc can take its opset, inputs and
    outputs; a clean error naming ``where`` if not. ``data``, the bytes the model was
    read from whole (no external data), lets the checker's verdict be remembered;
    ``digest`` is their SHA-256 when the caller knows it already."""
    onnx = require_onnx()
    check_names_utf8(model, where)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    newest = max_opset()
    if opset is not None and opset > newest:  # before the checker, which may not know it either
        raise GraphError(
            f"{where} uses ONNX opset {opset}; byoc imports opsets {MIN_OPSET} to {newest}",
            hint=f"convert it first: onnx.version_converter.convert_version(model, {newest})",
        )
    try:
        _onnx_checker(onnx, model, data, digest)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParseError(f"{where} is not a valid ONNX model: {first}") from None
    if opset is None:
        others = ", ".join(f"{o.domain} {o.version}" for o in model.opset_import) or "none"
        raise GraphError(
            f"{where} imports no opset of ONNX's default domain (ai.onnx), only: {others}",
            hint="byoc imports the ops of the default domain; a model of another domain alone "
            "(ai.onnx.ml: classic machine learning) has none it can take",
        )
    if opset < MIN_OPSET:
        _check_old_opset(model, opset, where)
    if not model.graph.output:
        raise GraphError(
            f"{where}: the model's graph has no outputs",
            hint="an ONNX graph names the values it computes in graph.output; the model is incomplete",
        )
    initializers = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name not in initializers:
            _check_tensor(where, "input", value)
            _check_dtype(onnx, value, where)
    for value in model.graph.output:  # their dtypes are the importer's to judge, at the node
        _check_tensor(where, "output", value)
    return model


def _onnx_checker(onnx, model, data: bytes | None, digest: str | None = None) -> None:
    """ONNX's checker on ``model``; an exception if it refuses it. Given the bytes
    ``data`` the model was read from, a pass is remembered in byoc's disk cache under
    their digest and the onnx version, so that the next import of the same file skips
    the checker: it serialises the whole model again first, weights included (a quarter
    of a second for ResNet-50's 100 MB, against 0.06 s to hash them). A refusal is not
    remembered: it is raised again, with its message, each time."""
    if data is None:
        onnx.checker.check_model(model)
        return
    from ..disk_cache import cached, entry_key
    from ..npz_files import sha256_hex

    def check() -> bool:
        onnx.checker.check_model(model)
        return True

    key = entry_key("onnx.checker", onnx.__version__, digest or sha256_hex(data))
    cached("onnx-checked", key, check, expect=bool)


def check_names_utf8(message, where: str, path: str = "") -> None:
    """Every string field of ``message`` (a protobuf message: the model, its graphs,
    nodes, tensors, ...) must be UTF-8 text; protobuf hands an invalid one over as bytes,
    which the importer cannot use as a name."""
    for field, value in message.ListFields():
        here = f"{path}.{field.name}" if path else field.name
        if field.type == field.TYPE_STRING:
            for k, item in enumerate(value if _repeated(field) else [value]):
                if isinstance(item, bytes):
                    at = f"{here}[{k}]" if _repeated(field) else here
                    raise ParseError(
                        f"{where}: the string {at} ({item[:60]!r}) is not UTF-8 text",
                        hint="ONNX names and strings are UTF-8; the model is corrupt or was not written "
                        "by an ONNX exporter",
                    )
        elif field.type == field.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                continue
            for k, item in enumerate(value if _repeated(field) else [value]):
                check_names_utf8(item, where, f"{here}[{k}]" if _repeated(field) else here)


def _repeated(field) -> bool:
    flag = getattr(field, "is_repeated", None)  # newer protobuf; older ones have only label
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def _check_tensor(where: str, role: str, value) -> None:
    """A model input or output must be a tensor."""
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise GraphError(
            f"{where}: {role} {value.name!r} is a {(kind or 'untyped value').removesuffix('_type')}, not a tensor",
            hint="byoc imports models whose inputs and outputs are tensors",
        )


def _check_dtype(onnx, value, where: str) -> None:
    """A model input must have a dtype byoc has."""
    elem = value.type.tensor_type.elem_type
    try:
        name = onnx.TensorProto.DataType.Name(elem).lower()
        supported = elem != 0 and onnx.helper.tensor_dtype_to_np_dtype(elem).name in DTYPES
    except (ValueError, KeyError):  # an element type this onnx does not know
        name, supported = f"<element type {elem}>", False
    if not supported:
        raise GraphError(
            f"{where}: input {value.name!r} has dtype {name}, which byoc does not support",
            hint=f"byoc supports {', '.join(DTYPES)}",
        )
