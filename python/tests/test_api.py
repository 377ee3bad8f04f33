"""The public Python API: the README quickstart, model properties, output containers, inputs
by name, program-directory determinism, load(), precision, input conversions, threads."""

import json
import platform
import sys
import threading
from pathlib import Path

import aneforge as af
import numpy as np
import pytest
from conformance_common import conv_ref, q

ON_ANE_MACHINE = sys.platform == "darwin" and platform.machine() == "arm64"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_quickstart() -> str:
    """The first ```python block of the README: the quickstart exactly as users read it."""
    text = README.read_text()
    start = text.index("```python\n") + len("```python\n")
    return text[start : text.index("```", start)]


def rel_err(got, ref):
    return float(np.max(np.abs(got - ref))) / float(np.max(np.abs(ref)))


def test_readme_quickstart_is_the_example_file():
    assert EXAMPLE.read_text() == readme_quickstart()


def test_quickstart_matches_numpy(capsys):
    ns = {"__name__": "__quickstart__"}
    exec(compile(readme_quickstart(), "README.md quickstart", "exec"), ns)
    out, W, img, net = ns["out"], ns["W"], ns["img"], ns["net"]
    ref = np.maximum(conv_ref(q(img), q(W), pad=(1, 1, 1, 1)), 0).mean(axis=(2, 3), keepdims=True)
    assert out.shape == (1, 16, 1, 1) and out.dtype == np.float32
    assert rel_err(out, ref) <= 3e-3
    printed = capsys.readouterr().out
    assert "output (1, 16, 1, 1)" in printed
    assert f"device {net.device}" in printed
    assert net.program_dir in printed
    assert "median per call" in printed


def small_net(**kw):
    x = af.input((2, 5), name="x")
    return af.compile((x * 2.0).relu(), **kw)


def test_model_properties():
    net = small_net()
    if not ON_ANE_MACHINE:
        assert net.device == "reference"
    d = Path(net.program_dir)
    assert d.is_dir()
    for f in ("model.mil", "weights.bin", "program.json"):
        assert (d / f).is_file(), f
    assert net.mil.startswith("program(1.3)")
    assert (d / "model.mil").read_text() == net.mil
    assert net.inputs == [("x", (2, 5), "fp16")]
    assert net.outputs == [("y0", (2, 5), "fp16")]
    assert net.n_ops == 2
    manifest = json.loads((d / "program.json").read_text())
    assert [p["name"] for p in manifest["inputs"]] == ["x"]
    r = repr(net)
    assert r.startswith("Model(") and net.device in r and "x: fp16 (2, 5)" in r


def test_tensor_properties():
    x = af.input((1, 16))
    y = x.relu()
    assert y.shape == (1, 16) and y.ndim == 2 and y.dtype == "fp16" and y.op == "relu"
    assert repr(y) == "Tensor(relu, shape=(1, 16), fp16)"
    assert repr(af.input((64,))) == "Tensor(input, shape=(64,), fp16)"
    assert af.input((2, 3), dtype="uint8").dtype == "uint8"
    c = x < y
    assert isinstance(c, af.Tensor) and c.dtype == "bool" and c.shape == (1, 16)
    assert (x >= 0.5).dtype == "bool" and (0.5 < x).dtype == "bool"
    # Identity semantics for == and hashing.
    assert x == x and not (x == y) and x != y
    assert {x: 1, y: 2}[y] == 2 and len({x, y, x}) == 2
    with pytest.raises(TypeError, match="truth value"):
        bool(x)
    with pytest.raises(TypeError, match="lazy"):
        np.asarray(x)


def test_reshape_and_transpose_spellings():
    x = af.input((2, 3, 4))
    assert x.reshape(6, 4).shape == x.reshape((6, 4)).shape == x.reshape([-1, 4]).shape == (6, 4)
    assert x.transpose(2, 0, 1).shape == x.transpose((2, 0, 1)).shape == (4, 2, 3)
    assert x.transpose().shape == (4, 3, 2)
    assert [t.shape for t in x.split(2, axis=2)] == [(2, 3, 2)] * 2
    assert [t.shape for t in af.split(x, (1, 2), axis=1)] == [(2, 1, 4), (2, 2, 4)]
    assert x.mean().shape == (1, 1, 1) and x.sum(keepdims=False, axes=(0, 1)).shape == (4,)


def test_dict_and_list_outputs():
    a, b = af.input((3,)), af.input((3,))
    av, bv = np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, -1.0, 2.0], np.float32)
    d = af.compile({"s": a + b, "d": a - b})(av, bv)
    assert isinstance(d, dict) and list(d) == ["s", "d"]
    np.testing.assert_array_equal(d["s"], av + bv)
    np.testing.assert_array_equal(d["d"], av - bv)
    lst = af.compile([a * b, a + b, a * b])(av, bv)
    assert isinstance(lst, list) and len(lst) == 3
    np.testing.assert_array_equal(lst[0], av * bv)
    np.testing.assert_array_equal(lst[2], av * bv)
    tup = af.compile((a.relu(),))(av)  # b is unused, so not a port
    assert isinstance(tup, list) and len(tup) == 1
    # An input returned as an output is copied through.
    np.testing.assert_array_equal(af.compile([a, b.relu()])(av, bv)[0], av)


def test_inputs_by_name():
    a, b = af.input((2, 2), name="a"), af.input((2, 2), name="b")
    net = af.compile(a - b)
    assert [p[0] for p in net.inputs] == ["a", "b"]
    av, bv = np.eye(2, dtype=np.float32), np.full((2, 2), 3.0, np.float32)
    by_pos = net(av, bv)
    np.testing.assert_array_equal(net(b=bv, a=av), by_pos)
    np.testing.assert_array_equal(by_pos, av - bv)


def test_inputs_are_fed_in_creation_order():
    first = af.input((2,))
    second = af.input((2,))
    net = af.compile(second - first)  # first used second in the expression
    assert [p[0] for p in net.inputs] == ["x0", "x1"]
    out = net(np.array([1, 2], np.float32), np.array([10, 20], np.float32))
    np.testing.assert_array_equal(out, [9, 18])


def build_det():
    x = af.input((1, 8, 6, 6), name="img")
    w = np.random.default_rng(3).standard_normal((4, 8, 3, 3)).astype(np.float32)
    return af.conv(x, w, pad=1).relu().mean((2, 3)).reshape(1, 4) @ np.ones((4, 2), np.float32)


def read_dir(d):
    return {f: (Path(d) / f).read_bytes() for f in ("model.mil", "weights.bin", "program.json")}


def test_determinism(tmp_path):
    n1, n2 = af.compile(build_det()), af.compile(build_det())
    assert n1.program_dir == n2.program_dir
    files = read_dir(n1.program_dir)
    assert len(files["weights.bin"]) > 0
    b1 = af.compile(build_det(), build_dir=tmp_path / "p1")
    b2 = af.compile(build_det(), build_dir=str(tmp_path / "p2"))
    assert Path(b1.program_dir) == tmp_path / "p1"
    assert read_dir(b1.program_dir) == read_dir(b2.program_dir) == files
    x = np.random.default_rng(4).standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_array_equal(n1(x), b2(x))


def test_load_reproduces_outputs():
    net = af.compile(build_det())
    x = np.random.default_rng(5).standard_normal((1, 8, 6, 6)).astype(np.float32)
    loaded = af.load(net.program_dir)
    assert loaded.inputs == net.inputs and loaded.outputs == net.outputs and loaded.n_ops == net.n_ops
    assert loaded.mil == net.mil and loaded.program_dir == net.program_dir
    np.testing.assert_array_equal(loaded(x), net(x))
    np.testing.assert_array_equal(loaded(img=x), net(x))
    a = af.input((3,))
    multi = af.compile({"p": a + 1.0, "m": a - 1.0})
    res = af.load(Path(multi.program_dir))(np.zeros(3, np.float32))
    assert isinstance(res, dict) and sorted(res) == ["m", "p"]
    np.testing.assert_array_equal(res["p"], np.ones(3))


def test_export_writes_the_same_directory_without_loading(tmp_path):
    net = af.compile(build_det())
    d = af.export(build_det(), build_dir=tmp_path / "exp")
    assert Path(d) == tmp_path / "exp"
    assert read_dir(d) == read_dir(net.program_dir)
    assert af.export(build_det()) == net.program_dir
    x = np.random.default_rng(6).standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_array_equal(af.load(d)(x), net(x))


@pytest.mark.parametrize(
    "kw, name",
    [({"opt": 1}, "opt"), ({"opt": "O2"}, "opt")],
)
def test_unimplemented_options(kw, name):
    with pytest.raises(NotImplementedError, match=f"{name}.*not implemented yet"):
        af.compile(af.input((2,)).relu(), **kw)


def test_opt_zero_and_none_are_accepted():
    for opt in (None, 0):
        assert af.compile(af.input((2,)).relu(), opt=opt, int8=False).n_ops == 1


def test_fp32_precision():
    x = af.input((1, 64))
    y = (x * 3.0 + 1.0).sigmoid()
    a = np.arange(64, dtype=np.float32).reshape(1, 64) / 7.0 - 4.0
    ref = 1 / (1 + np.exp(-(a.astype(np.float64) * 3.0 + 1.0)))
    out32 = af.compile(y, precision="fp32")(a)
    out16 = af.compile(y)(a)
    assert np.max(np.abs(out32 - ref)) < 1e-6
    assert np.max(np.abs(out16 - ref)) > 1e-5
    net = af.compile(y)
    np.testing.assert_array_equal(af.load(net.program_dir, precision="fp32")(a), out32)


def test_input_array_conversions():
    x = af.input((3, 4))
    net = af.compile(x * 1.0)
    base = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
    want = net(base)
    np.testing.assert_array_equal(want, base.astype(np.float16))
    variants = [
        base.astype(np.float16),
        base.astype(np.float64),
        np.asfortranarray(base),
        np.arange(24, dtype=np.float32).reshape(3, 8)[:, ::2] / 3 * 0 + base,  # strided view
        base.astype(">f4"),
        base.tolist(),
    ]
    for v in variants:
        np.testing.assert_array_equal(net(v), want)
    # The output is a fresh array each call.
    o1, o2 = net(base), net(base)
    assert o1 is not o2 and not np.shares_memory(o1, o2)


def test_weight_array_conversions():
    x = af.input((2, 3))
    w = np.arange(12, dtype=np.float64).reshape(3, 4) / 8
    ref = None
    for wv in (w, w.astype(np.float32), w.astype(np.float16), np.asfortranarray(w), w.tolist()):
        out = af.compile(x @ wv)(np.ones((2, 3), np.float32))
        if ref is None:
            ref = out
        np.testing.assert_array_equal(out, ref)
    np.testing.assert_allclose(ref, np.ones((2, 3)) @ w, rtol=1e-3)


def test_numpy_operands():
    x = af.input((2, 3))
    b = np.array([1.0, 2.0, 3.0], np.float32)
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    outs = af.compile([x + b, b - x, x * np.float32(2.0), np.float64(1.0) / (x + 10.0)])(a)
    np.testing.assert_array_equal(outs[0], a + b)
    np.testing.assert_array_equal(outs[1], b - a)
    np.testing.assert_array_equal(outs[2], a * 2)
    np.testing.assert_allclose(outs[3], 1 / (a + 10), rtol=1e-3)


def test_uint8_port_accepts_integer_arrays():
    img = af.image_input((1, 2, 2, 2), scale=1.0, bias=0.0)
    net = af.compile(img * 1.0)
    assert net.inputs == [("x0", (1, 2, 2, 2), "uint8")]
    v = np.arange(8).reshape(1, 2, 2, 2) * 30
    want = v.astype(np.float32)
    for arr in (v.astype(np.uint8), v.astype(np.int64), v.astype(np.int16), v.astype(np.uint32)):
        np.testing.assert_array_equal(net(arr), want)


def test_threads_share_a_model():
    x = af.input((256, 512))  # large enough that execution releases the GIL
    net = af.compile((x * 2.0).relu().sum(-1))
    rng = np.random.default_rng(9)
    data = [rng.standard_normal((256, 512)).astype(np.float32) for _ in range(4)]
    want = [net(d) for d in data]
    errors = []

    def worker(k):
        for _ in range(20):
            if not np.array_equal(net(data[k]), want[k]):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_version():
    assert af.__version__ == "0.1.0"


def test_stubs_cover_the_runtime_api():
    import ast

    stub = Path(af.__file__).with_name("__init__.pyi")
    assert stub.is_file() and stub.with_name("py.typed").is_file()
    tree = ast.parse(stub.read_text())
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for name in af.__all__:
        assert name == "__version__" or name in funcs or name in classes, name
    for cls in (af.Tensor, af.Model):
        methods = [n for n in classes[cls.__name__].body if isinstance(n, ast.FunctionDef)]
        public = {m for m in dir(cls) if not m.startswith("_")}
        assert public <= {m.name for m in methods}, public - {m.name for m in methods}
        funcs.update({f"{cls.__name__}.{m.name}": m for m in methods})
    overloaded_first = {
        n for n, f in funcs.items() if any(getattr(d, "id", "") == "overload" for d in f.decorator_list)
    }
    undocumented = [n for n, f in funcs.items() if not ast.get_docstring(f) and n not in overloaded_first]
    assert not undocumented
