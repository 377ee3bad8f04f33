"""Training-step benchmark (`make bench`): one step = forward + backward + Adam update, for the
MNIST MLP 784-256-10 (GELU, softmax cross-entropy) at batch 128 and the example CNN
(conv3x3-relu-maxpool x2 + linear, 16/32 channels) at batch 64, timed for our three Trainer
modes against PyTorch eager (when installed) and, for the MLP, a NumPy float32 step. Everything
runs at one thread (set before imports). Times are CPU time of the process (the machine is
shared), medians over rounds in which the implementations alternate. Writes (or replaces) the
"Training step" section of the report.

Usage: python bench/train_step.py [--out BENCHMARKS.md] [--steps 10] [--rounds 7]
"""

import os

for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import aneforge as af  # noqa: E402
import train_mnist_cnn  # noqa: E402
import train_mnist_mlp  # noqa: E402

MODELS = {"MLP": (train_mnist_mlp, 128, (784,)), "CNN": (train_mnist_cnn, 64, (1, 28, 28))}


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


def numpy_mlp_step(params, x, y, lr=3e-3):
    """A closure running one fp32 NumPy forward + backward + Adam step of the MLP (exact GELU)."""
    init = [af.value(p).copy() for p in params]
    moments = [(np.zeros_like(v), np.zeros_like(v)) for v in init]
    w1, b1, w2, b2 = init
    t = [0]

    def step():
        t[0] += 1
        z = x @ w1 + b1
        cdf = 0.5 * (1 + _erf(z * np.float32(1 / np.sqrt(2))))
        a = z * cdf
        lo = a @ w2 + b2
        p = np.exp(lo - lo.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
        dlo = p / len(y)
        dz = (dlo @ w2.T) * (cdf + z * np.exp(-0.5 * z * z) * np.float32(1 / np.sqrt(2 * np.pi)))
        for v, g, (m, s) in zip(init, (x.T @ dz, dz.sum(0), a.T @ dlo, dlo.sum(0)), moments):
            m *= 0.9
            m += 0.1 * g
            s *= 0.999
            s += 0.001 * g * g
            v -= lr * (m / (1 - 0.9 ** t[0])) / (np.sqrt(s / (1 - 0.999 ** t[0])) + 1e-8)

    return step


def torch_step(name, x, y):
    """A closure running one PyTorch eager step of the same model, or None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    nn = torch.nn
    if name == "MLP":
        model = nn.Sequential(nn.Linear(784, 256), nn.GELU(), nn.Linear(256, 10))
    else:
        c1, c2 = train_mnist_cnn.CH1, train_mnist_cnn.CH2
        model = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(c2 * 49, 10),
        )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()

    return step


def cpu_ms(step, steps):
    """CPU milliseconds per step over `steps` steps."""
    t0 = time.process_time()
    for _ in range(steps):
        step()
    return 1e3 * (time.process_time() - t0) / steps


def bench_model(name, steps, rounds):
    """[(implementation, ms / step)] for one model: each implementation warmed up, then timed in
    `rounds` alternating rounds of `steps` steps; the median round."""
    module, batch, shape = MODELS[name]
    rng = np.random.default_rng(0)
    x = rng.random((batch, *shape), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    impls = []
    for mode in ("host", "device", "resident"):
        params, obj = module.build(batch)
        tr = af.Trainer(
            loss=obj,
            params=params,
            lr=3e-3,
            optimizer="adam",
            device_optimizer=mode == "device",
            resident_state=mode == "resident",
            loss_scale=1.0 if mode == "host" else 1024.0,
        )
        impls.append((f"aneforge Trainer, {mode} ({tr.device})", lambda tr=tr: tr.step(x, y)))
    step = torch_step(name, x, y)
    if step is not None:
        impls.append(("PyTorch eager", step))
    if name == "MLP":
        params, _ = module.build(batch)
        impls.append(("NumPy float32 (hand-written backward)", numpy_mlp_step(params, x, y)))
    for _, fn in impls:
        fn()
    times = [[] for _ in impls]
    for _ in range(rounds):
        for k, (_, fn) in enumerate(impls):
            times[k].append(cpu_ms(fn, steps))
    return [(label, float(np.median(t))) for (label, _), t in zip(impls, times)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    results = {name: bench_model(name, args.steps, args.rounds) for name in MODELS}
    torch_ok = any(label == "PyTorch eager" for label, _ in results["MLP"])
    base_label = "PyTorch eager" if torch_ok else "NumPy float32 (hand-written backward)"
    lines = [
        "## Training step",
        "",
        "One step = forward + backward + Adam update. MLP: MNIST 784-256-10 (GELU, softmax cross-entropy), "
        "batch 128; CNN: the example's conv3x3(16)-relu-maxpool, conv3x3(32)-relu-maxpool, linear, batch 64. "
        f"One thread everywhere; CPU ms per step, median of {args.rounds} rounds of {args.steps} steps with the "
        f"implementations alternating; `bench/train_step.py` on {platform.machine()}, {os.cpu_count()} cores, "
        f"{datetime.date.today()}, load average {os.getloadavg()[0]:.1f} at the end"
        + ("" if torch_ok else " (PyTorch not installed: ratios against NumPy, MLP only)")
        + ".",
        "",
        f"| model | implementation | CPU ms / step | vs {base_label} |",
        "| --- | --- | ---: | ---: |",
    ]
    for name, rows in results.items():
        base = dict(rows).get(base_label)
        for label, ms in rows:
            ratio = f"{ms / base:.2f}x" if base else "—"
            lines.append(f"| {name} | {label} | {ms:.2f} | {ratio} |")
    lines.append("")
    section = "\n".join(lines)
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    text = re.sub(r"## Training step\n.*?(?=\n## |\Z)", "", text, flags=re.S).rstrip("\n")
    out.write_text((text + "\n\n" if text else "") + section)
    print(section)


if __name__ == "__main__":
    main()
