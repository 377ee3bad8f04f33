"""The Python API of the indexing, scan, sampling and bridge host ops against float64 NumPy oracles
written here (parameters drawn at random from fixed seeds), run as segmented plans on the
reference executor, and their bad input: out-of-range indices, wrong dtypes, bad parameters and
non-finite logits raise typed errors naming the op and the value."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest

RNG_SEEDS = [0, 1, 2]


def q(a):
    """Round to fp16 and back (the executor's contract on inputs and outputs)."""
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def run(outputs, *inputs, **options):
    net = af.compile(outputs, device="reference", **options)
    return net, net(*inputs)


def close(got, want, rtol=2e-3, atol=2e-3):
    np.testing.assert_allclose(got, q(want), rtol=rtol, atol=atol)


def scatter_oracle(x, idx, upd, axis, add):
    out = x.copy()
    for p in np.ndindex(*idx.shape):
        t = list(p)
        t[axis] = idx[p] % x.shape[axis]
        out[tuple(t)] = out[tuple(t)] + upd[p] if add else upd[p]
    return out


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("reduce", [None, "add"])
def test_scatter_matches_a_row_major_loop(seed, reduce):
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in rng.integers(2, 5, size=3))
    axis = int(rng.integers(0, 3))
    ishape = list(shape)
    ishape[axis] = int(rng.integers(1, shape[axis] + 2))
    xv = q(rng.normal(size=shape)).astype(np.float32)
    uv = q(rng.normal(size=ishape)).astype(np.float32)
    iv = rng.integers(-shape[axis], shape[axis], size=ishape).astype(np.int32)
    x, idx, upd = af.input(shape), af.input(tuple(ishape), dtype="int32"), af.input(tuple(ishape))
    net, got = run(af.scatter(x, idx, upd, axis=axis, reduce=reduce), xv, iv, uv)
    close(got, scatter_oracle(xv.astype(np.float64), iv, uv, axis, reduce == "add"))
    assert [s["kind"] for s in net.stages] == ["host"]


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_take_along_axis_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = (3, 4, 5)
    axis = int(rng.integers(0, 3))
    ishape = list(shape)
    ishape[axis] = 6
    xv = q(rng.normal(size=shape)).astype(np.float32)
    iv = rng.integers(0, shape[axis], size=ishape).astype(np.int32)
    x, idx = af.input(shape), af.input(tuple(ishape), dtype="int32")
    _, got = run(af.take_along_axis(x, idx, axis=axis), xv, iv)
    np.testing.assert_array_equal(got, np.take_along_axis(xv, iv, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_index_put_writes_whole_rows(axis):
    rng = np.random.default_rng(10 + axis)
    shape = (4, 3, 5)
    rows_shape = list(shape)
    rows_shape[axis] = 2
    xv = q(rng.normal(size=shape)).astype(np.float32)
    rv = q(rng.normal(size=rows_shape)).astype(np.float32)
    iv = rng.choice(shape[axis], size=2, replace=False).astype(np.int32)
    x, idx, rows = af.input(shape), af.input((2,), dtype="int32"), af.input(tuple(rows_shape))
    _, got = run(af.index_put(x, idx, rows, axis=axis), xv, iv, rv)
    want = xv.copy()
    sl = [slice(None)] * 3
    sl[axis] = iv
    want[tuple(sl)] = rv
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_on_any_axis(seed, exclusive, reverse):
    rng = np.random.default_rng(seed)
    xv = q(rng.normal(size=(3, 5, 4))).astype(np.float32)
    axis = int(rng.integers(-3, 3))
    x = af.input((3, 5, 4))
    _, got = run(af.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse), xv)
    v = np.flip(xv.astype(np.float64), axis) if reverse else xv.astype(np.float64)
    c = np.cumsum(v, axis=axis)
    if exclusive:
        c = c - v
    want = np.flip(c, axis) if reverse else c
    close(got, want)


def test_one_hot_and_its_errors():
    rng = np.random.default_rng(3)
    iv = rng.integers(0, 6, size=(2, 3)).astype(np.int32)
    ids = af.input((2, 3), dtype="int32")
    net, got = run(af.one_hot(ids, 6), iv)
    np.testing.assert_array_equal(got, np.eye(6)[iv])
    with pytest.raises(ValueError, match=r"one_hot.*index 6"):
        net(np.full((2, 3), 6, np.int32))
    with pytest.raises(ValueError, match=r"depth must be >= 1, got 0"):
        af.one_hot(ids, 0)


def test_sample_is_greedy_at_zero_and_deterministic_per_seed():
    rng = np.random.default_rng(4)
    lv = q(rng.normal(size=(6, 11)) * 3).astype(np.float32)
    logits = af.input((6, 11))
    _, greedy = run(af.sample(logits, temperature=0.0), lv)
    assert greedy.dtype == np.int32 and greedy.shape == (6, 1)
    np.testing.assert_array_equal(greedy[:, 0], np.argmax(lv, axis=-1))
    # top_k = 1 leaves only the largest logit whatever the temperature.
    _, top1 = run(af.sample(logits, temperature=2.0, top_k=1, seed=9), lv)
    np.testing.assert_array_equal(top1[:, 0], np.argmax(lv, axis=-1))
    a = run(af.sample(logits, temperature=1.0, seed=5), lv)[1]
    b = run(af.sample(logits, temperature=1.0, seed=5), lv)[1]
    np.testing.assert_array_equal(a, b)


def test_sample_frequencies_follow_the_tempered_softmax():
    rows, temperature = 4000, 0.7
    base = np.array([1.0, 0.0, -1.0, 0.5, 2.0], np.float32)
    lv = np.tile(base, (rows, 1))
    logits = af.input((rows, 5))
    _, ids = run(af.sample(logits, temperature=temperature, seed=123), lv)
    p = np.exp(q(base) / temperature)
    p /= p.sum()
    freq = np.bincount(ids[:, 0], minlength=5) / rows
    # 4000 draws: the standard error of each frequency is below 0.008.
    np.testing.assert_allclose(freq, p, atol=0.03)
    # top_p = 0.5 keeps the smallest prefix of the sorted probabilities reaching 0.5.
    _, ids_p = run(af.sample(logits, temperature=temperature, top_p=0.5, seed=1), lv)
    order = np.argsort(-p)
    keep = order[: int(np.searchsorted(np.cumsum(p[order]), 0.5) + 1)]
    assert set(np.unique(ids_p[:, 0])) <= set(keep.tolist())


def test_sample_rejects_bad_parameters_and_non_finite_logits():
    logits = af.input((2, 4))
    with pytest.raises(ValueError, match="temperature"):
        af.sample(logits, temperature=-1.0)
    with pytest.raises(ValueError, match="top_p"):
        af.sample(logits, top_p=0.0)
    net = af.compile(af.sample(logits * 1e4, temperature=1.0), device="reference")
    with pytest.raises(ValueError, match=r"sample.*(inf|finite)"):
        net(np.array([[10.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], np.float32))


def test_cross_product_and_radius_search_and_fps():
    rng = np.random.default_rng(5)
    av, bv = (q(rng.normal(size=(4, 3))).astype(np.float32) for _ in range(2))
    a, b = af.input((4, 3)), af.input((4, 3))
    _, got = run(af.cross_product(a, b), av, bv)
    close(got, np.cross(av.astype(np.float64), bv.astype(np.float64)))

    pts = q(rng.uniform(-2, 2, size=(12, 3))).astype(np.float32)
    cen = pts[[0, 5, 7]]
    p, c = af.input((12, 3)), af.input((3, 3))
    _, member = run(af.radius_search(p, c, 1.5), pts, cen)
    d2 = ((pts[:, None, :].astype(np.float64) - cen[None, :, :]) ** 2).sum(-1)
    np.testing.assert_array_equal(member, (d2 <= 1.5**2).astype(np.float64))

    _, chosen = run(af.fps(p, 4), pts)
    want, nearest, cur = [], np.full(12, np.inf), 0
    for _ in range(4):
        want.append(pts[cur])
        nearest = np.minimum(nearest, ((pts.astype(np.float64) - pts[cur]) ** 2).sum(-1))
        cur = int(np.argmax(nearest))
    np.testing.assert_array_equal(chosen, np.array(want))
    with pytest.raises(ValueError, match=r"fps.*k must be in 1..=12, got 13"):
        af.fps(p, 13)
    with pytest.raises(ValueError, match="cross_product"):
        af.cross_product(a, af.input((4, 2)))


def test_cross_correlation_and_cost_volume():
    rng = np.random.default_rng(6)
    xv = q(rng.normal(size=(6, 7))).astype(np.float32)
    tv = q(rng.normal(size=(3, 2))).astype(np.float32)
    x, t = af.input((6, 7)), af.input((3, 2))
    _, got = run(af.cross_correlation(x, t), xv, tv)
    win = np.lib.stride_tricks.sliding_window_view(xv.astype(np.float64), (3, 2))
    close(got, np.einsum("ijab,ab->ij", win, tv.astype(np.float64)))

    av, rv = q(rng.normal(size=5)).astype(np.float32), q(rng.normal(size=8)).astype(np.float32)
    aux, ref = af.input((5,)), af.input((8,))
    _, cv = run(af.cost_volume(aux, ref, 3), av, rv)
    want = np.stack([np.abs(av.astype(np.float64) - rv[d : d + 5]) for d in range(4)])
    close(cv, want)
    with pytest.raises(ValueError, match=r"cost_volume.*Wr >= Wa \+ disparity_range \(4\)"):
        af.cost_volume(aux, ref, 4)


@pytest.mark.parametrize("dimension, axis", [("width", 3), ("height", 2)])
def test_minmax_norm(dimension, axis):
    rng = np.random.default_rng(7)
    xv = q(rng.normal(size=(2, 3, 4, 5)) * 4).astype(np.float32)
    x = af.input((2, 3, 4, 5))
    _, got = run(af.minmax_norm(x, dimension, eps=1e-3), xv, route="host")
    lo, hi = xv.min(axis=axis, keepdims=True), xv.max(axis=axis, keepdims=True)
    close(got, (xv - lo.astype(np.float64)) / (hi.astype(np.float64) - lo + 1e-3))
    with pytest.raises(ValueError, match="dimension must be"):
        af.minmax_norm(x, "channel")
    with pytest.raises(ValueError, match="eps must be finite and > 0"):
        af.minmax_norm(x, "width", eps=0.0)


def numpy_space_to(xv, bh, bw, to_batch):
    n, c, h, w = xv.shape
    blocks = xv.reshape(n, c, h // bh, bh, w // bw, bw).transpose(3, 5, 0, 1, 2, 4)
    blocks = blocks.reshape(bh * bw, n, c, h // bh, w // bw)
    if to_batch:
        return blocks.reshape(bh * bw * n, c, h // bh, w // bw)
    return blocks.transpose(1, 0, 2, 3, 4).reshape(n, bh * bw * c, h // bh, w // bw)


@pytest.mark.parametrize("to_batch", [True, False])
def test_block_rearranges_follow_the_tensorflow_order_and_invert(to_batch):
    rng = np.random.default_rng(8)
    xv = q(rng.normal(size=(2, 3, 4, 6))).astype(np.float32)
    x = af.input((2, 3, 4, 6))
    there = af.space_to_batch(x, 2, 3) if to_batch else af.space_to_channel(x, 2, 3)
    back = af.batch_to_space(there, 2, 3) if to_batch else af.channel_to_space(there, 2, 3)
    _, (got, again) = run([there, back], xv)
    np.testing.assert_array_equal(got, numpy_space_to(xv, 2, 3, to_batch))
    np.testing.assert_array_equal(again, xv)
    with pytest.raises(ValueError, match="must divide by the blocks 3 x 3"):
        af.space_to_batch(x, 3, 3)


def test_flatten_input_view_dynamic_slice_and_scaled_elementwise():
    rng = np.random.default_rng(9)
    xv = q(rng.normal(size=(3, 4, 5))).astype(np.float32)
    zv = q(rng.normal(size=(3, 4, 5))).astype(np.float32)
    x, z = af.input((3, 4, 5)), af.input((3, 4, 5))
    start = af.input((3,), dtype="int32")
    outs = [
        af.flatten(x),
        af.input_view(x, 7, 11),
        af.dynamic_slice(x, start, [2, 2, 3]),
        af.scaled_elementwise(x, z, "sub", 0.5),
        af.scaled_elementwise(x, z, "max", -2.0),
    ]
    net, (flat, view, box, sub, mx) = run(outs, xv, zv, np.array([1, 2, 1], np.int32), route="host")
    np.testing.assert_array_equal(flat, xv.ravel())
    np.testing.assert_array_equal(view, xv.ravel()[7:18])
    np.testing.assert_array_equal(box, xv[1:3, 2:4, 1:4])
    close(sub, 0.5 * (xv.astype(np.float64) - zv))
    close(mx, -2.0 * np.maximum(xv, zv).astype(np.float64))
    with pytest.raises(ValueError, match=r"dynamic_slice.*start\[1\] = 3"):
        net(xv, zv, np.array([0, 3, 0], np.int32))
    with pytest.raises(ValueError, match="input_view"):
        af.input_view(x, 50, 11)
    with pytest.raises(ValueError, match="op must be one of"):
        af.scaled_elementwise(x, z, "div")


def test_sdpa_with_a_runtime_mask_runs_on_the_host():
    rng = np.random.default_rng(11)
    qv, kv = q(rng.normal(size=(2, 3, 4))), q(rng.normal(size=(2, 5, 4)))
    vv, mv = q(rng.normal(size=(2, 5, 6))), q(rng.normal(size=(3, 5)))
    qt, kt, vt, mt = af.input((2, 3, 4)), af.input((2, 5, 4)), af.input((2, 5, 6)), af.input((3, 5))
    net, got = run(af.sdpa(qt, kt, vt, attn_mask=mt), *(a.astype(np.float32) for a in (qv, kv, vv, mv)), route="host")
    s = qv @ kv.transpose(0, 2, 1) / 2.0 + mv
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    close(got, p @ vv)
    assert [st["ops"] for st in net.stages] == [["sdpa"]]
    with pytest.raises(ValueError, match="sdpa"):
        af.sdpa(qt, kt, af.input((2, 4, 6)), attn_mask=mt)


def test_wrong_index_dtypes_and_out_of_range_indices_are_typed_errors():
    x = af.input((3, 4))
    fidx = af.input((3, 4))
    with pytest.raises(TypeError, match=r"scatter: input 1 is fp16"):
        af.scatter(x, fidx, x)
    with pytest.raises(TypeError, match=r"take_along_axis: input 1 is fp16"):
        af.take_along_axis(x, fidx)
    with pytest.raises(TypeError, match=r"scatter.*indices must be a Tensor"):
        af.scatter(x, [0, 1], x)
    with pytest.raises(ValueError, match='reduce must be None or "add"'):
        af.scatter(x, af.input((3, 4), dtype="int32"), x, reduce="mul")
    idx = af.input((1, 4), dtype="int32")
    upd = af.input((1, 4))
    net = af.compile(af.scatter(x, idx, upd, axis=0), device="reference")
    with pytest.raises(ValueError, match=r"scatter.*index 3"):
        net(np.zeros((3, 4), np.float32), np.array([[0, 3, 0, 0]], np.int32), np.ones((1, 4), np.float32))
    rows = af.input((3, 1))
    put = af.compile(af.index_put(x, af.input((1,), dtype="int32"), rows, axis=1), device="reference")
    with pytest.raises(ValueError, match=r"index_put.*index -5"):
        put(np.zeros((3, 4), np.float32), np.ones((3, 1), np.float32), np.array([-5], np.int32))
