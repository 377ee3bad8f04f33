"""Random case generators for test_differential.py: one function per op family the Python API
exposes. Each draws its parameters (shapes, strides, paddings, dilations, groups, axes, eps,
scales, windows) from ``rng`` and returns a :class:`Draw` whose oracle is float64 NumPy written
here or in the conformance modules (never the code under test), evaluated on fp16-rounded
inputs, weights and scalar parameters (the fp16 contract).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import aneforge as af
import numpy as np
from conformance_common import conv_ref, erf, h, q
from test_conformance_linear import conv_transpose_ref, pool_ref

SINGLE = 2e-3  # one op: fp16 output rounding is 2**-11 relative
COMPOSITE = 1e-2  # ops that round intermediate values to fp16


@dataclass
class Draw:
    """One random case: inputs, the graph builder over their ports, the oracle over q(inputs)."""

    params: dict
    arrays: list[np.ndarray]
    build: Callable[..., object]
    ref: Callable[..., np.ndarray]
    tol: float = SINGLE
    exact: bool = False
    floor: float = 1e-3
    ports: list = field(default_factory=list)


def shape(rng, rank_lo=1, rank_hi=4, lo=1, hi=6) -> tuple[int, ...]:
    return tuple(int(v) for v in rng.integers(lo, hi + 1, int(rng.integers(rank_lo, rank_hi + 1))))


def data(rng, s, lo=-4.0, hi=4.0) -> np.ndarray:
    return rng.uniform(lo, hi, s).astype(np.float32)


def away(rng, s, lo=0.5, hi=4.0) -> np.ndarray:
    return (rng.uniform(lo, hi, s) * rng.choice([-1.0, 1.0], s)).astype(np.float32)


def pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def axes_of(rng, rank) -> tuple[int, ...]:
    """A non-empty random subset of axes, some spelled negative."""
    n = int(rng.integers(1, rank + 1))
    chosen = sorted(int(a) for a in rng.choice(rank, n, replace=False))
    return tuple(a - rank if rng.random() < 0.3 else a for a in chosen)


# ------------------------------------------------------------------ elementwise
BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (af.maximum, np.maximum),
    "minimum": (af.minimum, np.minimum),
    "pow": (lambda a, b: a**b, np.power),
}


def binary(rng) -> Draw:
    op = pick(rng, sorted(BINARY))
    sa = shape(rng)
    sb = tuple(1 if rng.random() < 0.3 else d for d in sa)[int(rng.integers(len(sa))) :] or (1,)
    if rng.random() < 0.5:
        sa, sb = sb, sa
    b_arr = away(rng, sb) if op == "div" else data(rng, sb)
    a_arr = rng.uniform(0.5, 2.0, sa).astype(np.float32) if op == "pow" else data(rng, sa)
    if op == "pow":
        b_arr = rng.uniform(-2, 2, sb).astype(np.float32)
    build, ref = BINARY[op]
    if rng.random() < 0.3:  # a Python-scalar right operand
        k = float(rng.uniform(0.5, 2.0) * (1 if op == "pow" else rng.choice([-1, 1])))
        return Draw({"op": op, "a": sa, "scalar": k}, [a_arr], lambda a: build(a, k), lambda a: ref(a, h(k)))
    return Draw({"op": op, "a": sa, "b": sb}, [a_arr, b_arr], build, ref)


def gelu_ref(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


# name -> (input range, oracle, parameter draw)
UNARY = {
    "relu": ((-4, 4), lambda x: np.maximum(x, 0)),
    "gelu": ((-4, 4), gelu_ref),
    "silu": ((-4, 4), lambda x: x / (1 + np.exp(-x))),
    "sigmoid": ((-6, 6), lambda x: 1 / (1 + np.exp(-x))),
    "tanh": ((-4, 4), np.tanh),
    "exp": ((-4, 4), np.exp),
    "log": ((0.05, 8), np.log),
    "sqrt": ((0, 8), np.sqrt),
    "abs": ((-4, 4), np.abs),
    "erf": ((-3, 3), erf),
    "softplus": ((-4, 4), lambda x: np.log1p(np.exp(x))),
    "relu6": ((-2, 8), lambda x: np.clip(x, 0, 6)),
    "atan": ((-4, 4), np.arctan),
    "sinh": ((-3, 3), np.sinh),
    "cosh": ((-3, 3), np.cosh),
    "asin": ((-0.99, 0.99), np.arcsin),
    "acos": ((-0.99, 0.99), np.arccos),
    "atanh": ((-0.9, 0.9), np.arctanh),
    "exp2": ((-4, 4), np.exp2),
    "softsign": ((-4, 4), lambda x: x / (1 + np.abs(x))),
    "floor": ((-4, 4), np.floor),
    "ceil": ((-4, 4), np.ceil),
    "sign": ((-4, 4), np.sign),
    "sin": ((-6, 6), np.sin),
    "cos": ((-6, 6), np.cos),
    "square": ((-4, 4), np.square),
    "neg": ((-4, 4), np.negative),
    "hardswish": ((-5, 5), lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    "mish": ((-4, 4), lambda x: x * np.tanh(np.log1p(np.exp(x)))),
}
# name -> (parameter range, builder, oracle over (x, fp16 parameter))
UNARY_PARAM = {
    "elu": ((0.1, 2), lambda x, a: x.elu(a), lambda x, a: np.where(x > 0, x, a * (np.exp(x) - 1))),
    "leaky_relu": ((0.01, 0.5), lambda x, a: x.leaky_relu(a), lambda x, a: np.where(x >= 0, x, a * x)),
    "rsqrt": ((1e-4, 0.5), lambda x, e: x.rsqrt(e), lambda x, e: 1 / np.sqrt(x + e)),
    "inverse": ((1e-4, 0.5), lambda x, e: x.inverse(e), lambda x, e: 1 / (x + e)),
    "thresholded_relu": ((-1, 1), lambda x, a: x.thresholded_relu(a), lambda x, a: np.where(x >= a, x, 0)),
}


def unary(rng) -> Draw:
    s = shape(rng)
    if rng.random() < 0.25:
        name = pick(rng, sorted(UNARY_PARAM))
        (lo, hi), build, ref = UNARY_PARAM[name]
        p = float(rng.uniform(lo, hi))
        x = rng.uniform(0.1, 4.0, s).astype(np.float32) if name in ("rsqrt", "inverse") else data(rng, s)
        return Draw({"op": name, "shape": s, "param": p}, [x], lambda t: build(t, p), lambda t: ref(t, h(p)))
    name = pick(rng, sorted(UNARY))
    (lo, hi), ref = UNARY[name]
    x = data(rng, s, lo, hi)
    tol = COMPOSITE if name in ("mish", "hardswish") else SINGLE
    return Draw({"op": name, "shape": s}, [x], lambda t: getattr(t, name)(), ref, tol=tol)


# ------------------------------------------------------------------ reductions
REDUCE = {
    "mean": np.mean,
    "sum": np.sum,
    "amax": np.max,
    "amin": np.min,
    "l1_norm": lambda x, axis, keepdims: np.abs(x).sum(axis=axis, keepdims=keepdims),
    "sum_square": lambda x, axis, keepdims: (x * x).sum(axis=axis, keepdims=keepdims),
    "log_sum_exp": lambda x, axis, keepdims: np.log(np.exp(x).sum(axis=axis, keepdims=keepdims)),
}


def reduce(rng) -> Draw:
    s = shape(rng, 1, 4, 1, 9)
    x = data(rng, s)
    if rng.random() < 0.2:
        axis = int(rng.integers(-len(s), len(s)))

        def softmax(t):
            e = np.exp(t - t.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

        return Draw({"op": "softmax", "shape": s, "axis": axis}, [x], lambda t: t.softmax(axis), softmax)
    op = pick(rng, sorted(REDUCE))
    ax = axes_of(rng, len(s))
    keep = bool(rng.random() < 0.5) or len(set(a % len(s) for a in ax)) == len(s)  # no rank-0 results
    return Draw(
        {"op": op, "shape": s, "axes": ax, "keepdims": keep},
        [x],
        lambda t: getattr(t, op)(ax, keep),
        lambda t: REDUCE[op](t, axis=ax, keepdims=keep),
    )


# ------------------------------------------------------------------ linear algebra
def matmul(rng) -> Draw:
    m, k, n = (int(v) for v in rng.integers(1, 40, 3))
    batch = shape(rng, 0, 2, 1, 3) if rng.random() < 0.6 else ()
    if rng.random() < 0.4:  # a baked weight: linear (PyTorch layout) or x @ W
        w = data(rng, (n, k), -1, 1)
        b = data(rng, (n,), -1, 1) if rng.random() < 0.5 else None
        x = data(rng, batch + (m, k))
        bq = 0 if b is None else q(b)
        return Draw(
            {"op": "linear", "x": x.shape, "w": w.shape, "bias": b is not None},
            [x],
            lambda t: t.linear(w, b),
            lambda t: t @ q(w).T + bq,
        )
    bb = tuple(1 if rng.random() < 0.4 else d for d in batch)
    a, bm = data(rng, batch + (m, k)), data(rng, bb + (k, n))
    return Draw({"op": "matmul", "a": a.shape, "b": bm.shape}, [a, bm], lambda x, y: x @ y, np.matmul)


EINSUM = ["ij,jk->ik", "bij,bjk->bik", "ij,kj->ik", "bhid,bhjd->bhij", "i,j->ij", "ij,ij->i", "bij,jk->bik", "ik,jk"]


def einsum(rng) -> Draw:
    eq = pick(rng, EINSUM)
    dims = {c: int(rng.integers(1, 9)) for c in "bhijkd"}
    ins = eq.split("->")[0].split(",")
    a, b = (data(rng, tuple(dims[c] for c in spec), -2, 2) for spec in ins)
    return Draw(
        {"op": "einsum", "eq": eq, "dims": dims},
        [a, b],
        lambda x, y: af.einsum(eq, x, y),
        lambda x, y: np.einsum(eq, x, y),
    )


# ------------------------------------------------------------------ convolution and pooling
def pair(rng, lo, hi) -> tuple[int, int]:
    return (int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1)))


def conv(rng) -> Draw:
    groups = int(pick(rng, [1, 1, 2, 3]))
    cin, cout = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
    k, st, dil = pair(rng, 1, 4), pair(rng, 1, 3), pair(rng, 1, 2)
    # every kernel tap reads real input somewhere (pads below the dilated kernel extent)
    pad = tuple(int(rng.integers(0, (k[i // 2] - 1) * dil[i // 2] // 2 + 1)) for i in range(4))
    hw = tuple(dil[i] * (k[i] - 1) + 1 + int(rng.integers(0, 8)) for i in range(2))
    x = data(rng, (int(rng.integers(1, 3)), cin) + hw)
    w = data(rng, (cout, cin // groups) + k, -1, 1)
    b = data(rng, (cout,), -1, 1) if rng.random() < 0.5 else None
    p = {"x": x.shape, "w": w.shape, "stride": st, "pad": pad, "dilation": dil, "groups": groups}
    return Draw(
        p,
        [x],
        lambda t: af.conv(t, w, stride=st, pad=pad, dilation=dil, groups=groups, bias=b),
        lambda t: conv_ref(t, q(w), None if b is None else q(b), st, pad, dil, groups),
    )


def conv_transpose(rng) -> Draw:
    groups = int(pick(rng, [1, 1, 2]))
    cin, cog = groups * int(rng.integers(1, 4)), int(rng.integers(1, 4))
    k, st, dil = pair(rng, 1, 4), pair(rng, 1, 3), pair(rng, 1, 2)
    pad = tuple(int(rng.integers(0, (k[i // 2] - 1) * dil[i // 2] // 2 + 1)) for i in range(4))
    x = data(rng, (1, cin) + pair(rng, 1, 6))
    w = data(rng, (cin, cog) + k, -1, 1)
    p = {"x": x.shape, "w": w.shape, "stride": st, "pad": pad, "dilation": dil, "groups": groups}
    return Draw(
        p,
        [x],
        lambda t: af.conv_transpose(t, w, stride=st, pad=pad, dilation=dil, groups=groups),
        lambda t: conv_transpose_ref(t, q(w), None, st, pad, dil, groups),
    )


def pool(rng) -> Draw:
    mode = pick(rng, ["max", "avg"])
    k, st = pair(rng, 1, 4), pair(rng, 1, 3)
    pad = tuple(int(rng.integers(0, k[i // 2] // 2 + 1)) for i in range(4))
    x = data(rng, (1, int(rng.integers(1, 4))) + tuple(k[i] + int(rng.integers(0, 8)) for i in range(2)))
    inc = bool(rng.random() < 0.5)
    p = {"mode": mode, "x": x.shape, "kernel": k, "stride": st, "pad": pad, "count_include_pad": inc}
    if mode == "max":
        return Draw(p, [x], lambda t: t.max_pool(k, st, pad), lambda t: pool_ref(t, k, st, pad, "max"))
    return Draw(p, [x], lambda t: t.avg_pool(k, st, pad, inc), lambda t: pool_ref(t, k, st, pad, "avg", inc))


# ------------------------------------------------------------------ normalisation
def standardize(x, axes, eps):
    m = x.mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axes, keepdims=True) + eps)


def lrn_ref(x, size, alpha, beta, k, window):
    c = x.shape[1]
    before = (size - 1) // 2 if window == "onnx" else size // 2
    out = np.empty_like(x)
    for ch in range(c):
        lo, hi = max(ch - before, 0), min(ch - before + size, c)
        s = (x[:, lo:hi] ** 2).sum(axis=1)
        out[:, ch] = x[:, ch] / (k + alpha / size * s) ** beta
    return out


def norm(rng) -> Draw:
    kind = pick(rng, ["layer", "rms", "l2", "group", "instance", "batch", "channel_layer", "lrn"])
    eps = float(10 ** rng.uniform(-6, -2))
    scale = float(10 ** rng.uniform(-2, 3))  # spread of the inputs
    if kind in ("layer", "rms"):
        s = shape(rng, 1, 3, 1, 40)
        x = data(rng, s) * scale + float(rng.uniform(-2, 2)) * scale
        d = s[-1]
        g = data(rng, (d,), 0.5, 2) if rng.random() < 0.5 else None
        gq = 1.0 if g is None else q(g)
        if kind == "layer":
            b = data(rng, (d,), -1, 1) if rng.random() < 0.5 else None
            bq = 0.0 if b is None else q(b)
            return Draw(
                {"op": "layer_norm", "shape": s, "eps": eps, "scale": scale},
                [x],
                lambda t: t.layer_norm(g, b, eps),
                lambda t: standardize(t, -1, h(eps)) * gq + bq,
                tol=COMPOSITE,
            )
        return Draw(
            {"op": "rms_norm", "shape": s, "eps": eps, "scale": scale},
            [x],
            lambda t: t.rms_norm(g, eps),
            lambda t: t / np.sqrt((t * t).mean(axis=-1, keepdims=True) + eps) * gq,
            tol=COMPOSITE,
        )
    if kind == "l2":
        s = shape(rng, 1, 3, 1, 20)
        axis = int(rng.integers(-len(s), len(s)))
        x = data(rng, s) * scale
        return Draw(
            {"op": "l2_norm", "shape": s, "axis": axis, "eps": eps},
            [x],
            lambda t: t.l2_norm(axis, eps),
            lambda t: t / np.maximum(np.sqrt((t * t).sum(axis=axis, keepdims=True)), h(eps)),
            tol=COMPOSITE,
        )
    if kind == "lrn":
        size, window = int(rng.integers(1, 7)), pick(rng, ["onnx", "torch"])
        alpha, beta, k = float(rng.uniform(1e-4, 1)), float(rng.uniform(0.1, 1)), float(rng.uniform(0.5, 2))
        x = data(rng, (int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 5)), 3))
        return Draw(
            {"op": "local_response_norm", "x": x.shape, "size": size, "window": window, "alpha": alpha},
            [x],
            lambda t: af.local_response_norm(t, size, alpha, beta, k, window=window),
            lambda t: lrn_ref(t, size, h(alpha), h(beta), h(k), window),
            tol=COMPOSITE,
        )
    n, groups = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    c = groups * int(rng.integers(1, 4))
    if kind == "channel_layer":
        x = data(rng, (n, c, 1, int(rng.integers(1, 9)))) * scale
        return Draw(
            {"op": "channel_layer_norm", "x": x.shape, "eps": eps},
            [x],
            lambda t: t.channel_layer_norm(eps=eps),
            lambda t: standardize(t, 1, h(eps)),
            tol=COMPOSITE,
        )
    spatial = shape(rng, 1, 2, 1, 6)
    x = data(rng, (n, c) + spatial) * scale
    gamma, beta = data(rng, (c,), 0.5, 2), data(rng, (c,), -1, 1)
    bc = (1, c) + (1,) * len(spatial)

    def gb(t):
        return t * q(gamma).reshape(bc) + q(beta).reshape(bc)

    if kind == "group":
        return Draw(
            {"op": "group_norm", "x": x.shape, "groups": groups, "eps": eps},
            [x],
            lambda t: t.group_norm(groups, gamma, beta, eps),
            lambda t: gb(standardize(t.reshape(n, groups, -1), -1, h(eps)).reshape(t.shape)),
            tol=COMPOSITE,
        )
    if kind == "instance":
        return Draw(
            {"op": "instance_norm", "x": x.shape, "eps": eps},
            [x],
            lambda t: af.instance_norm(t, gamma, beta, eps),
            lambda t: gb(standardize(t, tuple(range(2, t.ndim)), h(eps))),
            tol=COMPOSITE,
        )
    x = x.reshape(n, c, -1)[:, :, 0] if rng.random() < 0.3 else x  # batch_norm also takes [N, C]
    scale = min(scale, 100.0)  # the variance stays within fp16
    x = data(rng, x.shape) * scale
    mean, var = data(rng, (c,)) * scale, rng.uniform(0.5, 2, c).astype(np.float32) * scale**2
    bshape = (1, c) + (1,) * (x.ndim - 2)
    return Draw(
        {"op": "batch_norm", "x": x.shape, "eps": eps, "scale": scale},
        [x],
        lambda t: af.batch_norm(t, mean, var, gamma, beta, eps),
        lambda t: (
            (t - q(mean).reshape(bshape)) / np.sqrt(q(var).reshape(bshape) + h(eps)) * q(gamma).reshape(bshape)
            + q(beta).reshape(bshape)
        ),
        tol=COMPOSITE,
    )


# ------------------------------------------------------------------ resize
def bilinear_matrix(n: int, out: int, src: Callable[[int], float]) -> np.ndarray:
    """[out, n] interpolation weights for source coordinates src(i), clamped to [0, n − 1]."""
    m = np.zeros((out, n))
    for i in range(out):
        s = min(max(src(i), 0.0), n - 1)
        lo = int(math.floor(s))
        hi = min(lo + 1, n - 1)
        m[i, lo] += 1 - (s - lo)
        m[i, hi] += s - lo
    return m


def half_pixel(n, out):
    return bilinear_matrix(n, out, lambda i: (i + 0.5) * n / out - 0.5)


def corners(n, out):
    return bilinear_matrix(n, out, lambda i: i * (n - 1) / (out - 1) if out > 1 else 0.0)


def apply_hw(x, mh, mw):
    return np.einsum("...hw,oh,pw->...op", x, mh, mw)


def resize(rng) -> Draw:
    kind = pick(rng, ["nearest", "bilinear", "upsample_bilinear", "upsample"])
    x = data(rng, (1, int(rng.integers(1, 3))) + pair(rng, 1, 7))
    n_h, n_w = x.shape[2:]
    if kind == "nearest":
        th, tw = pair(rng, 1, 12)
        return Draw(
            {"op": kind, "x": x.shape, "to": (th, tw)},
            [x],
            lambda t: af.resize_nearest_neighbor(t, th, tw),
            lambda t: t[:, :, (np.arange(th) * n_h) // th][:, :, :, (np.arange(tw) * n_w) // tw],
            exact=True,
        )
    if kind == "upsample":
        s = pair(rng, 1, 3)
        return Draw(
            {"op": kind, "x": x.shape, "scale": s},
            [x],
            lambda t: t.upsample(s),
            lambda t: t.repeat(s[0], axis=2).repeat(s[1], axis=3),
            exact=True,
        )
    align = bool(rng.random() < 0.4)
    if kind == "bilinear":
        th, tw = pair(rng, 2, 12)
        grid = corners if align else half_pixel
        return Draw(
            {"op": kind, "x": x.shape, "to": (th, tw), "align_corners": align},
            [x],
            lambda t: af.resize_bilinear(t, th, tw, align_corners=align),
            lambda t: apply_hw(t, grid(n_h, th), grid(n_w, tw)),
        )
    sh, sw = (float(pick(rng, [1.0, 1.5, 2.0, 2.5, 3.0, 1.75])) for _ in range(2))
    oh, ow = int(n_h * sh), int(n_w * sw)
    recompute = align or bool(rng.random() < 0.5)
    if align:
        mh, mw = corners(n_h, oh), corners(n_w, ow)
    elif recompute:  # the MIL op: ratio in / out (PyTorch recompute_scale_factor=True)
        mh, mw = half_pixel(n_h, oh), half_pixel(n_w, ow)
    else:  # PyTorch's default scale_factor mapping: ratio 1 / s
        mh, mw = (
            bilinear_matrix(n, o, lambda i, s=s: (i + 0.5) / s - 0.5) for n, o, s in ((n_h, oh, sh), (n_w, ow, sw))
        )
    return Draw(
        {"op": kind, "x": x.shape, "scale": (sh, sw), "align_corners": align, "recompute_scale_factor": recompute},
        [x],
        lambda t: af.upsample_bilinear(t, (sh, sw), align_corners=align, recompute_scale_factor=recompute),
        lambda t: apply_hw(t, mh, mw),
    )


# ------------------------------------------------------------------ layout (exact)
def layout(rng) -> Draw:
    kind = pick(
        rng,
        ["transpose", "reshape", "reverse", "tile", "concat", "split", "slice", "gather", "take", "shuffle", "cumsum"],
    )
    s = shape(rng, 2, 4, 1, 5)
    x = data(rng, s)
    r = len(s)
    p = {"op": kind, "shape": s}
    if kind == "transpose":
        perm = tuple(int(v) for v in rng.permutation(r))
        return Draw(p | {"perm": perm}, [x], lambda t: t.transpose(perm), lambda t: t.transpose(perm), exact=True)
    if kind == "reshape":
        to = (-1,) + s[2:] if r > 2 else (s[1], s[0])
        return Draw(p | {"to": to}, [x], lambda t: t.reshape(to), lambda t: t.reshape(to), exact=True)
    if kind == "reverse":
        ax = axes_of(rng, r)
        return Draw(p | {"axes": ax}, [x], lambda t: t.reverse(ax), lambda t: np.flip(t, ax), exact=True)
    if kind == "tile":
        reps = tuple(int(v) for v in rng.integers(1, 3, r))
        return Draw(p | {"reps": reps}, [x], lambda t: t.tile(reps), lambda t: np.tile(t, reps), exact=True)
    axis = int(rng.integers(-r, r))
    if kind == "concat":
        other = list(s)
        other[axis] = int(rng.integers(1, 4))
        y = data(rng, tuple(other))
        return Draw(
            p | {"axis": axis, "other": tuple(other)},
            [x, y],
            lambda a, b: af.concat([a, b], axis),
            lambda a, b: np.concatenate([a, b], axis),
            exact=True,
        )
    if kind == "split":
        k = s[axis]
        return Draw(
            p | {"axis": axis}, [x], lambda t: t.split(k, axis)[-1], lambda t: np.split(t, k, axis)[-1], exact=True
        )
    if kind == "slice":
        begin = tuple(int(rng.integers(0, d)) for d in s)
        size = tuple(int(rng.integers(1, d - b + 1)) for d, b in zip(s, begin))
        window = tuple(slice(b, b + n) for b, n in zip(begin, size))
        return Draw(
            p | {"begin": begin, "size": size},
            [x],
            lambda t: t.slice_by_size(begin, size),
            lambda t: t[window],
            exact=True,
        )
    if kind in ("gather", "take"):
        d = s[axis]
        idx = [int(v) for v in rng.integers(-d, d, int(rng.integers(1, 6)))]
        index = idx[0] if kind == "take" else idx
        return Draw(
            p | {"axis": axis, "indices": index},
            [x],
            lambda t: af.gather(t, index, axis),
            lambda t: np.take(t, index, axis),
            exact=True,
        )
    if kind == "cumsum":
        return Draw(p, [x], lambda t: t.cumsum(-1), lambda t: np.cumsum(t, -1), floor=1.0)
    rr = int(rng.integers(1, 3))
    x = data(rng, (1, rr * rr * int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4))))
    n, c, hh, ww = x.shape

    def pixel_shuffle(t):
        return t.reshape(n, c // (rr * rr), rr, rr, hh, ww).transpose(0, 1, 4, 2, 5, 3).reshape(n, -1, hh * rr, ww * rr)

    return Draw(
        {"op": "pixel_shuffle", "x": x.shape, "r": rr},
        [x],
        lambda t: af.pixel_shuffle(t, rr),
        pixel_shuffle,
        exact=True,
    )


# ------------------------------------------------------------------ attention
def attention(rng) -> Draw:
    hds, sq, skv, d = (
        int(rng.integers(1, 3)),
        int(rng.integers(1, 9)),
        int(rng.integers(1, 9)),
        int(rng.integers(1, 17)),
    )
    causal = bool(rng.random() < 0.5) and sq == skv
    scale = float(rng.uniform(0.1, 1)) if rng.random() < 0.5 else None
    arrays = [data(rng, (1, hds, n, d), -2, 2) for n in (sq, skv, skv)]

    def ref(qq, k, v):
        s = qq @ k.swapaxes(-1, -2) * (1 / math.sqrt(d) if scale is None else h(scale))
        if causal:
            s = np.where(np.tril(np.ones((sq, skv))) > 0, s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True) @ v

    return Draw(
        {"op": "sdpa", "heads": hds, "sq": sq, "skv": skv, "d": d, "causal": causal, "scale": scale},
        arrays,
        lambda a, b, c: af.sdpa(a, b, c, scale=scale, is_causal=causal),
        ref,
        tol=COMPOSITE,
    )


FAMILIES: dict[str, Callable[[np.random.Generator], Draw]] = {
    "binary": binary,
    "unary": unary,
    "reduce": reduce,
    "matmul": matmul,
    "einsum": einsum,
    "conv": conv,
    "conv_transpose": conv_transpose,
    "pool": pool,
    "norm": norm,
    "resize": resize,
    "layout": layout,
    "attention": attention,
}
