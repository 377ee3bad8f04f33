"""ONNX import: the schema subset against the `onnx` package's descriptors, the API
(`af.load_onnx`, `af.onnx_to_graph`), initializer storage forms, folding, and bad input."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import aneforge as af  # noqa: E402
from aneforge import _core  # noqa: E402
from google.protobuf import descriptor_pb2  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from schema_descriptors import descriptors  # noqa: E402


def _ours():
    return descriptors(_core._onnx_schema())


def test_schema_subset_matches_onnx_descriptors():
    pool = onnx.onnx_ml_pb2.DESCRIPTOR.pool
    ours = _ours()
    assert {"onnx.ModelProto", "onnx.TensorProto", "onnx.NodeProto", "onnx.AttributeProto"} <= set(ours)
    checked = 0
    for name, mine in ours.items():
        if isinstance(mine, descriptor_pb2.EnumDescriptorProto):
            theirs = {v.name: v.number for v in pool.FindEnumTypeByName(name).values}
            for v in mine.value:
                assert theirs.get(v.name) == v.number, f"{name}.{v.name}"
                checked += 1
            continue
        theirs = pool.FindMessageTypeByName(name)
        for f in mine.field:
            t = theirs.fields_by_name.get(f.name)
            assert t is not None, f"{name}.{f.name} is not in onnx's schema"
            assert t.number == f.number, f"{name}.{f.name}: number {f.number} vs {t.number}"
            assert t.type == f.type, f"{name}.{f.name}: type {f.type} vs {t.type}"
            assert t.is_repeated == (f.label == f.LABEL_REPEATED), f"{name}.{f.name}: label"
            checked += 1
    assert checked >= 100


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def test_conv_bn_relu_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(4).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    mean, var = rng.standard_normal(4).astype(np.float32), rng.uniform(0.5, 2, 4).astype(np.float32)
    inits = [
        numpy_helper.from_array(a, n)
        for a, n in [(w, "w"), (b, "b"), (gamma, "g"), (beta, "be"), (mean, "m"), (var, "v")]
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"], epsilon=1e-5),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    m = _model(nodes, [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 4, 8, 8])], inits)
    # float64 oracle: direct convolution, then BN, then ReLU.
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 4, 8, 8))
    for i in range(8):
        for j in range(8):
            conv[0, :, i, j] = np.einsum("cij,ocij->o", xp[0, :, i : i + 3, j : j + 3], w) + b
    bn = (conv - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) * gamma[None, :, None, None]
    want = np.maximum(bn + beta[None, :, None, None], 0)
    got = af.load_onnx(m, device="reference")(x)
    got = got["y"] if isinstance(got, dict) else got
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-2)
    # The BN folded into the conv: the imported graph holds no separate affine for it.
    ins, outs = af.onnx_to_graph(m)
    assert list(ins) == ["x"] and list(outs) == ["y"] and outs["y"].shape == (1, 4, 8, 8)


def test_exporter_shape_subgraph_folds_and_symbolic_dims_need_input_shapes():
    # y = reshape(x, concat(shape(x)[0:1], [-1])): the shape arithmetic runs on the host.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "ax"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
    ]
    m = _model(nodes, [_vi("x", ["batch", 2, 3])], [_vi("y", ["batch", 6])], inits)
    with pytest.raises(ValueError, match=r"input 'x'.*dim 0 is symbolic"):
        af.onnx_to_graph(m)
    _, outs = af.onnx_to_graph(m, input_shapes={"x": (2, 2, 3)})
    assert outs["y"].shape == (2, 6)
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    got = af.load_onnx(m, input_shapes={"x": (2, 2, 3)}, device="reference")(x)
    np.testing.assert_array_equal(got["y"] if isinstance(got, dict) else got, x.reshape(2, 6))


@pytest.mark.parametrize("form", ["raw", "float_data", "float16", "double", "int8", "external"])
def test_initializer_storage_forms(form, tmp_path):
    w = np.array([[0.5, -1.25], [2.0, 0.75]], np.float32)
    if form == "raw":
        t = numpy_helper.from_array(w, "w")
    elif form == "float_data":
        t = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], w.ravel().tolist())
    elif form == "float16":
        t = helper.make_tensor("w", TensorProto.FLOAT16, [2, 2], w.astype(np.float16).ravel().tolist())
    elif form == "double":
        t = helper.make_tensor("w", TensorProto.DOUBLE, [2, 2], w.astype(np.float64).ravel().tolist())
    elif form == "int8":
        w = np.array([[1, -2], [3, 4]], np.float32)
        t = helper.make_tensor("w", TensorProto.INT8, [2, 2], [1, -2, 3, 4])
    else:
        t = numpy_helper.from_array(w, "w")
    cast = [helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT)] if form == "int8" else []
    nodes = cast + [helper.make_node("MatMul", ["x", "wf" if cast else "w"], ["y"])]
    m = _model(nodes, [_vi("x", [1, 2])], [_vi("y", [1, 2])], [t])
    x = np.array([[1.0, 2.0]], np.float32)
    if form == "external":
        path = tmp_path / "m.onnx"
        onnx.save_model(
            m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0
        )
        assert (tmp_path / "w.bin").exists()
        model = af.load_onnx(str(path), device="reference")
    else:
        model = af.load_onnx(m.SerializeToString(), device="reference")
    got = model(x)
    np.testing.assert_allclose(got["y"] if isinstance(got, dict) else got, x.astype(np.float64) @ w, rtol=1e-3)


def test_bad_input_gives_clear_errors(tmp_path):
    good = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1, 4])], [_vi("y", [1, 4])])
    data = good.SerializeToString()
    with pytest.raises(ValueError, match="not a valid ONNX ModelProto"):
        af.onnx_to_graph(data[: len(data) // 2] + b"\xff\xff")
    with pytest.raises(TypeError, match="path or bytes"):
        af.onnx_to_graph(3.5)
    # A cycle, a duplicate name, a length mismatch, a negative dim, an escaping external path.
    cyc = _model(
        [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
        [_vi("x", [1])],
        [_vi("a", [1])],
    )
    with pytest.raises(ValueError, match="cycle"):
        af.onnx_to_graph(cyc)
    dup = _model(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])],
        [_vi("x", [1])],
        [_vi("y", [1])],
    )
    with pytest.raises(ValueError, match="'y'.*defined twice"):
        af.onnx_to_graph(dup)
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], raw_data=b"\x00" * 12)
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [short])
    with pytest.raises(ValueError, match=r"tensor 'w'.*raw_data has 12 bytes.*need 16"):
        af.onnx_to_graph(m)
    neg = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-4])
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [neg])
    with pytest.raises(ValueError, match=r"tensor 'w'.*negative dim -4"):
        af.onnx_to_graph(m)
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 40, 1 << 30])
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [huge])
    with pytest.raises(ValueError, match="more than"):
        af.onnx_to_graph(m)
    ext = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    ext.external_data.add(key="location", value="../../etc/passwd")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [ext])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(ValueError, match="escapes the model's folder"):
        af.onnx_to_graph(str(path))


def test_unsupported_ops_are_listed_at_once():
    nodes = [
        helper.make_node("DeformConv", ["x", "g", "g"], ["p"], name="dc"),
        helper.make_node("Unique", ["p"], ["u"], name="uq"),
        helper.make_node("Relu", ["u"], ["y"]),
    ]
    m = _model(nodes, [_vi("x", [1, 1, 4, 4]), _vi("g", [1, 2, 2, 2])], [_vi("y", [1, 1, 2, 2])], [])
    with pytest.raises(NotImplementedError) as e:
        af.onnx_to_graph(m)
    msg = str(e.value)
    assert "2 node(s)" in msg and "DeformConv node 'dc' (opset 17)" in msg and "no mapping" in msg
    assert "Unique node 'uq' (opset 17): the output shape depends on the input values" in msg


def _external_model(tmp_path, location, offset=None):
    ext = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    ext.external_data.add(key="location", value=location)
    if offset is not None:
        ext.external_data.add(key="offset", value=str(offset))
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [ext])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return str(path)


def test_external_data_cannot_escape_the_model_folder(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    with pytest.raises(ValueError, match=r"tensor 'w'.*external data path '/.*outside.bin' escapes the model's folder"):
        af.onnx_to_graph(_external_model(model_dir, str(outside)))
    with pytest.raises(ValueError, match=r"tensor 'w'.*'../outside.bin' escapes the model's folder"):
        af.onnx_to_graph(_external_model(model_dir, "../outside.bin"))
    # A symlink inside the folder that points outside it is refused too.
    (model_dir / "link.bin").symlink_to(outside)
    with pytest.raises(ValueError, match=r"tensor 'w'.*'link.bin' resolves outside the model's folder"):
        af.onnx_to_graph(_external_model(model_dir, "link.bin"))
    # The same bytes inside the folder load, and an offset past the end is a format error.
    (model_dir / "w.bin").write_bytes(outside.read_bytes())
    _, outs = af.onnx_to_graph(_external_model(model_dir, "w.bin"))
    assert outs["y"].shape == (4,)
    with pytest.raises(ValueError, match=r"tensor 'w'.*needs 16 bytes at offset 8 but the file has 16"):
        af.onnx_to_graph(_external_model(model_dir, "w.bin", offset=8))
    # A FIFO inside the folder is refused before it is opened (opening would block).
    os.mkfifo(model_dir / "fifo.bin")
    with pytest.raises(ValueError, match=r"tensor 'w': external data is not a regular file"):
        af.onnx_to_graph(_external_model(model_dir, "fifo.bin"))


def test_bad_files_name_the_value():
    # Typed-field length mismatch, an initializer defined twice, an undefined node input.
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3], float_data=[1.0, 2.0])
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [3])], [_vi("y", [3])], [short])
    with pytest.raises(ValueError, match=r"tensor 'w': has 2 stored values but dims \[3\] need 3"):
        af.onnx_to_graph(m)
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [3])], [_vi("y", [3])], [w, w])
    with pytest.raises(ValueError, match="initializer 'w' is defined twice"):
        af.onnx_to_graph(m)
    m = _model([helper.make_node("Add", ["x", "nope"], ["y"], name="add")], [_vi("x", [3])], [_vi("y", [3])])
    with pytest.raises(ValueError, match="Add node 'add' reads 'nope', which nothing defines"):
        af.onnx_to_graph(m)
    # A ModelProto that is random bytes, and one cut inside an initializer's raw_data.
    with pytest.raises(ValueError, match="not a valid ONNX ModelProto"):
        af.onnx_to_graph(bytes(range(256)) * 4)
    big = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [_vi("x", [256])],
        [_vi("y", [256])],
        [numpy_helper.from_array(np.ones(256, np.float32), "w")],
    ).SerializeToString()
    with pytest.raises(ValueError, match="not a valid ONNX ModelProto"):
        af.onnx_to_graph(big[: len(big) // 2])
    # A negative input dim is named with the input.
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1, -3])], [_vi("y", [1, 3])])
    with pytest.raises(ValueError, match=r"input 'x'.*dim 1 is negative \(-3\)"):
        af.onnx_to_graph(m)
