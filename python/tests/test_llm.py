"""The decoder family on tiny random-weight models, one per architecture option, written by the
test as GGUF (the `gguf` package's writer, one Q8_0 tensor) and as Hugging Face folders
(config.json + safetensors, sharded with an index for one), against the NumPy float64 oracle
(llm_oracle.py): last-position logits (prefill programs) and greedy tokens (resident-KV decode
programs). Bad GGUF files raise typed errors naming the file, key or tensor."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import aneforge as af
import gguf
import numpy as np
import pytest
from llm_oracle import GGUF_NAMES, Oracle, Spec, weights_from_gguf
from safetensors.numpy import save_file

HF_NAMES = {
    "attn_norm": "input_layernorm.weight",
    "q": "self_attn.q_proj.weight",
    "k": "self_attn.k_proj.weight",
    "v": "self_attn.v_proj.weight",
    "bq": "self_attn.q_proj.bias",
    "bk": "self_attn.k_proj.bias",
    "bv": "self_attn.v_proj.bias",
    "q_norm": "self_attn.q_norm.weight",
    "k_norm": "self_attn.k_norm.weight",
    "o": "self_attn.o_proj.weight",
    "ffn_norm": "post_attention_layernorm.weight",
    "gate": "mlp.gate_proj.weight",
    "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}

# family -> (Spec options, HF config extras)
FAMILIES = {
    "llama": ({}, {}),
    "mistral": ({"window": 4}, {"sliding_window": 4}),
    "qwen2": ({"qkv_bias": True}, {}),
    "qwen3": ({"qk_norm": True, "head_dim": 24}, {"head_dim": 24}),
    "gemma": ({"gelu": True, "scale_embed": True}, {"hidden_act": "gelu_pytorch_tanh"}),
}


def spec_for(family, **over):
    opts = dict(FAMILIES[family][0])
    opts.update(over)
    base = dict(layers=2, width=64, heads=4, kv_heads=2, head_dim=16, ffn=80, vocab=64, rope_base=10000.0, eps=1e-5)
    base.update(opts)
    return Spec(**base)


def random_weights(spec, seed):
    rng = np.random.default_rng(seed)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    qd, kd = spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    W = {"embed": (0.5 * rng.standard_normal((spec.vocab, spec.width))).astype(np.float32)}
    for layer in range(spec.layers):
        p = f"{layer}."
        W.update({p + "attn_norm": norm(spec.width), p + "ffn_norm": norm(spec.width)})
        W.update({p + "q": mat(qd, spec.width), p + "k": mat(kd, spec.width), p + "v": mat(kd, spec.width)})
        W[p + "o"] = mat(spec.width, qd)
        W.update({p + "gate": mat(spec.ffn, spec.width), p + "up": mat(spec.ffn, spec.width)})
        W[p + "down"] = mat(spec.width, spec.ffn)
        if spec.qkv_bias:
            for b, n in (("bq", qd), ("bk", kd), ("bv", kd)):
                W[p + b] = (0.3 * rng.standard_normal(n)).astype(np.float32)
        if spec.qk_norm:
            W[p + "q_norm"], W[p + "k_norm"] = norm(spec.head_dim), norm(spec.head_dim)
    W["final_norm"] = norm(spec.width)
    W["lm_head"] = mat(spec.vocab, spec.width) * 4.0
    return W


def write_hf(folder, family, spec, W, shards=1):
    cfg = {
        "model_type": family,
        "hidden_size": spec.width,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "intermediate_size": spec.ffn,
        "vocab_size": spec.vocab,
        "max_position_embeddings": 64,
        "rope_theta": spec.rope_base,
        "rms_norm_eps": spec.eps,
        "tie_word_embeddings": family == "gemma",
        **FAMILIES[family][1],
    }
    (folder / "config.json").write_text(json.dumps(cfg))
    tensors = {"model.embed_tokens.weight": W["embed"], "model.norm.weight": W["final_norm"]}
    if family != "gemma":
        tensors["lm_head.weight"] = W["lm_head"]
    for key, value in W.items():
        layer, _, short = key.partition(".")
        if short:
            tensors[f"model.layers.{layer}.{HF_NAMES[short]}"] = value
    names = sorted(tensors)
    weight_map = {}
    for i in range(shards):
        part = names[i::shards]
        file = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, str(folder / file))
        weight_map.update(dict.fromkeys(part, file))
    if shards > 1:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


def write_gguf(path, arch, spec, W, extra_kv=None, scalars=None, tensors=None):
    """A GGUF file of `W` (one Q8_0 tensor); `extra_kv` arrays, `scalars` as GGUFWriter
    `add_<name>(value)` calls and extra `tensors` (name -> array) on top."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(spec.layers)
    w.add_context_length(64)
    w.add_embedding_length(spec.width)
    w.add_feed_forward_length(spec.ffn)
    w.add_head_count(spec.heads)
    w.add_head_count_kv(spec.kv_heads)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_rope_freq_base(spec.rope_base)
    w.add_layer_norm_rms_eps(spec.eps)
    w.add_vocab_size(spec.vocab)
    for key, value in (extra_kv or {}).items():
        w.add_array(key, value)
    for name, value in (scalars or {}).items():
        getattr(w, f"add_{name}")(value)
    for name, value in (tensors or {}).items():
        w.add_tensor(name, value)
    w.add_tensor("token_embd.weight", W["embed"])
    w.add_tensor("output_norm.weight", W["final_norm"])
    if arch != "gemma":
        w.add_tensor("output.weight", W["lm_head"])
    for key, value in W.items():
        layer, _, short = key.partition(".")
        if not short:
            continue
        name = f"blk.{layer}.{GGUF_NAMES[short]}"
        if short == "up":  # one block-quantized tensor: Q8_0, dequantized by the gguf package in the oracle
            q = gguf.quants.quantize(value, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


PROMPT = [3, 17, 42, 5, 9, 60, 1, 33, 28, 11, 7]


def check(model, oracle):
    got = model.logits(PROMPT).astype(np.float64)
    want = oracle.logits(PROMPT)
    assert cosine(got, want) >= 0.9999
    assert int(np.argmax(got)) == int(np.argmax(want))
    assert model.generate(PROMPT, max_new_tokens=6, stop_at_eos=False) == oracle.greedy(PROMPT, 6)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hf_folder_matches_oracle(tmp_path, family):
    spec = spec_for(family, norm_plus_one=family == "gemma")
    W = random_weights(spec, seed=len(family))
    write_hf(tmp_path, family, spec, W, shards=2 if family == "llama" else 1)
    model = af.load_llm(tmp_path, max_context=32, device="reference")
    assert model.family == family and model.vocab == spec.vocab
    oracle_w = {k: v.astype(np.float64) for k, v in W.items()}
    if family == "gemma":
        oracle_w["lm_head"] = oracle_w["embed"]
    check(model, Oracle(spec, oracle_w))


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma"])
def test_gguf_matches_oracle(tmp_path, arch):
    # llama.cpp conventions: llama Q/K rows in the interleaved-RoPE order, Gemma norms stored as (1 + w).
    spec = spec_for(arch, interleaved_rope=arch == "llama")
    W = random_weights(spec, seed=100 + len(arch))
    path = tmp_path / f"{arch}.gguf"
    write_gguf(path, arch, spec, W)
    model = af.load_llm(path, max_context=32, device="reference")
    check(model, Oracle(spec, weights_from_gguf(str(path))))


@pytest.fixture
def tiny_gguf(tmp_path):
    spec = spec_for("llama", layers=1)
    path = tmp_path / "tiny.gguf"
    write_gguf(path, "llama", spec, random_weights(spec, seed=1), extra_kv={"test.big_array": [1, 2, 3]})
    return path


def patch_after(data: bytearray, marker: bytes, offset: int, fmt: str, value):
    """Overwrite the `fmt` field `offset` bytes after the first `marker`."""
    at = data.index(marker) + len(marker) + offset
    struct.pack_into(fmt, data, at, value)


def test_truncated_gguf_names_file(tiny_gguf):
    data = tiny_gguf.read_bytes()
    tiny_gguf.write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="tiny.gguf"):
        af.load_llm(tiny_gguf, device="reference")


def test_tensor_past_end_names_tensor(tiny_gguf):
    data = bytearray(tiny_gguf.read_bytes())
    # tensor info: name, n_dims u32, dims u64 x2, type u32, offset u64
    patch_after(data, b"blk.0.ffn_down.weight", 4 + 16 + 4, "<Q", 1 << 40)
    tiny_gguf.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"tiny\.gguf.*blk\.0\.ffn_down\.weight"):
        af.load_llm(tiny_gguf, device="reference")


def test_unknown_quant_type_names_tensor(tiny_gguf):
    data = bytearray(tiny_gguf.read_bytes())
    patch_after(data, b"blk.0.ffn_gate.weight", 4 + 16, "<I", 99)
    tiny_gguf.write_bytes(bytes(data))
    with pytest.raises((ValueError, NotImplementedError), match=r"blk\.0\.ffn_gate\.weight"):
        af.load_llm(tiny_gguf, device="reference")


def test_huge_metadata_array_names_key(tiny_gguf):
    data = bytearray(tiny_gguf.read_bytes())
    # kv: key, value type u32 (array), element type u32, count u64
    patch_after(data, b"test.big_array", 8, "<Q", 1 << 40)
    tiny_gguf.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="test.big_array"):
        af.load_llm(tiny_gguf, device="reference")


def test_unknown_architecture_names_it(tmp_path):
    spec = spec_for("llama", layers=1)
    path = tmp_path / "mamba.gguf"
    write_gguf(path, "mamba", spec, random_weights(spec, seed=2))
    with pytest.raises((ValueError, NotImplementedError), match="mamba"):
        af.load_llm(path, device="reference")


def test_missing_tensor_and_bad_max_context(tmp_path):
    spec = spec_for("llama", layers=1)
    W = random_weights(spec, seed=3)
    del W["0.gate"]
    write_hf(tmp_path, "llama", spec, W)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.mlp\.gate_proj\.weight"):
        af.load_llm(tmp_path, device="reference")
    with pytest.raises(ValueError, match="max_context"):
        af.load_llm(tmp_path, max_context=1000, device="reference")


def word_tokenizer(vocab):
    """A word-level tokenizer.json over "w0" ... "w{vocab-1}" (decoded joined by spaces)."""
    return json.dumps(
        {
            "version": "1.0",
            "added_tokens": [],
            "normalizer": None,
            "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": None,
            "decoder": None,
            "model": {"type": "WordLevel", "vocab": {f"w{i}": i for i in range(vocab)}, "unk_token": "w0"},
        }
    )


def test_compressed_weights_stay_close_to_oracle(tmp_path):
    spec = spec_for("llama")
    W = random_weights(spec, seed=11)
    write_hf(tmp_path, "llama", spec, W)
    model = af.load_llm(tmp_path, max_context=32, device="reference", compress="int8")
    want = Oracle(spec, {k: v.astype(np.float64) for k, v in W.items()}).logits(PROMPT)
    assert cosine(model.logits(PROMPT).astype(np.float64), want) >= 0.995


def test_cli_generate_streams_the_greedy_text_and_speeds(tmp_path):
    spec = spec_for("llama")
    W = random_weights(spec, seed=12)
    write_hf(tmp_path, "llama", spec, W)
    (tmp_path / "tokenizer.json").write_text(word_tokenizer(spec.vocab))
    want = Oracle(spec, {k: v.astype(np.float64) for k, v in W.items()}).greedy(PROMPT, 5)
    prompt = " ".join(f"w{i}" for i in PROMPT)
    run = subprocess.run(
        [sys.executable, "-c", "from aneforge._cli import main; main()", "generate", str(tmp_path), prompt]
        + ["--max-new-tokens", "5", "--max-context", "32", "--device", "reference"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [f"w{t}" for t in want]
    assert "prefill: 11 tokens" in run.stderr and "decode: 4 tokens" in run.stderr
