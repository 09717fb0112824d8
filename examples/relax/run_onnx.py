"""An ONNX model through TVM's relax importer, offloaded to byoc backends, exported
with ``export_library`` and run again in a fresh process that cannot import byoc.

    python examples/relax/run_onnx.py [MODEL.onnx] [--backend NAME[,NAME...]]
        [--spec-path DIR] [-o model.so] [--random-weights SEED] [--tvm-alone]

The steps (each is a few lines below):
1. ``relax.frontend.onnx.from_onnx``, then ``FoldConstant`` (weights computed at
   import, such as the ``ConstantOfShape`` ones of ONNX's light models, into
   constants: byoc's patterns take a conv's weights as constants);
2. ``byoc.tvm.offload(mod, backends, spec_path)``: the backends' pattern tables,
   generated from their specs, for ``FuseOpsByPattern``, then
   ``MergeCompositeFunctions`` and ``RunCodegen``, which calls byoc's codegens;
3. ``tvm.compile`` and ``export_library`` with the link flags of the libraries the
   specs require (``byoc.tvm.link_flags``);
4. the relax VM runs it here, and a fresh Python (``-I``, byoc blocked) runs the
   exported file; both results are compared with ONNX Runtime's (or, without
   onnxruntime, with TVM's own build of the model).

It prints where the model's ops went, the build and run times (medians), and with
``--tvm-alone`` the same for TVM without byoc. The exit status is 0 when every result
matches, 1 when one does not.

ONNX's light models (``onnx/backend/test/data/light``) have constant weights, so
their outputs are nearly all alike; ``--random-weights SEED`` replaces each
``ConstantOfShape`` weight with seeded random values (He-scaled for a conv or a
matrix, in [0.5, 1.5) for a vector such as a batch norm's) and makes the input of
each Softmax an output too (a random network's softmax saturates), which makes the
comparison meaningful.

Needs ``pip install 'byoc-codegen[tvm,test]'`` (apache-tvm, onnx, onnxruntime).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent
DEFAULT_MODEL = HERE.parent / "onnx" / "tiny_cnn.onnx"

FRESH_PROCESS = textwrap.dedent(
    """
    import sys

    class NoByoc:  # the exported library must not need byoc
        def find_spec(self, name, path=None, target=None):
            if name == "byoc" or name.startswith("byoc."):
                raise ImportError("byoc is not available here")

    sys.meta_path.insert(0, NoByoc())
    import numpy as np
    import tvm
    from tvm import relax

    library, inputs, output = sys.argv[1:4]
    vm = relax.VirtualMachine(tvm.runtime.load_module(library), tvm.cpu())
    data = np.load(inputs)
    out = vm["main"](*(tvm.runtime.tensor(data[k]) for k in sorted(data.files)))
    outs = list(out) if isinstance(out, tvm.ir.Array) else [out]
    np.savez(output, *(o.numpy() for o in outs))
    """
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Run an ONNX model through TVM relax with byoc backends as its codegens.",
        epilog="example: python examples/relax/run_onnx.py examples/onnx/tiny_cnn.onnx --backend ccompiler,fused",
    )
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL), help="an ONNX model of static shapes")
    ap.add_argument(
        "--backend",
        default="fused",
        help="byoc backends, in order of preference (default: fused); what none takes stays in TVM",
    )
    ap.add_argument("--spec-path", action="append", help="a directory of backend specs of your own")
    ap.add_argument("-o", "--output", help="where to export the library (default: a temporary file)")
    ap.add_argument("--random-weights", type=int, metavar="SEED", help="random ConstantOfShape weights")
    ap.add_argument("--tvm-alone", action="store_true", help="also build and time TVM without byoc")
    ap.add_argument("--repeat", type=int, default=10, help="runs to take the median of (default: 10)")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    return ap.parse_args(argv)


def randomise_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """``model`` with each ConstantOfShape of a constant shape replaced by an
    initializer of seeded random values."""
    rng = np.random.default_rng(seed)
    shapes = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    kept = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        if len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            values = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        else:
            values = rng.uniform(0.5, 1.5, shape)
        model.graph.initializer.append(numpy_helper.from_array(values.astype(np.float32), node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    outputs = {o.name for o in model.graph.output}
    for node in kept:  # a random network's softmax saturates: compare its logits too
        if node.op_type == "Softmax" and node.input[0] not in outputs:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(node.input[0]))
    return model


def random_inputs(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """One random array per graph input that is not an initializer."""
    rng = np.random.default_rng(seed)
    given = {i.name for i in model.graph.initializer}
    inputs = {}
    for value in model.graph.input:
        if value.name in given:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
        if 0 in shape:
            sys.exit(f"error: input {value.name!r} has a dynamic shape; this example needs static ones")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        inputs[value.name] = rng.standard_normal(shape).astype(dtype)
    return inputs


def relax_module(model: onnx.ModelProto):
    """The model as a relax module, its constants folded."""
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(model, keep_params_in_input=False)
    return relax.transform.FoldConstant()(mod)


def relax_ops(mod) -> collections.Counter:
    """How often each relax op and each offloaded call appears in ``main``."""
    return collections.Counter(re.findall(r"R\.([a-z_.0-9]+)\(", mod["main"].script()))


def build(mod, library: Path, flags: list[str]):
    """Compile, export and load ``mod``: (the relax VM's main, seconds it took)."""
    import tvm
    from tvm import relax

    start = time.perf_counter()
    tvm.compile(mod, target="llvm").export_library(str(library), options=flags)
    seconds = time.perf_counter() - start
    return relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())["main"], seconds


def run(main, inputs: dict[str, np.ndarray], repeat: int) -> tuple[list[np.ndarray], float]:
    """``main``'s outputs and the median seconds of ``repeat`` calls."""
    import tvm

    tensors = [tvm.runtime.tensor(v) for v in inputs.values()]
    out = main(*tensors)
    outs = [o.numpy() for o in (out if isinstance(out, tvm.ir.Array) else [out])]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        main(*tensors)
        times.append(time.perf_counter() - start)
    return outs, float(np.median(times))


def run_fresh(library: Path, inputs: dict[str, np.ndarray], work: Path) -> list[np.ndarray]:
    """The exported library's outputs, computed by a Python that cannot import byoc."""
    np.savez(work / "inputs.npz", **{f"{k:04d}": v for k, v in enumerate(inputs.values())})
    proc = subprocess.run(
        [sys.executable, "-I", "-c", FRESH_PROCESS, str(library), "inputs.npz", "outputs.npz"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"error: the exported library failed in a fresh process:\n{proc.stderr[-2000:]}")
    with np.load(work / "outputs.npz") as data:
        return [data[f"arr_{k}"] for k in range(len(data.files))]


def reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> tuple[str, list[np.ndarray] | None]:
    try:
        import onnxruntime as ort
    except ImportError:
        return "TVM alone", None
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return "ONNX Runtime", sess.run(None, inputs)


def matches(name: str, got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float) -> bool:
    """Whether each output is within ``atol + rtol * (its largest magnitude)`` of the
    reference: relative to the output's scale, because a sum of thousands of
    products may end near zero with an error of the size of its terms' rounding."""
    ok = len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        err = float(np.max(np.abs(g.astype(np.float64) - w))) if g.size and g.shape == w.shape else np.inf
        close = err <= atol + rtol * scale
        print(
            f"  {name}, output {k}: {'matches' if close else 'MISMATCH'} "
            f"(max abs error {err:.3g}, largest value {scale:.3g})"
        )
        ok = ok and close
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import byoc.tvm

    model = onnx.load(args.model)
    if args.random_weights is not None:
        model = randomise_weights(model, args.random_weights)
    inputs = random_inputs(model, args.seed)
    ref_name, want = reference(model, inputs)

    mod = relax_module(model)
    with tempfile.TemporaryDirectory(prefix="byoc-relax-") as tmp:
        work = Path(tmp)
        library = Path(args.output).resolve() if args.output else work / "model.so"
        start = time.perf_counter()
        offloaded = byoc.tvm.offload(mod, args.backend, spec_path=args.spec_path)
        offload_s = time.perf_counter() - start
        left = relax_ops(offloaded)
        calls = left.pop("call_dps_packed", 0)
        for name in ("func_attr", "dataflow", "output", "shape", "const"):
            left.pop(name, None)
        print(f"{Path(args.model).name} on {args.backend}: {calls} byoc regions")
        print(f"  left in TVM: {', '.join(f'{op} x{n}' for op, n in left.most_common()) or 'nothing'}")
        main_fn, build_s = build(offloaded, library, byoc.tvm.link_flags(args.backend, args.spec_path))
        got, run_s = run(main_fn, inputs, args.repeat)
        print(
            f"  build: {offload_s:.1f} s in byoc's codegens + {build_s:.1f} s in TVM; run: {run_s * 1e3:.2f} ms"
        )
        if args.tvm_alone or want is None:
            alone_main, alone_s = build(mod, work / "tvm_alone.so", [])
            alone, alone_run_s = run(alone_main, inputs, args.repeat)
            print(f"  TVM alone: build {alone_s:.1f} s; run {alone_run_s * 1e3:.2f} ms")
            if want is None:
                want = alone
        ok = matches(f"relax VM vs {ref_name}", got, want, args.rtol, args.atol)
        ok = (
            matches(
                f"exported, fresh process vs {ref_name}",
                run_fresh(library, inputs, work),
                want,
                args.rtol,
                args.atol,
            )
            and ok
        )
    print("result: every output matches" if ok else "result: MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
