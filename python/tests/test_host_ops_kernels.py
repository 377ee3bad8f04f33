"""The host kernels behind sort / topk / take on every size class, bit for bit against NumPy
oracles (stable argsort, np.take) on random fp16 data with ties, NaN (two payloads), +-inf and
-0.0; the plan's values-only sort stage; routes kept for a fully routed graph; compress on a
plan directory."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from aneforge import _core

# Lane lengths: below the radix threshold, the sorting network (16..512), the radix sort, and
# beyond the packed-position limit of the full sort (65536).
LANES = [1, 5, 16, 63, 64, 100, 384, 512, 513, 4096, 70_000]


def specials(n, seed):
    """[rows, n] float32 of fp16 values: ties (small integers / 4), NaNs with two payloads
    (one negative), +-inf, -0.0 and +0.0 at random places."""
    rng = np.random.default_rng(seed)
    rows = 3 if n < 10_000 else 1
    x = (rng.integers(-12, 13, size=(rows, n)) / 4.0).astype(np.float32)
    mixed = rng.random(x.shape) < 0.3
    x[mixed] = rng.standard_normal(int(mixed.sum())).astype(np.float16)
    picks = rng.random(x.shape)
    x[picks < 0.05] = -0.0
    x[(picks >= 0.05) & (picks < 0.08)] = 0.0
    x[(picks >= 0.08) & (picks < 0.10)] = np.inf
    x[(picks >= 0.10) & (picks < 0.12)] = -np.inf
    bits = x.view(np.uint32)
    bits[(picks >= 0.12) & (picks < 0.14)] = 0x7FC00000
    bits[(picks >= 0.14) & (picks < 0.15)] = 0xFFC00123
    return x


def stable_order(x, descending):
    """Stable order of each row: by value, NaN above every number, -0 equal to +0."""

    def key(v):
        if v != v:
            return (0 if descending else 1, 0.0)
        return (1 if descending else 0, -v if descending else v)

    return np.array([sorted(range(len(r)), key=lambda i, r=r: key(r[i])) for r in x.tolist()])


@pytest.mark.parametrize("n", LANES)
@pytest.mark.parametrize("descending", [False, True])
def test_values_only_sort_is_the_stable_sort_bit_for_bit(n, descending):
    x = specials(n, n)
    order = stable_order(x, descending)
    want = np.take_along_axis(x, order, -1).view(np.uint32)
    got = _core._kernel_sort_values(x, descending)
    np.testing.assert_array_equal(got.view(np.uint32), want)
    values, perm = _core._kernel_sort(x, descending)
    np.testing.assert_array_equal(values.view(np.uint32), want)
    np.testing.assert_array_equal(perm, order)
    # Values that are not fp16 numbers take the comparison path, with the same order.
    y = np.where(np.isfinite(x) & (x != 0), x * np.float32(1.0001), x).astype(np.float32)
    want_y = np.take_along_axis(y, stable_order(y, descending), -1).view(np.uint32)
    np.testing.assert_array_equal(_core._kernel_sort_values(y, descending).view(np.uint32), want_y)


@pytest.mark.parametrize("n", [17, 100, 384, 512])
@pytest.mark.parametrize("descending", [False, True])
def test_values_only_sort_of_many_rows_is_the_stable_sort_bit_for_bit(n, descending):
    # 37 rows: two batches of 16 sorted together and 5 left over; row 3 holds a value fp16 does
    # not, so it leaves its batch for the comparison path.
    x = np.concatenate([specials(n, s) for s in range(13)])[:37]
    x[3, 1] = np.float32(1.0001)
    want = np.take_along_axis(x, stable_order(x, descending), -1).view(np.uint32)
    np.testing.assert_array_equal(_core._kernel_sort_values(x, descending).view(np.uint32), want)


@pytest.mark.parametrize("n, m", [(1, 1), (5, 7), (384, 8), (384, 384), (4096, 9), (50257, 4099)])
def test_take_kernel_matches_numpy_take_with_negative_indices(n, m):
    rng = np.random.default_rng(n + m)
    x = specials(n, m)
    idx = rng.integers(-n, n, size=m).astype(np.int32)
    got = _core._kernel_take(x, idx)
    np.testing.assert_array_equal(got.view(np.uint32), np.take(x, idx, axis=1).view(np.uint32))
    nonneg = np.abs(idx) % n
    np.testing.assert_array_equal(_core._kernel_take(x, nonneg.astype(np.int32)), np.take(x, nonneg, axis=1))
    for bad in (n, -n - 1):
        idx[m // 2] = bad
        with pytest.raises(ValueError, match=f"index {bad} "):
            _core._kernel_take(x, idx)


@pytest.mark.parametrize("axis", [0, 1])
def test_plan_gather_over_long_index_lists_matches_numpy(axis):
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((40, 50)).astype(np.float16).astype(np.float32)
    idv = rng.integers(-xv.shape[axis], xv.shape[axis], size=37).astype(np.int32)
    x, ids = af.input(xv.shape), af.input((37,), dtype="int32")
    net = af.compile(af.take(x * 1.0, ids, axis=axis) + 0.0, device="reference")
    np.testing.assert_array_equal(net(xv, idv), np.take(xv, idv, axis=axis))


def test_a_sort_whose_permutation_nobody_reads_runs_values_only():
    xv = specials(300, 9)[:, :300].copy()
    xv[~np.isfinite(xv)] = 1.5  # plan inputs must be finite; ties and -0.0 stay
    x = af.input(xv.shape)
    net = af.compile([af.sort(x * 1.0, descending=True), af.argsort(x, axis=1)], device="reference")
    ops = [s["ops"] for s in net.stages if s["kind"] == "host"]
    assert ["sort_values"] in ops and ["sort"] in ops, net.stages
    values, perm = net(xv)
    order = stable_order(xv, True)
    np.testing.assert_array_equal(values.view(np.uint32), np.take_along_axis(xv, order, -1).view(np.uint32))
    np.testing.assert_array_equal(perm, stable_order(xv, False))


def test_routes_of_a_fully_routed_graph_survive_a_reload(tmp_path):
    x = af.input((2, 8))
    net = af.compile(af.flatten(x) * 2.0, device="reference", build_dir=str(tmp_path / "p"))
    assert net.routes == ["routed fused: flatten (removes 1 cut)"]
    back = af.load(str(tmp_path / "p"), device="reference")
    assert back.routes == net.routes
    assert [s["kind"] for s in back.stages] == ["region"]
    xv = np.arange(16, dtype=np.float32).reshape(2, 8)
    np.testing.assert_array_equal(back(xv), xv.reshape(-1) * 2.0)
    assert net.save_mlpackage(str(tmp_path / "m.mlpackage")).endswith("m.mlpackage")
    with pytest.raises(NotImplementedError, match="segmented plan"):
        af.load(str(tmp_path / "p"), device="reference", compress="int8")
