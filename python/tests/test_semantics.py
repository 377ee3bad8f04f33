"""Ops do what their stubs say (issue 16, item 6): each mismatch the issue lists, against NumPy
float64 oracles or closed forms written here."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from conformance_common import h, q
from differential_families import lrn_ref


def run(out, *arrays, **options):
    return af.compile(out, **options)(*arrays)


@pytest.mark.parametrize(
    ("build", "grad"),
    [
        (lambda p: p**1.5, lambda v: 1.5 * v**0.5),
        (lambda p: 2.0**p, lambda v: 2.0**v * np.log(2.0)),
        (lambda p: p.pow(3.0), lambda v: 3.0 * v**2),
    ],
    ids=["p**1.5", "2.0**p", "pow(p, 3)"],
)
def test_backward_through_pow_with_a_python_scalar(build, grad):
    v = np.array([[0.5, 1.0, 2.0, 3.0]])
    p = af.parameter(v, name="p")
    g = af.backward(build(p).sum([0, 1]), [p])[p]
    got = af.compile(g, precision="fp32")(p=v)
    np.testing.assert_allclose(got, grad(v), rtol=2e-3)


def test_gather_with_an_int_drops_the_axis_like_numpy_take():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for index, axis in [(1, 1), (-1, 2), (0, 0)]:
        got = run(af.gather(af.input(x.shape), index, axis), x)
        np.testing.assert_array_equal(got, np.take(x, index, axis))
    np.testing.assert_array_equal(run(af.gather(af.input(x.shape), [1], 1), x), np.take(x, [1], 1))
    with pytest.raises(ValueError, match="rank 0"):
        af.gather(af.input((5,)), 2)


@pytest.mark.parametrize("size", [2, 4, 5])
def test_local_response_norm_window_by_name(size):
    x = np.random.default_rng(1).uniform(-3, 3, (2, 7, 3, 2)).astype(np.float32)
    xd = q(x)
    for window in ("onnx", "torch"):
        got = run(af.local_response_norm(af.input(x.shape), size, 0.5, 0.75, 1.0, window=window), x)
        np.testing.assert_allclose(got, lrn_ref(xd, size, 0.5, 0.75, 1.0, window), rtol=3e-3, atol=1e-3)
    default = run(af.local_response_norm(af.input(x.shape), size, 0.5, 0.75, 1.0), x)
    np.testing.assert_allclose(default, lrn_ref(xd, size, 0.5, 0.75, 1.0, "onnx"), rtol=3e-3, atol=1e-3)
    with pytest.raises(ValueError, match="window"):
        af.local_response_norm(af.input(x.shape), size, window="caffe")


def test_upsample_bilinear_non_integer_scale_maps_by_in_over_out():
    """The stub's mapping: source (i + 0.5)·in/out − 0.5 with out = floor(in·s)."""
    x = np.arange(3, dtype=np.float32).reshape(1, 1, 1, 3) * 2  # [0, 2, 4]
    got = run(af.upsample_bilinear(af.input(x.shape), (1.0, 2.5)), x)[0, 0, 0]
    src = np.clip((np.arange(7) + 0.5) * 3 / 7 - 0.5, 0, 2)
    np.testing.assert_allclose(got, np.interp(src, [0, 1, 2], [0, 2, 4]), atol=2e-3)


def test_upsample_bilinear_pytorch_scale_factor_mapping_by_name():
    """recompute_scale_factor=False: source (i + 0.5)/s − 0.5, PyTorch's default for scale_factor=2.5."""
    x = np.float32([[[[0, 2, 4], [1, 1, 1]]]])
    got = run(af.upsample_bilinear(af.input(x.shape), 2.5, recompute_scale_factor=False), x)
    assert got.shape == (1, 1, 5, 7)
    src = np.clip((np.arange(7) + 0.5) / 2.5 - 0.5, 0, 2)
    np.testing.assert_allclose(got[0, 0, 0], np.interp(src, [0, 1, 2], [0, 2, 4]), atol=4e-3)
    rows = np.clip((np.arange(5) + 0.5) / 2.5 - 0.5, 0, 1)
    want_col0 = np.interp(rows, [0, 1], [0, 1])  # column 0 reads x[:, 0] = [0, 1]
    np.testing.assert_allclose(got[0, 0, :, 0], want_col0, atol=4e-3)
    with pytest.raises(ValueError, match="align_corners"):
        af.upsample_bilinear(af.input(x.shape), 2.5, align_corners=True, recompute_scale_factor=False)


@pytest.mark.parametrize(
    "build",
    [
        lambda: af.input((4,)) @ af.input((4,)),
        lambda: af.input((2, 3)).sum(None, keepdims=False),
        lambda: af.einsum("ij,jk->", af.input((2, 3)), af.input((3, 2))),
    ],
    ids=["1d@1d", "sum-all", "einsum-scalar"],
)
def test_rank0_results_raise_a_clear_value_error(build):
    with pytest.raises(ValueError, match=r"rank|scalar"):
        build()


def test_group_norm_rank3_and_batch_norm_rank2():
    rng = np.random.default_rng(2)
    x3 = rng.uniform(-2, 2, (2, 4, 5)).astype(np.float32)
    got = run(af.input(x3.shape).group_norm(2, eps=1e-5), x3)
    g = q(x3).reshape(2, 2, 10)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + h(1e-5))).reshape(x3.shape)
    np.testing.assert_allclose(got, want, atol=1e-2)
    x2 = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    mean, var = np.float32([0.5, -1, 0, 2]), np.float32([1, 2, 0.5, 4])
    got = run(af.batch_norm(af.input(x2.shape), mean, var, eps=1e-3), x2)
    np.testing.assert_allclose(got, (q(x2) - mean) / np.sqrt(var + h(1e-3)), atol=4e-3)


def _standardize_ref(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    d = x - x.mean(axis=axes, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=axes, keepdims=True) + eps)


@pytest.mark.parametrize(
    ("name", "build", "axes"),
    [
        ("layer_norm", lambda t: t.layer_norm(eps=1e-12), (-1,)),
        ("group_norm", lambda t: t.group_norm(num_groups=2, eps=1e-12), (1, 2, 3)),
        ("instance_norm", lambda t: af.instance_norm(t, eps=1e-12), (2, 3)),
    ],
)
def test_norm_eps_below_fp16_range_is_not_flushed_to_zero(name, build, axes):
    """BERT's eps = 1e-12 is below fp16's smallest subnormal: a constant slice must give 0 (as
    float64 does), not 0/0 = NaN, and a varied slice must match float64."""
    rng = np.random.default_rng(1612)
    x = rng.uniform(-3, 3, (2, 4, 3, 5)).astype(np.float32)
    x[0] = 1.5  # constant: every slice of sample 0 (and both of its groups) is constant
    if name == "group_norm":
        ref = _standardize_ref(x.reshape(2, 2, 2, 15), (2, 3), 1e-12).reshape(x.shape)
    else:
        ref = _standardize_ref(x, axes, 1e-12)
    out = af.compile(build(af.input(x.shape)), device="reference")(x)
    assert np.isfinite(out).all(), f"{name}: {np.isnan(out).sum()} NaN"
    np.testing.assert_allclose(out, ref, atol=2e-2, rtol=1e-2)
