"""Special functions as fp16 polynomial graphs: each takes a ``Tensor`` and returns a
``Tensor`` (compile it with ``af.compile``). Horner forms of the classical Abramowitz-Stegun
approximations on fixed ranges, with both branches built and ``select`` choosing per element;
accuracy is set by fp16 (max |error| / max(1, |f|) <= 3e-3 on the stated ranges, see
docs/numerics-accuracy.md).
"""

from __future__ import annotations

from aneforge import _core
from aneforge._core import Tensor

__all__ = ["bessel_i0", "bessel_j0", "bessel_k0", "erfc", "expm1", "gamma", "lgamma", "log1p"]


def erfc(x: Tensor) -> Tensor:
    """Complementary error function, every x (A&S 7.1.26; 0 past x ~ 3.9 in fp16)."""
    return _core.special("erfc", x)


def expm1(x: Tensor) -> Tensor:
    """exp(x) - 1 without cancellation near 0 (series for |x| <= 0.7)."""
    return _core.special("expm1", x)


def log1p(x: Tensor) -> Tensor:
    """log(1 + x) without cancellation near 0 (atanh series for x in [-0.5, 1]), x > -1."""
    return _core.special("log1p", x)


def bessel_j0(x: Tensor) -> Tensor:
    """Bessel J0 (A&S 9.4.1 for |x| <= 3, 9.4.3 beyond with ~|x|*5e-4 absolute phase error)."""
    return _core.special("bessel_j0", x)


def bessel_i0(x: Tensor) -> Tensor:
    """Modified Bessel I0 (A&S 9.8.1 for |x| <= 3.75, 9.8.2 beyond; inf past |x| ~ 12)."""
    return _core.special("bessel_i0", x)


def bessel_k0(x: Tensor) -> Tensor:
    """Modified Bessel K0 for x > 0 (A&S 9.8.5 for x <= 2, 9.8.6 beyond)."""
    return _core.special("bessel_k0", x)


def gamma(x: Tensor) -> Tensor:
    """Gamma function for 0 < x <= ~9.17 (recurrence onto [1, 2]); +inf beyond (fp16 overflow), x <= 0 meaningless."""
    return _core.special("gamma", x)


def lgamma(x: Tensor) -> Tensor:
    """log Gamma for 0 < x <= ~7000 (recurrence for x <= 8, Stirling beyond); x <= 0 meaningless."""
    return _core.special("lgamma", x)
