"""Baselines for bench/llm.py (issue 14), run by hand in a separate venv that has them
(never in `make test`): Hugging Face transformers (PyTorch eager, the GGUF dequantized to fp32
by transformers' own loader) and llama.cpp (llama-cpp-python, the same GGUF), one thread each,
on the same token ids. Each runtime runs in its own process so its peak RSS is its own.

Usage: PYTHON bench/llm_baselines.py {transformers|llama_cpp} MODEL.gguf IDS_JSON NEW_TOKENS RUNS
prints one JSON object: prefill and decode tok/s by wall and by process CPU time (medians), peak
RSS in MB, version.
"""

import json
import os
import resource
import statistics
import sys
import time

os.environ["OMP_NUM_THREADS"] = "1"


def timed(fn):
    """(wall s, process CPU s) of fn()."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def transformers_run(path, ids, new_tokens, runs):
    import torch
    import transformers

    torch.set_num_threads(1)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), torch_dtype=torch.float32
    )
    model.eval()
    prefill, decode = [], []
    state = {}

    def first():
        out = model(torch.tensor([ids]), use_cache=True)
        state["past"], state["next"] = out.past_key_values, int(out.logits[0, -1].argmax())

    def steps():
        for _ in range(new_tokens):
            out = model(torch.tensor([[state["next"]]]), past_key_values=state["past"], use_cache=True)
            state["past"], state["next"] = out.past_key_values, int(out.logits[0, -1].argmax())

    with torch.inference_mode():
        for _ in range(runs):
            prefill.append(timed(first))
            decode.append(timed(steps))
    return prefill, decode, f"transformers {transformers.__version__}, torch {torch.__version__}"


def llama_cpp_run(path, ids, new_tokens, runs):
    import llama_cpp
    import llama_cpp.llama_cpp as capi
    import numpy as np

    # Without extra buffer types (weight repacking): on this VM the AMX repack of a native
    # build crashes in ggml_backend_amx_mul_mat.
    defaults = capi.llama_model_default_params

    def model_params():
        p = defaults()
        p.use_extra_bufts = False
        return p

    capi.llama_model_default_params = model_params
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_threads=1, n_threads_batch=1, n_batch=256, verbose=False)
    prefill, decode = [], []

    def greedy():
        return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))))

    def steps():
        for _ in range(new_tokens):
            llm.eval([greedy()])

    for _ in range(runs):
        llm.reset()
        prefill.append(timed(lambda: llm.eval(ids)))
        decode.append(timed(steps))
    return prefill, decode, f"llama-cpp-python {llama_cpp.__version__}"


def main():
    which, path, ids_json, new_tokens, runs = sys.argv[1:6]
    ids = json.loads(ids_json)
    run = {"transformers": transformers_run, "llama_cpp": llama_cpp_run}[which]
    prefill, decode, version = run(path, ids, int(new_tokens), int(runs))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def rate(count, times, i):
        return count / statistics.median(t[i] for t in times)

    n, steps = len(ids), int(new_tokens)
    result = {
        "prefill": rate(n, prefill, 0),
        "prefill_cpu": rate(n, prefill, 1),
        "decode": rate(steps, decode, 0),
        "decode_cpu": rate(steps, decode, 1),
        "rss_mb": rss,
        "version": version,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
