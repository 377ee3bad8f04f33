"""A dependency-free line chart written as PNG (NumPy raster + zlib), for the training examples:
the loss per step on the left panel, test accuracy per epoch on the right."""

import struct
import zlib

import numpy as np


def _png(path, rgb: np.ndarray):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _panel(img, x0, y0, pw, ph, ys, color):
    img[y0:y0 + ph, x0] = img[y0 + ph - 1, x0:x0 + pw] = 0  # axes
    ys = np.asarray(ys, np.float64)
    if len(ys) == 0:
        return
    lo, hi = float(ys.min()), float(ys.max())
    span = hi - lo or 1.0
    xs = np.linspace(x0 + 2, x0 + pw - 2, max(len(ys), 2))[: len(ys)]
    py = y0 + ph - 3 - (ys - lo) / span * (ph - 6)
    for i in range(len(ys) - 1 if len(ys) > 1 else 1):
        j = min(i + 1, len(ys) - 1)
        n = int(max(abs(xs[j] - xs[i]), abs(py[j] - py[i]))) + 1
        for t in np.linspace(0, 1, n):
            x, y = int(round(xs[i] + t * (xs[j] - xs[i]))), int(round(py[i] + t * (py[j] - py[i])))
            img[max(y - 1, 0):y + 1, max(x - 1, 0):x + 1] = color


def save_curves(path, losses, accuracies):
    """Write a 640x240 PNG: training loss per step (blue, left) and test accuracy per epoch (red, right)."""
    img = np.full((240, 640, 3), 255, np.uint8)
    _panel(img, 10, 10, 300, 220, losses, (30, 60, 200))
    _panel(img, 330, 10, 300, 220, accuracies, (200, 40, 30))
    _png(path, img)
