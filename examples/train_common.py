"""Shared by the training examples: the MNIST-5k training run in any Trainer mode, and a
dependency-free loss/accuracy chart written as PNG (NumPy raster + zlib)."""

import struct
import sys
import zlib

import aneforge as af
import numpy as np


def train_mnist(build, image_shape, mode="host", epochs=8, seed=0, lr=3e-3, log=sys.stderr):
    """Train ``build(seed=...) -> (params, objective)`` on MNIST-5k (4,000 / 1,000, split seed 0)
    with Adam in ``mode`` (host, device = device_optimizer, resident = resident_state; the device
    modes use loss scale 1024); returns (trainer, {"loss": per step, "accuracy": per epoch})."""
    x_train, y_train, x_test, y_test = af.load_mnist_5k(seed=0)
    x_train, x_test = x_train.reshape((-1,) + image_shape), x_test.reshape((-1,) + image_shape)
    params, obj = build(seed=seed)
    trainer = af.Trainer(
        loss=obj,
        params=params,
        lr=lr,
        optimizer="adam",
        device_optimizer=(mode == "device"),
        resident_state=(mode == "resident"),
        loss_scale=1.0 if mode == "host" else 1024.0,
    )
    hist = trainer.fit(x_train, y_train, epochs=epochs, seed=seed, test=(x_test, y_test), log_every=0, file=log)
    return trainer, hist


def _png(path, rgb: np.ndarray):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def _panel(img, x0, y0, pw, ph, ys, color):
    img[y0 : y0 + ph, x0] = img[y0 + ph - 1, x0 : x0 + pw] = 0  # axes
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
            img[max(y - 1, 0) : y + 1, max(x - 1, 0) : x + 1] = color


def save_curves(path, losses, accuracies):
    """Write a 640x240 PNG: training loss per step (blue, left) and test accuracy per epoch (red, right)."""
    img = np.full((240, 640, 3), 255, np.uint8)
    _panel(img, 10, 10, 300, 220, losses, (30, 60, 200))
    _panel(img, 330, 10, 300, 220, accuracies, (200, 40, 30))
    _png(path, img)
