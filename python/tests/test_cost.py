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
    with pytest.raises(ValueError, match="'m9x' is not a known ANE arch"):
        af.estimate(_matmul(), "m9x")
    with pytest.raises(ValueError, match="no ANE family"):
        af.project_peak("u2")
    x = af.input([4])
    for y in (x, [x, af.constant(np.ones(3, np.float32))]):
        for target in (None, "h14"):
            with pytest.raises(ValueError, match="no compute nodes"):
                af.estimate(y, target)


def test_m_series_chip_names_are_targets():
    # M<n> is h<n + 12>; the measured M5 Pro is h17s.
    assert af.estimate(_matmul(), "M1", warn=False).target == "h13"
    assert af.estimate(_matmul(), "m2 pro", warn=False).provenance == "measured anchor h14"
    assert af.project_peak("M4")["arch"] == "h16"
    assert af.project_peak("M5 Pro")["arch"] == "h17s"


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


def test_cross_compile_check_accepts_chip_names():
    # The names estimate and project_peak accept: M<n> is h<n + 12>, the M5 Pro h17s.
    x = af.input([1, 8])
    for chip, arch, family in [("M1", "h13", "A13"), ("m4", "h16", "A16"), ("M5 Pro", "h17s", "A16")]:
        r = af.cross_compile_check(x.sin(), chip)
        assert (r["target"], r["arch"], r["family"]) == (chip, arch, family)
        assert af.preflight(x.sin(), chip)["family"] == family
    with pytest.raises(ValueError, match=r"'M7' is not a known ANE arch; expected one of h11, .* M-series chip M1"):
        af.cross_compile_check(x.relu(), "M7")


def test_ops_folded_into_a_conv_cost_their_elements_at_the_epilogue_rate(tmp_path, monkeypatch):
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    # conv 2→3 (3×3, pad 1) on 4×4: 48 outputs × 18 multiply-adds × 2 = 1728 flops; the relu
    # (48 elements) runs inside the conv's step.
    x = af.input([1, 2, 4, 4])
    y = af.conv(x, np.full((3, 2, 3, 3), 0.1, np.float32), pad=[1, 1, 1, 1]).relu()
    (tmp_path / "host_cost_model.json").write_text(
        '{"floor_us": 0, "bytes_per_us": 100, "gemm_flops_per_us": 1, "conv_flops_per_us": 1728,'
        ' "elementwise_per_us": 4, "epilogue_per_us": 16}'
    )
    e = af.estimate(y, warn=False)
    conv, relu = e.ops
    assert conv["folded_into"] is None and relu["folded_into"] == conv["node"]
    # conv 1728 / 1728 = 1 µs; relu 48 / 16 = 3 µs (unfolded it would be 48 / 4 = 12 µs).
    assert e.micros == pytest.approx(4.0, rel=1e-12)


def test_a_plan_on_an_ane_target_pays_the_projected_cut():
    x = af.input([2, 5])
    vals, _ = af.topk(x * 2.0, 2)
    e = af.estimate(vals + 1.0, target="h14", warn=False)
    # One host stage: 200 µs projected plus its 44 crossing bytes at 48e3 B/µs.
    assert e.regions == 2 and e.cut_us == pytest.approx(200 + 44 / 48e3, rel=1e-12)
    assert "cuts projected (200 µs per host stage" in e.provenance
