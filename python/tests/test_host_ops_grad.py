"""Gradients of the host ops (scatter, take_along_axis, index_put, cumsum, the bridge layers)
through af.backward, compiled in fp32 on the reference executor, against central finite
differences of float64 NumPy oracles written here; ops without a gradient raise
NotImplementedError naming the op."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest


def spread(shape, seed):
    """Distinct values at least 1/8 apart (no ties, so min/max/sign are stable under a 1e-3 step)."""
    n = int(np.prod(shape))
    v = np.random.default_rng(seed).permutation(n).astype(np.float64) / 8.0 - n / 16.0
    return v.reshape(shape)


def fd(f, vals, k, eps=1e-3):
    g = np.zeros_like(vals[k])
    for i in range(vals[k].size):
        plus = [v.copy() for v in vals]
        minus = [v.copy() for v in vals]
        plus[k].flat[i] += eps
        minus[k].flat[i] -= eps
        g.flat[i] = (f(*plus) - f(*minus)) / (2 * eps)
    return g


def check(build, oracle, floats, ints=(), seed=0, tol=2e-3):
    """Compare af.backward of sum(build(...) * W) with finite differences of sum(oracle(...) * W)."""
    params = [af.input(v.shape) for v in floats]
    idx = [af.input(v.shape, dtype="int32") for v in ints]
    out = build(*params, *idx)
    # Constants are baked as fp16: the oracle uses the same rounded weights.
    w = np.random.default_rng(seed).normal(size=tuple(out.shape)).astype(np.float16).astype(np.float64)
    loss = (out * af.constant(w)).sum()
    grads = af.backward(loss, params)
    net = af.compile([grads[p] for p in params], device="reference", precision="fp32", route="host")
    got = net(*(v.astype(np.float32) for v in floats), *ints)
    got = got if isinstance(got, list) else [got]

    def f(*vals):
        return float((oracle(*vals, *ints) * w).sum())

    for k in range(len(floats)):
        np.testing.assert_allclose(got[k], fd(f, list(floats), k), rtol=tol, atol=tol)


def scatter_np(x, idx, upd, axis, add):
    out = x.copy()
    for p in np.ndindex(*idx.shape):
        t = list(p)
        t[axis] = idx[p]
        out[tuple(t)] = out[tuple(t)] + upd[p] if add else upd[p]
    return out


@pytest.mark.parametrize("reduce", [None, "add"])
def test_scatter_gradients_reach_x_and_updates(reduce):
    idx = np.array([[2, 0, 1, 3], [0, 1, 3, 2]], np.int32)  # no duplicate targets per column
    check(
        lambda x, u, i: af.scatter(x, i, u, axis=0, reduce=reduce),
        lambda x, u, i: scatter_np(x, i, u, 0, reduce == "add"),
        [spread((4, 4), 1), spread((2, 4), 2)],
        [idx],
    )


def test_take_along_axis_and_index_put_gradients():
    idx = np.array([[1, 1, 0], [2, 0, 0]], np.int32)
    check(
        lambda x, i: af.take_along_axis(x, i, axis=1),
        lambda x, i: np.take_along_axis(x, i, axis=1),
        [spread((2, 3), 3)],
        [idx],
    )
    rows = np.array([3, 0], np.int32)

    def put(x, r, i):
        out = x.copy()
        out[:, i] = r
        return out

    check(
        lambda x, r, i: af.index_put(x, i, r, axis=1),
        put,
        [spread((2, 5), 4), spread((2, 2), 5)],
        [rows],
    )


@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, True)])
def test_cumsum_gradient(exclusive, reverse):
    def oracle(x):
        v = np.flip(x, 0) if reverse else x
        c = np.cumsum(v, axis=0) - (v if exclusive else 0)
        return np.flip(c, 0) if reverse else c

    check(lambda x: af.cumsum(x, axis=0, exclusive=exclusive, reverse=reverse), oracle, [spread((4, 3), 6)])


def test_cross_product_flatten_and_rearrange_gradients():
    check(af.cross_product, lambda a, b: np.cross(a, b), [spread((2, 3), 7), spread((2, 3), 8)])
    check(af.flatten, lambda x: x.ravel(), [spread((2, 3, 2), 9)])

    def s2b(x):
        n, c, h, w = x.shape
        return x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(3, 5, 0, 1, 2, 4).reshape(4 * n, c, h // 2, w // 2)

    check(lambda x: af.space_to_batch(x, 2, 2), s2b, [spread((1, 2, 2, 4), 10)])
    check(lambda x: af.space_to_channel(x, 2, 1), _s2c, [spread((1, 2, 2, 2), 11)])


def _s2c(x):
    n, c, h, w = x.shape
    b = x.reshape(n, c, h // 2, 2, w, 1).transpose(3, 5, 0, 1, 2, 4).reshape(2, n, c, h // 2, w)
    return b.transpose(1, 0, 2, 3, 4).reshape(n, 2 * c, h // 2, w)


@pytest.mark.parametrize("dimension, axis", [("width", 3), ("height", 2)])
def test_minmax_norm_gradient(dimension, axis):
    def oracle(x):
        lo, hi = x.min(axis=axis, keepdims=True), x.max(axis=axis, keepdims=True)
        return (x - lo) / (hi - lo + 0.01)

    check(lambda x: af.minmax_norm(x, dimension, eps=0.01), oracle, [spread((1, 2, 3, 4), 12)])


def test_sdpa_gradient_reaches_q_k_v_and_the_mask():
    def oracle(qv, kv, vv, mv):
        s = qv @ kv.transpose(0, 2, 1) * 0.5 + mv
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ vv

    vals = [spread(s, 13 + i) / 8.0 for i, s in enumerate([(2, 3, 4), (2, 5, 4), (2, 5, 2), (3, 5)])]
    check(lambda a, b, c, m: af.sdpa(a, b, c, scale=0.5, attn_mask=m), oracle, vals)


def test_correlation_gradients():
    def corr(x, t):
        win = np.lib.stride_tricks.sliding_window_view(x, t.shape)
        return np.einsum("ijab,ab->ij", win, t)

    check(af.cross_correlation, corr, [spread((4, 5), 14) / 4, spread((2, 3), 15) / 4])
    check(
        lambda a, r: af.cost_volume(a, r, 2),
        lambda a, r: np.stack([np.abs(a - r[d : d + 4]) for d in range(3)]),
        [spread((4,), 16), spread((6,), 17) + 0.0625],
    )


def test_view_and_scaled_elementwise_gradients():
    check(lambda x: af.input_view(x, 3, 5), lambda x: x.ravel()[3:8], [spread((3, 4), 18)])
    for op, f in [("mul", np.multiply), ("min", np.minimum), ("sub", np.subtract)]:
        check(
            lambda x, z, op=op: af.scaled_elementwise(x, z, op, 1.5),
            lambda x, z, f=f: 1.5 * f(x, z),
            [spread((2, 3), 19), spread((2, 3), 20) + 0.0625],
        )


def test_dynamic_slice_gradient_lands_in_the_box_at_the_runtime_start():
    for start in ([1, 2], [0, 0], [2, 1]):
        check(
            lambda x, s: af.dynamic_slice(x, s, [2, 3]),
            lambda x, s: x[s[0] : s[0] + 2, s[1] : s[1] + 3],
            [spread((4, 5), 21)],
            [np.array(start, np.int32)],
        )


def test_ops_without_a_gradient_say_so():
    x = af.input((4, 3))
    with pytest.raises(NotImplementedError, match="fps is not differentiable"):
        af.backward(af.fps(x, 2).sum(), [x])
    with pytest.raises(NotImplementedError, match="radius_search is not differentiable"):
        af.backward(af.radius_search(x, x, 1.0).sum(), [x])
