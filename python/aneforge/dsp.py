"""Signal processing run as compiled aneforge programs (NumPy / SciPy calling conventions):
windows, FIR filtering, FFT convolution, correlation, STFT and spectrogram.

Signals are 1-D arrays (converted to float64); inputs are scaled on the host before they reach
the fp16 device and results are scaled back. ``fir_filter`` uses a native 1 x K convolution for
K <= 15 taps and FFT convolution beyond; ``stft`` cuts frames on the host and runs one batched
real FFT. Every device function takes the compile options as keywords (``device=...``; see
``aneforge.CompileOptions``). Accuracy: see docs/numerics-accuracy.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from aneforge import _core

__all__ = [
    "blackman",
    "correlate",
    "fft_convolve",
    "fir_filter",
    "get_window",
    "hamming",
    "hann",
    "spectrogram",
    "stft",
]


def get_window(name: str, n: int, periodic: bool = True) -> np.ndarray:
    """``hann``, ``hamming`` or ``blackman`` of length ``n`` (periodic by default, like
    ``scipy.signal.get_window``; ``periodic=False`` gives the symmetric form)."""
    return _core.dsp_window(name, n, periodic)


def hann(n: int, periodic: bool = True) -> np.ndarray:
    """Hann window (see :func:`get_window`)."""
    return get_window("hann", n, periodic)


def hamming(n: int, periodic: bool = True) -> np.ndarray:
    """Hamming window (see :func:`get_window`)."""
    return get_window("hamming", n, periodic)


def blackman(n: int, periodic: bool = True) -> np.ndarray:
    """Blackman window (see :func:`get_window`)."""
    return get_window("blackman", n, periodic)


def fir_filter(x: npt.ArrayLike, taps: npt.ArrayLike, mode: str = "full", **options: Any) -> np.ndarray:
    """``numpy.convolve(x, taps, mode)`` (mode full, same or valid) on the device."""
    return _core.dsp_convolve("fir", x, taps, mode, **options)


def fft_convolve(x: npt.ArrayLike, h: npt.ArrayLike, mode: str = "full", **options: Any) -> np.ndarray:
    """Convolution through one FFT program (zero-padded to a 2-3-5-smooth length), NumPy modes."""
    return _core.dsp_convolve("fft", x, h, mode, **options)


def correlate(a: npt.ArrayLike, v: npt.ArrayLike, mode: str = "valid", **options: Any) -> np.ndarray:
    """``numpy.correlate(a, v, mode)`` for real signals."""
    return _core.dsp_convolve("correlate", a, v, mode, **options)


def stft(
    x: npt.ArrayLike,
    win: int = 256,
    hop: int | None = None,
    window: str | npt.ArrayLike = "hann",
    **options: Any,
) -> np.ndarray:
    """Short-time Fourier transform: frames of ``win`` samples every ``hop`` (default win // 4),
    no padding, each times ``window``; returns complex ``[win // 2 + 1, frames]``."""
    w = get_window(window, win) if isinstance(window, str) else np.asarray(window, np.float64)
    re, im = _core.dsp_stft(x, w, hop or max(win // 4, 1), **options)
    return (re + 1j * im).T


def spectrogram(
    x: npt.ArrayLike,
    win: int = 256,
    hop: int | None = None,
    window: str | npt.ArrayLike = "hann",
    mode: str = "power",
    **options: Any,
) -> np.ndarray:
    """``abs(stft) ** 2`` (``mode="power"``) or ``abs(stft)`` (``mode="magnitude"``)."""
    if mode not in ("power", "magnitude"):
        raise ValueError(f"spectrogram: unknown mode '{mode}' (expected power or magnitude)")
    mag = np.abs(stft(x, win, hop, window, **options))
    return mag**2 if mode == "power" else mag
