"""The inputs of ``byoc run``: --inputs (an .npz, or an ONNX test-data directory) read
and matched to the built model, an ONNX model specialised to some of them, or seeded
random arrays."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..ir import is_integer, numpy_dtype
from ..npz_files import read_npz


def read_inputs(path: str | None):
    """What --inputs holds, read before the build: an .npz's arrays by key, the ONNX
    test data of a directory, or None (no --inputs: random inputs)."""
    if path is None:
        return None
    if not Path(path).is_dir():
        return read_npz(path, f"--inputs {path}", UsageError)
    from ..onnx.test_data import read_test_data

    return read_test_data(path)


def import_specialised(args: argparse.Namespace, catalog, given):
    """``(program, specialised, key)``: the ONNX model of ``byoc run``, specialised to the
    --inputs values of the inputs that a node needs at build time (Reshape's shape, a
    reduction's axes, TopK's k: :class:`byoc.onnx.importer.NeedsValue`), as
    :mod:`byoc.onnx.backend` does; ``specialised`` maps each such ONNX input to its
    value, and ``key`` names the import in the cache (:mod:`byoc.onnx.import_cache`),
    or is None."""
    from ..onnx.import_cache import import_path
    from ..onnx.importer import NeedsValue
    from .onnx_import import shapes_of

    bound: dict[str, np.ndarray] = {}
    while True:
        try:
            program, key = import_path(
                args.file, shapes_of(args), catalog=catalog, spec_path=args.spec_path, bound=bound
            )
            return program, bound, key
        except NeedsValue as need:
            value = None if given is None else _given_value(given, need)
            if value is None or need.input in bound:
                raise
            bound[need.input] = value


def _given_value(given, need) -> np.ndarray | None:
    """The --inputs value of the ONNX input that ``need`` (a NeedsValue) names: the .npz
    array of its name, or the test data's input_K.pb of its place K among the model's
    inputs that are not initializers; None when --inputs has none."""
    if isinstance(given, dict):
        return given.get(need.input)
    k = need.position
    return given.inputs[k].array if k is not None and k < len(given.inputs) else None


def without_specialised(given, specialised: dict[str, np.ndarray]):
    """--inputs less the values that the build took as constants."""
    if isinstance(given, dict):
        return {k: v for k, v in given.items() if k not in specialised}
    kept = tuple(t for t in given.inputs if not any(t.array is v for v in specialised.values()))
    return type(given)(given.directory, kept, given.outputs)


def supplied_inputs(path: str | None, given, model, program):
    """``(arrays, origins, test_data)`` of --inputs (``given``, read by :func:`read_inputs`)
    matched to the built model: the arrays by --inputs key (None: random inputs), where
    each came from (for messages), and the ONNX test data when --inputs is a directory
    (None otherwise)."""
    if given is None:
        return None, {}, None
    if isinstance(given, dict):
        return given, {key: f"--inputs array {key!r}" for key in given}, None
    data = given
    if len(model.graph_names) != 1:
        raise UsageError(
            f"--inputs {path}: an ONNX test-data directory feeds one graph, and this file has "
            f"{len(model.graph_names)}",
            hint="pass an .npz with GRAPH/INPUT arrays",
        )
    (graph,) = model.graph_names
    names = model.executor(graph).input_names
    if len(data.inputs) != len(names):
        raise UsageError(
            f"--inputs {path} holds {len(data.inputs)} input file(s), but graph {graph} takes "
            f"{len(names)} input(s): {', '.join(names)}",
            hint="input_K.pb feeds the graph's K-th input",
        )
    want = program.function(graph).output_types
    if data.outputs and len(data.outputs) != len(want):
        raise UsageError(
            f"--inputs {path} holds {len(data.outputs)} output file(s), but graph {graph} has {len(want)} output(s)"
        )
    for k, (tensor, t) in enumerate(zip(data.outputs, want)):
        _check_array(tensor.array, t, f"--inputs {tensor.file}", f"output {k} of {graph} is")
    arrays = {name: tensor.array for name, tensor in zip(names, data.inputs)}
    origins = {name: f"--inputs {tensor.file} (for input {name})" for name, tensor in zip(names, data.inputs)}
    return arrays, origins, data


def _check_array(array: np.ndarray, t, what: str, wanted: str) -> None:
    """``array`` is of type ``t``, else an error: "WHAT is float64[2], but WANTED float32[2]"."""
    if array.shape != t.shape or array.dtype != np.dtype(t.dtype):
        raise UsageError(f"{what} is {array.dtype}{list(array.shape)}, but {wanted} {t}")


def inputs_for(executor, graph: str, supplied, origins, seed: int, qualified: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs: dict[str, np.ndarray] = {}
    for name in executor.input_names:
        t = executor.input_type(name)
        if supplied is None:
            inputs[name] = random_array(rng, t)
            continue
        key = f"{graph}/{name}" if qualified else name
        if key not in supplied:
            raise UsageError(
                f"--inputs has no array {key!r}",
                hint=f"graph {graph} takes: {', '.join(executor.input_names)}",
            )
        _check_array(supplied[key], t, origins[key], f"{graph} takes")
        inputs[name] = supplied[key]
    return inputs


def random_array(rng: np.random.Generator, t) -> np.ndarray:
    """Seeded random values of type ``t``: small integers (0 to 100 for the unsigned
    dtypes, -100 to 100 else, within every integer dtype's range), True/False for bool,
    and floats in [-2, 2] rounded to the dtype (every float dtype holds them, float16
    and bfloat16 included)."""
    if t.dtype == "bool":
        return rng.integers(0, 1, size=t.shape, endpoint=True).astype(np.bool_)
    if is_integer(t.dtype):
        info = np.iinfo(t.dtype)
        low, high = max(-100, int(info.min)), min(100, int(info.max))
        return rng.integers(low, high, size=t.shape, endpoint=True).astype(t.dtype)
    return rng.uniform(-2.0, 2.0, size=t.shape).astype(numpy_dtype(t.dtype))


def check_unused(supplied, model, qualified: bool) -> None:
    """An --inputs array that no graph input takes is a mistake (a misspelt name)."""
    takes = [
        f"{graph}/{name}" if qualified else name
        for graph in model.graph_names
        for name in model.executor(graph).input_names
    ]
    unused = sorted(set(supplied) - set(takes))
    if unused:
        raise UsageError(
            f"--inputs has {len(unused)} array(s) that no graph input takes: {', '.join(map(repr, unused))}",
            hint=f"inputs: {', '.join(takes)}",
        )
