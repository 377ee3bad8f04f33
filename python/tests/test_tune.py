"""af.tune / af.tune_precision on a tiny graph with real measurements on the reference
executor: structure of the result, the gate's invariants, the cache and its corrupt-file path."""

import json

import aneforge as af
import numpy as np
import pytest


def _graph(seed):
    w = np.sin(np.arange(64 * 64, dtype=np.float32) * 0.37 + seed).reshape(64, 64) * 0.2
    return (af.input([1, 64]) @ af.constant(w)).sum(axes=[1], keepdims=True)


def test_tune_gates_caches_and_returns_the_chosen_model(tmp_path, monkeypatch):
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    t = af.tune(_graph(0.0), budget=8, reps=3, device="reference")
    assert isinstance(t, af.Tuned) and not t.from_cache and t.executor == "reference"
    rows = {r["variant"]: r for r in t.table}
    assert rows["baseline"]["error"] == 0.0 and rows["baseline"]["accepted"]
    base = rows["baseline"]["measured_us"]
    for r in t.table:
        if r["accepted"]:
            assert r["error"] <= 5e-3
            if r["lossy"]:
                assert base / r["measured_us"] >= 1.10
    assert rows[t.chosen]["accepted"]
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    ref = af.compile(_graph(0.0), device="reference")(x)
    assert np.max(np.abs(t.model(x) - ref)) <= 5e-3 * np.max(np.abs(ref)) + 1e-6

    hit = af.tune(_graph(1.0), budget=8, reps=3, device="reference")
    assert hit.from_cache and hit.chosen == t.chosen
    assert [(r["variant"], r["accepted"]) for r in hit.table] == [(r["variant"], r["accepted"]) for r in t.table]

    (tmp_path / "autotune.json").write_text("[not json")
    again = af.tune(_graph(0.0), budget=1, reps=3, device="reference")
    assert not again.from_cache and again.chosen == "baseline"
    assert len(json.loads((tmp_path / "autotune.json").read_text())) == 1


def test_tune_precision():
    t = af.tune_precision(_graph(0.0), target_error=0.5)
    assert {r["variant"] for r in t.table} >= {"baseline", "sum_via_matmul"}
    assert [r for r in t.table if r["variant"] == t.chosen][0]["error"] <= 0.5
    with pytest.raises(ValueError, match="no variant meets target_error"):
        af.tune_precision(_graph(0.0), target_error=1e-12)


def _minmax_f64(x):
    """Min-max normalisation along the last axis in float64 (the oracle)."""
    lo, hi = x.min(axis=-1, keepdims=True), x.max(axis=-1, keepdims=True)
    return (x - lo) / (hi - lo + 1e-3)


def test_tune_ranks_the_routes_of_a_host_op_and_gates_them(tmp_path, monkeypatch):
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    y = af.minmax_norm(af.input([1, 2, 4, 8]) * 3.0, "width", 1e-3) * 2.0
    t = af.tune(y, budget=8, reps=3, device="reference")
    rows = {r["variant"]: r for r in t.table}
    assert {"baseline", "route_fused", "route_host"} <= set(rows)
    for name in ["route_fused", "route_host"]:
        r = rows[name]
        assert not r["lossy"] and r["measured_us"] > 0
        assert r["accepted"] == (r["error"] is not None and r["error"] <= 5e-3), r
    assert rows[t.chosen]["accepted"]
    if t.chosen.startswith("route_"):
        assert t.options["route"] == t.chosen.removeprefix("route_")
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 2, 4, 8)
    want = _minmax_f64(x.astype(np.float64) * 3.0) * 2.0
    for route in ["fused", "host"]:
        got = af.compile(y, device="reference", route=route)(x)
        np.testing.assert_allclose(got, want, atol=4e-3)
    np.testing.assert_allclose(t.model(x), want, atol=4e-3)


def test_tune_lists_no_route_variant_without_a_routable_op(tmp_path, monkeypatch):
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    t = af.tune(_graph(0.0), budget=2, reps=3, device="reference")
    assert not any(r["variant"].startswith("route_") for r in t.table)
