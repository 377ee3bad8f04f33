"""Host ops (argmax/argmin, topk, sort/argsort, runtime gather/take/embedding) against NumPy
oracles, run as segmented plans on the reference executor; int32 ports; plan stages; the
gradients of take/embedding and topk values against finite differences in float64 NumPy."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest


def q(a):
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def run(outputs, *inputs, **options):
    net = af.compile(outputs, device="reference", **options)
    return net, net(*inputs)


def data(shape, seed):
    # Distinct fp16 values (no ties), so every index oracle is unambiguous.
    n = int(np.prod(shape))
    vals = np.random.default_rng(seed).permutation(n).astype(np.float32) / 8.0 - n / 16.0
    return vals.reshape(shape)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_argmin_match_numpy(axis, keepdims):
    xv = data((3, 4, 5), 1)
    x = af.input((3, 4, 5))
    _, (amax, amin) = run([af.argmax(x, axis, keepdims), af.argmin(x, axis, keepdims)], xv)
    assert amax.dtype == np.int32
    np.testing.assert_array_equal(amax, np.argmax(xv, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(amin, np.argmin(xv, axis=axis, keepdims=keepdims))


def test_argmax_ties_take_the_first():
    x = af.input((1, 4))
    _, got = run(af.argmax(x, 1), np.array([[1.0, 3.0, 3.0, 0.0]], np.float32))
    np.testing.assert_array_equal(got, [1])


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_numpy_sort(largest):
    xv = data((4, 9), 2)
    x = af.input((4, 9))
    v, i = af.topk(x * 2.0, 3, axis=-1, largest=largest)
    _, (gv, gi) = run([v, i], xv)
    ref = q(xv) * 2.0
    order = np.argsort(-ref if largest else ref, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(gi, order)
    np.testing.assert_array_equal(gv, np.take_along_axis(ref, order, axis=-1))


def test_sort_and_argsort_are_stable_both_ways():
    xv = np.array([[2.0, -1.0, 2.0, 0.5, -1.0, 7.0]], np.float32)
    x = af.input((1, 6))
    outs = [af.sort(x), af.argsort(x), af.sort(x, descending=True), af.argsort(x, descending=True)]
    _, (s, a, sd, ad) = run(outs, xv)
    np.testing.assert_array_equal(s, np.sort(xv, axis=-1))
    np.testing.assert_array_equal(a, np.argsort(xv, axis=-1, kind="stable"))
    np.testing.assert_array_equal(ad, np.argsort(-xv, axis=-1, kind="stable"))
    np.testing.assert_array_equal(sd, np.take_along_axis(xv, ad, axis=-1))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_runtime_gather_matches_numpy_take(axis):
    xv = data((3, 4, 5), 3)
    idx = np.array([[2, 0], [-1, 1]], np.int32)
    x = af.input((3, 4, 5))
    ids = af.input((2, 2), dtype="int32")
    net, got = run(af.gather(x + 1.0, ids, axis=axis), xv, idx)
    np.testing.assert_array_equal(got, np.take(q(xv) + 1.0, idx, axis=axis))
    assert [s["kind"] for s in net.stages] == ["region", "host"]
    assert net.stages[1]["ops"] == ["gather"] and net.stages[1]["executor"] == "host"


def test_embedding_rows_and_out_of_range_error():
    table = data((6, 3), 4)
    ids = af.input((2, 3), dtype="int32")
    t = af.input((6, 3))
    net = af.compile(af.embedding(ids, t) * 2.0, device="reference")
    idv = np.array([[5, 0, 2], [1, 1, 4]], np.int64)
    np.testing.assert_array_equal(net(idv, table), table[idv] * 2.0)
    with pytest.raises(ValueError, match=r"gather.*index 6 .*size 6"):
        net(np.array([[0, 6, 0], [0, 0, 0]], np.int32), table)
    with pytest.raises(ValueError, match="int32 range"):
        net(np.array([[2**31, 0, 0], [0, 0, 0]], np.int64), table)
    with pytest.raises(TypeError, match="int32 port"):
        net(np.zeros((2, 3), np.float32), table)


def test_int32_ports_are_exact_over_the_int32_range():
    ids = af.input((4,), dtype="int32")
    x = af.input((3,))
    # The index path is exact: gather reports the exact out-of-range value it saw.
    net = af.compile(af.take(x, ids), device="reference")
    for big in (2**31 - 1, -(2**31)):
        with pytest.raises(ValueError, match=str(big)):
            net(np.array([0, 1, big, 2], np.int32), np.ones(3, np.float32))
    got = net(np.array([2, -3, 1, 0], np.int32), np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(got, [3.0, 1.0, 2.0, 1.0])


def test_cast_between_fp16_and_int32():
    x = af.input((4,))
    back = af.cast(af.cast(x, "int32"), "fp16")
    _, got = run(back, np.array([2.75, -2.75, 100.5, 0.25], np.float32))
    np.testing.assert_array_equal(got, np.trunc([2.75, -2.75, 100.5, 0.25]))


def test_int32_is_refused_by_fused_ops_and_topk_checks_k():
    ids = af.input((3,), dtype="int32")
    with pytest.raises(TypeError, match="int32"):
        ids.relu()
    with pytest.raises(ValueError, match="k = 7"):
        af.topk(af.input((2, 6)), 7)


def test_plan_directory_loads_and_segmented_mlpackage_is_not_implemented(tmp_path):
    x = af.input((2, 5))
    v, _ = af.topk(x.relu(), 2)
    net = af.compile(v * 3.0, device="reference", build_dir=str(tmp_path / "p"))
    xv = data((2, 5), 5)
    ref = np.sort(np.maximum(q(xv), 0), axis=-1)[:, ::-1][:, :2] * 3.0
    np.testing.assert_array_equal(net(xv), ref)
    back = af.load(str(tmp_path / "p"), device="reference")
    np.testing.assert_array_equal(back(xv), ref)
    assert [s["kind"] for s in back.stages] == ["region", "host", "region"]
    with pytest.raises(NotImplementedError, match="topk"):
        net.save_mlpackage(str(tmp_path / "m.mlpackage"))


def fd_grad(f, x, eps=1e-3):
    g = np.zeros_like(x)
    for k in range(x.size):
        d = np.zeros_like(x)
        d.flat[k] = eps
        g.flat[k] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def test_gradients_of_embedding_and_topk_values_match_finite_differences():
    table_v = data((5, 3), 6).astype(np.float64)
    idv = np.array([4, 1, 4, 0], np.int32)
    w = np.arange(1.0, 13.0).reshape(4, 3) / 4.0
    table = af.input((5, 3))
    ids = af.input((4,), dtype="int32")
    loss = (af.embedding(ids, table) * af.constant(w)).sum()
    v, _ = af.topk(table, 2, axis=0)
    loss2 = (v * af.constant(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))).sum()
    grads = af.backward(loss + loss2, [table])
    net = af.compile(grads[table], device="reference", precision="fp32")
    got = net(table_v.astype(np.float32), idv)

    def f(t):
        top = np.sort(t, axis=0)[::-1][:2]
        return (t[idv] * w).sum() + (top * np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum()

    np.testing.assert_allclose(got, fd_grad(f, table_v), rtol=1e-3, atol=1e-3)
