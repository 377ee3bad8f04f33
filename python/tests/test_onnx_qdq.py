"""QDQ import: DequantizeLinear of int8/uint8 initializers becomes the int8 weight encoding
(per tensor and per axis, zero points folded into the int8 values), activation
QuantizeLinear→DequantizeLinear pairs become fake-quant arithmetic. Oracle: onnx's reference
evaluator (``onnx.reference.ReferenceEvaluator``) on the same model, and NumPy float64."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import aneforge as af  # noqa: E402
from aneforge import _core  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

# Scales that are fp16 values, so the graph's fp16 constants hold them exactly.
S_IN = float(np.float16(0.0234))
S_OUT = float(np.float16(0.0517))


def _model(nodes, inputs, outputs, inits, opset=19):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _run(m, x, **opts):
    got = af.load_onnx(m.SerializeToString(), device="reference", **opts)(x)
    return np.asarray(list(got.values())[0] if isinstance(got, dict) else got, np.float64)


def _mil(m, tmp_path):
    _, outs = _core._onnx_import(m.SerializeToString(), [])
    build = str(tmp_path / "prog")
    af.export({port: t for _, port, t in outs}, build_dir=build)
    return open(os.path.join(build, "model.mil")).read()


def _assert_within_one_step(got, want, step, exact_share):
    """`got` within one quantization step (plus fp16 rounding) of `want`; at least `exact_share`
    of the values equal fp16(want) exactly."""
    want16 = want.astype(np.float16).astype(np.float64)
    assert np.max(np.abs(got - want)) <= step + np.max(np.abs(want - want16))
    assert np.mean(got == want16) >= exact_share, np.mean(got == want16)


def _fake_quant_model(qtype, zero):
    inits = [
        numpy_helper.from_array(np.array(S_IN, np.float32), "s"),
        numpy_helper.from_array(np.array(zero, qtype), "z"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
    ]
    return _model(nodes, [_vi("x", [4, 64])], [_vi("y", [4, 64])], inits)


@pytest.mark.parametrize(("qtype", "zero"), [(np.int8, 0), (np.int8, -7), (np.uint8, 128), (np.uint8, 3)])
def test_activation_fake_quant_is_exact_in_fp32(qtype, zero):
    m = _fake_quant_model(qtype, zero)
    # fp16 inputs spanning the clamp range and beyond (saturation on both sides).
    x = np.linspace(-4.0, 4.0, 256).astype(np.float16).astype(np.float32).reshape(4, 64)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0].astype(np.float64)
    # NumPy float64 oracle of the same definition: saturate(round_half_even(x / s) + z).
    lo, hi = np.iinfo(qtype).min, np.iinfo(qtype).max
    q = np.clip(np.round(x.astype(np.float64) / np.float32(S_IN)) + zero, lo, hi)
    np.testing.assert_array_equal(want, (q - zero) * np.float32(S_IN))
    np.testing.assert_array_equal(_run(m, x, precision="fp32"), want)
    # fp16 contract: x / s is rounded to fp16 before rounding to an integer, so a value may land
    # one quantization step away, and the output (q - z) · s is itself an fp16 value.
    _assert_within_one_step(_run(m, x), want, S_IN, 0.9)


def test_fake_quant_ties_round_to_even():
    m = _fake_quant_model(np.int8, 0)
    x = (np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5] * 32, np.float32) * np.float32(S_IN)).reshape(4, 64)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(want[0, :8] / np.float32(S_IN), [0, 2, 2, -0, -2, -2, 4, 4])
    np.testing.assert_array_equal(_run(m, x, precision="fp32"), want)


def _qdq_conv_net(per_channel: bool, weight_type=np.int8, w_zero=0):
    """x → Q/DQ (uint8) → Conv(DQ(int8 weight), DQ(int32 bias)) → Relu → Q/DQ → output."""
    rng = np.random.default_rng(0)
    cout, cin = 8, 4
    w = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.2
    if per_channel:
        w_scale = (np.abs(w).reshape(cout, -1).max(1) / 127).astype(np.float16).astype(np.float32)
        wq = np.round(w / w_scale[:, None, None, None]).astype(np.int32) + w_zero
    else:
        w_scale = np.float32(np.float16(np.abs(w).max() / 127))
        wq = np.round(w / w_scale).astype(np.int32) + w_zero
    info = np.iinfo(weight_type)
    wq = np.clip(wq, info.min, info.max).astype(weight_type)
    bias = rng.standard_normal(cout).astype(np.float32) * 0.1
    b_scale = (np.float32(S_IN) * np.atleast_1d(w_scale)).astype(np.float32)
    bq = np.round(bias / b_scale).astype(np.int32)
    w_zp = np.full(cout, w_zero, weight_type) if per_channel else np.array(w_zero, weight_type)
    inits = [
        numpy_helper.from_array(np.array(S_IN, np.float32), "s_in"),
        numpy_helper.from_array(np.array(128, np.uint8), "z_in"),
        numpy_helper.from_array(np.array(S_OUT, np.float32), "s_out"),
        numpy_helper.from_array(np.array(0, np.uint8), "z_out"),
        numpy_helper.from_array(wq, "wq"),
        numpy_helper.from_array(np.asarray(w_scale, np.float32), "w_scale"),
        numpy_helper.from_array(w_zp, "w_zp"),
        numpy_helper.from_array(bq, "bq"),
        numpy_helper.from_array(b_scale if per_channel else b_scale.reshape(()), "b_scale"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s_in", "z_in"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "w_scale", "w_zp"], ["w"], axis=0),
        helper.make_node("DequantizeLinear", ["bq", "b_scale"], ["b"], axis=0),
        helper.make_node("Conv", ["xd", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "s_out", "z_out"], ["rq"]),
        helper.make_node("DequantizeLinear", ["rq", "s_out", "z_out"], ["y"]),
    ]
    return _model(nodes, [_vi("x", [1, cin, 10, 10])], [_vi("y", [1, cout, 10, 10])], inits)


@pytest.mark.parametrize(
    ("per_channel", "weight_type", "w_zero"),
    [(True, np.int8, 0), (False, np.int8, 0), (True, np.int8, 5), (False, np.uint8, 128)],
)
def test_qdq_conv_net_matches_reference_and_uses_int8_weights(per_channel, weight_type, w_zero, tmp_path):
    m = _qdq_conv_net(per_channel, weight_type, w_zero)
    x = np.random.default_rng(1).uniform(-2, 2, (1, 4, 10, 10)).astype(np.float16).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0].astype(np.float64)
    assert np.abs(want).max() > 10 * S_OUT  # the test exercises real values, not a clamp to 0
    # Products q·scale are rounded to fp16 in the weight encoding, so a requantized output may
    # move by one output step; nearly all match exactly.
    got = _run(m, x, precision="fp32")
    assert np.max(np.abs(got - want)) <= S_OUT * 1.001
    assert np.mean(got == want) >= 0.95, np.mean(got == want)
    _assert_within_one_step(_run(m, x), want, S_OUT, 0.9)
    mil = _mil(m, tmp_path)
    assert mil.count("constexpr_affine_dequantize") == 1, "the weight is stored as int8"


def test_uint8_weight_outside_int8_dequantizes_dense(tmp_path):
    # q - zero_point spans 0..255: not an int8 payload, so the weight is dequantized to fp16.
    q = np.arange(256).reshape(16, 16).astype(np.uint8)
    inits = [
        numpy_helper.from_array(q, "q"),
        numpy_helper.from_array(np.array(1 / 64, np.float32), "s"),
        numpy_helper.from_array(np.array(0, np.uint8), "z"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    m = _model(nodes, [_vi("x", [2, 16])], [_vi("y", [2, 16])], inits)
    x = np.random.default_rng(3).uniform(-1, 1, (2, 16)).astype(np.float16).astype(np.float32)
    want = x.astype(np.float64) @ (q.astype(np.float64) / 64)
    np.testing.assert_allclose(ReferenceEvaluator(m).run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(m, x, precision="fp32"), want, rtol=1e-5, atol=1e-5)
    assert "constexpr_affine_dequantize" not in _mil(m, tmp_path)


def test_qdq_errors_name_the_node():
    def dq(attrs=None, scale=(0.5, 0.25), zp=(0, 0)):
        inits = [
            numpy_helper.from_array(np.ones((3, 2), np.int8), "q"),
            numpy_helper.from_array(np.array(scale, np.float32), "s"),
            numpy_helper.from_array(np.array(zp, np.int8), "z"),
        ]
        nodes = [
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"], name="dq", **(attrs or {})),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ]
        g = helper.make_graph(nodes, "g", [_vi("x", [1, 3])], [_vi("y", [1, 2])], initializer=inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])

    with pytest.raises(NotImplementedError, match=r"DequantizeLinear node 'dq'.*blocked quantization"):
        af.onnx_to_graph(dq({"axis": 0, "block_size": 2}, scale=[[0.5], [0.5], [0.5]], zp=[[0], [0], [0]]))
    with pytest.raises(ValueError, match=r"DequantizeLinear node 'dq'.*3 zero points for 2 scales"):
        af.onnx_to_graph(dq({"axis": 1}, zp=(0, 0, 0)))
    with pytest.raises(ValueError, match=r"DequantizeLinear node 'dq'.*scale -0.25 is not a finite positive"):
        af.onnx_to_graph(dq({"axis": 1}, scale=(0.5, -0.25)))
    with pytest.raises(
        ValueError,
        match=r"DequantizeLinear node 'dq'.*2 scales \(dims \[2\]\) with axis 0 do not fit an input of dims \[3, 2\]",
    ):
        af.onnx_to_graph(dq({"axis": 0}))
    # A well-formed per-axis weight: y = x @ ((q - z) · s), checked against NumPy.
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    got = af.load_onnx(dq({"axis": 1}).SerializeToString(), device="reference")(x)
    got = np.asarray(list(got.values())[0] if isinstance(got, dict) else got)
    np.testing.assert_allclose(got, x.astype(np.float64) @ (np.ones((3, 2)) * [0.5, 0.25]), rtol=1e-3)
