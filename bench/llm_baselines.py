"""Baselines for bench/llm.py (issue 14), run by hand in a separate venv that has them
(never in `make test`): Hugging Face transformers (PyTorch eager, the GGUF dequantized to fp32
by transformers' own loader) and llama.cpp (llama-cpp-python, the same GGUF), one thread each,
on the same token ids. Each runtime runs in its own process so its peak RSS is its own.

Usage: PYTHON bench/llm_baselines.py {transformers|llama_cpp} MODEL.gguf IDS_JSON NEW_TOKENS RUNS
prints one JSON object: prefill tok/s, decode tok/s (medians), peak RSS in MB, version.
"""

import json
import os
import resource
import statistics
import sys
import time

os.environ["OMP_NUM_THREADS"] = "1"


def transformers_run(path, ids, new_tokens, runs):
    import torch
    import transformers

    torch.set_num_threads(1)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), torch_dtype=torch.float32
    )
    model.eval()
    prefill, decode = [], []
    with torch.inference_mode():
        for _ in range(runs):
            x = torch.tensor([ids])
            t = time.perf_counter()
            out = model(x, use_cache=True)
            prefill.append(len(ids) / (time.perf_counter() - t))
            past, nxt = out.past_key_values, int(out.logits[0, -1].argmax())
            t = time.perf_counter()
            for _ in range(new_tokens):
                out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, int(out.logits[0, -1].argmax())
            decode.append(new_tokens / (time.perf_counter() - t))
    return prefill, decode, f"transformers {transformers.__version__}, torch {torch.__version__}"


def llama_cpp_run(path, ids, new_tokens, runs):
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_threads=1, n_threads_batch=1, n_batch=256, verbose=False)
    prefill, decode = [], []
    for _ in range(runs):
        llm.reset()
        t = time.perf_counter()
        llm.eval(ids)
        prefill.append(len(ids) / (time.perf_counter() - t))
        t = time.perf_counter()
        for _ in range(new_tokens):
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            llm.eval([nxt])
        decode.append(new_tokens / (time.perf_counter() - t))
    return prefill, decode, f"llama-cpp-python {llama_cpp.__version__}"


def main():
    which, path, ids_json, new_tokens, runs = sys.argv[1:6]
    ids = json.loads(ids_json)
    run = {"transformers": transformers_run, "llama_cpp": llama_cpp_run}[which]
    prefill, decode, version = run(path, ids, int(new_tokens), int(runs))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "prefill": statistics.median(prefill),
                "decode": statistics.median(decode),
                "rss_mb": rss,
                "version": version,
            }
        )
    )


if __name__ == "__main__":
    main()
