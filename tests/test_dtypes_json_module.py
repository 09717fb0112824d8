"""The dtypes of issue 29 in JSON modules: float16, bfloat16 and bool constants bound,
checked against their dtype and kept in the module's npz, and bfloat16 arguments
taken as DLPack tensors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import run_cli

from byoc.errors import RuntimeFailure
from byoc.npz_files import npz_bytes, read_npz
from byoc.runtime.module import bfloat16_tensor

BF16 = np.dtype(ml_dtypes.bfloat16)

# ------------------------------------------------------------------ JSON modules' constants

JSON_CONSTS = """\
graph main(h: float16[3], b: bfloat16[3], m: bool[3]) {
  r, q, n = @json {
    kh = const float16[3] [0.1, -65504, 2.5]
    kb = const bfloat16[3] [0.1, -3.3895e38, 2.5]
    km = const bool[3] [true, false, true]
    return add(h, kh), multiply(b, kb), concatenate(m, km, axis=0)
  }
  return r, q, n
}
"""


def _json_doc():
    import json

    from runtime_json_support import json_module_text

    from byoc.api import parse

    text, _ = json_module_text(parse(JSON_CONSTS, "graph"))
    return json.loads(text)


def _json_module(doc):
    import json

    from byoc.runtime.json_module import JsonRuntimeModule

    return JsonRuntimeModule.from_text(json.dumps(doc))


def test_a_json_module_binds_float16_bfloat16_and_bool_constants():
    doc = _json_doc()
    module = _json_module(doc)
    (symbol,) = doc["functions"]
    rng = np.random.default_rng(9)
    h = rng.uniform(-2, 2, 3).astype(np.float16)
    b = rng.uniform(-2, 2, 3).astype(BF16)
    m = np.array([True, True, False])
    outs = (np.empty(3, np.float16), np.empty(3, BF16), np.empty(6, bool))
    module.get_function(symbol)(h, b, m, *outs)
    kh = np.array([0.1, -65504, 2.5], np.float16)
    kb = np.array([0.1, -3.3895e38, 2.5]).astype(BF16)
    assert outs[0].tobytes() == (h.astype(np.float64) + kh.astype(np.float64)).astype(np.float16).tobytes()
    assert outs[1].tobytes() == (b.astype(np.float64) * kb.astype(np.float64)).astype(BF16).tobytes()
    assert outs[2].tolist() == [True, True, False, True, False, True]


@pytest.mark.parametrize(
    "index, value, dtype",
    [
        (0, 65520.0, "float16"),
        (1, 1e39, "bfloat16"),
        (2, 1, "bool"),
        (2, "true", "bool"),
        (0, True, "float16"),
    ],
)
def test_a_json_constant_that_its_dtype_cannot_hold_is_refused(index, value, dtype):
    doc = _json_doc()
    names = [n for n, v in doc["const_values"].items() if v["dtype"] == dtype]
    doc["const_values"][names[0]]["data"][index] = value
    kind = "bool value" if dtype == "bool" else f"{dtype} number"
    with pytest.raises(RuntimeFailure, match=f"not a {kind}"):
        _json_module(doc)


def test_a_large_bfloat16_constant_of_a_json_module_lives_in_its_npz(capsys, tmp_path):
    """Over LARGE_CONSTANT_ELEMENTS, a JSON module's constant is an entry of its .npz,
    written by npz_bytes and read back by read_npz, bfloat16 bits and all."""
    from byoc.generator.artifacts import LARGE_CONSTANT_ELEMENTS
    from byoc.npz_files import sha256_hex

    n = LARGE_CONSTANT_ELEMENTS + 4
    k = np.random.default_rng(6).uniform(-8, 8, n).astype(BF16)
    data = npz_bytes({"k": k})
    (tmp_path / "w.npz").write_bytes(data)
    graph = tmp_path / "g.graph"
    graph.write_text(
        f'weights "w.npz" sha256 "{sha256_hex(data)}"\n'
        f"graph main(x: bfloat16[{n}]) {{\n"
        f'  s = @json {{\n    k = const bfloat16[{n}] weights["k"]\n    return add(x, k)\n  }}\n'
        "  return s\n}\n"
    )
    x = np.random.default_rng(7).uniform(-8, 8, n).astype(BF16)
    (tmp_path / "in.npz").write_bytes(npz_bytes({"x": x}))
    out_file = tmp_path / "out.npz"
    rc, out, err = run_cli(capsys, "run", graph, "--inputs", tmp_path / "in.npz", "--save-outputs", out_file)
    assert rc == 0, out + err
    got = read_npz(str(out_file), "out", RuntimeFailure)["output_0"]
    assert got.tobytes() == (x.astype(np.float64) + k.astype(np.float64)).astype(BF16).tobytes()


def test_an_interpreted_module_takes_dlpack_bfloat16_tensors():
    """The JSON runtime reads its arguments through np.from_dlpack, which refuses
    bfloat16; a tvm_ffi bfloat16 tensor still works, the output written in place."""
    doc = _json_doc()
    module = _json_module(doc)
    (symbol,) = doc["functions"]
    rng = np.random.default_rng(12)
    h = rng.uniform(-2, 2, 3).astype(np.float16)
    b = rng.uniform(-2, 2, 3).astype(BF16)
    m = np.array([True, False, True])
    q = np.zeros(3, BF16)
    outs = [np.empty(3, np.float16), bfloat16_tensor(q), np.empty(6, bool)]
    module.get_function(symbol)(h, bfloat16_tensor(b), m, *outs)
    kb = np.array([0.1, -3.3895e38, 2.5]).astype(BF16)
    assert q.tobytes() == (b.astype(np.float64) * kb.astype(np.float64)).astype(BF16).tobytes()
