"""Routing (the route compile option): a host op with a fused decomposition compiles to one
program under route="auto" (when that removes a cut) and "fused", to a plan under "host", with
the same numbers against float64 NumPy oracles; Model.routes reports each decision."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest


def q(a):
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def kinds(net):
    return [s["kind"] for s in net.stages]


def minmax_oracle(xv):
    lo, hi = xv.min(axis=3, keepdims=True), xv.max(axis=3, keepdims=True)
    return (q(xv) - lo) / (hi - lo + 1e-3) * 2.0


ROUTED = [
    (
        "minmax_norm",
        lambda x: af.minmax_norm(x, "width", eps=1e-3) * 2.0,
        minmax_oracle,
        (2, 3, 4, 5),
    ),
    ("flatten", lambda x: af.flatten(x) * 2.0, lambda xv: q(xv).ravel() * 2.0, (2, 3, 4)),
    (
        "gather",
        lambda x: af.take(x, af.cast(af.constant(np.array([[2.0, 0.0], [-1.0, 1.0]])), "int32"), axis=1) * 2.0,
        lambda xv: np.take(q(xv), [[2, 0], [-1, 1]], axis=1) * 2.0,
        (3, 4),
    ),
]


@pytest.mark.parametrize("name, build, oracle, shape", ROUTED, ids=[r[0] for r in ROUTED])
def test_routable_op_is_one_program_under_auto_and_fused_and_a_plan_under_host(name, build, oracle, shape):
    xv = (np.random.default_rng(len(name)).permutation(int(np.prod(shape))) / 4.0 - 3.0).reshape(shape)
    xv = xv.astype(np.float32)
    want = oracle(xv)
    for route in ("auto", "fused"):
        net = af.compile(build(af.input(shape)), device="reference", route=route)
        assert kinds(net) == ["region"], (route, net.stages)
        assert net.routes == [f"routed fused: {name} (removes 1 cut)"]
        np.testing.assert_allclose(net(xv), want, rtol=2e-3, atol=2e-3)
    net = af.compile(build(af.input(shape)), device="reference", route="host")
    assert "host" in kinds(net) and [name] in [s["ops"] for s in net.stages]
    assert net.routes == [f'kept on host: {name} (route="host")']
    np.testing.assert_allclose(net(xv), want, rtol=2e-3, atol=2e-3)


def test_sdpa_with_a_runtime_mask_routes_to_fused_ops():
    rng = np.random.default_rng(3)
    vals = [q(rng.normal(size=s)) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 6), (3, 5)]]
    s = vals[0] @ vals[1].transpose(0, 2, 1) / 2.0 + vals[3]
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ vals[2]
    for route, stages in [("auto", ["region"]), ("host", ["host"])]:
        ins = [af.input(v.shape) for v in vals]
        net = af.compile(af.sdpa(*ins[:3], attn_mask=ins[3]), device="reference", route=route)
        assert kinds(net) == stages
        np.testing.assert_allclose(net(*(v.astype(np.float32) for v in vals)), want, rtol=5e-3, atol=5e-3)


def test_auto_keeps_an_op_on_the_host_when_no_cut_goes_away():
    x = af.input((1, 1, 2, 4))
    net = af.compile(
        [af.minmax_norm(x, "width"), af.sort(x, axis=3)],
        device="reference",
        route="auto",
    )
    assert net.routes == ["kept on host: minmax_norm (removes no cut)"]
    assert sorted(op for s in net.stages if s["kind"] == "host" for op in s["ops"]) == ["minmax_norm", "sort_values"]
    fused = af.compile([af.minmax_norm(x, "width"), af.sort(x, axis=3)], device="reference", route="fused")
    assert fused.routes == ["routed fused: minmax_norm (removes 0 cuts)"]


def argmax_oracle(xv, axis, largest):
    """NumPy's rule: the first extreme, NaN counting as the extreme (np.argmax/np.argmin)."""
    return np.argmax(xv, axis=axis) if largest else np.argmin(xv, axis=axis)


@pytest.mark.parametrize("largest", [True, False])
def test_argmax_routes_fused_up_to_2048_with_ties_nan_and_signed_zero(largest):
    rng = np.random.default_rng(7)
    xv = np.round(rng.normal(size=(6, 2048)) * 2).astype(np.float32)  # many ties
    xv[2] = 0.0
    xv[2, 3] = -0.0
    xv[3, 2047] = 1000.0 if largest else -1000.0
    # Inputs must be finite: NaN and +-inf are made in the graph, from 0/1 masks (fp16 overflow).
    nan_at, inf_at = np.zeros_like(xv), np.zeros_like(xv)
    nan_at[1, [5, 900]] = 1.0
    inf_at[4, [7, 8]] = 1.0
    sign = 1.0 if largest else -1.0
    want_x = xv + np.where(nan_at > 0, np.nan, 0.0) + np.where(inf_at > 0, sign * np.inf, 0.0)
    op = af.argmax if largest else af.argmin
    name = "argmax" if largest else "argmin"

    def graph(axis, keep):
        x, m, k = (af.input(xv.shape) for _ in range(3))
        big = m * 60000.0 * 2.0
        y = x + (big - big) + k * (60000.0 * sign) * 2.0
        return op(y, axis=axis, keepdims=keep)

    for axis, keep in [(1, False), (0, True)]:
        want = np.argmax(want_x, axis=axis) if largest else np.argmin(want_x, axis=axis)
        net = af.compile(graph(axis, keep), device="reference")
        assert kinds(net) == ["region"] and net.routes == [f"routed fused: {name} (removes 1 cut)"]
        got = net(xv, nan_at, inf_at)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        host = af.compile(graph(axis, keep), device="reference", route="host")
        np.testing.assert_array_equal(host(xv, nan_at, inf_at).reshape(want.shape), want)


def test_argmax_over_more_than_2048_stays_on_the_host_and_the_routes_say_why(tmp_path):
    xv = np.zeros((1, 2049), np.float32)
    xv[0, 2048] = 1.0
    net = af.compile(af.argmax(af.input(xv.shape), axis=1), device="reference", build_dir=str(tmp_path))
    want = ["kept on host: argmax (axis of 2049 > 2048: fp16 index numbers are exact only up to 2048)"]
    assert kinds(net) == ["host"] and net.routes == want
    assert af.load(str(tmp_path), device="reference").routes == want
    np.testing.assert_array_equal(net(xv), [2048])


def test_routes_survive_a_reload_of_the_plan_directory(tmp_path):
    x = af.input((2, 8))
    net = af.compile([af.flatten(x), af.sort(x, axis=1)], device="reference", route="host", build_dir=str(tmp_path))
    assert net.routes == ['kept on host: flatten (route="host")']
    assert af.load(str(tmp_path), device="reference").routes == net.routes


def test_route_option_values_are_checked():
    assert af.CompileOptions().route == "auto"
    assert af.CompileOptions(route="host").route == "host"
    with pytest.raises(ValueError, match='route must be "auto", "fused" or "host", got "gpu"'):
        af.compile(af.flatten(af.input((2, 2))), device="reference", route="gpu")
    plain = af.compile(af.input((2, 2)) * 2.0, device="reference")
    assert plain.routes == []
