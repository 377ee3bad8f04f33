"""Every row of docs/ieee.md (IEEE special values under the fp16 contract, reference executor).

Program inputs must be finite, so infinities and NaNs are made inside the graph: INF = exp(20)
and NAN = sqrt(x - 2) at x = 1. Expected values are the closed forms the table states; the
comparison is bit-exact up to NaN payloads and checks the sign of zeros.
"""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest

nan, inf = np.nan, np.inf


def NAN(t):
    """NaN from a port holding 1 (sqrt(−1))."""
    return (t - 2.0).sqrt()


def INF(t):
    """+inf from a port holding 20 (exp(20) overflows fp16)."""
    return (t * 20.0).exp()


# (table row id, builder over one port per input, inputs, expected output)
ROWS = [
    ("div-by-zero", lambda a, b: a / b, ([1, -1, 0, 1], [0, 0, 0, -0.0]), [inf, -inf, nan, -inf]),
    ("overflow-mul", lambda a, b: a * b, ([300, -300, 255], [300, 300, 256]), [inf, -inf, 65280]),
    ("overflow-rounding", lambda a, b: a + b, ([65504, 65504], [15, 16]), [65504, inf]),
    (
        "signed-zero",
        lambda a, b: af.concat([a + b, a * -1.0, -b], 0),
        ([-0.0, -0.0], [-0.0, 0.0]),
        [-0.0, 0.0, 0.0, 0.0, 0.0, -0.0],
    ),
    (
        "nan-arith",
        lambda t: af.concat([NAN(t) + 1.0, NAN(t) * 0.0, INF(t) - INF(t), INF(t) * 0.0], 0),
        ([1],),
        [nan] * 4,
    ),
    ("max-min-nan", lambda t: af.concat([af.maximum(NAN(t), 0.5), af.minimum(NAN(t), 0.5)], 0), ([1],), [0.5, 0.5]),
    ("pow", lambda a, b: a**b, ([0, -8, 0, 2, -2], [-1, 1 / 3, 0, 20, 3]), [inf, nan, 1, inf, -8]),
    ("log", lambda t: t.log(), ([0, -0.0, -1, 1],), [-inf, -inf, nan, 0]),
    ("sqrt", lambda t: t.sqrt(), ([0, -0.0, -1, 4],), [0, -0.0, nan, 2]),
    ("rsqrt-inverse", lambda t: af.concat([t.rsqrt(), t.inverse()], 0), ([0, -0.0],), [inf, inf, inf, -inf]),
    ("exp-range", lambda t: t.exp(), ([11, 12, -17, -20],), [59872, inf, 2.0**-24, 0]),
    (
        "saturating",
        lambda t: af.concat([INF(t).tanh(), INF(t).sigmoid(), (-INF(t)).sigmoid(), (-INF(t)).exp(), INF(t).log()], 0),
        ([1],),
        [1, 1, 0, 0, inf],
    ),
    (
        "unary-nan",
        lambda t: af.concat([NAN(t).relu(), NAN(t).clip(-1, 1), NAN(t).sign(), NAN(t).exp(), NAN(t).tanh()], 0),
        ([1],),
        [0, -1, nan, nan, nan],
    ),
    (
        "round",
        lambda t: af.concat([t.round(), t.floor(), t.ceil()], 0),
        ([-0.5, 0.5, 2.5],),
        [-0.0, 0, 2, -1, 0, 2, -0.0, 1, 3],
    ),
    ("underflow", lambda t: t * t, ([1e-4, 3e-4],), [0, 2.0**-23]),
    (
        "reduce-overflow",
        lambda t: af.concat([t.sum(1), t.mean(1), t.log_sum_exp(1)], 1),
        ([[60000, 60000]],),
        [[inf, 60000, 60000]],
    ),
    (
        "reduce-nan",
        lambda t: af.concat([NAN(t).sum(1), NAN(t).mean(1), NAN(t).amax(1), NAN(t).amin(1)], 1),
        ([[1, 3]],),
        [[nan, nan, 1, 1]],
    ),
    (
        "softmax-special",
        lambda t: af.concat([NAN(t).softmax(1), INF(t).softmax(1)], 0),
        ([[1, 0.5]],),
        [[nan, nan], [nan, nan]],
    ),
    ("matmul-inf-zero", lambda t: INF(t) @ np.zeros((1, 2), np.float32), ([[1]],), [[nan, nan]]),
    (
        "conv-pool-nan",
        lambda t: af.concat(
            [
                af.conv(NAN(t), np.ones((1, 1, 1, 1), np.float32)),
                NAN(t).max_pool((1, 2), (1, 1)),
                NAN(t).avg_pool((1, 2), (1, 1)),
            ],
            3,
        ),
        ([[[[1, 3, 6]]]],),
        [[[[nan, 1, 2, 1, 2, nan, 1.5]]]],
    ),
    (
        "norm-degenerate",
        lambda t: af.concat([t.layer_norm(), t.layer_norm(eps=0.0), (t * 0.0).rms_norm(), (t * 0.0).l2_norm()], 0),
        ([[300, 300]],),
        [[0, 0], [nan, nan], [0, 0], [0, 0]],
    ),
]


@pytest.mark.parametrize(("build", "inputs", "want"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_ieee_row(build, inputs, want):
    arrays = [np.asarray(a, np.float32) for a in inputs]
    got = af.compile(build(*[af.input(a.shape) for a in arrays]))(*arrays)
    want = np.asarray(want, np.float32)
    np.testing.assert_array_equal(got, want)
    zeros = want == 0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), f"signs of zero: {got} vs {want}"


def test_every_row_is_in_the_doc():
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "ieee.md").read_text()
    missing = [r[0] for r in ROWS if f"`{r[0]}`" not in doc]
    assert not missing, f"rows tested but not documented: {missing}"


def test_non_finite_inputs_are_rejected_at_the_port():
    net = af.compile(af.input((2,)).exp())
    for bad in (np.nan, np.inf, 70000.0):
        with pytest.raises(ValueError):
            net(np.float32([1.0, bad]))
