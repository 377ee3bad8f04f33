"""Chat KV reuse and the compression report on tiny random-weight decoders written by the test
(Hugging Face folders with a word-level tokenizer and a Jinja chat template, GGUF through the
`gguf` package), against the NumPy float64 oracle (llm_oracle.py) and NumPy's own fp16 rounding."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from test_llm import random_weights, spec_for, write_gguf, write_hf
from test_llm_cli import chat_folder

# User turns are "w1 ... w2", assistant turns "w3 ... w4"; the generation prompt is "w3", so a
# rendered conversation extends the previous turn's prompt plus its answer token for token.
TEMPLATE = (
    "{% for m in messages %}{% if m.role == 'user' %}w1 {{ m.content }} w2 "
    "{% else %}w3 {{ m.content }} w4 {% endif %}{% endfor %}"
    "{% if add_generation_prompt %}w3{% endif %}"
)


@pytest.fixture
def chat_model(tmp_path):
    oracle = chat_folder(tmp_path, TEMPLATE, seed=21)
    return af.load_llm(tmp_path, max_context=64, device="reference"), oracle


def ids_of(text):
    return [int(w[1:]) for w in text.split()]


def two_turns(model, reuse):
    """Run a two-turn chat; returns both answers and the second turn's stats."""
    first = [{"role": "user", "content": "w5 w6 w7"}]
    answer = model.chat(first, max_new_tokens=4, stop_at_eos=False, reuse_kv=reuse)
    second = first + [{"role": "assistant", "content": answer}, {"role": "user", "content": "w9 w10"}]
    return answer, model.chat(second, max_new_tokens=4, stop_at_eos=False, reuse_kv=reuse), model.stats()


def test_second_turn_runs_only_the_new_tokens_and_matches_the_oracle(chat_model):
    model, oracle = chat_model
    answer, reply, stats = two_turns(model, reuse=True)
    prompt1 = [1, 5, 6, 7, 2, 3]
    assert ids_of(answer) == oracle.greedy(prompt1, 4)
    prompt2 = prompt1 + ids_of(answer) + [4, 1, 9, 10, 2, 3]
    assert ids_of(reply) == oracle.greedy(prompt2, 4)
    # resident: the first prompt and the first 3 answer tokens (the 4th was sampled, never fed)
    assert stats["prompt_tokens"] == len(prompt2) == 16
    assert stats["prefilled_tokens"] == len(prompt2) - (len(prompt1) + 3) == 7

    _, reply_again, fresh = two_turns(model, reuse=False)
    assert reply_again == reply
    assert fresh["prefilled_tokens"] == 16


def test_a_conversation_that_does_not_extend_the_cache_is_prefilled_whole(chat_model):
    model, oracle = chat_model
    model.chat([{"role": "user", "content": "w5 w6 w7"}], max_new_tokens=3, stop_at_eos=False)
    other = [{"role": "user", "content": "w8 w6"}]
    reply = model.chat(other, max_new_tokens=3, stop_at_eos=False)
    assert model.stats()["prefilled_tokens"] == 5
    assert ids_of(reply) == oracle.greedy([1, 8, 6, 2, 3], 3)


def fp16_rel_error(w):
    w = w.astype(np.float64)
    return float(np.linalg.norm(w - w.astype(np.float16).astype(np.float64)) / np.linalg.norm(w))


def test_hf_weights_are_held_as_fp16_with_their_rounding_error(tmp_path):
    spec = spec_for("llama", layers=1)
    W = random_weights(spec, seed=22)
    write_hf(tmp_path, "llama", spec, W)
    rows = {r["name"]: r for r in af.load_llm(tmp_path, max_context=32, device="reference").compression_report()}
    k = rows["model.layers.0.self_attn.k_proj.weight"]
    assert k["encoding"] == "fp16" and k["shape"] == W["0.k"].shape
    assert k["bytes_encoded"] == k["bytes_fp16"] == 2 * W["0.k"].size
    assert k["rel_error"] == pytest.approx(fp16_rel_error(W["0.k"]), rel=1e-6)
    assert 0 < k["rel_error"] < 1e-3
    assert rows["lm_head.weight"]["shape"] == (spec.vocab, spec.width)
    assert len(rows) == 7 + 1  # q k v o gate up down, lm_head

    compressed = af.load_llm(tmp_path, max_context=32, device="reference", compress="int8").compression_report()
    assert all(r["encoding"] == "int8" for r in compressed)
    projections = [r for r in compressed if r["shape"] != (spec.head_dim, spec.head_dim)]  # not the RoPE ±1 matrices
    assert len(projections) == 8 and all(1e-3 < r["rel_error"] < 0.02 for r in projections)


def test_gguf_report_lists_exact_gguf_blocks_and_fp16(tmp_path):
    spec = spec_for("qwen2", layers=1)
    path = tmp_path / "q.gguf"
    write_gguf(path, "qwen2", spec, random_weights(spec, seed=23))
    rows = {r["name"]: r for r in af.load_llm(path, max_context=32, device="reference").compression_report()}
    up = rows["blk.0.ffn_up.weight"]  # the one Q8_0 tensor: int8 codes + one fp16 scale per 32,
    # kept in the exact `gguf` encoding (its MIL form, blockwise int8 without a minimum, is exact)
    assert up["encoding"] == "gguf" and up["rel_error"] == 0.0
    assert up["bytes_encoded"] == spec.ffn * spec.width + 2 * spec.ffn * spec.width // 32
    assert rows["blk.0.ffn_down.weight"]["encoding"] == "fp16"
