"""Conformance cases: reductions, softmax and the normalizations (shared pieces in conformance_common.py)."""

from __future__ import annotations

import math

import aneforge as af
import numpy as np
import pytest
from conformance_common import Registry, c4, check_case, h, q, uniform

R = Registry()
case = R.case

# ------------------------------------------------------------- reductions ---------------
RED = [("mean", np.mean), ("sum", np.sum), ("amax", np.max), ("amin", np.min)]
for i, (kind, fn) in enumerate(RED):
    case(
        f"{kind}-last-keep",
        kind,
        [uniform((3, 7, 783), 400 + i)],
        lambda x, k=kind: getattr(x, k)(-1),
        lambda x, fn=fn: fn(x, axis=-1, keepdims=True),
    )
    case(
        f"{kind}-02-drop",
        kind,
        [uniform((5, 7, 65), 410 + i)],
        lambda x, k=kind: getattr(x, k)((0, 2), keepdims=False),
        lambda x, fn=fn: fn(x, axis=(0, 2), keepdims=False),
    )
    case(
        f"{kind}-1-drop",
        kind,
        [uniform((2, 7, 1, 9), 420 + i)],
        lambda x, k=kind: getattr(x, k)(1, keepdims=False),
        lambda x, fn=fn: fn(x, axis=1),
    )


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
    case(
        f"{kind}-last-keep",
        kind,
        [uniform((3, 7, 783), 440 + i, lo)],
        lambda x, k=kind: getattr(x, k)(-1),
        lambda x, fn=fn: fn(x, -1, keepdims=True),
    )
    case(
        f"{kind}-02-drop",
        kind,
        [uniform((5, 7, 65), 450 + i, lo)],
        lambda x, k=kind: getattr(x, k)((0, 2), keepdims=False),
        lambda x, fn=fn: fn(x, (0, 2)),
    )
    case(
        f"{kind}-1-drop",
        kind,
        [uniform((2, 7, 1, 9), 460 + i, lo)],
        lambda x, k=kind: getattr(x, k)(1, keepdims=False),
        lambda x, fn=fn: fn(x, 1),
    )
case(
    "log_sum_exp-alias-big",
    "log_sum_exp",
    [uniform((7, 65), 470, 8, 11)],
    lambda x: x.reduce_log_sum_exp(-1),
    lambda x: lse_ref(x, -1, keepdims=True),
)
case("softmax-last", "softmax", [uniform((7, 783), 430)], lambda x: x.softmax(), lambda x: softmax_ref(x, -1))
case(
    "softmax-axis1",
    "softmax",
    [uniform((2, 7, 5), 431, -8, 8)],
    lambda x: x.softmax(axis=1),
    lambda x: softmax_ref(x, 1),
)


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
    "layer_norm-affine",
    "layer_norm",
    [uniform((2, 7, 783), 502)],
    lambda x: x.layer_norm(NG, NB),
    lambda x: standardize(x, -1, h(1e-5)) * q(NG) + q(NB),
    tol=1e-2,
    note=COMPOSITE,
)
case(
    "layer_norm-plain",
    "layer_norm",
    [uniform((7, 65), 503, 0, 8)],
    lambda x: x.layer_norm(eps=1e-3),
    lambda x: standardize(x, -1, h(1e-3)),
    tol=1e-2,
    note=COMPOSITE,
)
case(
    "layer_norm-tensor-gamma",
    "layer_norm",
    [uniform((7, 33), 504), uniform((33,), 505, 0.5, 1.5)],
    lambda x, g: x.layer_norm(g),
    lambda x, g: standardize(x, -1, h(1e-5)) * g,
    tol=1e-2,
    note=COMPOSITE,
)


def rms_ref(x, eps, g=None):
    rms = np.sqrt((x**2).mean(axis=-1, keepdims=True))
    y = x / np.maximum(rms, math.sqrt(eps))
    return y if g is None else y * g


case(
    "rms_norm-affine",
    "rms_norm",
    [uniform((3, 7, 783), 510)],
    lambda x: x.rms_norm(NG),
    lambda x: rms_ref(x, h(1e-5), q(NG)),
    tol=1e-2,
    note=COMPOSITE,
)
case(
    "rms_norm-plain",
    "rms_norm",
    [uniform((7, 65), 511)],
    lambda x: x.rms_norm(),
    lambda x: rms_ref(x, h(1e-5)),
    tol=1e-2,
    note=COMPOSITE,
)

BM, BV = uniform((6,), 520, -1, 1), uniform((6,), 521, 0.25, 4)
BG, BB = uniform((6,), 522, 0.5, 1.5), uniform((6,), 523, -1, 1)
case(
    "batch_norm-affine",
    "batch_norm",
    [uniform((2, 6, 5, 7), 524)],
    lambda x: af.batch_norm(x, BM, BV, BG, BB),
    lambda x: (x - c4(q(BM))) / np.sqrt(c4(q(BV)) + h(1e-5)) * c4(q(BG)) + c4(q(BB)),
)
case(
    "batch_norm-rank3",
    "batch_norm",
    [uniform((1, 6, 783), 525)],
    lambda x: af.batch_norm(x, BM, BV, eps=1e-3),
    lambda x: (x - q(BM)[None, :, None]) / np.sqrt(q(BV)[None, :, None] + h(1e-3)),
)

case(
    "instance_norm-affine",
    "instance_norm",
    [uniform((2, 6, 7, 65), 526)],
    lambda x: af.instance_norm(x, BG, BB),
    lambda x: standardize(x, (2, 3), h(1e-5)) * c4(q(BG)) + c4(q(BB)),
)
case(
    "instance_norm-rank3",
    "instance_norm",
    [uniform((1, 6, 783), 527)],
    lambda x: af.instance_norm(x, eps=1e-3),
    lambda x: standardize(x, 2, h(1e-3)),
)

case(
    "channel_layer_norm-affine",
    "channel_layer_norm",
    [uniform((2, 6, 1, 783), 528)],
    lambda x: x.channel_layer_norm(BG, BB),
    lambda x: standardize(x, 1, h(1e-5)) * c4(q(BG)) + c4(q(BB)),
    tol=1e-2,
    note=COMPOSITE,
)
case(
    "channel_layer_norm-plain",
    "channel_layer_norm",
    [uniform((1, 7, 1, 65), 529)],
    lambda x: x.channel_layer_norm(eps=1e-3),
    lambda x: standardize(x, 1, h(1e-3)),
    tol=1e-2,
    note=COMPOSITE,
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
    "group_norm-affine",
    "group_norm",
    [uniform((2, 8, 5, 7), 532)],
    lambda x: x.group_norm(4, GG, GB),
    lambda x: group_ref(x, 4, h(1e-5), q(GG), q(GB)),
    tol=1e-2,
    note=COMPOSITE,
)
case(
    "group_norm-1group",
    "group_norm",
    [uniform((1, 8, 3, 65), 533)],
    lambda x: x.group_norm(1),
    lambda x: group_ref(x, 1, h(1e-5)),
    tol=1e-2,
    note=COMPOSITE,
)


def l2_ref(x, axis, eps):
    n = np.sqrt((x**2).sum(axis=axis, keepdims=True))
    return x / np.maximum(n, math.sqrt(eps))


case(
    "l2_norm-last",
    "l2_norm",
    [uniform((7, 783), 540)],
    lambda x: x.l2_norm(),
    lambda x: l2_ref(x, -1, 0.0),
    tol=1e-2,
    note=COMPOSITE,
)
case(
    "l2_norm-axis1",
    "l2_norm",
    [uniform((2, 7, 5), 541)],
    lambda x: x.l2_norm(axis=1, eps=1e-4),
    lambda x: l2_ref(x, 1, h(1e-4)),
    tol=1e-2,
    note=COMPOSITE,
)


@pytest.mark.parametrize("c", R.cases, ids=[c.id for c in R.cases])
def test_case(c):
    check_case(c)
