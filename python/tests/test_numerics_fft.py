"""af.fft against NumPy float64 (numpy.fft on the same fp16-rounded inputs) on the reference executor."""

import aneforge as af
import numpy as np
import pytest


def _rel_l2(got, want):
    return float(np.linalg.norm(np.asarray(got, np.complex128) - want) / np.linalg.norm(want))


def _signal(shape, seed, complex_=True):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape).astype(np.float16).astype(np.float64)
    if complex_:
        x = x + 1j * rng.uniform(-1, 1, shape).astype(np.float16).astype(np.float64)
    return x


@pytest.mark.parametrize("n", [64, 256, 1024, 2048, 1536, 1280])
def test_fft_ifft_relative_l2(n):
    x = _signal((2, n), n)
    assert _rel_l2(af.fft.fft(x, device="reference"), np.fft.fft(x)) <= 2e-3
    assert _rel_l2(af.fft.ifft(x, device="reference"), np.fft.ifft(x)) <= 2e-3


@pytest.mark.parametrize("n", [64, 1024, 1280, 97])
def test_rfft_irfft_round_trip(n):
    x = _signal((3, n), n + 1, complex_=False)
    spec = af.fft.rfft(x, device="reference")
    assert spec.shape == (3, n // 2 + 1) and spec.dtype == np.complex64
    assert _rel_l2(spec, np.fft.rfft(x)) <= 2e-3
    want = np.fft.rfft(x).astype(np.complex64).astype(np.complex128)
    back = af.fft.irfft(want, n=n, device="reference")
    assert back.shape == (3, n)
    assert _rel_l2(back, np.fft.irfft(want, n=n)) <= 2e-3


def test_fft2_ifft2_and_axes():
    x = _signal((3, 32, 48), 5)
    assert _rel_l2(af.fft.fft2(x, device="reference"), np.fft.fft2(x)) <= 2e-3
    assert _rel_l2(af.fft.ifft2(x, device="reference"), np.fft.ifft2(x)) <= 2e-3
    y = _signal((16, 5, 24), 6)
    assert _rel_l2(af.fft.fft2(y, axes=(0, 2), device="reference"), np.fft.fft2(y, axes=(0, 2))) <= 2e-3
    assert _rel_l2(af.fft.fft(y, axis=0, device="reference"), np.fft.fft(y, axis=0)) <= 2e-3


def test_n_crops_and_pads_like_numpy():
    x = _signal((100,), 9)
    assert _rel_l2(af.fft.fft(x, n=128, device="reference"), np.fft.fft(x, n=128)) <= 2e-3
    assert _rel_l2(af.fft.fft(x, n=60, device="reference"), np.fft.fft(x, n=60)) <= 2e-3


def test_plan_compiles_once_and_is_reused():
    x = _signal((4, 320), 12)
    p = af.fft.plan("fft", (4, 320), device="reference")
    before = af.fft.compile_count()
    for _ in range(3):
        re, im = p(x.real, x.imag)
        af.fft.fft(x, device="reference")
    assert af.fft.compile_count() == before
    assert p.kind == "fft" and p.in_shape == [4, 320] and p.device == "reference"
    assert _rel_l2(re + 1j * im, np.fft.fft(x)) <= 2e-3
    af.fft.fft(_signal((4, 321), 1), device="reference")
    assert af.fft.compile_count() == before + 1


def test_bad_input():
    with pytest.raises(NotImplementedError, match="4099"):
        af.fft.fft(np.ones(2 * 4099), device="reference")
    with pytest.raises(ValueError, match="70000"):
        af.fft.plan("fft", (70000,), device="reference")
    with pytest.raises(ValueError, match="unknown transform"):
        af.fft.plan("dct", (8,), device="reference")
    with pytest.raises(ValueError, match=r"shape \(9,\)"):
        af.fft.plan("fft", (8,), device="reference")(np.ones(9), np.ones(9))
    with pytest.raises(TypeError, match="real"):
        af.fft.rfft(np.ones(8) * 1j, device="reference")
    with pytest.raises(RuntimeError, match="overflowed fp16"):
        af.fft.fft(np.full(2048, 40.0), device="reference")


def test_navier_stokes_example_tracks_numpy():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "navier_stokes.py"
    spec = importlib.util.spec_from_file_location("navier_stokes", path)
    ns = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ns)
    dye = ns.simulate(32, 20, 0.02, 5e-4, ns.graph_fft2, ns.graph_synth)
    ref = ns.simulate(32, 20, 0.02, 5e-4, ns.numpy_fft2, ns.numpy_synth)
    assert np.linalg.norm(dye - ref) / np.linalg.norm(ref) < 5e-3
