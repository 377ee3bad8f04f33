"""af.dsp against NumPy / SciPy float64 on the reference executor."""

import aneforge as af
import numpy as np
import pytest
import scipy.signal

DEV = "reference"


def _rel(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("name", ["hann", "hamming", "blackman"])
def test_windows_match_scipy(name):
    for n in (16, 255):
        np.testing.assert_allclose(af.dsp.get_window(name, n), scipy.signal.get_window(name, n), atol=1e-12)
        np.testing.assert_allclose(
            af.dsp.get_window(name, n, periodic=False), scipy.signal.get_window(name, n, fftbins=False), atol=1e-12
        )


@pytest.mark.parametrize("k", [5, 15, 16, 101])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fir_filter_and_fft_convolve(k, mode):
    rng = np.random.default_rng(k)
    x, taps = rng.standard_normal(700), rng.standard_normal(k)
    want = np.convolve(x, taps, mode)
    got = af.dsp.fir_filter(x, taps, mode, device=DEV)
    assert got.shape == want.shape and _rel(got, want) < 5e-3
    assert _rel(af.dsp.fft_convolve(x, taps, mode, device=DEV), want) < 5e-3
    assert _rel(af.dsp.correlate(x, taps, mode, device=DEV), np.correlate(x, taps, mode)) < 5e-3


def test_stft_and_spectrogram():
    rng = np.random.default_rng(5)
    t = np.arange(4000) / 8000.0
    x = np.sin(2 * np.pi * 440 * t) + 0.1 * rng.standard_normal(t.size)
    win, hop = 256, 64
    w = scipy.signal.get_window("hann", win)
    frames = 1 + (x.size - win) // hop
    want = np.stack([np.fft.rfft(x[i * hop : i * hop + win] * w) for i in range(frames)], axis=1)
    got = af.dsp.stft(x, win, hop, device=DEV)
    assert got.shape == (win // 2 + 1, frames) and _rel(got, want) < 3e-3
    assert _rel(af.dsp.spectrogram(x, win, hop, device=DEV), np.abs(want) ** 2) < 6e-3
    assert np.argmax(af.dsp.spectrogram(x, win, hop, mode="magnitude", device=DEV)[:, 0]) == round(440 * win / 8000)


def test_bad_input():
    with pytest.raises(NotImplementedError, match="kaiser"):
        af.dsp.get_window("kaiser", 8)
    with pytest.raises(ValueError, match="unknown mode"):
        af.dsp.fir_filter(np.ones(8), np.ones(3), "middle", device=DEV)
    with pytest.raises(ValueError, match="empty"):
        af.dsp.fft_convolve(np.ones(8), np.ones(0), device=DEV)
    with pytest.raises(ValueError, match="no longer than the signal"):
        af.dsp.stft(np.ones(100), 256, device=DEV)
