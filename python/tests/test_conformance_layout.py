"""Conformance cases: data movement, resize, channel ops, einsum, affine and image input (shared pieces in conformance_common.py)."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from conformance_common import Registry, c4, check_case, h, q, uniform

R = Registry()
case = R.case

# ---------------------------------------------------------------- layout ----------------
case(
    "reshape",
    "reshape",
    [uniform((2, 3, 4, 5), 600)],
    lambda x: x.reshape(6, -1),
    lambda x: x.reshape(6, -1),
    exact=True,
)
case(
    "reshape-tuple",
    "reshape",
    [uniform((7, 783), 601)],
    lambda x: x.reshape((1, 7, 27, 29)),
    lambda x: x.reshape(1, 7, 27, 29),
    exact=True,
)
case(
    "transpose",
    "transpose",
    [uniform((2, 7, 65), 602)],
    lambda x: x.transpose(0, 2, 1),
    lambda x: x.transpose(0, 2, 1),
    exact=True,
)
case(
    "transpose-rev",
    "transpose",
    [uniform((3, 1, 7, 5), 603)],
    lambda x: x.transpose(),
    lambda x: x.transpose(),
    exact=True,
)
case(
    "concat-3",
    "concat",
    [uniform((2, 1, 5), 604), uniform((2, 7, 5), 605), uniform((2, 13, 5), 606)],
    lambda a, b, c: af.concat([a, b, c], axis=1),
    lambda a, b, c: np.concatenate([a, b, c], axis=1),
    exact=True,
)
case(
    "concat-neg",
    "concat",
    [uniform((3, 65), 607), uniform((3, 783), 608)],
    lambda a, b: af.concat((a, b), axis=-1),
    lambda a, b: np.concatenate([a, b], -1),
    exact=True,
)
case("split-equal", "split", [uniform((6, 7, 5), 609)], lambda x: x.split(3), lambda x: np.split(x, 3), exact=True)
case(
    "split-sizes",
    "split",
    [uniform((2, 783), 610)],
    lambda x: af.split(x, [1, 700, 82], axis=-1),
    lambda x: np.split(x, [1, 701], axis=-1),
    exact=True,
)
case(
    "slice_by_size",
    "slice_by_size",
    [uniform((3, 7, 783), 611)],
    lambda x: x.slice_by_size((1, 0, 3), (2, 7, 100)),
    lambda x: x[1:3, 0:7, 3:103],
    exact=True,
)
case(
    "squeeze",
    "squeeze",
    [uniform((1, 7, 1, 5), 612)],
    lambda x: x.squeeze((0, 2)),
    lambda x: x.squeeze((0, 2)),
    exact=True,
)
case("squeeze-neg", "squeeze", [uniform((7, 65, 1), 613)], lambda x: x.squeeze(-1), lambda x: x.squeeze(-1), exact=True)
case(
    "expand_dims",
    "expand_dims",
    [uniform((7, 5), 614)],
    lambda x: x.expand_dims((0, 2)),
    lambda x: x[None, :, None, :],
    exact=True,
)
case(
    "expand_dims-neg",
    "expand_dims",
    [uniform((7, 5), 615)],
    lambda x: x.expand_dims(-1),
    lambda x: x[..., None],
    exact=True,
)
case(
    "reverse",
    "reverse",
    [uniform((2, 7, 65), 620)],
    lambda x: x.reverse((0, -1)),
    lambda x: x[::-1, :, ::-1],
    exact=True,
)
case("reverse-1", "reverse", [uniform((1, 783), 621)], lambda x: x.reverse(1), lambda x: x[:, ::-1], exact=True)
case(
    "tile", "tile", [uniform((7, 1, 65), 622)], lambda x: x.tile((2, 3, 1)), lambda x: np.tile(x, (2, 3, 1)), exact=True
)
case("tile-1", "tile", [uniform((1, 7), 623)], lambda x: x.tile([3, 1]), lambda x: np.tile(x, (3, 1)), exact=True)
case(
    "flatten2d",
    "flatten2d",
    [uniform((2, 7, 1, 65), 624)],
    lambda x: x.flatten2d(),
    lambda x: x.reshape(2, -1),
    exact=True,
)
case(
    "flatten2d-neg",
    "flatten2d",
    [uniform((3, 7, 5), 625)],
    lambda x: x.flatten2d(-1),
    lambda x: x.reshape(21, 5),
    exact=True,
)
case(
    "stack",
    "stack",
    [uniform((7, 65), 626), uniform((7, 65), 627)],
    lambda a, b: af.stack([a, b]),
    lambda a, b: np.stack([a, b]),
    exact=True,
)
case(
    "stack-neg",
    "stack",
    [uniform((1, 783), 628), uniform((1, 783), 629), uniform((1, 783), 630)],
    lambda a, b, c: af.stack((a, b, c), axis=-1),
    lambda a, b, c: np.stack([a, b, c], axis=-1),
    exact=True,
)
case(
    "gather",
    "gather",
    [uniform((7, 65), 631)],
    lambda x: af.gather(x, [0, 1, 2, 64, -1, 3, 3], axis=-1),
    lambda x: np.take(x, [0, 1, 2, 64, 64, 3, 3], axis=-1),
    exact=True,
)
case(
    "gather-1",
    "gather",
    [uniform((2, 7, 5), 632)],
    lambda x: af.gather(x, 6, axis=1),
    lambda x: np.take(x, 6, axis=1),
    exact=True,
)


def d2s_ref(x, r, dcr):
    """depth -> space: DCR reads channel (i*r + j)*C + c, PyTorch reads c*r*r + i*r + j."""
    n, cd, h, w = x.shape
    c = cd // (r * r)
    t = (
        x.reshape(n, r, r, c, h, w).transpose(0, 3, 4, 1, 5, 2)
        if dcr
        else x.reshape(n, c, r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    )
    return t.reshape(n, c, h * r, w * r)


def s2d_ref(x, r, dcr):
    n, c, hh, ww = x.shape
    h, w = hh // r, ww // r
    t = x.reshape(n, c, h, r, w, r)
    t = t.transpose(0, 3, 5, 1, 2, 4) if dcr else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * r * r, h, w)


case(
    "crop",
    "crop",
    [uniform((2, 3, 7, 65), 633)],
    lambda x: af.crop(x, 1, 2, 3, 0),
    lambda x: x[..., 1:5, 3:],
    exact=True,
)
case(
    "crop-1", "crop", [uniform((1, 1, 783), 634)], lambda x: af.crop(x, 0, 0, 0, 782), lambda x: x[..., :1], exact=True
)
case(
    "space_to_depth",
    "space_to_depth",
    [uniform((2, 3, 14, 6), 635)],
    lambda x: af.space_to_depth(x),
    lambda x: s2d_ref(x, 2, True),
    exact=True,
)
case(
    "depth_to_space",
    "depth_to_space",
    [uniform((1, 18, 7, 5), 636)],
    lambda x: af.depth_to_space(x, 3),
    lambda x: d2s_ref(x, 3, True),
    exact=True,
)
case(
    "pixel_shuffle",
    "pixel_shuffle",
    [uniform((2, 12, 7, 5), 637)],
    lambda x: af.pixel_shuffle(x, 2),
    lambda x: d2s_ref(x, 2, False),
    exact=True,
)
case(
    "pixel_unshuffle",
    "pixel_unshuffle",
    [uniform((1, 2, 21, 9), 638)],
    lambda x: af.pixel_unshuffle(x, 3),
    lambda x: s2d_ref(x, 3, False),
    exact=True,
)
case(
    "upsample-2",
    "upsample",
    [uniform((1, 3, 5, 7), 616)],
    lambda x: x.upsample(),
    lambda x: x.repeat(2, 2).repeat(2, 3),
    exact=True,
)
case(
    "upsample-2x3",
    "upsample",
    [uniform((2, 1, 7, 4), 617)],
    lambda x: x.upsample((2, 3)),
    lambda x: x.repeat(2, 2).repeat(3, 3),
    exact=True,
)


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


case(
    "resize_nearest-up",
    "resize_nearest_neighbor",
    [uniform((1, 3, 7, 5), 640)],
    lambda x: af.resize_nearest_neighbor(x, 13, 11),
    lambda x: nearest_ref(x, 13, 11),
    exact=True,
)
case(
    "resize_nearest-down",
    "resize_nearest_neighbor",
    [uniform((2, 2, 65, 9), 641)],
    lambda x: af.resize_nearest_neighbor(x, 7, 4),
    lambda x: nearest_ref(x, 7, 4),
    exact=True,
)
case(
    "resize_nearest-rank3",
    "resize_nearest_neighbor",
    [uniform((3, 1, 783), 642)],
    lambda x: af.resize_nearest_neighbor(x, 1, 100),
    lambda x: nearest_ref(x, 1, 100),
    exact=True,
)
case(
    "resize_bilinear-half",
    "resize_bilinear",
    [uniform((1, 3, 7, 5), 643)],
    lambda x: af.resize_bilinear(x, 15, 12),
    lambda x: bilinear_ref(x, 15, 12, "UNALIGN_CORNERS"),
)
case(
    "resize_bilinear-align",
    "resize_bilinear",
    [uniform((2, 1, 9, 65), 644)],
    lambda x: af.resize_bilinear(x, 5, 130, align_corners=True),
    lambda x: bilinear_ref(x, 5, 130, "ALIGN_CORNERS"),
)
case(
    "resize_bilinear-down",
    "resize_bilinear",
    [uniform((4, 13, 7), 645)],
    lambda x: af.resize_bilinear(x, 1, 3),
    lambda x: bilinear_ref(x, 1, 3, "UNALIGN_CORNERS"),
)
case(
    "resize_bilinear-default",
    "resize_bilinear",
    [uniform((1, 2, 6, 5), 649)],
    lambda x: af.resize_bilinear(x, 9, 4, sampling_mode="DEFAULT"),
    lambda x: bilinear_ref(x, 9, 4, "DEFAULT"),
)
case(
    "resize_bilinear-offset",
    "resize_bilinear",
    [uniform((1, 2, 6, 5), 650)],
    lambda x: af.resize_bilinear(x, 4, 11, sampling_mode="OFFSET_CORNERS"),
    lambda x: bilinear_ref(x, 4, 11, "OFFSET_CORNERS"),
)
case(
    "resize_bilinear-strict1",
    "resize_bilinear",
    [uniform((3, 5, 8), 651)],
    lambda x: af.resize_bilinear(x, 1, 3, sampling_mode="STRICT_ALIGN_CORNERS"),
    lambda x: bilinear_ref(x, 1, 3, "STRICT_ALIGN_CORNERS"),
)
case(
    "resize_bilinear-align1",
    "resize_bilinear",
    [uniform((3, 5, 8), 652)],
    lambda x: af.resize_bilinear(x, 1, 3, align_corners=True),
    # PyTorch / ONNX align_corners: a size-1 output samples index 0 (MIL ALIGN_CORNERS would take the centre).
    lambda x: bilinear_ref(x, 1, 3, "STRICT_ALIGN_CORNERS"),
)
case(
    "upsample_bilinear-2",
    "upsample_bilinear",
    [uniform((1, 3, 7, 5), 646)],
    lambda x: af.upsample_bilinear(x),
    lambda x: upsample_bilinear_ref(x, 2, 2, False),
)
case(
    "upsample_bilinear-align",
    "upsample_bilinear",
    [uniform((2, 2, 5, 9), 647)],
    lambda x: af.upsample_bilinear(x, (1.5, 3.0), align_corners=True),
    lambda x: upsample_bilinear_ref(x, 1.5, 3.0, True),
)
case(
    "upsample_bilinear-frac",
    "upsample_bilinear",
    [uniform((1, 1, 7, 7), 648)],
    lambda x: af.upsample_bilinear(x, 2.5),
    lambda x: upsample_bilinear_ref(x, 2.5, 2.5, False),
)

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
    "local_response_norm-5",
    "local_response_norm",
    [uniform((2, 7, 5, 65), 803)],
    lambda x: af.local_response_norm(x, 5, alpha=0.05, beta=0.75, k=2.0),
    lambda x: lrn_ref(x, 5, h(0.05), 0.75, 2.0),
)
case(
    "local_response_norm-even",
    "local_response_norm",
    [uniform((1, 6, 783), 804)],
    lambda x: af.local_response_norm(x, 4, alpha=0.1, beta=0.5),
    lambda x: lrn_ref(x, 4, h(0.1), 0.5, 1.0),
)
case(
    "lrn",
    "lrn",
    [uniform((1, 6, 7, 9), 805)],
    lambda x: af.lrn(x, alpha=0.02, beta=0.75, k=1.0),
    lambda x: lrn_ref(x, 6, h(0.02 * 6), 0.75, 1.0),
)
EIN_W = uniform((65, 9), 806, -1, 1)
case(
    "einsum-matmul",
    "einsum",
    [uniform((7, 65), 807)],
    lambda x: af.einsum("ij,jk->ik", x, EIN_W),
    lambda x: x @ q(EIN_W),
)
case(
    "einsum-batched-transposed",
    "einsum",
    [uniform((3, 7, 65), 808), uniform((3, 5, 65), 809)],
    lambda a, b: af.einsum("bij,bkj->bki", a, b),
    lambda a, b: np.einsum("bij,bkj->bki", a, b),
)
case(
    "einsum-implicit-summed",
    "einsum",
    [uniform((4, 7, 9), 810, -1, 1), uniform((9, 5), 811, -1, 1)],
    lambda a, b: af.einsum("ijk,kl", a, b),
    lambda a, b: np.einsum("ijk,kl", a, b),
)
case(
    "einsum-outer",
    "einsum",
    [uniform((7,), 812), uniform((65,), 813)],
    lambda a, b: af.einsum("i,j->ji", a, b),
    lambda a, b: np.einsum("i,j->ji", a, b),
)
EIN_NATIVE_W = uniform((2, 65, 5, 9), 814, -1, 1)
case(
    "einsum_native-rank4",
    "einsum_native",
    [uniform((2, 3, 5, 65), 815, -1, 1)],
    lambda x: af.einsum_native("nchw,nwhu->nchu", x, EIN_NATIVE_W),
    lambda x: np.einsum("nchw,nwhu->nchu", x, q(EIN_NATIVE_W)),
)
case(
    "einsum_native-rank3-broadcast-h",
    "einsum_native",
    [uniform((7, 1, 65), 816, -1, 1), uniform((65, 4, 3), 817, -1, 1)],
    lambda a, b: af.einsum_native("chw,whu->chu", a, b),
    lambda a, b: np.einsum("chw,whu->chu", np.broadcast_to(a, (7, 4, 65)), b),
)
AFF_T = np.array([[0.9, -0.2, 0.1, 0.3, 1.1, -0.15]], dtype=np.float32)
case(
    "affine-shared",
    "affine",
    [uniform((2, 3, 9, 65), 818)],
    lambda x: af.affine(x, AFF_T, 7, 33),
    lambda x: affine_ref(x, q(AFF_T), 7, 33, False),
)
case(
    "affine-per-batch-align",
    "affine",
    [uniform((2, 1, 7, 7), 819), uniform((2, 6), 820, -1, 1)],
    lambda x, t: af.affine(x, t, 11, 5, align_corners=True),
    lambda x, t: affine_ref(x, t, 11, 5, True),
)

# ------------------------------------------------------------ image_input ---------------
IMG = np.random.default_rng(700).integers(0, 256, (1, 3, 7, 9)).astype(np.uint8)
IMG_SCALE, IMG_BIAS = [0.0171, 0.0175, 0.0174], [-2.1179, -2.0357, -1.8044]
case(
    "image_input-per-channel",
    "image_input",
    [IMG],
    lambda x: x,
    lambda x: q(x * c4(q(np.array(IMG_SCALE)))) + c4(q(np.array(IMG_BIAS))),
    ports=lambda: [af.image_input((1, 3, 7, 9), IMG_SCALE, IMG_BIAS)],
)
IMG2 = np.random.default_rng(701).integers(0, 256, (2, 1, 5, 783)).astype(np.uint8)
case(
    "image_input-default",
    "image_input",
    [IMG2],
    lambda x: x.relu(),
    lambda x: x * h(1 / 255),
    ports=lambda: [af.image_input((2, 1, 5, 783))],
)


@pytest.mark.parametrize("c", R.cases, ids=[c.id for c in R.cases])
def test_case(c):
    check_case(c)
