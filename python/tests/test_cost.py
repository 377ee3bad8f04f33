"""af.estimate / af.project_peak / af.cross_compile_check: structure and hand-computed values
(timing accuracy is measured in bench/cost_model.py, not here)."""

import warnings

import aneforge as af
import numpy as np
import pytest


def _matmul():
    x = af.input([2, 3, 4])
    return x @ af.constant(np.full((4, 5), 0.5, np.float32))


def test_analytic_estimate_on_an_anchor_matches_the_formula(monkeypatch):
    monkeypatch.delenv("ANEFORGE_QUIET", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        e = af.estimate(_matmul(), target="h14")
    assert isinstance(e, af.Estimate)
    assert e.provenance == "measured anchor h14" and e.target == "h14" and e.floor_us == 100.0
    (row,) = e.ops
    assert (row["op"], row["kind"], row["flops"], row["bytes"]) == ("matmul", "gemm", 240, 148)
    assert row["input_shapes"] == [[2, 3, 4], [4, 5]] and row["output_shapes"] == [[2, 3, 5]]
    compute = 240 / (7.3e6 * (240 / 1.8e10) ** 0.38)
    assert e.micros == pytest.approx(100 + max(148 / 48e3, compute), rel=1e-12)
    assert any(issubclass(w.category, af.DispatchFloorWarning) for w in caught)


def test_warnings_are_silenceable(monkeypatch):
    monkeypatch.delenv("ANEFORGE_QUIET", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = af.estimate(_matmul(), target="h14", warn=False)
        assert e.warnings and e.warnings[0].startswith("dispatch floor")
        monkeypatch.setenv("ANEFORGE_NO_COST_WARNINGS", "1")
        af.estimate(_matmul(), target="h14")


def test_precision_warning_from_narrow_sums(monkeypatch):
    monkeypatch.delenv("ANEFORGE_QUIET", raising=False)
    y = af.input([1, 1024]).sum(axes=[1], keepdims=True)
    with pytest.warns(af.PrecisionWarning, match="1024"):
        af.estimate(y, target="h17s")


def test_compile_issues_the_precision_warning_unless_silenced(monkeypatch):
    monkeypatch.delenv("ANEFORGE_QUIET", raising=False)
    y = af.input([1, 1024]).sum(axes=[1], keepdims=True)
    with pytest.warns(af.PrecisionWarning, match="1024"):
        af.compile(y, device="reference")
    monkeypatch.setenv("ANEFORGE_NO_COST_WARNINGS", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        af.compile(y, device="reference")


def test_host_mode_reports_its_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    e = af.estimate(_matmul(), warn=False)
    assert e.target is None and e.provenance == "uncalibrated defaults" and e.floor_us == 70.0
    assert e.micros == pytest.approx(70 + 240 / 1.45e7, rel=1e-12)
    (tmp_path / "host_cost_model.json").write_text("{not json")
    e = af.estimate(_matmul(), warn=False)
    assert e.provenance == "uncalibrated defaults"
    assert any("ignoring the host calibration" in w for w in e.warnings)
    (tmp_path / "host_cost_model.json").write_text(
        '{"floor_us": 10, "bytes_per_us": 100, "gemm_flops_per_us": 1000,'
        ' "conv_flops_per_us": 1, "elementwise_per_us": 1}'
    )
    e = af.estimate(_matmul(), warn=False)
    assert e.provenance == "calibrated host" and e.micros == pytest.approx(10.24, rel=1e-12)


def test_estimate_of_a_compiled_model(tmp_path, monkeypatch):
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    net = af.compile(_matmul(), device="reference")
    e = af.estimate(net, target="h13", warn=False)
    assert e.provenance == "measured anchor h13" and [r["op"] for r in e.ops] == ["matmul"]


def test_scaled_and_projected_targets():
    assert af.estimate(_matmul(), "h17d", warn=False).provenance.startswith("scaled from h17s")
    assert af.estimate(_matmul(), "h16", warn=False).provenance.startswith("projected from h17s")
    assert af.estimate(_matmul(), "A13", warn=False).target == "h13"


def test_bad_targets_and_empty_graphs():
    with pytest.raises(ValueError, match="'m1' is not a known ANE arch"):
        af.estimate(_matmul(), "m1")
    with pytest.raises(ValueError, match="no ANE family"):
        af.project_peak("u2")


def test_project_peak():
    p = af.project_peak("h13")
    assert (p["tflops"], p["rel_m1"], p["cores"], p["ghz"]) == (1.8, 1.0, 4, 1.428)
    p = af.project_peak("h17s")
    assert p["rel_m1"] == pytest.approx(16 * 1.89 / (4 * 1.428), rel=1e-12)
    assert p["tflops"] == pytest.approx(1.8 * 16 * 1.89 / (4 * 1.428), rel=1e-12)


def test_cross_compile_check_reports_static_result_and_skipped_compile():
    x = af.input([1, 8])
    r = af.cross_compile_check(x.sin(), "h13")
    assert r["family"] == "A13" and r["compiled"] is None
    assert "compile step not run" in r["compile_note"] and "macOS" in r["compile_note"]
    assert r["arch"] == "h13" and r["caches"] == []
    assert [e["op"] for e in r["decompose"]] == ["sin"]
    with pytest.raises(ValueError, match="not a known ANE arch"):
        af.cross_compile_check(x.relu(), "h99")
