"""Discrete Fourier transforms run as compiled aneforge programs (NumPy ``numpy.fft`` calling
conventions).

Each transform compiles one program per (transform, shape, device) — a staged Cooley–Tukey
with fp16 DFT-matrix stages (at most three digit groups, twiddles fed as program inputs,
a dense DFT for prime lengths) — cached process-wide, so calling again with the same shape
reuses it (``compile_count()`` counts actual compiles). Every function takes the compile
options as keywords (``device=...``; see ``aneforge.CompileOptions``). Complex values travel as separate
real and imaginary fp16 tensors; results come back as ``complex64`` (``float32`` for
``irfft``). Accuracy on the reference executor: relative L2 error ~1e-3 or better against
float64 (see docs/numerics-accuracy.md). Forward transforms grow values by up to N: inputs
whose spectrum exceeds 65504 overflow fp16 and raise ``RuntimeError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from aneforge._core import FftPlan
from aneforge._core import fft_plan as _fft_plan
from aneforge._core import numerics_compile_count as compile_count

__all__ = [
    "FftPlan",
    "compile_count",
    "fft",
    "fft2",
    "ifft",
    "ifft2",
    "irfft",
    "plan",
    "rfft",
]


def plan(kind: str, shape: Sequence[int], n: int | None = None, **options: Any) -> FftPlan:
    """The cached plan for ``kind`` (fft, ifft, rfft, irfft, fft2, ifft2) on inputs of
    ``shape`` (the transformed axis last; for irfft ``n`` is the output length). Call it with
    float32 parts: ``plan(re, im)`` returns ``[re, im]`` (``[x]`` for irfft). ``options``: the
    compile options (``device`` or ``options=CompileOptions(...)``); plans honour only the
    device, other options raise NotImplementedError."""
    return _fft_plan(kind, [int(d) for d in shape], n, **options)


def _fit(x: np.ndarray, n: int | None, axis: int) -> np.ndarray:
    """Crop or zero-pad ``x`` along ``axis`` to length ``n`` (NumPy's rule)."""
    if n is None or n == x.shape[axis]:
        return x
    if n < 1:
        raise ValueError(f"fft: invalid number of data points {n}")
    if n < x.shape[axis]:
        return np.take(x, np.arange(n), axis=axis)
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, n - x.shape[axis])
    return np.pad(x, pad)


def _parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(x.real, np.float32), np.ascontiguousarray(np.imag(x), np.float32)


def _complex(kind: str, x: npt.ArrayLike, n: int | None, axis: int, options: dict[str, Any]) -> np.ndarray:
    a = np.moveaxis(_fit(np.asarray(x), n, axis), axis, -1)
    re, im = _parts(a)
    yr, yi = plan(kind, a.shape, **options)(re, im)
    return np.moveaxis((yr + 1j * yi).astype(np.complex64), -1, axis)


def fft(x: npt.ArrayLike, n: int | None = None, axis: int = -1, **options: Any) -> np.ndarray:
    """1-D DFT along ``axis`` (``numpy.fft.fft``); ``n`` crops or zero-pads first."""
    return _complex("fft", x, n, axis, options)


def ifft(x: npt.ArrayLike, n: int | None = None, axis: int = -1, **options: Any) -> np.ndarray:
    """1-D inverse DFT along ``axis``, scaled by 1/n (``numpy.fft.ifft``)."""
    return _complex("ifft", x, n, axis, options)


def rfft(x: npt.ArrayLike, n: int | None = None, axis: int = -1, **options: Any) -> np.ndarray:
    """DFT of a real signal: the n//2 + 1 non-negative-frequency bins (``numpy.fft.rfft``)."""
    a = np.asarray(x)
    if np.iscomplexobj(a):
        raise TypeError("rfft: the input must be real (use fft for complex input)")
    a = np.moveaxis(_fit(a, n, axis), axis, -1)
    yr, yi = plan("rfft", a.shape, **options)(np.ascontiguousarray(a, np.float32))
    return np.moveaxis((yr + 1j * yi).astype(np.complex64), -1, axis)


def irfft(x: npt.ArrayLike, n: int | None = None, axis: int = -1, **options: Any) -> np.ndarray:
    """Inverse of rfft: ``n`` (default 2·(bins − 1)) real samples (``numpy.fft.irfft``)."""
    a = np.moveaxis(np.asarray(x), axis, -1)
    n = 2 * (a.shape[-1] - 1) if n is None else int(n)
    if n < 1:
        raise ValueError(f"irfft: invalid number of data points {n}")
    a = _fit(a, n // 2 + 1, -1)
    re, im = _parts(a)
    (y,) = plan("irfft", a.shape, n=n, **options)(re, im)
    return np.moveaxis(y, -1, axis)


def _complex2(
    kind: str,
    x: npt.ArrayLike,
    s: Sequence[int] | None,
    axes: Sequence[int],
    options: dict[str, Any],
) -> np.ndarray:
    a = np.asarray(x)
    if len(axes) != 2:
        raise ValueError(f"{kind}: axes must name two axes, got {tuple(axes)}")
    if s is not None:
        for size, ax in zip(s, axes):
            a = _fit(a, int(size), ax)
    a = np.moveaxis(a, tuple(axes), (-2, -1))
    re, im = _parts(a)
    yr, yi = plan(kind, a.shape, **options)(re, im)
    return np.moveaxis((yr + 1j * yi).astype(np.complex64), (-2, -1), tuple(axes))


def fft2(
    x: npt.ArrayLike,
    s: Sequence[int] | None = None,
    axes: Sequence[int] = (-2, -1),
    **options: Any,
) -> np.ndarray:
    """2-D DFT over ``axes`` (``numpy.fft.fft2``); ``s`` crops or zero-pads first."""
    return _complex2("fft2", x, s, axes, options)


def ifft2(
    x: npt.ArrayLike,
    s: Sequence[int] | None = None,
    axes: Sequence[int] = (-2, -1),
    **options: Any,
) -> np.ndarray:
    """2-D inverse DFT over ``axes``, scaled by 1/(M·N) (``numpy.fft.ifft2``)."""
    return _complex2("ifft2", x, s, axes, options)
