"""Norm composites across the fp16 range against NumPy float64 (issue 16, item 3).

Every normalisation the Python API offers runs on inputs whose magnitude spans the fp16
range (2**-14 .. 60000), whose mean is large next to their spread (8 + 0.05·N(0, 1)), whose
deviations reach 256 and beyond (the old lowering squared them in fp16 and returned zeros), and
on two-point and single-outlier rows. The oracle is float64 on the fp16-rounded inputs; a case
whose float64 answer is finite and within fp16 range must come back finite and within 1e-2 of
the largest reference magnitude (the composite tolerance of the conformance corpus).
"""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from conformance_common import h, q

TOL = 1e-2
FP16_MAX = 65504.0


def rows(d: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """Named [d] input rows spanning the fp16 range (already fp16-representable)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(d)
    out = []
    for m in (2.0**-14, 1e-3, 0.1, 1.0, 255.0, 256.0, 1000.0, 8000.0, 30000.0, 60000.0):
        out.append((f"normal*{m:g}", np.clip(z * m, -60000, 60000)))
        out.append((f"two-point {m:g}", np.resize([m, -m], d)))
        one = np.zeros(d)
        one[d // 3] = m
        out.append((f"outlier {m:g}", one))
    for c, s in ((8.0, 0.05), (1000.0, 4.0), (-30000.0, 100.0), (60000.0, 1000.0), (0.01, 1e-4)):
        out.append((f"{c:g} + {s:g}*N", c + s * z))
    out.append(("span ±60000", np.linspace(-60000, 60000, d)))
    out.append(("constant 300", np.full(d, 300.0)))
    return [(name, q(r)) for name, r in out]


def std_ref(x: np.ndarray, axes, eps: float) -> np.ndarray:
    """(x − mean)/√(var + eps) over axes, float64."""
    m = x.mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axes, keepdims=True) + eps)


def rms_ref(x: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps)


def l2_ref(x: np.ndarray, eps: float) -> np.ndarray:
    return x / np.maximum(np.sqrt((x**2).sum(axis=-1, keepdims=True)), eps)


D = 48
EPS = 1e-5
# name -> (build on a [R, D] batch of rows, float64 oracle on the same batch)
NORMS = {
    "layer_norm": (lambda x: x.layer_norm(eps=EPS), lambda x: std_ref(x, -1, h(EPS))),
    "rms_norm": (lambda x: x.rms_norm(eps=EPS), lambda x: rms_ref(x, EPS)),
    "l2_norm": (lambda x: x.l2_norm(-1, 1e-12), lambda x: l2_ref(x, 1e-12)),
    "channel_layer_norm": (
        lambda x: x.transpose(1, 0).reshape(1, D, 1, -1).channel_layer_norm(eps=EPS).reshape(D, -1).transpose(1, 0),
        lambda x: std_ref(x, -1, h(EPS)),
    ),
    "group_norm": (
        lambda x: x.reshape(-1, 4, 3, 4).group_norm(2, eps=EPS),
        lambda x: std_ref(x.reshape(-1, 2, 24), -1, h(EPS)).reshape(-1, 4, 3, 4),
    ),
    "instance_norm": (
        lambda x: af.instance_norm(x.reshape(-1, 1, 6, 8), eps=EPS),
        lambda x: std_ref(x, -1, h(EPS)).reshape(-1, 1, 6, 8),
    ),
}


@pytest.mark.parametrize("norm", sorted(NORMS))
def test_norm_sweep(norm):
    build, ref = NORMS[norm]
    named = rows(D, seed=16)
    x = np.stack([r for _, r in named]).astype(np.float32)
    net = af.compile(build(af.input(x.shape)))
    got = np.asarray(net(x), np.float64).reshape(len(named), -1)
    want = np.asarray(ref(x.astype(np.float64))).reshape(len(named), -1)
    bad = []
    for (name, _), g, w in zip(named, got, want):
        if not (np.all(np.isfinite(w)) and np.max(np.abs(w)) <= FP16_MAX):
            continue  # no representable answer to compare with
        err = np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-3) if np.all(np.isfinite(g)) else np.inf
        if err > TOL:
            bad.append(f"{name}: rel err {err:.3g} (got {g[:3]}, want {w[:3]})")
    assert not bad, f"{norm}:\n" + "\n".join(bad)


@pytest.mark.parametrize("norm", ["layer_norm", "channel_layer_norm", "group_norm"])
def test_256_deviation_is_not_zeroed(norm):
    """The issue's reproducer: layer_norm([256, −256]) is [1, −1] (it was [0, −0])."""
    x = np.resize(np.float32([256, -256]), (2, D)).astype(np.float32)
    build, _ = NORMS[norm]
    got = np.asarray(af.compile(build(af.input(x.shape)))(x)).reshape(2, D)
    np.testing.assert_allclose(got, np.resize([1.0, -1.0], (2, D)), atol=2e-3)


def test_large_mean_small_spread_is_accurate():
    """x = 8 + 0.05·N(0, 1): the fp16-rounded mean is off by up to 2**-8; the lowering removes it."""
    x = q(8 + 0.05 * np.random.default_rng(3).standard_normal((4, 384))).astype(np.float32)
    got = af.compile(af.input(x.shape).layer_norm(eps=EPS))(x)
    want = std_ref(x.astype(np.float64), -1, h(EPS))
    assert np.max(np.abs(got - want)) < 4e-3


def test_rms_norm_is_the_pytorch_form():
    """The issue's numbers: rms_norm([.003, −.002, .001, .0025], eps=1e-5) = x/√(mean(x²) + eps)."""
    x = np.float32([[0.003, -0.002, 0.001, 0.0025]])
    got = af.compile(af.input(x.shape).rms_norm(eps=1e-5))(x)
    xd = q(x)
    want = xd / np.sqrt((xd**2).mean() + 1e-5)
    np.testing.assert_allclose(got, want, rtol=2e-3)
    np.testing.assert_allclose(want, [[0.773, -0.515, 0.258, 0.644]], atol=1e-3)


def test_l2_norm_floors_at_eps_not_its_root():
    """l2_norm = x / max(‖x‖, eps): a vector shorter than eps is divided by eps."""
    x = np.float32([[0.003, -0.004]])  # ‖x‖ = 0.005
    got = af.compile(af.input(x.shape).l2_norm(-1, eps=0.01))(x)
    np.testing.assert_allclose(got, q(x) / h(0.01), rtol=2e-3)
    zero = np.zeros((1, 5), np.float32)
    assert np.array_equal(af.compile(af.input(zero.shape).l2_norm())(zero), zero)
