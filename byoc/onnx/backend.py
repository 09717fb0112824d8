"""byoc as an ONNX backend: ``onnx.backend.base.Backend`` over import, build and run.

    from byoc.onnx.backend import ByocBackend, backend_for

    rep = ByocBackend.prepare(model, backends="fused,ccompiler")
    (y,) = rep.run([x])                      # positional, or {"input name": array}
    Fused = backend_for("fused,ccompiler")   # a Backend class for onnx's BackendTest

``prepare`` checks the model and, when every input has a static shape, imports it
(:func:`byoc.onnx.model_import.import_program`), partitions it over ``backends`` (in order
of preference; what none of them takes runs on the host, unless
``host_fallback=False`` makes that an error) and builds it. ONNX's ``prepare`` gets
no inputs, so a model with a dynamic input dimension is built on ``run``, once per
combination of input shapes (the built models are kept, keyed by those shapes):
the dynamic dimensions come from the arrays given, the static ones must match.
An input whose value a node needs at build time (Reshape's shape, a reduction's axes,
Pad's pads, given as inputs rather than initializers) makes the model specialised:
it is built on ``run`` with that input's value bound as a constant, once per
combination of such values (:attr:`ByocRep.specialised` names those inputs).

``run`` takes the model's inputs that are not initializers, in the graph's order,
and returns the outputs in the graph's order, with the dtypes the model declares.

``onnx`` is an optional dependency: this module imports without it, and using the
backend then is a usage error that names the extra to install.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..errors import GraphError, UsageError
from .importer import NeedsValue
from .model_import import check_model, require_onnx

try:
    from onnx.backend.base import Backend as _OnnxBackend
    from onnx.backend.base import BackendRep as _OnnxBackendRep
except ImportError:  # the classes still import; require_onnx() says how to install onnx when used
    _OnnxBackend = _OnnxBackendRep = object

Shapes = tuple[tuple[int, ...], ...]
Key = Shapes | tuple[Shapes, tuple[tuple[str, str, bytes], ...]]
"""A build's key: the input shapes, and with them the values of the specialised inputs
when there are any."""


@dataclass(frozen=True)
class Settings:
    """How a model is built: the backends in order of preference, whether nodes that
    none of them takes may run on the host, the spec search path and build options."""

    backends: tuple[str, ...]
    host_fallback: bool = True
    spec_path: Any = None
    options: Mapping[str, str] | None = None


SETTINGS = tuple(f.name for f in fields(Settings))
"""The keywords ``prepare`` takes besides the model and the device."""


def _check_keywords(given: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise UsageError(
            f"{where} got unknown keyword(s) {', '.join(unknown)}",
            hint=f"the byoc ONNX backend takes: {', '.join(SETTINGS)}",
        )


def _backend_names(value) -> tuple[str, ...]:
    """``"fused,ccompiler"`` or ``["fused", "ccompiler"]`` as a tuple of names."""
    names = value.split(",") if isinstance(value, str) else list(value or ())
    names = [str(n).strip() for n in names if str(n).strip()]
    if not names:
        raise UsageError(
            "the byoc ONNX backend needs the byoc backends to offload to",
            hint='pass backends="fused,ccompiler" to prepare, or use backend_for("fused,ccompiler")',
        )
    return tuple(names)


class ByocBackend(_OnnxBackend):
    """The ONNX backend; ``backend_for`` gives subclasses with their settings bound."""

    bound: Mapping[str, Any] = {}
    """Settings every ``prepare`` of this class uses unless given (see :func:`backend_for`)."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> ByocRep:
        require_onnx()
        cls._check_device(device)
        _check_keywords(kwargs, "prepare")
        given = {**cls.bound, **kwargs}
        settings = Settings(
            backends=_backend_names(given.get("backends")),
            host_fallback=bool(given.get("host_fallback", True)),
            spec_path=given.get("spec_path"),
            options=given.get("options"),
        )
        return ByocRep(check_model(model, "<model>"), settings)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs: Any):
        """Run one node: a model of it alone, at ``opset_version`` (default: the
        installed onnx's newest), its inputs typed by the arrays given."""
        onnx = require_onnx()
        helper = onnx.helper
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        arrays = [np.asarray(a) for a in (inputs.values() if isinstance(inputs, Mapping) else inputs)]
        names = [n for n in node.input if n]
        if len(arrays) != len(names):
            raise UsageError(f"node {node.op_type} takes {len(names)} input(s), got {len(arrays)}")
        graph = helper.make_graph(
            [node],
            f"{node.op_type}_node",
            [
                helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                for n, a in zip(names, arrays)
            ],
            [helper.make_empty_tensor_value_info(o) for o in node.output if o],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        # the checker wants typed outputs: take them from ONNX's shape inference
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        del model.graph.output[:]
        model.graph.output.extend(inferred.graph.output)
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Only the CPU: byoc's backends generate host code."""
        return device.split(":")[0].upper() == "CPU"

    @classmethod
    def _check_device(cls, device: str) -> None:
        if not cls.supports_device(device):
            raise UsageError(
                f"the byoc ONNX backend runs on the CPU, not on {device!r}", hint='use device="CPU"'
            )


def backend_for(backends: str | Sequence[str], **settings: Any) -> type[ByocBackend]:
    """A :class:`ByocBackend` subclass whose ``prepare`` offloads to ``backends`` (and
    uses the other ``settings``, keywords of ``prepare``) unless told otherwise: what
    ``onnx.backend.test.BackendTest``, which passes no byoc keywords, takes."""
    _check_keywords(settings, "backend_for")
    names = _backend_names(backends)
    bound = {"backends": names, **settings}
    return type(f"ByocBackend_{'_'.join(names)}", (ByocBackend,), {"bound": bound, "__module__": __name__})


@dataclass(frozen=True)
class Built:
    """A model built for one combination of input shapes: ``run`` maps the inputs, in
    order, to the outputs; ``host_ops`` are the catalog ops left on the host."""

    run: Any
    host_ops: tuple[str, ...]


class ByocRep(_OnnxBackendRep):
    """A prepared model (see the module doc); ``built`` holds one build per input shapes."""

    def __init__(self, model, settings: Settings) -> None:
        onnx = require_onnx()
        self.model = model
        self.settings = settings
        graph = model.graph
        initializers = {t.name for t in graph.initializer}
        self.inputs = [v for v in graph.input if v.name not in initializers]
        self.input_names = [v.name for v in self.inputs]
        self.input_dims = [_dims(v) for v in self.inputs]
        self.input_dtypes = [_dtype(onnx, v) for v in self.inputs]
        self.output_names = [v.name for v in graph.output]
        self.output_dtypes = [_dtype(onnx, v) for v in graph.output]
        self.built: dict[Key, Built] = {}
        self.specialised: list[str] = []
        """The inputs whose values the model is built for (see the module doc)."""
        if all(d is not None for dims in self.input_dims for d in dims):
            try:
                self._build(tuple(tuple(dims) for dims in self.input_dims), None)
            except NeedsValue as need:  # built by run, for the values it is given
                self.specialised.append(need.input)

    def run(self, inputs: Any, **kwargs: Any):
        onnx = require_onnx()
        if kwargs:
            raise UsageError(f"run got unknown keyword(s) {', '.join(sorted(kwargs))}")
        arrays = self._arrays(inputs)
        shapes = tuple(a.shape for a in arrays)
        built = self.built.get(self._key(shapes, arrays)) or self._build(shapes, arrays)
        outputs = [
            np.asarray(o, dtype) if dtype is not None else np.asarray(o)
            for o, dtype in zip(built.run(arrays), self.output_dtypes)
        ]
        return onnx.backend.base.namedtupledict("Outputs", self.output_names)(*outputs)

    def _arrays(self, inputs: Any) -> list[np.ndarray]:
        """The inputs in graph order, checked against the model's dtypes and static dims."""
        names = self.input_names
        if isinstance(inputs, Mapping):
            hint = f"the model's inputs: {', '.join(names)}"
            missing = [n for n in names if n not in inputs]
            if missing:
                raise UsageError(f"the inputs lack {', '.join(map(repr, missing))}", hint=hint)
            extra = sorted(set(inputs) - set(names))
            if extra:
                raise UsageError(
                    f"the inputs name {', '.join(map(repr, extra))}, which the model does not take", hint=hint
                )
            inputs = [inputs[n] for n in names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != len(names):
            raise UsageError(
                f"the model takes {len(names)} input(s), got {len(inputs)}",
                hint=f"the model's inputs, in order: {', '.join(names)}",
            )
        arrays = []
        for name, dims, dtype, value in zip(names, self.input_dims, self.input_dtypes, inputs):
            array = np.asarray(value, order="C")  # keeps a rank-0 array rank 0
            if dtype is not None and array.dtype != dtype:
                raise UsageError(f"input {name!r} is {array.dtype}, but the model takes {dtype}")
            if len(array.shape) != len(dims) or any(
                d is not None and d != s for d, s in zip(dims, array.shape)
            ):
                shown = ", ".join("?" if d is None else str(d) for d in dims)
                raise UsageError(
                    f"input {name!r} has shape {list(array.shape)}, but the model takes [{shown}]"
                )
            arrays.append(array)
        return arrays

    def _key(self, shapes: Shapes, arrays: Sequence[np.ndarray] | None) -> Key:
        if not self.specialised or arrays is None:
            return shapes
        values = {name: arrays[self.input_names.index(name)] for name in self.specialised}
        return shapes, tuple((n, a.dtype.str, a.tobytes()) for n, a in sorted(values.items()))

    def _build(self, shapes: Shapes, arrays: Sequence[np.ndarray] | None) -> Built:
        """The build for ``shapes`` and, of the specialised inputs, the values in
        ``arrays`` (None: no values known, at prepare); an input found to need its value
        joins :attr:`specialised`, and the import starts again with it bound."""
        from ..api import load_catalog
        from .model_import import import_program

        s = self.settings
        catalog = load_catalog(spec_path=s.spec_path)
        names = self.input_names
        fixed = dict(zip(names, shapes))
        while True:
            bound = {n: arrays[names.index(n)] for n in self.specialised} if arrays is not None else {}
            try:
                program = import_program(
                    self.model, fixed, catalog=catalog, spec_path=s.spec_path, bound=bound
                )
                break
            except NeedsValue as need:
                if arrays is None or need.input in self.specialised or need.input not in names:
                    raise
                self.specialised.append(need.input)
        built = self._built(program, catalog, [k for k, n in enumerate(names) if n not in bound])
        self.built[self._key(shapes, arrays)] = built
        return built

    def _built(self, program, catalog, taken: list[int]) -> Built:
        """``program`` partitioned and built; it takes the inputs at ``taken`` (the rest
        are bound)."""
        from ..api import backend_loader
        from ..building import build, partition_over
        from ..ir import CALL_OP
        from ..reference import evaluate

        s = self.settings
        program = partition_over(program, s.backends, backend_loader(s.spec_path, catalog), catalog)
        main = program.functions[0]
        host_ops = tuple(n.op for n in main.nodes if n.op != CALL_OP)
        if host_ops and not s.host_fallback:
            raise GraphError(
                f"backend(s) {', '.join(s.backends)} do not take {len(host_ops)} op(s) of the model: "
                f"{', '.join(sorted(set(host_ops)))}",
                hint="let the host run them (host_fallback=True), or name a backend that takes them",
            )
        params = [p.name for p in main.params]
        if len(host_ops) < len(main.nodes):
            executor = build(program, options=s.options, spec_path=s.spec_path, catalog=catalog).executor()

            def run(arrays):
                return executor(**dict(zip(params, [arrays[k] for k in taken])))

        else:  # no node, or none that a backend takes: the host runs it all, as it would its part

            def run(arrays):
                return evaluate(main, dict(zip(params, [arrays[k] for k in taken])), catalog)

        return Built(run, host_ops)


def _dims(value) -> list[int | None]:
    """A value's dimensions; None for a dynamic one."""
    return [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]


def _dtype(onnx, value) -> np.dtype | None:
    elem = value.type.tensor_type.elem_type
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else None
