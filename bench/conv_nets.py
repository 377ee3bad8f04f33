"""Convolution networks on the reference executor vs ONNX Runtime at 1 and 2 threads (issue 15), printed as a Markdown section:
ResNet-18 and ResNet-50 (bench/resnet18.py: `aneforge_graph` vs `onnx_model`, same seeded
weights) and MobileNetV3-small (bench/mobilenetv3.py: one onnx.helper model, imported by
`af.load_onnx` and run by ONNX Runtime from the same bytes), 224x224, batch 1.

Each (build, threads) pair runs in its own subprocess (RAYON_NUM_THREADS=n and
af.set_num_threads(n); ORT intra_op_num_threads=n), calls alternating with ONNX Runtime, so each
ratio comes from one process; the row is the median over rounds. Every call is timed twice: wall
clock and process CPU time (all threads), the latter robust to other work on a loaded machine. `--base DIR` also times a saved build for before/after:
DIR is a copy of an installed `aneforge` package directory (with its built `_core`) or a directory
containing one; the worker reports the package it imported and a mismatch is an error.

Usage: python bench/conv_nets.py [--base DIR] [--runs N] [--rounds N] [--models resnet18,resnet50,mobilenetv3]
                             [--out BENCHMARKS.md (appended)]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from base_build import run_worker
from emit import emit

HERE = Path(__file__).resolve().parent
MODELS = {
    "resnet18": "ResNet-18 224×224 b1",
    "resnet50": "ResNet-50 224×224 b1",
    "mobilenetv3": "MobileNetV3-small 224×224 b1",
}


def alternate(f, g, runs):
    """[f wall, g wall, f CPU, g CPU]: median seconds per call, f and g called alternately after
    two warm-up calls each; CPU is process time (every thread of the process)."""
    for _ in range(2):
        f(), g()
    samples = {f: ([], []), g: ([], [])}
    for _ in range(runs):
        for h in (f, g):
            c, t = time.process_time(), time.perf_counter()
            h()
            samples[h][0].append(time.perf_counter() - t)
            samples[h][1].append(time.process_time() - c)
    return [median(samples[h][i]) for i in (0, 1) for h in (f, g)]


def worker(threads, runs, names):
    """Time the models `names` at `threads` threads; print one JSON object
    {model: [aneforge wall s, ORT wall s, aneforge CPU s, ORT CPU s]}."""
    sys.path.insert(0, str(HERE))
    import models  # sets RAYON_NUM_THREADS=1 on import; the pool reads it on first use

    os.environ["RAYON_NUM_THREADS"] = str(threads)
    import aneforge as af
    import mobilenetv3
    import numpy as np
    import resnet18

    def session(model):
        return models.ort_session(model, threads)

    if hasattr(af, "set_num_threads"):
        af.set_num_threads(threads)
    out = {}
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float16).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="aneforge-bench-conv-") as tmp:
        os.environ["ANEFORGE_CACHE_DIR"] = tmp
        for depth in [d for d in (18, 50) if f"resnet{d}" in names]:
            w = resnet18.weights(depth=depth)
            net = af.compile(resnet18.aneforge_graph(af, w, depth), device="reference")
            sess = session(resnet18.onnx_model(w, depth))
            out[f"resnet{depth}"] = alternate(lambda n=net: n(x), lambda s=sess: s.run(None, {"x": x}), runs)
        if "mobilenetv3" in names:
            m = mobilenetv3.onnx_model()
            net = af.load_onnx(m.SerializeToString(), device="reference")
            sess = session(m)
            out["mobilenetv3"] = alternate(lambda: net(x), lambda: sess.run(None, {"x": x}), runs)
    out["module"] = af.__file__
    print(json.dumps(out))


def median(values):
    s = sorted(values)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def section(runs, rounds, base=None, names=tuple(MODELS)):
    builds = [("this build", None)] + ([("before (base)", base)] if base else [])
    load = os.getloadavg()[0]
    per = {}  # (build, threads) -> list of per-round results
    for _ in range(rounds):
        for b, d in builds:
            for t in (1, 2):
                per.setdefault((b, t), []).append(
                    run_worker(__file__, ["--worker", str(t), "--runs", str(runs), "--models", ",".join(names)], t, d)
                )
    res = {k: {m: [median([r[m][i] for r in v]) for i in range(4)] for m in names} for k, v in per.items()}
    rows = [
        "| model | build | threads | aneforge wall | ORT wall | wall ratio | aneforge CPU | ORT CPU | CPU ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key in names:
        label = MODELS[key]
        for b, _ in builds:
            for t in (1, 2):
                a, o, ac, oc = res[(b, t)][key]
                rows.append(
                    f"| {label} | {b} | {t} | {a * 1e3:.2f} ms | {o * 1e3:.2f} ms | {a / o:.2f}× "
                    f"| {ac * 1e3:.2f} ms | {oc * 1e3:.2f} ms | {ac / oc:.2f}× |"
                )
    speed = [f"{MODELS[k]} {res[('this build', 1)][k][0] / res[('this build', 2)][k][0]:.2f}×" for k in names]
    ort_speed = [f"{MODELS[k]} {res[('this build', 1)][k][1] / res[('this build', 2)][k][1]:.2f}×" for k in names]
    return "\n".join(
        [
            "## Convolution networks vs ONNX Runtime (bench/conv_nets.py)",
            "",
            *rows,
            "",
            f"- Each cell: median over {rounds} rounds (builds and thread counts alternating, each in its own process) "
            f"of the median of {runs} calls alternating aneforge / ONNX Runtime; CPU = process CPU time over all threads.",
            f"- 2-thread speed-up of this build (1-thread / 2-thread): {', '.join(speed)}; ONNX Runtime: {', '.join(ort_speed)}.",
            f"- Load average when the run started: {load:.1f} on {os.cpu_count()} cores (other engineers' builds share the machine).",
            "",
        ]
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", type=int)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base")
    ap.add_argument("--out")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ", ".join(MODELS))
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    if unknown := [m for m in names if m not in MODELS]:
        ap.error(f"unknown models {unknown}; choose from {list(MODELS)}")
    if args.worker:
        worker(args.worker, args.runs, names)
        return
    text = section(args.runs, args.rounds, args.base, names)
    emit(text, args.out)


if __name__ == "__main__":
    main()
