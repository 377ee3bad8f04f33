"""Shared pieces of the conformance corpus (test_conformance*.py): every op kind against an
independent NumPy float64 oracle.

Each case builds a small graph through the public Python API, compiles it, runs it on seeded
inputs and compares with a float64 NumPy implementation written here (not derived from the
Rust kernels), evaluated on the fp16-rounded inputs and fp16-rounded weights — what the
fp16 contract feeds every op.

Metric: ``max|got - ref| <= tol * max(max|ref|, floor)``. ``tol`` is 2e-3 for single ops
(fp16 output rounding is 2**-11 ~ 4.9e-4 relative); composites that round intermediate values
to fp16 (layer/rms/group/l2 norm, and the quickstart-style chains) use 1e-2, noted in the case.
``floor`` turns the bound absolute where the reference is near zero. Comparisons and select
must match exactly, as must pure data movement (layout ops).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import aneforge as af
import numpy as np


def q(a: np.ndarray) -> np.ndarray:
    """fp16-rounded float64 copy (what the fp16 contract feeds an op)."""
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def h(v: float) -> float:
    """A scalar parameter as the core bakes it (fp16-rounded)."""
    return float(np.float16(v))


def uniform(shape, seed, lo=-4.0, hi=4.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def away(shape, seed, lo=0.5, hi=4.0):
    """Magnitudes in [lo, hi] with random signs (safe denominators)."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def small_ints(shape, seed, lo=-3, hi=3):
    """Few distinct values, so comparisons see ties."""
    return np.random.default_rng(seed).integers(lo, hi + 1, shape).astype(np.float32)


erf = np.vectorize(math.erf, otypes=[np.float64])


def c4(a):
    """A per-channel vector broadcast over NCHW."""
    return a[None, :, None, None]


@dataclass
class Case:
    id: str
    kinds: tuple[str, ...]
    arrays: list[np.ndarray]
    build: Callable[..., object]
    ref: Callable[..., object]
    tol: float = 2e-3
    floor: float = 1e-3
    exact: bool = False
    ports: Callable[[], list] | None = None
    note: str = ""
    fp32: bool = False  # also run with precision="fp32"


class Registry:
    """The cases one conformance module declares (``R.case(...)``), in declaration order."""

    def __init__(self):
        self.cases: list[Case] = []

    def case(self, id, kinds, arrays, build, ref, **kw):
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        self.cases.append(Case(id, kinds, list(arrays), build, ref, **kw))


def _as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def run(c: Case, precision: str = "fp16", arrays=None):
    arrays = c.arrays if arrays is None else arrays
    ports = c.ports() if c.ports else [af.input(a.shape) for a in arrays]
    out = c.build(*ports)
    net = af.compile(out, precision=precision)
    got = _as_list(net(*arrays))
    ref = _as_list(c.ref(*[a.astype(np.float64) if a.dtype == np.uint8 else q(a) for a in arrays]))
    assert len(got) == len(ref), c.id
    return got, ref


def rel_err(got, ref, floor):
    return float(np.max(np.abs(got - ref))) / max(float(np.max(np.abs(ref))), floor)


def check_case(c: Case):
    """Run ``c`` in fp16 and compare every output with its oracle (exact or within tol)."""
    got, ref = run(c)
    for g, r in zip(got, ref):
        assert g.dtype == np.float32
        assert g.shape == np.shape(r), f"{c.id}: shape {g.shape} vs reference {np.shape(r)}"
        if c.exact:
            np.testing.assert_array_equal(g, r, err_msg=c.id)
        else:
            err = rel_err(g, r, c.floor)
            assert err <= c.tol, f"{c.id}: max|err|/max|ref| = {err:.3g} > {c.tol} {c.note}"


def conv_ref(x, w, b=None, stride=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1), groups=1):
    """Direct convolution over explicit padded windows (float64)."""
    n, cin, hh, ww = x.shape
    cout, cg, kh, kw = w.shape
    t, bo, l, r = pad
    xp = np.zeros((n, cin, hh + t + bo, ww + l + r))
    xp[:, :, t : t + hh, l : l + ww] = x
    oh = (hh + t + bo - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (ww + l + r - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, cout, oh, ow))
    cog = cout // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg : (g + 1) * cg], w[g * cog : (g + 1) * cog]
        for i in range(kh):
            for j in range(kw):
                y0, x0 = i * dil[0], j * dil[1]
                patch = xs[
                    :, :, y0 : y0 + stride[0] * (oh - 1) + 1 : stride[0], x0 : x0 + stride[1] * (ow - 1) + 1 : stride[1]
                ]
                out[:, g * cog : (g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out
