"""Conformance corpus: every op kind against an independent NumPy float64 oracle.

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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import aneforge as af
from aneforge import _core

# Every op kind that must have at least one case below: every row of the core's unary op tables
# (native and composite, read through the registry) plus the builders that are not table rows.
UNARY_ROWS = _core._unary_ops()
NON_TABLE_KINDS = """
square add sub mul real_div maximum minimum pow mul_scalar add_scalar sub_scalar div_scalar
rsub_scalar rdiv_scalar greater less equal not_equal less_equal greater_equal select matmul
linear bmm conv2d max_pool avg_pool mean sum amax amin softmax layer_norm rms_norm batch_norm
group_norm l2_norm reshape transpose concat split slice_by_size squeeze expand_dims upsample
image_input where l1_norm log_sum sum_square log_sum_exp reverse tile flatten2d stack cumsum
gather crop space_to_depth depth_to_space pixel_shuffle pixel_unshuffle instance_norm
channel_layer_norm resize_nearest_neighbor resize_bilinear upsample_bilinear geglu
conv_transpose sdpa mha dynamic_conv cross_attention prelu local_response_norm lrn einsum
einsum_native affine
""".split()
REQUIRED_KINDS = [name for name, _, _ in UNARY_ROWS] + NON_TABLE_KINDS
# Registered MIL ops only printed for compressed weights (compile(..., compress=...)), which these
# cases do not set; the Rust corpus (tests/mil_golden.rs) and test_compress.py cover them.
COVERED_IN_RUST_ONLY = {
    "constexpr_affine_dequantize",
    "constexpr_blockwise_shift_scale",
    "constexpr_lut_to_dense",
    "constexpr_sparse_to_dense",
}


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


_erf = np.vectorize(math.erf, otypes=[np.float64])


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


CASES: list[Case] = []


def case(id, kinds, arrays, build, ref, **kw):
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    CASES.append(Case(id, kinds, list(arrays), build, ref, **kw))


# ---------------------------------------------------------------- unary -----------------
UNARY = [
    # kind, builder, oracle, shape, (lo, hi)
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), (1, 783), (-4, 4)),
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), (7, 13, 5), (-4, 4)),
    ("gelu", lambda x: x.gelu(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), (7, 65), (-5, 5)),
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
    ("erf", lambda x: x.erf(), _erf, (7, 65), (-3, 3)),
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
    ("thresholded_relu", lambda x: x.thresholded_relu(alpha=0.3), lambda x: np.where(x >= h(0.3), x, 0), (7, 9), (-1, 1)),
    ("scaled_tanh", lambda x: x.scaled_tanh(), np.tanh, (1, 783), (-4, 4)),
    ("scaled_tanh", lambda x: x.scaled_tanh(1.7, 0.6), lambda x: h(1.7) * np.tanh(h(0.6) * x), (7, 65), (-4, 4)),
    ("clamped_relu", lambda x: x.clamped_relu(), lambda x: np.clip(x, 0, 6), (1, 783), (-8, 8)),
    ("clamped_relu", lambda x: x.clamped_relu(0.1, 2.5), lambda x: np.minimum(np.where(x >= 0, x, h(0.1) * x), 2.5), (7, 9), (-4, 4)),
    ("sigmoid_hard", lambda x: x.sigmoid_hard(), lambda x: np.clip(h(0.2) * x + 0.5, 0, 1), (1, 783), (-4, 4)),
    ("sigmoid_hard", lambda x: x.sigmoid_hard(0.3, 0.4), lambda x: np.clip(h(0.3) * x + h(0.4), 0, 1), (7, 65), (-4, 4)),
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
halves = lambda shape, seed: small_ints(shape, seed, -9, 9) / 2
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
case("where", "where", [uniform((7, 1, 65), 75), uniform((1, 5, 65), 76)], lambda x, y: af.where(x < y, x, y), np.minimum, exact=True)
case("select-rcmp", "select", [uniform((7, 9), 72)], lambda x: af.select(0.5 < x, x, 0.0), lambda x: np.where(x > 0.5, x, 0.0), exact=True)

# ---------------------------------------------------------------- matmul ----------------
W1 = uniform((100, 65), 80, -1, 1)
case("matmul-3d", "matmul", [uniform((1, 7, 100), 81)], lambda x: x @ W1, lambda x: x @ q(W1))
W2 = uniform((783, 13), 82, -1, 1)
case("matmul-783", "matmul", [uniform((7, 783), 83)], lambda x: x.matmul(W2), lambda x: x @ q(W2))
W3 = uniform((1, 1), 84, -1, 1)
case("matmul-k1", "matmul", [uniform((7, 1), 85)], lambda x: x @ W3, lambda x: x @ q(W3))
WL, BL = uniform((50, 64), 86, -1, 1), uniform((50,), 87, -1, 1)
case("linear-bias", "linear", [uniform((3, 7, 64), 88)], lambda x: x.linear(WL, BL), lambda x: x @ q(WL).T + q(BL))
WL2 = uniform((7, 783), 89, -0.5, 0.5)
case("linear-nobias", "linear", [uniform((1, 783), 90)], lambda x: x.linear(WL2), lambda x: x @ q(WL2).T)
case("bmm-bcast", "bmm", [uniform((2, 1, 7, 33), 91), uniform((3, 33, 5), 92)], lambda a, b: a @ b, np.matmul)
case("bmm-vec", "bmm", [uniform((4, 7, 65), 93), uniform((65,), 94)], lambda a, b: a.matmul(b), np.matmul)


def geglu_ref(x, w, b=None):
    """value * gelu(gate): value from the first half of the rows of w (and b), gate from the second."""
    y = x @ q(w).T + (0 if b is None else q(b))
    value, gate = np.split(y, 2, axis=-1)
    return value * 0.5 * gate * (1 + _erf(gate / math.sqrt(2)))


# geglu is a composite (two linears, gelu, mul): the linears and gelu round to fp16 between ops, so 1e-2.
WGE, BGE = uniform((66, 65), 98, -0.25, 0.25), uniform((66,), 99, -1, 1)
case("geglu", "geglu", [uniform((1, 7, 65), 100)], lambda x: af.geglu(x, WGE, BGE), lambda x: geglu_ref(x, WGE, BGE), tol=1e-2, note="composite")
WGE2 = uniform((2, 783), 101, -0.1, 0.1)
case("geglu-dff1", "geglu", [uniform((7, 783), 102)], lambda x: af.geglu(x, WGE2), lambda x: geglu_ref(x, WGE2), tol=1e-2, note="composite")


# cumsum is a matmul with f32 accumulation, rounded once.
case("cumsum", "cumsum", [uniform((7, 65), 95)], lambda x: x.cumsum(), lambda x: np.cumsum(x, axis=-1))
case("cumsum-783", "cumsum", [uniform((2, 1, 783), 96)], lambda x: x.cumsum(axis=2), lambda x: np.cumsum(x, axis=-1))
case("cumsum-1", "cumsum", [uniform((7, 1), 97)], lambda x: x.cumsum(), lambda x: x)

# Attention composites (matmul, scale, softmax, matmul per query tile; fp16 between ops): 1e-2.
def attention_ref(q, k, v, scale=None, mask=None):
    """softmax(q @ k^T * scale + mask) @ v over the last two axes (float64)."""
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else h(scale))
    s = s + (0 if mask is None else mask)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def heads(t, n):
    """[S, D] -> [n, S, D / n]."""
    return t.reshape(t.shape[0], n, -1).transpose(1, 0, 2)


def block_ref(x, ctx, w, b, n):
    """Projections (PyTorch linear), per-head attention, merged heads, output projection."""
    lin = lambda t, i: t @ q(w[i]).T + (0 if b[i] is None else q(b[i]))
    o = attention_ref(heads(lin(x, 0), n), heads(lin(ctx, 1), n), heads(lin(ctx, 2), n))
    return lin(o.transpose(1, 0, 2).reshape(x.shape[0], -1), 3)


CAUSAL = np.triu(np.full((800, 800), -1e4), 1)
AMASK = np.where(np.random.default_rng(110).uniform(size=(1, 1, 7, 33)) < 0.3, -1e4, 0.0).astype(np.float32)
case("sdpa-causal-2tiles", "sdpa", [uniform((1, 2, 800, 8), 111, -1, 1)] * 3, lambda a, b, c: af.sdpa(a, b, c, is_causal=True), lambda a, b, c: attention_ref(a, b, c, mask=CAUSAL), tol=1e-2)
case("sdpa-mask-scale", "sdpa", [uniform((1, 3, 7, 65), 112, -1, 1), uniform((1, 3, 33, 65), 113, -1, 1), uniform((1, 3, 33, 5), 114)], lambda a, b, c: af.sdpa(a, b, c, scale=0.3, attn_mask=AMASK), lambda a, b, c: attention_ref(a, b, c, 0.3, q(AMASK)), tol=1e-2)
MW = [uniform((16, 16), 115 + i, -0.5, 0.5) for i in range(4)]
MB = [uniform((16,), 119 + i, -0.5, 0.5) for i in range(4)]
case("mha-770-2tiles", "mha", [uniform((770, 16), 123, -1, 1)], lambda x: af.mha(x, MW[0], MB[0], MW[1], MB[1], MW[2], MB[2], MW[3], MB[3], 2), lambda x: block_ref(x, x, MW, MB, 2), tol=1e-2)
case("mha-1", "mha", [uniform((1, 16), 124, -1, 1)], lambda x: af.mha(x, MW[0], None, MW[1], None, MW[2], None, MW[3], None, 4), lambda x: block_ref(x, x, MW, [None] * 4, 4), tol=1e-2)
CW_ = [uniform((16, 16), 125, -0.5, 0.5), uniform((16, 7), 126, -0.5, 0.5), uniform((16, 7), 127, -0.5, 0.5), uniform((16, 16), 128, -0.5, 0.5)]
case(
    "cross_attention-tiled", "cross_attention", [uniform((768, 16), 129, -1, 1), uniform((512, 7), 130, -1, 1)],
    lambda x, c: af.cross_attention(x, c, *CW_, 2, bq=MB[0], bo=MB[3]), lambda x, c: block_ref(x, c, CW_, [MB[0], None, None, MB[3]], 2), tol=1e-2,
)
case("cross_attention-small", "cross_attention", [uniform((7, 16), 131, -1, 1), uniform((9, 7), 132, -1, 1)], lambda x, c: af.cross_attention(x, c, *CW_, 4), lambda x, c: block_ref(x, c, CW_, [None] * 4, 4), tol=1e-2)

# ---------------------------------------------------------------- conv ------------------
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
                patch = xs[:, :, y0 : y0 + stride[0] * (oh - 1) + 1 : stride[0], x0 : x0 + stride[1] * (ow - 1) + 1 : stride[1]]
                out[:, g * cog : (g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


CW = {k: uniform(s, 200 + i, -1, 1) for i, (k, s) in enumerate([
    ("a", (8, 3, 3, 3)), ("ab", (8,)), ("b", (6, 4, 3, 2)), ("c", (4, 5, 3, 3)), ("d", (6, 4, 3, 3)),
    ("e", (16, 1, 3, 3)), ("eb", (16,)), ("f", (5, 7, 1, 1)),
])}
case(
    "conv-3x3-pad1-bias", "conv2d", [uniform((1, 3, 17, 23), 210)],
    lambda x: af.conv(x, CW["a"], pad=1, bias=CW["ab"]),
    lambda x: conv_ref(x, q(CW["a"]), q(CW["ab"]), pad=(1, 1, 1, 1)),
)
case(
    "conv-stride2-pad4", "conv2d", [uniform((2, 4, 15, 9), 211)],
    lambda x: af.conv(x, CW["b"], stride=2, pad=(1, 0, 2, 1)),
    lambda x: conv_ref(x, q(CW["b"]), stride=(2, 2), pad=(1, 0, 2, 1)),
)
case(
    "conv-dilation2", "conv2d", [uniform((1, 5, 19, 19), 212)],
    lambda x: af.conv(x, CW["c"], pad=2, dilation=2),
    lambda x: conv_ref(x, q(CW["c"]), pad=(2, 2, 2, 2), dil=(2, 2)),
)
case(
    "conv-groups2-stride-hw", "conv2d", [uniform((1, 8, 10, 11), 213)],
    lambda x: af.conv(x, CW["d"], stride=(1, 2), pad=(1, 0), groups=2),
    lambda x: conv_ref(x, q(CW["d"]), stride=(1, 2), pad=(1, 1, 0, 0), groups=2),
)
case(
    "conv-depthwise-bias", "conv2d", [uniform((1, 16, 12, 12), 214)],
    lambda x: af.conv(x, CW["e"], pad=1, groups=16, bias=CW["eb"]),
    lambda x: conv_ref(x, q(CW["e"]), q(CW["eb"]), pad=(1, 1, 1, 1), groups=16),
)
case(
    "conv-1x1-w783", "conv2d", [uniform((1, 7, 1, 783), 215)],
    lambda x: af.conv(x, CW["f"]),
    lambda x: conv_ref(x, q(CW["f"])),
)

# dynamic_conv: the weight is a second program input (fp16-rounded like any input).
case(
    "dynamic_conv-groups2", "dynamic_conv", [uniform((1, 4, 9, 65), 216), uniform((6, 2, 3, 3), 217, -1, 1)],
    lambda x, w: af.dynamic_conv(x, w, stride=(1, 2), pad=1, groups=2),
    lambda x, w: conv_ref(x, w, stride=(1, 2), pad=(1, 1, 1, 1), groups=2),
)


def conv_transpose_ref(x, w, b=None, stride=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1), groups=1):
    """Scatter form: each input pixel adds x * w[ci, co] over its strided kernel window, then pad crops (float64)."""
    n, cin, hh, ww = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    full = np.zeros((n, cog * groups, (hh - 1) * stride[0] + dil[0] * (kh - 1) + 1, (ww - 1) * stride[1] + dil[1] * (kw - 1) + 1))
    for g in range(groups):
        xs, ws = x[:, g * cig : (g + 1) * cig], w[g * cig : (g + 1) * cig]
        for i in range(kh):
            for j in range(kw):
                y0, x0 = i * dil[0], j * dil[1]
                rows, cols = slice(y0, y0 + stride[0] * (hh - 1) + 1, stride[0]), slice(x0, x0 + stride[1] * (ww - 1) + 1, stride[1])
                full[:, g * cog : (g + 1) * cog, rows, cols] += np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
    t, bo, l, r = pad
    out = full[:, :, t : full.shape[2] - bo, l : full.shape[3] - r]
    return out if b is None else out + b[None, :, None, None]


CTW = {k: uniform(s, 220 + i, -1, 1) for i, (k, s) in enumerate([("a", (3, 5, 3, 3)), ("ab", (5,)), ("b", (4, 3, 2, 3)), ("c", (7, 1, 4, 4))])}
case(
    "conv_transpose-stride2-bias", "conv_transpose", [uniform((1, 3, 7, 9), 224)],
    lambda x: af.conv_transpose(x, CTW["a"], stride=2, pad=1, bias=CTW["ab"]),
    lambda x: conv_transpose_ref(x, q(CTW["a"]), q(CTW["ab"]), stride=(2, 2), pad=(1, 1, 1, 1)),
)
case(
    "conv_transpose-groups2-dilation", "conv_transpose", [uniform((2, 4, 5, 65), 225)],
    lambda x: af.conv_transpose(x, CTW["b"], stride=(1, 3), pad=(0, 1, 2, 0), dilation=(2, 1), groups=2),
    lambda x: conv_transpose_ref(x, q(CTW["b"]), stride=(1, 3), pad=(0, 1, 2, 0), dil=(2, 1), groups=2),
)
case(
    "conv_transpose-depthwise-1px", "conv_transpose", [uniform((1, 7, 1, 1), 226)],
    lambda x: af.conv_transpose(x, CTW["c"], stride=4, groups=7),
    lambda x: conv_transpose_ref(x, q(CTW["c"]), stride=(4, 4), groups=7),
)

# ---------------------------------------------------------------- pooling ---------------
def pool_ref(x, k, s, pad, mode, include_pad=True):
    n, c, hh, ww = x.shape
    t, b, l, r = pad
    fill = -np.inf if mode == "max" else 0.0
    xp = np.full((n, c, hh + t + b, ww + l + r), fill)
    xp[:, :, t : t + hh, l : l + ww] = x
    mask = np.zeros((hh + t + b, ww + l + r))
    mask[t : t + hh, l : l + ww] = 1
    oh, ow = (hh + t + b - k[0]) // s[0] + 1, (ww + l + r - k[1]) // s[1] + 1
    win = lambda a, i, j: a[..., i : i + s[0] * (oh - 1) + 1 : s[0], j : j + s[1] * (ow - 1) + 1 : s[1]]
    stack = np.stack([win(xp, i, j) for i in range(k[0]) for j in range(k[1])])
    if mode == "max":
        return stack.max(axis=0)
    total = stack.sum(axis=0)
    if include_pad:
        return total / (k[0] * k[1])
    count = np.stack([win(mask, i, j) for i in range(k[0]) for j in range(k[1])]).sum(axis=0)
    return total / count


case("max_pool-3s2p1", "max_pool", [uniform((1, 3, 15, 17), 300)], lambda x: x.max_pool(3, 2, 1), lambda x: pool_ref(x, (3, 3), (2, 2), (1, 1, 1, 1), "max"))
case("max_pool-2", "max_pool", [uniform((2, 4, 8, 7), 301)], lambda x: x.max_pool(2), lambda x: pool_ref(x, (2, 2), (2, 2), (0, 0, 0, 0), "max"))
case(
    "avg_pool-incl", "avg_pool", [uniform((1, 3, 15, 17), 302)],
    lambda x: x.avg_pool(3, stride=2, pad=1),
    lambda x: pool_ref(x, (3, 3), (2, 2), (1, 1, 1, 1), "avg", include_pad=True),
)
case(
    "avg_pool-excl", "avg_pool", [uniform((1, 3, 15, 17), 303)],
    lambda x: x.avg_pool(3, stride=2, pad=1, count_include_pad=False),
    lambda x: pool_ref(x, (3, 3), (2, 2), (1, 1, 1, 1), "avg", include_pad=False),
)
case(
    "avg_pool-rect-pad4", "avg_pool", [uniform((2, 2, 9, 13), 304)],
    lambda x: x.avg_pool((2, 3), stride=(1, 2), pad=(1, 0, 1, 2), count_include_pad=False),
    lambda x: pool_ref(x, (2, 3), (1, 2), (1, 0, 1, 2), "avg", include_pad=False),
)

# ------------------------------------------------------------- reductions ---------------
RED = [("mean", np.mean), ("sum", np.sum), ("amax", np.max), ("amin", np.min)]
for i, (kind, fn) in enumerate(RED):
    case(f"{kind}-last-keep", kind, [uniform((3, 7, 783), 400 + i)], lambda x, k=kind: getattr(x, k)(-1), lambda x, fn=fn: fn(x, axis=-1, keepdims=True))
    case(
        f"{kind}-02-drop", kind, [uniform((5, 7, 65), 410 + i)],
        lambda x, k=kind: getattr(x, k)((0, 2), keepdims=False),
        lambda x, fn=fn: fn(x, axis=(0, 2), keepdims=False),
    )
    case(f"{kind}-1-drop", kind, [uniform((2, 7, 1, 9), 420 + i)], lambda x, k=kind: getattr(x, k)(1, keepdims=False), lambda x, fn=fn: fn(x, axis=1))


def lse_ref(x, axis, keepdims=False):
    m = x.max(axis=axis, keepdims=True)
    r = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    return r if keepdims else np.squeeze(r, axis=axis)


RED2 = [
    ("l1_norm", lambda x, axis, keepdims=False: np.abs(x).sum(axis=axis, keepdims=keepdims), -4),
    ("log_sum", lambda x, axis, keepdims=False: np.log(x.sum(axis=axis, keepdims=keepdims)), 0.05),
    ("sum_square", lambda x, axis, keepdims=False: (x * x).sum(axis=axis, keepdims=keepdims), -4),
    ("log_sum_exp", lse_ref, -8),
]
for i, (kind, fn, lo) in enumerate(RED2):
    case(f"{kind}-last-keep", kind, [uniform((3, 7, 783), 440 + i, lo)], lambda x, k=kind: getattr(x, k)(-1), lambda x, fn=fn: fn(x, -1, keepdims=True))
    case(
        f"{kind}-02-drop", kind, [uniform((5, 7, 65), 450 + i, lo)],
        lambda x, k=kind: getattr(x, k)((0, 2), keepdims=False),
        lambda x, fn=fn: fn(x, (0, 2)),
    )
    case(f"{kind}-1-drop", kind, [uniform((2, 7, 1, 9), 460 + i, lo)], lambda x, k=kind: getattr(x, k)(1, keepdims=False), lambda x, fn=fn: fn(x, 1))
case("log_sum_exp-alias-big", "log_sum_exp", [uniform((7, 65), 470, 8, 11)], lambda x: x.reduce_log_sum_exp(-1), lambda x: lse_ref(x, -1, keepdims=True))
case("softmax-last", "softmax", [uniform((7, 783), 430)], lambda x: x.softmax(), lambda x: softmax_ref(x, -1))
case("softmax-axis1", "softmax", [uniform((2, 7, 5), 431, -8, 8)], lambda x: x.softmax(axis=1), lambda x: softmax_ref(x, 1))


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---------------------------------------------------------------- norms -----------------
def standardize(x, axes, eps):
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


NG, NB = uniform((783,), 500, 0.5, 1.5), uniform((783,), 501, -1, 1)
COMPOSITE = "composite of reduce/sub/mul/rsqrt with fp16 intermediates: 1e-2"
case(
    "layer_norm-affine", "layer_norm", [uniform((2, 7, 783), 502)],
    lambda x: x.layer_norm(NG, NB),
    lambda x: standardize(x, -1, h(1e-5)) * q(NG) + q(NB),
    tol=1e-2, note=COMPOSITE,
)
case(
    "layer_norm-plain", "layer_norm", [uniform((7, 65), 503, 0, 8)],
    lambda x: x.layer_norm(eps=1e-3),
    lambda x: standardize(x, -1, h(1e-3)),
    tol=1e-2, note=COMPOSITE,
)
case(
    "layer_norm-tensor-gamma", "layer_norm", [uniform((7, 33), 504), uniform((33,), 505, 0.5, 1.5)],
    lambda x, g: x.layer_norm(g),
    lambda x, g: standardize(x, -1, h(1e-5)) * g,
    tol=1e-2, note=COMPOSITE,
)


def rms_ref(x, eps, g=None):
    rms = np.sqrt((x**2).mean(axis=-1, keepdims=True))
    y = x / np.maximum(rms, math.sqrt(eps))
    return y if g is None else y * g


case("rms_norm-affine", "rms_norm", [uniform((3, 7, 783), 510)], lambda x: x.rms_norm(NG), lambda x: rms_ref(x, h(1e-5), q(NG)), tol=1e-2, note=COMPOSITE)
case("rms_norm-plain", "rms_norm", [uniform((7, 65), 511)], lambda x: x.rms_norm(), lambda x: rms_ref(x, h(1e-5)), tol=1e-2, note=COMPOSITE)

BM, BV = uniform((6,), 520, -1, 1), uniform((6,), 521, 0.25, 4)
BG, BB = uniform((6,), 522, 0.5, 1.5), uniform((6,), 523, -1, 1)
c4 = lambda a: a[None, :, None, None]
case(
    "batch_norm-affine", "batch_norm", [uniform((2, 6, 5, 7), 524)],
    lambda x: af.batch_norm(x, BM, BV, BG, BB),
    lambda x: (x - c4(q(BM))) / np.sqrt(c4(q(BV)) + h(1e-5)) * c4(q(BG)) + c4(q(BB)),
)
case(
    "batch_norm-rank3", "batch_norm", [uniform((1, 6, 783), 525)],
    lambda x: af.batch_norm(x, BM, BV, eps=1e-3),
    lambda x: (x - q(BM)[None, :, None]) / np.sqrt(q(BV)[None, :, None] + h(1e-3)),
)

case(
    "instance_norm-affine", "instance_norm", [uniform((2, 6, 7, 65), 526)],
    lambda x: af.instance_norm(x, BG, BB),
    lambda x: standardize(x, (2, 3), h(1e-5)) * c4(q(BG)) + c4(q(BB)),
)
case(
    "instance_norm-rank3", "instance_norm", [uniform((1, 6, 783), 527)],
    lambda x: af.instance_norm(x, eps=1e-3),
    lambda x: standardize(x, 2, h(1e-3)),
)

case(
    "channel_layer_norm-affine", "channel_layer_norm", [uniform((2, 6, 1, 783), 528)],
    lambda x: x.channel_layer_norm(BG, BB),
    lambda x: standardize(x, 1, h(1e-5)) * c4(q(BG)) + c4(q(BB)),
    tol=1e-2, note=COMPOSITE,
)
case(
    "channel_layer_norm-plain", "channel_layer_norm", [uniform((1, 7, 1, 65), 529)],
    lambda x: x.channel_layer_norm(eps=1e-3),
    lambda x: standardize(x, 1, h(1e-3)),
    tol=1e-2, note=COMPOSITE,
)

GG, GB = uniform((8,), 530, 0.5, 1.5), uniform((8,), 531, -1, 1)


def group_ref(x, groups, eps, g=None, b=None):
    n, c = x.shape[:2]
    y = standardize(x.reshape(n, groups, -1), -1, eps).reshape(x.shape)
    if g is not None:
        y = y * c4(g)
    if b is not None:
        y = y + c4(b)
    return y


case(
    "group_norm-affine", "group_norm", [uniform((2, 8, 5, 7), 532)],
    lambda x: x.group_norm(4, GG, GB),
    lambda x: group_ref(x, 4, h(1e-5), q(GG), q(GB)),
    tol=1e-2, note=COMPOSITE,
)
case(
    "group_norm-1group", "group_norm", [uniform((1, 8, 3, 65), 533)],
    lambda x: x.group_norm(1),
    lambda x: group_ref(x, 1, h(1e-5)),
    tol=1e-2, note=COMPOSITE,
)


def l2_ref(x, axis, eps):
    n = np.sqrt((x**2).sum(axis=axis, keepdims=True))
    return x / np.maximum(n, math.sqrt(eps))


case("l2_norm-last", "l2_norm", [uniform((7, 783), 540)], lambda x: x.l2_norm(), lambda x: l2_ref(x, -1, 0.0), tol=1e-2, note=COMPOSITE)
case("l2_norm-axis1", "l2_norm", [uniform((2, 7, 5), 541)], lambda x: x.l2_norm(axis=1, eps=1e-4), lambda x: l2_ref(x, 1, h(1e-4)), tol=1e-2, note=COMPOSITE)

# ---------------------------------------------------------------- layout ----------------
case("reshape", "reshape", [uniform((2, 3, 4, 5), 600)], lambda x: x.reshape(6, -1), lambda x: x.reshape(6, -1), exact=True)
case("reshape-tuple", "reshape", [uniform((7, 783), 601)], lambda x: x.reshape((1, 7, 27, 29)), lambda x: x.reshape(1, 7, 27, 29), exact=True)
case("transpose", "transpose", [uniform((2, 7, 65), 602)], lambda x: x.transpose(0, 2, 1), lambda x: x.transpose(0, 2, 1), exact=True)
case("transpose-rev", "transpose", [uniform((3, 1, 7, 5), 603)], lambda x: x.transpose(), lambda x: x.transpose(), exact=True)
case(
    "concat-3", "concat", [uniform((2, 1, 5), 604), uniform((2, 7, 5), 605), uniform((2, 13, 5), 606)],
    lambda a, b, c: af.concat([a, b, c], axis=1),
    lambda a, b, c: np.concatenate([a, b, c], axis=1),
    exact=True,
)
case("concat-neg", "concat", [uniform((3, 65), 607), uniform((3, 783), 608)], lambda a, b: af.concat((a, b), axis=-1), lambda a, b: np.concatenate([a, b], -1), exact=True)
case("split-equal", "split", [uniform((6, 7, 5), 609)], lambda x: x.split(3), lambda x: np.split(x, 3), exact=True)
case(
    "split-sizes", "split", [uniform((2, 783), 610)],
    lambda x: af.split(x, [1, 700, 82], axis=-1),
    lambda x: np.split(x, [1, 701], axis=-1),
    exact=True,
)
case(
    "slice_by_size", "slice_by_size", [uniform((3, 7, 783), 611)],
    lambda x: x.slice_by_size((1, 0, 3), (2, 7, 100)),
    lambda x: x[1:3, 0:7, 3:103],
    exact=True,
)
case("squeeze", "squeeze", [uniform((1, 7, 1, 5), 612)], lambda x: x.squeeze((0, 2)), lambda x: x.squeeze((0, 2)), exact=True)
case("squeeze-neg", "squeeze", [uniform((7, 65, 1), 613)], lambda x: x.squeeze(-1), lambda x: x.squeeze(-1), exact=True)
case("expand_dims", "expand_dims", [uniform((7, 5), 614)], lambda x: x.expand_dims((0, 2)), lambda x: x[None, :, None, :], exact=True)
case("expand_dims-neg", "expand_dims", [uniform((7, 5), 615)], lambda x: x.expand_dims(-1), lambda x: x[..., None], exact=True)
case("reverse", "reverse", [uniform((2, 7, 65), 620)], lambda x: x.reverse((0, -1)), lambda x: x[::-1, :, ::-1], exact=True)
case("reverse-1", "reverse", [uniform((1, 783), 621)], lambda x: x.reverse(1), lambda x: x[:, ::-1], exact=True)
case("tile", "tile", [uniform((7, 1, 65), 622)], lambda x: x.tile((2, 3, 1)), lambda x: np.tile(x, (2, 3, 1)), exact=True)
case("tile-1", "tile", [uniform((1, 7), 623)], lambda x: x.tile([3, 1]), lambda x: np.tile(x, (3, 1)), exact=True)
case("flatten2d", "flatten2d", [uniform((2, 7, 1, 65), 624)], lambda x: x.flatten2d(), lambda x: x.reshape(2, -1), exact=True)
case("flatten2d-neg", "flatten2d", [uniform((3, 7, 5), 625)], lambda x: x.flatten2d(-1), lambda x: x.reshape(21, 5), exact=True)
case("stack", "stack", [uniform((7, 65), 626), uniform((7, 65), 627)], lambda a, b: af.stack([a, b]), lambda a, b: np.stack([a, b]), exact=True)
case(
    "stack-neg", "stack", [uniform((1, 783), 628), uniform((1, 783), 629), uniform((1, 783), 630)],
    lambda a, b, c: af.stack((a, b, c), axis=-1),
    lambda a, b, c: np.stack([a, b, c], axis=-1),
    exact=True,
)
case("gather", "gather", [uniform((7, 65), 631)], lambda x: af.gather(x, [0, 1, 2, 64, -1, 3, 3], axis=-1), lambda x: np.take(x, [0, 1, 2, 64, 64, 3, 3], axis=-1), exact=True)
case("gather-1", "gather", [uniform((2, 7, 5), 632)], lambda x: af.gather(x, 6, axis=1), lambda x: np.take(x, [6], axis=1), exact=True)


def d2s_ref(x, r, dcr):
    """depth -> space: DCR reads channel (i*r + j)*C + c, PyTorch reads c*r*r + i*r + j."""
    n, cd, h, w = x.shape
    c = cd // (r * r)
    t = x.reshape(n, r, r, c, h, w).transpose(0, 3, 4, 1, 5, 2) if dcr else x.reshape(n, c, r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c, h * r, w * r)


def s2d_ref(x, r, dcr):
    n, c, hh, ww = x.shape
    h, w = hh // r, ww // r
    t = x.reshape(n, c, h, r, w, r)
    t = t.transpose(0, 3, 5, 1, 2, 4) if dcr else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * r * r, h, w)


case("crop", "crop", [uniform((2, 3, 7, 65), 633)], lambda x: af.crop(x, 1, 2, 3, 0), lambda x: x[..., 1:5, 3:], exact=True)
case("crop-1", "crop", [uniform((1, 1, 783), 634)], lambda x: af.crop(x, 0, 0, 0, 782), lambda x: x[..., :1], exact=True)
case("space_to_depth", "space_to_depth", [uniform((2, 3, 14, 6), 635)], lambda x: af.space_to_depth(x), lambda x: s2d_ref(x, 2, True), exact=True)
case("depth_to_space", "depth_to_space", [uniform((1, 18, 7, 5), 636)], lambda x: af.depth_to_space(x, 3), lambda x: d2s_ref(x, 3, True), exact=True)
case("pixel_shuffle", "pixel_shuffle", [uniform((2, 12, 7, 5), 637)], lambda x: af.pixel_shuffle(x, 2), lambda x: d2s_ref(x, 2, False), exact=True)
case("pixel_unshuffle", "pixel_unshuffle", [uniform((1, 2, 21, 9), 638)], lambda x: af.pixel_unshuffle(x, 3), lambda x: s2d_ref(x, 3, False), exact=True)
case("upsample-2", "upsample", [uniform((1, 3, 5, 7), 616)], lambda x: x.upsample(), lambda x: x.repeat(2, 2).repeat(2, 3), exact=True)
case("upsample-2x3", "upsample", [uniform((2, 1, 7, 4), 617)], lambda x: x.upsample((2, 3)), lambda x: x.repeat(2, 2).repeat(3, 3), exact=True)


def nearest_ref(x, oh, ow):
    """Nearest neighbour: output (i, j) reads input (floor(i * H / oh), floor(j * W / ow))."""
    ih, iw = x.shape[-2:]
    return x[..., (np.arange(oh) * ih) // oh, :][..., (np.arange(ow) * iw) // ow]


def grid(mode, n, out):
    """Source coordinates of resize_bilinear's sampling modes (coremltools' op documentation), clamped."""
    i = np.arange(out, dtype=np.float64)
    if mode == "UNALIGN_CORNERS":  # half-pixel
        src = (i + 0.5) * (n / out) - 0.5
    elif mode == "OFFSET_CORNERS":
        delta = max(1, n - 1) / out
        src = 0.5 * delta + i * delta
    elif out == 1:
        src = np.full(1, (n - 1) / 2 if mode == "ALIGN_CORNERS" else 0.0)
    elif mode == "DEFAULT":
        src = i * (n - n / out) / (out - 1)
    else:  # STRICT_ALIGN_CORNERS, ALIGN_CORNERS
        src = i * (n - 1) / (out - 1)
    return np.clip(src, 0.0, n - 1)


def interp_matrix(n, out, mode):
    """[out, n] linear-interpolation weights for the sampling grid of `mode`."""
    m = np.zeros((out, n))
    for i, src in enumerate(grid(mode, n, out)):
        lo = int(np.floor(src))
        m[i, lo] += 1 - (src - lo)
        m[i, min(lo + 1, n - 1)] += src - lo
    return m


def bilinear_ref(x, oh, ow, mode):
    ih, iw = x.shape[-2:]
    return np.einsum("ih,...hw,jw->...ij", interp_matrix(ih, oh, mode), x, interp_matrix(iw, ow, mode))


def upsample_bilinear_ref(x, sh, sw, align):
    """upsample_bilinear recomputes the ratio from the output size (in / floor(in * s))."""
    ih, iw = x.shape[-2:]
    return bilinear_ref(x, int(ih * sh), int(iw * sw), "STRICT_ALIGN_CORNERS" if align else "UNALIGN_CORNERS")


def test_sampling_grid_oracle_matches_the_documented_examples():
    """The oracle's grids reproduce coremltools' documented examples (Xin = 2, Xout = 5 and 6)."""
    documented = {
        "UNALIGN_CORNERS": ([0, 0.1, 0.5, 0.9, 1], [0, 0, 0.33, 0.67, 1, 1]),
        "ALIGN_CORNERS": ([0, 0.25, 0.5, 0.75, 1], [0, 0.2, 0.4, 0.6, 0.8, 1]),
        "DEFAULT": ([0, 0.4, 0.8, 1, 1], [0, 0.33, 0.67, 1, 1, 1]),
        "OFFSET_CORNERS": ([0.1, 0.3, 0.5, 0.7, 0.9], [0.08, 0.25, 0.42, 0.58, 0.75, 0.92]),
    }
    for mode, (five, six) in documented.items():
        np.testing.assert_allclose(grid(mode, 2, 5), five, atol=6e-3)
        np.testing.assert_allclose(grid(mode, 2, 6), six, atol=6e-3)


case("resize_nearest-up", "resize_nearest_neighbor", [uniform((1, 3, 7, 5), 640)], lambda x: af.resize_nearest_neighbor(x, 13, 11), lambda x: nearest_ref(x, 13, 11), exact=True)
case("resize_nearest-down", "resize_nearest_neighbor", [uniform((2, 2, 65, 9), 641)], lambda x: af.resize_nearest_neighbor(x, 7, 4), lambda x: nearest_ref(x, 7, 4), exact=True)
case("resize_nearest-rank3", "resize_nearest_neighbor", [uniform((3, 1, 783), 642)], lambda x: af.resize_nearest_neighbor(x, 1, 100), lambda x: nearest_ref(x, 1, 100), exact=True)
case("resize_bilinear-half", "resize_bilinear", [uniform((1, 3, 7, 5), 643)], lambda x: af.resize_bilinear(x, 15, 12), lambda x: bilinear_ref(x, 15, 12, "UNALIGN_CORNERS"))
case("resize_bilinear-align", "resize_bilinear", [uniform((2, 1, 9, 65), 644)], lambda x: af.resize_bilinear(x, 5, 130, align_corners=True), lambda x: bilinear_ref(x, 5, 130, "ALIGN_CORNERS"))
case("resize_bilinear-down", "resize_bilinear", [uniform((4, 13, 7), 645)], lambda x: af.resize_bilinear(x, 1, 3), lambda x: bilinear_ref(x, 1, 3, "UNALIGN_CORNERS"))
case("resize_bilinear-default", "resize_bilinear", [uniform((1, 2, 6, 5), 649)], lambda x: af.resize_bilinear(x, 9, 4, sampling_mode="DEFAULT"), lambda x: bilinear_ref(x, 9, 4, "DEFAULT"))
case("resize_bilinear-offset", "resize_bilinear", [uniform((1, 2, 6, 5), 650)], lambda x: af.resize_bilinear(x, 4, 11, sampling_mode="OFFSET_CORNERS"), lambda x: bilinear_ref(x, 4, 11, "OFFSET_CORNERS"))
case("resize_bilinear-strict1", "resize_bilinear", [uniform((3, 5, 8), 651)], lambda x: af.resize_bilinear(x, 1, 3, sampling_mode="STRICT_ALIGN_CORNERS"), lambda x: bilinear_ref(x, 1, 3, "STRICT_ALIGN_CORNERS"))
case("resize_bilinear-align1", "resize_bilinear", [uniform((3, 5, 8), 652)], lambda x: af.resize_bilinear(x, 1, 3, align_corners=True), lambda x: bilinear_ref(x, 1, 3, "ALIGN_CORNERS"))
case("upsample_bilinear-2", "upsample_bilinear", [uniform((1, 3, 7, 5), 646)], lambda x: af.upsample_bilinear(x), lambda x: upsample_bilinear_ref(x, 2, 2, False))
case("upsample_bilinear-align", "upsample_bilinear", [uniform((2, 2, 5, 9), 647)], lambda x: af.upsample_bilinear(x, (1.5, 3.0), align_corners=True), lambda x: upsample_bilinear_ref(x, 1.5, 3.0, True))
case("upsample_bilinear-frac", "upsample_bilinear", [uniform((1, 1, 7, 7), 648)], lambda x: af.upsample_bilinear(x, 2.5), lambda x: upsample_bilinear_ref(x, 2.5, 2.5, False))

# ------------------------------------------------- channel ops, einsum, affine ----------
PRELU_A = uniform((6,), 800, -0.5, 0.5)


def prelu_ref(x, a):
    a = q(a).reshape((1, -1) + (1,) * (x.ndim - 2))
    return np.where(x >= 0, x, a * x)


def lrn_ref(x, size, alpha, beta, k):
    """Window c - (size-1)//2 .. c + size//2 clipped to the channels; alpha is the fp16 value the op prints."""
    c = x.shape[1]
    out = np.empty_like(x)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c, ch + size // 2 + 1)
        s = np.sum(x[:, lo:hi] ** 2, axis=1)
        out[:, ch] = x[:, ch] / (h(k) + alpha / size * s) ** h(beta)
    return out


def affine_ref(x, t, oh, ow, align):
    """Bilinear grid sample (PyTorch affine_grid + grid_sample convention, zero padding) in float64."""
    b_, _, ih, iw = x.shape

    def grid(n):
        if n == 1:
            return np.zeros(1)
        return np.linspace(-1.0, 1.0, n) if align else (2 * np.arange(n) + 1) / n - 1

    def to_pixel(s, n):
        return (s + 1) / 2 * (n - 1) if align else ((s + 1) * n - 1) / 2

    u, v = grid(ow)[None, :], grid(oh)[:, None]
    out = np.zeros((b_, x.shape[1], oh, ow))
    for b in range(b_):
        a0, a1, a2, b0, b1, b2 = t[b if t.shape[0] > 1 else 0]
        px, py = to_pixel(a0 * u + a1 * v + a2, iw), to_pixel(b0 * u + b1 * v + b2, ih)
        x0, y0 = np.floor(px), np.floor(py)
        for yy, wy in ((y0, 1 - (py - y0)), (y0 + 1, py - y0)):
            for xx, wx in ((x0, 1 - (px - x0)), (x0 + 1, px - x0)):
                inside = (yy >= 0) & (yy < ih) & (xx >= 0) & (xx < iw)
                vals = x[b][:, np.clip(yy, 0, ih - 1).astype(int), np.clip(xx, 0, iw - 1).astype(int)]
                out[b] += np.where(inside, wy * wx, 0.0) * vals
    return out


case("prelu-nchw", "prelu", [uniform((2, 6, 7, 65), 801)], lambda x: x.prelu(PRELU_A), lambda x: prelu_ref(x, PRELU_A))
case("prelu-rank3", "prelu", [uniform((1, 6, 783), 802)], lambda x: x.prelu(PRELU_A), lambda x: prelu_ref(x, PRELU_A))
case(
    "local_response_norm-5", "local_response_norm", [uniform((2, 7, 5, 65), 803)],
    lambda x: af.local_response_norm(x, 5, alpha=0.05, beta=0.75, k=2.0),
    lambda x: lrn_ref(x, 5, h(0.05), 0.75, 2.0),
)
case(
    "local_response_norm-even", "local_response_norm", [uniform((1, 6, 783), 804)],
    lambda x: af.local_response_norm(x, 4, alpha=0.1, beta=0.5),
    lambda x: lrn_ref(x, 4, h(0.1), 0.5, 1.0),
)
case(
    "lrn", "lrn", [uniform((1, 6, 7, 9), 805)],
    lambda x: af.lrn(x, alpha=0.02, beta=0.75, k=1.0),
    lambda x: lrn_ref(x, 6, h(0.02 * 6), 0.75, 1.0),
)
EIN_W = uniform((65, 9), 806, -1, 1)
case("einsum-matmul", "einsum", [uniform((7, 65), 807)], lambda x: af.einsum("ij,jk->ik", x, EIN_W), lambda x: x @ q(EIN_W))
case(
    "einsum-batched-transposed", "einsum", [uniform((3, 7, 65), 808), uniform((3, 5, 65), 809)],
    lambda a, b: af.einsum("bij,bkj->bki", a, b), lambda a, b: np.einsum("bij,bkj->bki", a, b),
)
case(
    "einsum-implicit-summed", "einsum", [uniform((4, 7, 9), 810, -1, 1), uniform((9, 5), 811, -1, 1)],
    lambda a, b: af.einsum("ijk,kl", a, b), lambda a, b: np.einsum("ijk,kl", a, b),
)
case(
    "einsum-outer", "einsum", [uniform((7,), 812), uniform((65,), 813)],
    lambda a, b: af.einsum("i,j->ji", a, b), lambda a, b: np.einsum("i,j->ji", a, b),
)
EIN_NATIVE_W = uniform((2, 65, 5, 9), 814, -1, 1)
case(
    "einsum_native-rank4", "einsum_native", [uniform((2, 3, 5, 65), 815, -1, 1)],
    lambda x: af.einsum_native("nchw,nwhu->nchu", x, EIN_NATIVE_W),
    lambda x: np.einsum("nchw,nwhu->nchu", x, q(EIN_NATIVE_W)),
)
case(
    "einsum_native-rank3-broadcast-h", "einsum_native", [uniform((7, 1, 65), 816, -1, 1), uniform((65, 4, 3), 817, -1, 1)],
    lambda a, b: af.einsum_native("chw,whu->chu", a, b),
    lambda a, b: np.einsum("chw,whu->chu", np.broadcast_to(a, (7, 4, 65)), b),
)
AFF_T = np.array([[0.9, -0.2, 0.1, 0.3, 1.1, -0.15]], dtype=np.float32)
case(
    "affine-shared", "affine", [uniform((2, 3, 9, 65), 818)],
    lambda x: af.affine(x, AFF_T, 7, 33), lambda x: affine_ref(x, q(AFF_T), 7, 33, False),
)
case(
    "affine-per-batch-align", "affine", [uniform((2, 1, 7, 7), 819), uniform((2, 6), 820, -1, 1)],
    lambda x, t: af.affine(x, t, 11, 5, align_corners=True), lambda x, t: affine_ref(x, t, 11, 5, True),
)

# ------------------------------------------------------------ image_input ---------------
IMG = np.random.default_rng(700).integers(0, 256, (1, 3, 7, 9)).astype(np.uint8)
IMG_SCALE, IMG_BIAS = [0.0171, 0.0175, 0.0174], [-2.1179, -2.0357, -1.8044]
case(
    "image_input-per-channel", "image_input", [IMG],
    lambda x: x,
    lambda x: q(x * c4(q(np.array(IMG_SCALE)))) + c4(q(np.array(IMG_BIAS))),
    ports=lambda: [af.image_input((1, 3, 7, 9), IMG_SCALE, IMG_BIAS)],
)
IMG2 = np.random.default_rng(701).integers(0, 256, (2, 1, 5, 783)).astype(np.uint8)
case(
    "image_input-default", "image_input", [IMG2],
    lambda x: x.relu(),
    lambda x: x * h(1 / 255),
    ports=lambda: [af.image_input((2, 1, 5, 783))],
)

# ------------------------------------------------------------------ runner --------------
FP32_IDS = {"gelu-7x65-2", "matmul-783", "conv-3x3-pad1-bias", "softmax-last", "layer_norm-affine", "sum-last-keep", "avg_pool-excl", "rdiv_scalar"}


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


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_case(c: Case):
    got, ref = run(c)
    for g, r in zip(got, ref):
        assert g.dtype == np.float32
        assert g.shape == np.shape(r), f"{c.id}: shape {g.shape} vs reference {np.shape(r)}"
        if c.exact:
            np.testing.assert_array_equal(g, r, err_msg=c.id)
        else:
            err = rel_err(g, r, c.floor)
            assert err <= c.tol, f"{c.id}: max|err|/max|ref| = {err:.3g} > {c.tol} {c.note}"


@pytest.mark.parametrize("c", [c for c in CASES if c.id in FP32_IDS], ids=lambda c: c.id)
def test_fp32_precision_is_much_tighter(c: Case):
    # fp16-representable inputs: both modes then see the same values, only the rounding differs.
    arrays = [q(a).astype(np.float32) for a in c.arrays]
    got32, ref = run(c, "fp32", arrays)
    got16, _ = run(c, "fp16", arrays)
    for g32, g16, r in zip(got32, got16, ref):
        e32, e16 = rel_err(g32, r, c.floor), rel_err(g16, r, c.floor)
        assert e32 <= 1e-5, f"{c.id}: fp32 relative error {e32:.3g}"
        assert e32 < e16, f"{c.id}: fp32 ({e32:.3g}) is not tighter than fp16 ({e16:.3g})"


def test_fp32_ids_exist():
    assert FP32_IDS <= {c.id for c in CASES}


def test_every_required_op_kind_has_a_case():
    covered = {k for c in CASES for k in c.kinds}
    missing = [k for k in REQUIRED_KINDS if k not in covered]
    assert not missing, f"op kinds without a conformance case: {missing}"


def test_every_registered_mil_op_is_printed_by_a_case():
    printed = set()
    for c in CASES:
        ports = c.ports() if c.ports else [af.input(a.shape) for a in c.arrays]
        mil = af.compile(c.build(*ports)).mil
        statements = [line for line in mil.splitlines() if line.startswith("        ") and " = " in line]
        printed |= {line.split(" = ")[1].split("(")[0] for line in statements}
    missing = sorted(set(_core._mil_op_names()) - printed - COVERED_IN_RUST_ONLY)
    assert not missing, f"registered MIL ops no conformance case prints: {missing}"


STUBS = Path(af.__file__).with_name("__init__.pyi")
BEGIN, END = "    # BEGIN generated: unary op tables\n", "    # END generated: unary op tables\n"


def unary_stub_block() -> str:
    """The Tensor methods of the unary op tables, as the .pyi spells them."""
    out = []
    for name, doc, params in UNARY_ROWS:
        args = "".join(f", {p}: float" + (f" = {d}" if d is not None else "") for p, d in params)
        out.append(f'    def {name}(self{args}) -> Tensor:\n        """{doc}"""\n')
    return "".join(out)


def test_unary_stubs_match_the_op_tables():
    """Regenerate: ANEFORGE_UPDATE_STUBS=1 .venv/bin/python -m pytest python/tests/test_conformance.py -k stubs"""
    text = STUBS.read_text()
    head, rest = text.split(BEGIN)
    block, tail = rest.split(END)
    if os.environ.get("ANEFORGE_UPDATE_STUBS") == "1":
        block = unary_stub_block()
        STUBS.write_text(head + BEGIN + block + END + tail)
    assert block == unary_stub_block(), "python/aneforge/__init__.pyi is out of date with the op tables"


def test_unary_methods_follow_the_table_signature():
    x = af.input((2, 3))
    for name, _, params in UNARY_ROWS:
        assert callable(getattr(af.Tensor, name)), name
        required = [p for p, d in params if d is None]
        with pytest.raises(TypeError, match=name):
            getattr(x, name)(*[0.5] * (len(params) + 1))
        with pytest.raises(TypeError, match="unexpected keyword"):
            getattr(x, name)(*[0.5] * len(required), nope=1.0)
        if required:
            with pytest.raises(TypeError, match=f"missing required argument '{required[0]}'"):
                getattr(x, name)()
    with pytest.raises(TypeError, match="must be a number"):
        x.elu(alpha="big")
    with pytest.raises(TypeError, match="multiple values"):
        x.elu(1.0, alpha=2.0)
    with pytest.raises(ValueError, match="clip"):
        x.clip(2.0, 1.0)


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


def test_shapes_cover_awkward_extents():
    extents = {d for c in CASES for a in c.arrays for d in a.shape}
    assert {1, 7, 783} <= extents
    assert any(d % 64 for d in extents if d > 64)
