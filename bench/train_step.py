"""Training-step benchmark (`make bench`): the MNIST MLP 784-256-10 (GELU, softmax
cross-entropy, Adam) at batch 128, one step = forward + backward + update, timed for our three
Trainer modes on this machine's executor against a NumPy float32 implementation of the same
step and, when installed, PyTorch CPU. Everything runs at one thread (set before imports).
Writes (or replaces) the "Training step" section of the report.

Usage: python bench/train_step.py [--out BENCHMARKS.md] [--steps 60]
"""

import os

for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import aneforge as af  # noqa: E402
import train_mnist_mlp  # noqa: E402

BATCH = 128


def _erf(x):
    """Vectorised erf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7) in float32."""
    t = 1 / (1 + np.float32(0.3275911) * np.abs(x))
    poly = t * (
        np.float32(0.254829592)
        + t
        * (
            np.float32(-0.284496736)
            + t * (np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))
        )
    )
    return np.sign(x) * (1 - poly * np.exp(-x * x))


def numpy_step(state, x, y, t, lr=3e-3):
    """One fp32 NumPy forward + backward + Adam step of the same MLP (exact GELU)."""
    (w1, b1, w2, b2), moments = state
    z = x @ w1 + b1
    cdf = 0.5 * (1 + _erf(z * np.float32(1 / np.sqrt(2))))
    a = z * cdf
    lo = a @ w2 + b2
    p = np.exp(lo - lo.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    dlo = p / len(y)
    dz = (dlo @ w2.T) * (cdf + z * np.exp(-0.5 * z * z) * np.float32(1 / np.sqrt(2 * np.pi)))
    for v, g, (m, s) in zip((w1, b1, w2, b2), (x.T @ dz, dz.sum(0), a.T @ dlo, dlo.sum(0)), moments):
        m *= 0.9
        m += 0.1 * g
        s *= 0.999
        s += 0.001 * g * g
        v -= lr * (m / (1 - 0.9**t)) / (np.sqrt(s / (1 - 0.999**t)) + 1e-8)


def median_ms(fn, steps):
    fn(0)  # warm-up (compilation happens in the constructors)
    times = []
    for t in range(1, steps + 1):
        t0 = time.perf_counter()
        fn(t)
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def torch_step_ms(x, y, steps):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step(_):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()

    return median_ms(step, steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x, y = rng.random((BATCH, 784), dtype=np.float32), rng.integers(0, 10, BATCH)
    rows = []
    for mode in ("host", "device", "resident"):
        params, obj = train_mnist_mlp.build(BATCH)
        tr = af.Trainer(
            loss=obj,
            params=params,
            lr=3e-3,
            optimizer="adam",
            device_optimizer=mode == "device",
            resident_state=mode == "resident",
            loss_scale=1.0 if mode == "host" else 1024.0,
        )
        rows.append((f"aneforge Trainer, {mode} ({tr.device})", median_ms(lambda _t, tr=tr: tr.step(x, y), args.steps)))
    params, _ = train_mnist_mlp.build(BATCH)
    init = [af.value(p).copy() for p in params]
    state = (init, [(np.zeros_like(v), np.zeros_like(v)) for v in init])
    base = median_ms(lambda t: numpy_step(state, x, y, max(t, 1)), args.steps)
    rows.append(("NumPy float32 (same step, hand-written backward)", base))
    torch_ms = torch_step_ms(x, y, args.steps)
    if torch_ms is not None:
        rows.append(("PyTorch CPU", torch_ms))
    lines = [
        "## Training step",
        "",
        f"MNIST MLP 784-256-10 (GELU, softmax cross-entropy, Adam), batch {BATCH}, one thread everywhere; "
        f"median of {args.steps} steps after a warm-up, measured by `bench/train_step.py` in one run"
        + ("" if torch_ms is not None else " (PyTorch not installed)")
        + ".",
        "",
        "| implementation | ms / step | vs NumPy |",
        "| --- | ---: | ---: |",
        *[f"| {name} | {ms:.2f} | {ms / base:.2f}x |" for name, ms in rows],
        "",
    ]
    section = "\n".join(lines)
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    text = re.sub(r"## Training step\n.*?(?=\n## |\Z)", "", text, flags=re.S).rstrip("\n")
    out.write_text((text + "\n\n" if text else "") + section)
    print(section)


if __name__ == "__main__":
    main()
