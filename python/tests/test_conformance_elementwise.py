"""Conformance cases: unary (table rows and composites), binary, scalar and comparison ops (shared pieces in conformance_common.py)."""

from __future__ import annotations

import math

import aneforge as af
import numpy as np
import pytest
from conformance_common import Registry, away, check_case, erf, h, small_ints, uniform

R = Registry()
case = R.case

# ---------------------------------------------------------------- unary -----------------
UNARY = [
    # kind, builder, oracle, shape, (lo, hi)
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), (1, 783), (-4, 4)),
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), (7, 13, 5), (-4, 4)),
    ("gelu", lambda x: x.gelu(), lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), (7, 65), (-5, 5)),
    ("silu", lambda x: x.silu(), lambda x: x / (1 + np.exp(-x)), (1, 783), (-6, 6)),
    ("sigmoid", lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), (3, 7, 33), (-8, 8)),
    ("tanh", lambda x: x.tanh(), np.tanh, (1, 783), (-4, 4)),
    ("exp", lambda x: x.exp(), np.exp, (7, 100), (-6, 6)),
    ("log", lambda x: x.log(), np.log, (1, 783), (0.05, 8)),
    ("log", lambda x: x.log(eps=0.5), lambda x: np.log(x + h(0.5)), (7, 9), (0.0, 8)),
    ("sqrt", lambda x: x.sqrt(), np.sqrt, (1, 783), (0, 9)),
    ("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), (7, 65), (0.05, 9)),
    ("rsqrt", lambda x: x.rsqrt(eps=1e-3), lambda x: 1 / np.sqrt(x + h(1e-3)), (2, 3, 7), (0.0, 9)),
    ("abs", lambda x: x.abs(), np.abs, (1, 783), (-4, 4)),
    ("square", lambda x: x.square(), np.square, (7, 65), (-4, 4)),
    ("sin", lambda x: x.sin(), np.sin, (1, 783), (-6, 6)),
    ("cos", lambda x: x.cos(), np.cos, (1, 783), (-6, 6)),
    ("erf", lambda x: x.erf(), erf, (7, 65), (-3, 3)),
    ("softplus", lambda x: x.softplus(), lambda x: np.log1p(np.exp(x)), (1, 783), (-8, 8)),
    ("relu6", lambda x: x.relu6(), lambda x: np.clip(x, 0, 6), (7, 65), (-8, 8)),
    ("elu", lambda x: x.elu(), lambda x: np.where(x > 0, x, np.expm1(x)), (1, 783), (-4, 4)),
    ("elu", lambda x: x.elu(alpha=0.3), lambda x: np.where(x > 0, x, h(0.3) * np.expm1(x)), (7, 9), (-4, 4)),
    ("leaky_relu", lambda x: x.leaky_relu(), lambda x: np.where(x >= 0, x, h(0.01) * x), (1, 783), (-4, 4)),
    ("leaky_relu", lambda x: x.leaky_relu(alpha=0.2), lambda x: np.where(x >= 0, x, h(0.2) * x), (7, 9), (-4, 4)),
    ("clip", lambda x: x.clip(-1.5, 2.25), lambda x: np.clip(x, -1.5, 2.25), (1, 783), (-4, 4)),
    ("clip", lambda x: x.clamp(-0.1, 0.1), lambda x: np.clip(x, h(-0.1), h(0.1)), (7, 9), (-1, 1)),
]
for i, (kind, b, r, shape, (lo, hi)) in enumerate(UNARY):
    case(f"{kind}-{'x'.join(map(str, shape))}-{i}", kind, [uniform(shape, 100 + i, lo, hi)], b, r)

UNARY_PARAM = [
    ("atan", lambda x: x.atan(), np.arctan, (1, 783), (-8, 8)),
    ("exp2", lambda x: x.exp2(), np.exp2, (7, 65), (-8, 8)),
    ("softsign", lambda x: x.softsign(), lambda x: x / (1 + np.abs(x)), (1, 783), (-8, 8)),
    ("inverse", lambda x: x.inverse(), lambda x: 1 / x, (7, 65), (0.25, 8)),
    ("inverse", lambda x: x.inverse(eps=0.3), lambda x: 1 / (x + h(0.3)), (1, 7, 9), (0.0, 8)),
    ("threshold", lambda x: x.threshold(), lambda x: np.maximum(x, 0), (1, 783), (-4, 4)),
    ("threshold", lambda x: x.threshold(alpha=-0.3), lambda x: np.maximum(x, h(-0.3)), (7, 9), (-1, 1)),
    ("thresholded_relu", lambda x: x.thresholded_relu(), lambda x: np.where(x >= 1, x, 0), (1, 783), (-4, 4)),
    (
        "thresholded_relu",
        lambda x: x.thresholded_relu(alpha=0.3),
        lambda x: np.where(x >= h(0.3), x, 0),
        (7, 9),
        (-1, 1),
    ),
    ("scaled_tanh", lambda x: x.scaled_tanh(), np.tanh, (1, 783), (-4, 4)),
    ("scaled_tanh", lambda x: x.scaled_tanh(1.7, 0.6), lambda x: h(1.7) * np.tanh(h(0.6) * x), (7, 65), (-4, 4)),
    ("clamped_relu", lambda x: x.clamped_relu(), lambda x: np.clip(x, 0, 6), (1, 783), (-8, 8)),
    (
        "clamped_relu",
        lambda x: x.clamped_relu(0.1, 2.5),
        lambda x: np.minimum(np.where(x >= 0, x, h(0.1) * x), 2.5),
        (7, 9),
        (-4, 4),
    ),
    ("sigmoid_hard", lambda x: x.sigmoid_hard(), lambda x: np.clip(h(0.2) * x + 0.5, 0, 1), (1, 783), (-4, 4)),
    (
        "sigmoid_hard",
        lambda x: x.sigmoid_hard(0.3, 0.4),
        lambda x: np.clip(h(0.3) * x + h(0.4), 0, 1),
        (7, 65),
        (-4, 4),
    ),
    ("linear_activation", lambda x: x.linear_activation(), lambda x: x, (1, 783), (-4, 4)),
    ("linear_activation", lambda x: x.linear_activation(-1.3, 0.7), lambda x: h(-1.3) * x + h(0.7), (7, 9), (-4, 4)),
    ("tan", lambda x: x.tan(), np.tan, (7, 65), (-1.2, 1.2)),
    ("sinh", lambda x: x.sinh(), np.sinh, (1, 783), (-4, 4)),
    ("cosh", lambda x: x.cosh(), np.cosh, (7, 65), (-4, 4)),
    ("asin", lambda x: x.asin(), np.arcsin, (1, 783), (-0.95, 0.95)),
    ("acos", lambda x: x.acos(), np.arccos, (7, 65), (-0.95, 0.95)),
    ("atanh", lambda x: x.atanh(), np.arctanh, (1, 783), (-0.9, 0.9)),
]
for i, (kind, b, r, shape, (lo, hi)) in enumerate(UNARY_PARAM):
    case(f"{kind}-{'x'.join(map(str, shape))}-p{i}", kind, [uniform(shape, 150 + i, lo, hi)], b, r)

# Composite unary ops: two fp16 roundings (the inner op, then the product), hence 1e-2.
case(
    "hardswish",
    "hardswish",
    [uniform((7, 65), 190, -5, 5)],
    lambda x: x.hardswish(),
    lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    tol=1e-2,
    note="composite: x * sigmoid_hard(1/6, 1/2)",
)
case(
    "mish",
    "mish",
    [uniform((1, 783), 191, -6, 6)],
    lambda x: x.mish(),
    lambda x: x * np.tanh(np.log1p(np.exp(x))),
    tol=1e-2,
    note="composite: x * tanh(softplus(x))",
)

# Integer-valued results match exactly; halves exercise round's ties-to-even (numpy.round).


def halves(shape, seed):
    """Integers and halves in [-4.5, 4.5]."""
    return small_ints(shape, seed, -9, 9) / 2


case("floor", "floor", [uniform((1, 783), 180, -40, 40)], lambda x: x.floor(), np.floor, exact=True)
case("ceil", "ceil", [uniform((7, 65), 181, -40, 40)], lambda x: x.ceil(), np.ceil, exact=True)
case("round-ties", "round", [halves((7, 65), 182)], lambda x: x.round(), np.round, exact=True)
case("round", "round", [uniform((1, 783), 183, -40, 40)], lambda x: x.round(), np.round, exact=True)
case("sign", "sign", [small_ints((7, 9), 184)], lambda x: x.sign(), np.sign, exact=True)
case("sign-1", "sign", [uniform((1,), 185)], lambda x: x.sign(), np.sign, exact=True)

# ---------------------------------------------------------------- binary ----------------
case("add-bcast", "add", [uniform((7, 1, 783), 1), uniform((1, 5, 1), 2)], lambda a, b: a + b, lambda a, b: a + b)
case("add-same", "add", [uniform((1, 65), 3), uniform((1, 65), 4)], lambda a, b: a + b, lambda a, b: a + b)
case("sub-bcast", "sub", [uniform((2, 7, 65), 5), uniform((65,), 6)], lambda a, b: a - b, lambda a, b: a - b)
case("mul-bcast", "mul", [uniform((7, 1), 7), uniform((1, 783), 8)], lambda a, b: a * b, lambda a, b: a * b)
case("real_div", "real_div", [uniform((7, 65), 9), away((7, 65), 10)], lambda a, b: a / b, lambda a, b: a / b)
case("real_div-bcast", "real_div", [uniform((3, 1, 7), 11), away((5, 1), 12)], lambda a, b: a / b, lambda a, b: a / b)
case("maximum", "maximum", [uniform((7, 65), 13), uniform((7, 65), 14)], lambda a, b: a.maximum(b), np.maximum)
case("maximum-fn", "maximum", [uniform((1, 783), 15), uniform((783,), 16)], af.maximum, np.maximum)
case("maximum-scalar", "maximum", [uniform((7, 9), 17)], lambda a: af.maximum(0.5, a), lambda a: np.maximum(a, 0.5))
case("minimum", "minimum", [uniform((7, 65), 18), uniform((1, 65), 19)], lambda a, b: a.minimum(b), np.minimum)
case("minimum-fn", "minimum", [uniform((2, 7, 5), 20)], lambda a: af.minimum(a, -0.25), lambda a: np.minimum(a, -0.25))
case("pow", "pow", [uniform((7, 65), 21, 0.25, 4), uniform((7, 65), 22, -2, 2)], lambda a, b: a**b, np.power)
case("pow-method", "pow", [uniform((1, 783), 23, 0.25, 3), uniform((1, 1), 24, -1, 2)], lambda a, b: a.pow(b), np.power)
case("pow-scalar", ("pow", "pow_scalar"), [uniform((7, 9), 25, -3, 3)], lambda a: a**2.0, lambda a: a**2)
case("neg", "neg", [uniform((7, 9), 26)], lambda a: -a, lambda a: -a)

# ---------------------------------------------------------------- scalar ----------------
SC = (7, 65)
case("mul_scalar", "mul_scalar", [uniform(SC, 30)], lambda x: x * 2.5, lambda x: x * 2.5)
case("mul_scalar-r", "mul_scalar", [uniform((1, 783), 31)], lambda x: 0.3 * x, lambda x: h(0.3) * x)
case("add_scalar", "add_scalar", [uniform(SC, 32)], lambda x: x + 1.5, lambda x: x + 1.5)
case("add_scalar-r", "add_scalar", [uniform(SC, 33)], lambda x: 3 + x, lambda x: x + 3)
case("sub_scalar", "sub_scalar", [uniform(SC, 34)], lambda x: x - 0.75, lambda x: x - 0.75)
case("div_scalar", "div_scalar", [uniform(SC, 35)], lambda x: x / 3.0, lambda x: x / 3.0)
case("rsub_scalar", "rsub_scalar", [uniform(SC, 36)], lambda x: 2 - x, lambda x: 2 - x)
case("rdiv_scalar", "rdiv_scalar", [away(SC, 37)], lambda x: 2 / x, lambda x: 2 / x)
case("rpow", "pow", [uniform(SC, 38, -2, 2)], lambda x: 2.0**x, lambda x: 2.0**x)

# ------------------------------------------------------------ comparisons ---------------
CMP = [
    ("greater", lambda a, b: a > b, np.greater),
    ("less", lambda a, b: a < b, np.less),
    ("equal", lambda a, b: a.equal(b), np.equal),
    ("not_equal", lambda a, b: a.not_equal(b), np.not_equal),
    ("less_equal", lambda a, b: a <= b, np.less_equal),
    ("greater_equal", lambda a, b: a >= b, np.greater_equal),
]
for i, (kind, b, r) in enumerate(CMP):
    case(
        f"{kind}-tensor",
        (kind, "select"),
        [small_ints((7, 65), 40 + i), small_ints((1, 65), 50 + i)],
        lambda x, y, b=b: af.select(b(x, y), 1.0, 0.0),
        lambda x, y, r=r: np.where(r(x, y), 1.0, 0.0),
        exact=True,
    )
    method = getattr(af.Tensor, kind)
    case(
        f"{kind}-scalar",
        (kind, "select"),
        [small_ints((1, 783), 60 + i)],
        lambda x, m=method: af.select(m(x, 1.0), x, -x),
        lambda x, r=r: np.where(r(x, 1.0), x, -x),
        exact=True,
    )
case(
    "select-bcast",
    "select",
    [uniform((7, 1, 65), 70), uniform((1, 5, 65), 71)],
    lambda x, y: af.select(x > 0, x, y),
    lambda x, y: np.where(x > 0, x, y),
    exact=True,
)
case(
    "logical_not",
    ("logical_not", "select"),
    [small_ints((7, 65), 73), small_ints((1, 65), 74)],
    lambda x, y: af.select((x > y).logical_not(), 1.0, 0.0),
    lambda x, y: np.where(np.logical_not(x > y), 1.0, 0.0),
    exact=True,
)
case(
    "where",
    "where",
    [uniform((7, 1, 65), 75), uniform((1, 5, 65), 76)],
    lambda x, y: af.where(x < y, x, y),
    np.minimum,
    exact=True,
)
case(
    "select-rcmp",
    "select",
    [uniform((7, 9), 72)],
    lambda x: af.select(0.5 < x, x, 0.0),
    lambda x: np.where(x > 0.5, x, 0.0),
    exact=True,
)


@pytest.mark.parametrize("c", R.cases, ids=[c.id for c in R.cases])
def test_case(c):
    check_case(c)
