"""af.special graphs against scipy.special (float64) on fp16-rounded inputs, reference executor."""

import aneforge as af
import numpy as np
import pytest
import scipy.special as sp

CASES = [
    # name, oracle, range, max |error| / max(1, |f|), max relative error where |f| > 1e-2
    # (None for J0, whose zeros make relative error meaningless)
    ("erfc", sp.erfc, (-3.0, 6.0), 3e-3, 4e-3),
    ("expm1", np.expm1, (-3.0, 3.0), 2e-3, 2e-3),
    ("log1p", np.log1p, (-0.9, 5.0), 2e-3, 2e-3),
    ("bessel_j0", sp.j0, (-3.0, 3.0), 2e-3, None),
    ("bessel_j0", sp.j0, (3.0, 12.0), 2e-3, None),
    ("bessel_i0", sp.i0, (-8.0, 8.0), 3e-3, 3e-3),
    ("bessel_k0", sp.k0, (0.05, 8.0), 2e-3, 8e-3),
    ("gamma", sp.gamma, (0.05, 9.0), 3e-3, 3e-3),
    ("lgamma", sp.gammaln, (0.01, 10.0), 2e-3, None),
    ("lgamma", sp.gammaln, (10.0, 6000.0), 2e-3, 2e-3),
]


@pytest.mark.parametrize("name,oracle,span,atol,rtol", CASES)
def test_against_scipy(name, oracle, span, atol, rtol):
    xs = np.linspace(*span, 2001).astype(np.float16).astype(np.float64)
    x = af.input((xs.size,))
    got = af.compile(getattr(af.special, name)(x), device="reference")(xs.astype(np.float32)).astype(np.float64)
    want = oracle(xs)
    scale = np.maximum(np.abs(want), 1.0)
    assert np.max(np.abs(got - want) / scale) < atol, name
    if rtol is not None:
        big = np.abs(want) > 1e-2
        assert np.max(np.abs(got - want)[big] / np.abs(want[big])) < rtol, name


def test_unknown_function():
    from aneforge import _core

    with pytest.raises(NotImplementedError, match="digamma"):
        _core.special("digamma", af.input((4,)))
