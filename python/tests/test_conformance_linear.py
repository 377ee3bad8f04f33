"""Conformance cases: matmul, linear, attention composites, conv, conv_transpose, dynamic_conv and pooling (shared pieces in conformance_common.py)."""

from __future__ import annotations

import math

import aneforge as af
import numpy as np
import pytest
from conformance_common import Registry, check_case, conv_ref, erf, h, q, uniform

R = Registry()
case = R.case

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
    return value * 0.5 * gate * (1 + erf(gate / math.sqrt(2)))


# geglu is a composite (two linears, gelu, mul): the linears and gelu round to fp16 between ops, so 1e-2.
WGE, BGE = uniform((66, 65), 98, -0.25, 0.25), uniform((66,), 99, -1, 1)
case(
    "geglu",
    "geglu",
    [uniform((1, 7, 65), 100)],
    lambda x: af.geglu(x, WGE, BGE),
    lambda x: geglu_ref(x, WGE, BGE),
    tol=1e-2,
    note="composite",
)
WGE2 = uniform((2, 783), 101, -0.1, 0.1)
case(
    "geglu-dff1",
    "geglu",
    [uniform((7, 783), 102)],
    lambda x: af.geglu(x, WGE2),
    lambda x: geglu_ref(x, WGE2),
    tol=1e-2,
    note="composite",
)


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

    def lin(t, i):
        return t @ q(w[i]).T + (0 if b[i] is None else q(b[i]))

    o = attention_ref(heads(lin(x, 0), n), heads(lin(ctx, 1), n), heads(lin(ctx, 2), n))
    return lin(o.transpose(1, 0, 2).reshape(x.shape[0], -1), 3)


CAUSAL = np.triu(np.full((800, 800), -1e4), 1)
AMASK = np.where(np.random.default_rng(110).uniform(size=(1, 1, 7, 33)) < 0.3, -1e4, 0.0).astype(np.float32)
case(
    "sdpa-causal-2tiles",
    "sdpa",
    [uniform((1, 2, 800, 8), 111, -1, 1)] * 3,
    lambda a, b, c: af.sdpa(a, b, c, is_causal=True),
    lambda a, b, c: attention_ref(a, b, c, mask=CAUSAL),
    tol=1e-2,
)
case(
    "sdpa-mask-scale",
    "sdpa",
    [uniform((1, 3, 7, 65), 112, -1, 1), uniform((1, 3, 33, 65), 113, -1, 1), uniform((1, 3, 33, 5), 114)],
    lambda a, b, c: af.sdpa(a, b, c, scale=0.3, attn_mask=AMASK),
    lambda a, b, c: attention_ref(a, b, c, 0.3, q(AMASK)),
    tol=1e-2,
)
MW = [uniform((16, 16), 115 + i, -0.5, 0.5) for i in range(4)]
MB = [uniform((16,), 119 + i, -0.5, 0.5) for i in range(4)]
case(
    "mha-770-2tiles",
    "mha",
    [uniform((770, 16), 123, -1, 1)],
    lambda x: af.mha(x, MW[0], MB[0], MW[1], MB[1], MW[2], MB[2], MW[3], MB[3], 2),
    lambda x: block_ref(x, x, MW, MB, 2),
    tol=1e-2,
)
case(
    "mha-1",
    "mha",
    [uniform((1, 16), 124, -1, 1)],
    lambda x: af.mha(x, MW[0], None, MW[1], None, MW[2], None, MW[3], None, 4),
    lambda x: block_ref(x, x, MW, [None] * 4, 4),
    tol=1e-2,
)
CW_ = [
    uniform((16, 16), 125, -0.5, 0.5),
    uniform((16, 7), 126, -0.5, 0.5),
    uniform((16, 7), 127, -0.5, 0.5),
    uniform((16, 16), 128, -0.5, 0.5),
]
case(
    "cross_attention-tiled",
    "cross_attention",
    [uniform((768, 16), 129, -1, 1), uniform((512, 7), 130, -1, 1)],
    lambda x, c: af.cross_attention(x, c, *CW_, 2, bq=MB[0], bo=MB[3]),
    lambda x, c: block_ref(x, c, CW_, [MB[0], None, None, MB[3]], 2),
    tol=1e-2,
)
case(
    "cross_attention-small",
    "cross_attention",
    [uniform((7, 16), 131, -1, 1), uniform((9, 7), 132, -1, 1)],
    lambda x, c: af.cross_attention(x, c, *CW_, 4),
    lambda x, c: block_ref(x, c, CW_, [None] * 4, 4),
    tol=1e-2,
)


# ---------------------------------------------------------------- conv ------------------
CW = {
    k: uniform(s, 200 + i, -1, 1)
    for i, (k, s) in enumerate(
        [
            ("a", (8, 3, 3, 3)),
            ("ab", (8,)),
            ("b", (6, 4, 3, 2)),
            ("c", (4, 5, 3, 3)),
            ("d", (6, 4, 3, 3)),
            ("e", (16, 1, 3, 3)),
            ("eb", (16,)),
            ("f", (5, 7, 1, 1)),
        ]
    )
}
case(
    "conv-3x3-pad1-bias",
    "conv2d",
    [uniform((1, 3, 17, 23), 210)],
    lambda x: af.conv(x, CW["a"], pad=1, bias=CW["ab"]),
    lambda x: conv_ref(x, q(CW["a"]), q(CW["ab"]), pad=(1, 1, 1, 1)),
)
case(
    "conv-stride2-pad4",
    "conv2d",
    [uniform((2, 4, 15, 9), 211)],
    lambda x: af.conv(x, CW["b"], stride=2, pad=(1, 0, 2, 1)),
    lambda x: conv_ref(x, q(CW["b"]), stride=(2, 2), pad=(1, 0, 2, 1)),
)
case(
    "conv-dilation2",
    "conv2d",
    [uniform((1, 5, 19, 19), 212)],
    lambda x: af.conv(x, CW["c"], pad=2, dilation=2),
    lambda x: conv_ref(x, q(CW["c"]), pad=(2, 2, 2, 2), dil=(2, 2)),
)
case(
    "conv-groups2-stride-hw",
    "conv2d",
    [uniform((1, 8, 10, 11), 213)],
    lambda x: af.conv(x, CW["d"], stride=(1, 2), pad=(1, 0), groups=2),
    lambda x: conv_ref(x, q(CW["d"]), stride=(1, 2), pad=(1, 1, 0, 0), groups=2),
)
case(
    "conv-depthwise-bias",
    "conv2d",
    [uniform((1, 16, 12, 12), 214)],
    lambda x: af.conv(x, CW["e"], pad=1, groups=16, bias=CW["eb"]),
    lambda x: conv_ref(x, q(CW["e"]), q(CW["eb"]), pad=(1, 1, 1, 1), groups=16),
)
case(
    "conv-1x1-w783",
    "conv2d",
    [uniform((1, 7, 1, 783), 215)],
    lambda x: af.conv(x, CW["f"]),
    lambda x: conv_ref(x, q(CW["f"])),
)

# dynamic_conv: the weight is a second program input (fp16-rounded like any input).
case(
    "dynamic_conv-groups2",
    "dynamic_conv",
    [uniform((1, 4, 9, 65), 216), uniform((6, 2, 3, 3), 217, -1, 1)],
    lambda x, w: af.dynamic_conv(x, w, stride=(1, 2), pad=1, groups=2),
    lambda x, w: conv_ref(x, w, stride=(1, 2), pad=(1, 1, 1, 1), groups=2),
)


def conv_transpose_ref(x, w, b=None, stride=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1), groups=1):
    """Scatter form: each input pixel adds x * w[ci, co] over its strided kernel window, then pad crops (float64)."""
    n, cin, hh, ww = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    full = np.zeros(
        (n, cog * groups, (hh - 1) * stride[0] + dil[0] * (kh - 1) + 1, (ww - 1) * stride[1] + dil[1] * (kw - 1) + 1)
    )
    for g in range(groups):
        xs, ws = x[:, g * cig : (g + 1) * cig], w[g * cig : (g + 1) * cig]
        for i in range(kh):
            for j in range(kw):
                y0, x0 = i * dil[0], j * dil[1]
                rows, cols = (
                    slice(y0, y0 + stride[0] * (hh - 1) + 1, stride[0]),
                    slice(x0, x0 + stride[1] * (ww - 1) + 1, stride[1]),
                )
                full[:, g * cog : (g + 1) * cog, rows, cols] += np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
    t, bo, l, r = pad
    out = full[:, :, t : full.shape[2] - bo, l : full.shape[3] - r]
    return out if b is None else out + b[None, :, None, None]


CTW = {
    k: uniform(s, 220 + i, -1, 1)
    for i, (k, s) in enumerate([("a", (3, 5, 3, 3)), ("ab", (5,)), ("b", (4, 3, 2, 3)), ("c", (7, 1, 4, 4))])
}
case(
    "conv_transpose-stride2-bias",
    "conv_transpose",
    [uniform((1, 3, 7, 9), 224)],
    lambda x: af.conv_transpose(x, CTW["a"], stride=2, pad=1, bias=CTW["ab"]),
    lambda x: conv_transpose_ref(x, q(CTW["a"]), q(CTW["ab"]), stride=(2, 2), pad=(1, 1, 1, 1)),
)
case(
    "conv_transpose-groups2-dilation",
    "conv_transpose",
    [uniform((2, 4, 5, 65), 225)],
    lambda x: af.conv_transpose(x, CTW["b"], stride=(1, 3), pad=(0, 1, 2, 0), dilation=(2, 1), groups=2),
    lambda x: conv_transpose_ref(x, q(CTW["b"]), stride=(1, 3), pad=(0, 1, 2, 0), dil=(2, 1), groups=2),
)
case(
    "conv_transpose-depthwise-1px",
    "conv_transpose",
    [uniform((1, 7, 1, 1), 226)],
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

    def win(a, i, j):
        return a[..., i : i + s[0] * (oh - 1) + 1 : s[0], j : j + s[1] * (ow - 1) + 1 : s[1]]

    stack = np.stack([win(xp, i, j) for i in range(k[0]) for j in range(k[1])])
    if mode == "max":
        return stack.max(axis=0)
    total = stack.sum(axis=0)
    if include_pad:
        return total / (k[0] * k[1])
    count = np.stack([win(mask, i, j) for i in range(k[0]) for j in range(k[1])]).sum(axis=0)
    return total / count


case(
    "max_pool-3s2p1",
    "max_pool",
    [uniform((1, 3, 15, 17), 300)],
    lambda x: x.max_pool(3, 2, 1),
    lambda x: pool_ref(x, (3, 3), (2, 2), (1, 1, 1, 1), "max"),
)
case(
    "max_pool-2",
    "max_pool",
    [uniform((2, 4, 8, 7), 301)],
    lambda x: x.max_pool(2),
    lambda x: pool_ref(x, (2, 2), (2, 2), (0, 0, 0, 0), "max"),
)
case(
    "avg_pool-incl",
    "avg_pool",
    [uniform((1, 3, 15, 17), 302)],
    lambda x: x.avg_pool(3, stride=2, pad=1),
    lambda x: pool_ref(x, (3, 3), (2, 2), (1, 1, 1, 1), "avg", include_pad=True),
)
case(
    "avg_pool-excl",
    "avg_pool",
    [uniform((1, 3, 15, 17), 303)],
    lambda x: x.avg_pool(3, stride=2, pad=1, count_include_pad=False),
    lambda x: pool_ref(x, (3, 3), (2, 2), (1, 1, 1, 1), "avg", include_pad=False),
)
case(
    "avg_pool-rect-pad4",
    "avg_pool",
    [uniform((2, 2, 9, 13), 304)],
    lambda x: x.avg_pool((2, 3), stride=(1, 2), pad=(1, 0, 1, 2), count_include_pad=False),
    lambda x: pool_ref(x, (2, 3), (1, 2), (1, 0, 1, 2), "avg", include_pad=False),
)


@pytest.mark.parametrize("c", R.cases, ids=[c.id for c in R.cases])
def test_case(c):
    check_case(c)
