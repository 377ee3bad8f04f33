"""Targets: af.preflight and compile(target=...) per family, shapes just inside and just outside each limit."""

import math

import aneforge as af
import numpy as np
import pytest

LIMITS = {  # family: (max_tensor_dim, transpose_extent, conv_kw_max)
    "A13": (16384, 2**23 - 1, 13),
    "A14": (16384, 2**23 - 1, 13),
    "A15": (16384, 2**23 - 1, 13),
    "A16": (65536, 2**24 - 1, 15),
}
ARCH = {"A13": "h13", "A14": "h14g", "A15": "m11", "A16": "h17s"}


def conv_kw(kw):
    return af.conv(af.input((1, 1, 4, 32)), np.ones((1, 1, 1, kw), np.float32))


def oversize(y, target):
    return [(o["op"], o["limit"], o["value"], o["max"]) for o in af.preflight(y, target)["oversize"]]


@pytest.mark.parametrize("family", LIMITS)
def test_max_tensor_dim(family):
    dim = LIMITS[family][0]
    p = af.preflight(af.input((1, dim)).relu(), ARCH[family])
    assert p["ok"] and p["family"] == family and [e["op"] for e in p["native"]] == ["relu"]
    if dim < 65536:
        assert oversize(af.input((1, dim + 1)).relu(), family) == [
            ("input", "max_tensor_dim", dim + 1, dim),
            ("relu", "max_tensor_dim", dim + 1, dim),
        ]
        with pytest.raises(
            NotImplementedError,
            match=f"target family {family}: input .*axis extent = {dim + 1} exceeds max_tensor_dim = {dim}",
        ):
            af.compile(af.input((1, dim + 1)).relu(), target=ARCH[family])
    else:
        with pytest.raises(ValueError, match="65537"):
            af.input((1, dim + 1))


@pytest.mark.parametrize("family", LIMITS)
def test_channel_extent_is_axis_1_of_rank_4(family):
    assert af.preflight(af.input((1, 65536, 1, 1)).relu(), family)["ok"]
    assert af.preflight(af.input((1, 1, 1, 16385)).relu(), family)["ok"] == (family == "A16")


@pytest.mark.parametrize("family", LIMITS)
def test_transpose_extent(family):
    dim, extent, _ = LIMITS[family]
    rows = (extent + 1) // dim
    assert af.preflight(af.input((rows, dim - 1)).transpose(1, 0), family)["ok"]
    y = af.input((rows, dim)).transpose(1, 0)
    assert oversize(y, family) == [("transpose", "transpose_extent", extent + 1, extent)]
    with pytest.raises(
        NotImplementedError, match=f"transpose .*element count = {extent + 1} exceeds transpose_extent = {extent}"
    ):
        af.compile(y, target=family)


@pytest.mark.parametrize("family", LIMITS)
def test_conv_kernel_width(family):
    kw = LIMITS[family][2]
    assert af.preflight(conv_kw(kw), family)["ok"]
    if kw < 15:
        assert oversize(conv_kw(kw + 1), family) == [("conv", "conv_kw_max", kw + 1, kw)]
        with pytest.raises(
            NotImplementedError,
            match=f"target family {family}: conv .*kernel width = {kw + 1} exceeds conv_kw_max = {kw}",
        ):
            af.compile(conv_kw(kw + 1), target=ARCH[family])
    else:
        with pytest.raises(ValueError, match="kernel width 16 exceeds"):
            conv_kw(16)


@pytest.mark.parametrize("family", LIMITS)
def test_sin_cos_decompose_below_a15(family):
    x = af.input((4001,))
    p = af.preflight({"s": x.sin(), "c": x.cos()}, family)
    below = family in ("A13", "A14")
    assert [e["op"] for e in p["decompose"]] == (["sin", "cos"] if below else [])
    assert all(e["floor"] == "A15" for e in p["decompose"]) and p["ok"] and not p["reject"]
    m = af.compile({"s": x.sin(), "c": x.cos()}, target=ARCH[family], device="reference")
    assert (" sin(" in m.mil) == (not below)
    xs = np.linspace(-4 * math.pi, 4 * math.pi, 4001).astype(np.float16)
    out = m(xs)
    ref = xs.astype(np.float64)
    err_s, err_c = np.abs(out["s"] - np.sin(ref)).max(), np.abs(out["c"] - np.cos(ref)).max()
    assert err_s < (1.1e-3 if below else 5e-4) and err_c < (8e-4 if below else 5e-4), (err_s, err_c)


def test_older_unknown_and_unmapped_targets():
    y = af.input((4,)).relu()
    for arch in ("h11", "h12", "m9", "t0"):
        with pytest.raises(NotImplementedError, match=f"'{arch}' is family OLDER; MIL is only supported for H13\\+"):
            af.compile(y, target=arch)
        with pytest.raises(NotImplementedError, match="MIL is only supported for H13\\+"):
            af.preflight(y, arch)
    for bad in ("h99", "M7", "X1", ""):
        with pytest.raises(ValueError, match=f"'{bad}' is not a known ANE arch"):
            af.compile(y, target=bad)
    # Chip names map onto their arch (spec §3: M1 = h13, M4 = h16).
    for chip, arch, family in (("M1", "h13", "A13"), ("m4", "h16", "A16")):
        assert af.preflight(y, chip) == af.preflight(y, arch)
        assert af.preflight(y, chip)["family"] == family
    with pytest.raises(ValueError, match="'u1' is a reference arch with no ANE family"):
        af.preflight(y, "u1")


def test_target_overrides_environment_and_fp32_refuses_decomposition(monkeypatch):
    monkeypatch.setenv("ANEFORGE_TARGET", "h13")
    y = af.input((1, 20000)).relu()
    with pytest.raises(NotImplementedError, match="target family A13"):
        af.compile(y)
    assert af.compile(y, target="h16", device="reference").n_ops == 1
    with pytest.raises(NotImplementedError, match="relu .*exceeds max_tensor_dim = 16384"):
        af.export(y, target="A15")
    with pytest.raises(ValueError, match="needs fp16 rounding"):
        af.compile(af.input((4,)).sin(), precision="fp32")
