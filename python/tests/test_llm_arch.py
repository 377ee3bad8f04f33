"""Decoder-family options beyond test_llm.py, each on a tiny random-weight model written by the
test and checked against the NumPy float64 oracle (llm_oracle.py): llama3 RoPE scaling (HF
`rope_scaling` and GGUF `rope_freqs.weight`, frequencies computed here from the published
rule), linear RoPE scaling, Mistral's sliding window from GGUF, GPT-2 (LayerNorm, learned
positions, fused QKV, biased GELU MLP; HF folders with and without the `transformer.` prefix and
GGUF with a Q8_0 fused QKV) at every prompt position, its GGUF tokenizer (pre `gpt-2`) against the
`tokenizers` package with streamed text; and clear errors for what the family does not implement
(Gemma 2/3 options, yarn RoPE) and for broken HF folders and GPT-2 files."""

from __future__ import annotations

import dataclasses
import json
import math

import aneforge as af
import gguf
import numpy as np
import pytest
from llm_oracle import Oracle, Spec, weights_from_gguf
from safetensors.numpy import load_file, save_file
from test_llm import PROMPT, check, cosine, random_weights, spec_for, write_gguf, write_hf

LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
BASE = 100.0  # a small RoPE base so every scaling regime matters within a 32-token context
LONG_PROMPT = [(7 * i + 3) % 64 for i in range(30)]


def llama3_divisors(head_dim, base, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings):
    """Per-frequency divisors of Llama 3.1 RoPE scaling (transformers' `_compute_llama3_parameters`,
    llama.cpp's `rope_freqs` factors): 1 for short wavelengths, `factor` for long ones,
    interpolated in between."""
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / inv
    low_wavelen = original_max_position_embeddings / low_freq_factor
    high_wavelen = original_max_position_embeddings / high_freq_factor
    smooth = (original_max_position_embeddings / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    mid = 1.0 / ((1 - smooth) / factor + smooth)
    return np.where(wavelen < high_wavelen, 1.0, np.where(wavelen > low_wavelen, factor, mid))


def check_long(model, oracle):
    got = model.logits(LONG_PROMPT).astype(np.float64)
    want = oracle.logits(LONG_PROMPT)
    assert cosine(got, want) >= 0.9999
    assert int(np.argmax(got)) == int(np.argmax(want))


def test_llama3_divisors_cover_all_three_regimes():
    d = llama3_divisors(16, BASE, **LLAMA3)
    assert d[0] == 1.0 and d[-1] == 8.0 and np.any((d > 1.0) & (d < 8.0))


def test_llama3_rope_scaling_from_hf_config(tmp_path):
    divisors = tuple(llama3_divisors(16, BASE, **LLAMA3))
    spec = spec_for("llama", rope_base=BASE, rope_divisors=divisors)
    W = random_weights(spec, seed=31)
    write_hf(tmp_path, "llama", spec, W)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "llama3", **LLAMA3}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model = af.load_llm(tmp_path, max_context=32, device="reference")
    W64 = {k: v.astype(np.float64) for k, v in W.items()}
    scaled = Oracle(spec, W64)
    check_long(model, scaled)
    check(model, scaled)
    # The scaling changes the answer: plain RoPE is far from it (the test can fail).
    plain = Oracle(spec_for("llama", rope_base=BASE), W64).logits(LONG_PROMPT)
    assert cosine(plain, scaled.logits(LONG_PROMPT)) < 0.999


def test_llama3_rope_scaling_from_gguf_rope_freqs(tmp_path):
    divisors = llama3_divisors(16, BASE, **LLAMA3)
    spec = spec_for("llama", rope_base=BASE, rope_divisors=tuple(divisors), interleaved_rope=True)
    W = random_weights(spec, seed=32)
    path = tmp_path / "llama3.gguf"
    write_gguf(path, "llama", spec, W, tensors={"rope_freqs.weight": divisors.astype(np.float32)})
    model = af.load_llm(path, max_context=32, device="reference")
    check_long(model, Oracle(spec, weights_from_gguf(str(path))))


def test_linear_rope_scaling_from_hf_and_gguf(tmp_path):
    spec = spec_for("llama", rope_base=BASE, rope_divisors=(4.0,) * 8)
    W = random_weights(spec, seed=33)
    write_hf(tmp_path, "llama", spec, W)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_scaling"] = {"type": "linear", "factor": 4.0}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model = af.load_llm(tmp_path, max_context=32, device="reference")
    check_long(model, Oracle(spec, {k: v.astype(np.float64) for k, v in W.items()}))
    gspec = spec_for("llama", rope_base=BASE, rope_divisors=(4.0,) * 8, interleaved_rope=True)
    path = tmp_path / "linear.gguf"
    write_gguf(
        path, "llama", gspec, W, scalars={"rope_scaling_type": gguf.RopeScalingType.LINEAR, "rope_scaling_factor": 4.0}
    )
    model = af.load_llm(path, max_context=32, device="reference")
    check_long(model, Oracle(gspec, weights_from_gguf(str(path))))


def test_mistral_sliding_window_from_gguf(tmp_path):
    # llama.cpp writes Mistral models as the llama architecture with a sliding-window key.
    spec = spec_for("mistral", interleaved_rope=True)
    W = random_weights(spec, seed=34)
    path = tmp_path / "mistral.gguf"
    write_gguf(path, "llama", spec, W, scalars={"sliding_window": 4})
    model = af.load_llm(path, max_context=32, device="reference")
    oracle = Oracle(spec, weights_from_gguf(str(path)))
    check(model, oracle)
    full = Oracle(spec_for("llama", interleaved_rope=True), weights_from_gguf(str(path))).logits(LONG_PROMPT)
    assert cosine(full, oracle.logits(LONG_PROMPT)) < 0.999


@pytest.mark.parametrize("model_type", ["gemma2", "gemma3_text"])
def test_gemma2_and_3_name_the_missing_options(tmp_path, model_type):
    spec = spec_for("gemma", layers=1)
    write_hf(tmp_path, "gemma", spec, random_weights(spec, seed=35))
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(model_type=model_type, attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NotImplementedError, match=rf"config\.json.*{model_type}.*softcapping.*post-feed-forward"):
        af.load_llm(tmp_path, device="reference")


def test_gemma2_gguf_names_the_missing_options(tmp_path):
    spec = spec_for("gemma", layers=1)
    path = tmp_path / "g2.gguf"
    write_gguf(path, "gemma2", spec, random_weights(spec, seed=36))
    with pytest.raises(NotImplementedError, match=r"g2\.gguf.*gemma2.*softcapping"):
        af.load_llm(path, device="reference")


def test_unsupported_rope_scaling_names_the_type(tmp_path):
    spec = spec_for("llama", layers=1)
    write_hf(tmp_path, "llama", spec, random_weights(spec, seed=37))
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NotImplementedError, match="rope_scaling type 'yarn'"):
        af.load_llm(tmp_path, device="reference")
    cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="rope_scaling.low_freq_factor"):
        af.load_llm(tmp_path, device="reference")


def test_gguf_yarn_scaling_names_the_key(tmp_path):
    spec = spec_for("llama", layers=1)
    path = tmp_path / "yarn.gguf"
    write_gguf(
        path, "llama", spec, random_weights(spec, seed=38), scalars={"rope_scaling_type": gguf.RopeScalingType.YARN}
    )
    with pytest.raises(NotImplementedError, match=r"yarn\.gguf.*llama\.rope\.scaling\.type = 'yarn'"):
        af.load_llm(path, device="reference")


def sharded_folder(tmp_path):
    spec = spec_for("llama", layers=1)
    write_hf(tmp_path, "llama", spec, random_weights(spec, seed=39), shards=2)
    return tmp_path


def test_hf_missing_shard_names_the_file(tmp_path):
    folder = sharded_folder(tmp_path)
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises((OSError, ValueError), match="model-00002-of-00002.safetensors"):
        af.load_llm(folder, device="reference")


@pytest.mark.parametrize(
    ("shard", "error", "message"),
    [
        ("model-00009-of-00009.safetensors", (OSError, ValueError), "model-00009-of-00009.safetensors"),
        ("../outside.safetensors", ValueError, r"model\.safetensors\.index\.json.*plain file name"),
    ],
)
def test_hf_index_naming_a_missing_or_outside_file_names_it(tmp_path, shard, error, message):
    folder = sharded_folder(tmp_path)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.norm.weight"] = shard
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(error, match=message):
        af.load_llm(folder, device="reference")


GPT2 = Spec(
    layers=2,
    width=64,
    heads=4,
    kv_heads=4,
    head_dim=16,
    ffn=80,
    vocab=64,
    qkv_bias=True,
    gelu=True,
    layer_norm=True,
    learned_pos=True,
    gated=False,
)
GPT2_POSITIONS = 64


def gpt2_weights(seed, vocab=GPT2.vocab):
    """Random GPT-2 weights in the oracle's names ([out, in] projections, tied lm_head)."""
    rng = np.random.default_rng(seed)
    d, f = GPT2.width, GPT2.ffn

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def vec(n, scale=0.2, base=0.0):
        return (base + scale * rng.standard_normal(n)).astype(np.float32)

    W = {"embed": vec((vocab, d), 0.5), "pos_embed": vec((GPT2_POSITIONS, d), 0.3)}
    for layer in range(GPT2.layers):
        p = f"{layer}."
        for norm in ("attn_norm", "ffn_norm"):
            W[p + norm], W[p + norm + "_b"] = vec(d, 0.2, 1.0), vec(d, 0.1)
        for name in ("q", "k", "v", "o"):
            W[p + name] = mat(d, d)
        for name in ("bq", "bk", "bv", "bo", "bdown"):
            W[p + name] = vec(d, 0.3)
        W[p + "up"], W[p + "bup"], W[p + "down"] = mat(f, d), vec(f, 0.3), mat(d, f)
    W["final_norm"], W["final_norm_b"] = vec(d, 0.2, 1.0), vec(d, 0.1)
    W["lm_head"] = W["embed"]
    return W


def write_gpt2_hf(folder, W, prefix="transformer."):
    """A Hugging Face GPT-2 folder: fused c_attn and Conv1D weights stored [in, out]."""
    cfg = {
        "model_type": "gpt2",
        "n_embd": GPT2.width,
        "n_layer": GPT2.layers,
        "n_head": GPT2.heads,
        "n_inner": GPT2.ffn,
        "n_positions": GPT2_POSITIONS,
        "vocab_size": GPT2.vocab,
        "layer_norm_epsilon": GPT2.eps,
        "activation_function": "gelu_new",
    }
    (folder / "config.json").write_text(json.dumps(cfg))
    t = {"wte.weight": W["embed"], "wpe.weight": W["pos_embed"], "ln_f.weight": W["final_norm"]}
    t["ln_f.bias"] = W["final_norm_b"]
    for layer in range(GPT2.layers):
        p, h = f"{layer}.", f"h.{layer}."
        t[h + "attn.c_attn.weight"] = np.concatenate([W[p + n] for n in "qkv"]).T
        t[h + "attn.c_attn.bias"] = np.concatenate([W[p + n] for n in ("bq", "bk", "bv")])
        for hf, (weight, bias) in {
            "ln_1": ("attn_norm", "attn_norm_b"),
            "ln_2": ("ffn_norm", "ffn_norm_b"),
            "attn.c_proj": ("o", "bo"),
            "mlp.c_fc": ("up", "bup"),
            "mlp.c_proj": ("down", "bdown"),
        }.items():
            w = W[p + weight]
            t[h + hf + ".weight"] = w.T if w.ndim == 2 else w
            t[h + hf + ".bias"] = W[p + bias]
    save_file({prefix + k: np.ascontiguousarray(v) for k, v in t.items()}, str(folder / "model.safetensors"))


def write_gpt2_gguf(path, W, drop=(), reshape=None, vocab=None):
    """A GGUF file of GPT-2 in llama.cpp's layout (attn_qkv rows q, k, v; [out, in] weights;
    output.weight a copy of token_embd as the converter writes it), the fused QKV and ffn_up
    as Q8_0; tensors in `drop` left out, `reshape` = (name, array) replacing one; `vocab` =
    GGUFWriter `add_<name>` tokenizer entries."""
    w = gguf.GGUFWriter(str(path), "gpt2")
    for name, value in (vocab or {}).items():
        getattr(w, f"add_{name}")(value)
    w.add_block_count(GPT2.layers)
    w.add_context_length(GPT2_POSITIONS)
    w.add_embedding_length(GPT2.width)
    w.add_feed_forward_length(GPT2.ffn)
    w.add_head_count(GPT2.heads)
    w.add_layer_norm_eps(GPT2.eps)
    w.add_vocab_size(len(W["embed"]))
    t = {
        "token_embd.weight": W["embed"],
        "position_embd.weight": W["pos_embed"],
        "output_norm.weight": W["final_norm"],
        "output_norm.bias": W["final_norm_b"],
        "output.weight": W["lm_head"],
    }
    names = {"attn_norm": "attn_norm.weight", "attn_norm_b": "attn_norm.bias", "ffn_norm": "ffn_norm.weight"}
    names.update({"ffn_norm_b": "ffn_norm.bias", "o": "attn_output.weight", "bo": "attn_output.bias"})
    names.update({"up": "ffn_up.weight", "bup": "ffn_up.bias", "down": "ffn_down.weight", "bdown": "ffn_down.bias"})
    for layer in range(GPT2.layers):
        p, blk = f"{layer}.", f"blk.{layer}."
        t[blk + "attn_qkv.weight"] = np.concatenate([W[p + n] for n in "qkv"])
        t[blk + "attn_qkv.bias"] = np.concatenate([W[p + n] for n in ("bq", "bk", "bv")])
        t.update({blk + full: W[p + short] for short, full in names.items()})
    if reshape is not None:
        t[reshape[0]] = reshape[1]
    for name, value in t.items():
        if name in drop:
            continue
        if name.endswith(("attn_qkv.weight", "ffn_up.weight")) and value.shape[-1] % 32 == 0:
            q = gguf.quants.quantize(value, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_every_position(model, oracle):
    """Last-position logits of every prefix of PROMPT (positions 0..10, prefill programs) against
    the oracle (cosine and argmax), then the greedy continuation (decode programs)."""
    for n in range(1, len(PROMPT) + 1):
        got = model.logits(PROMPT[:n]).astype(np.float64)
        want = oracle.logits(PROMPT[:n])
        assert cosine(got, want) >= 0.9999, n
        assert int(np.argmax(got)) == int(np.argmax(want)), n
    check(model, oracle)


@pytest.mark.parametrize("prefix", ["transformer.", ""])
def test_gpt2_hf_folder_matches_oracle_at_every_position(tmp_path, prefix):
    W = gpt2_weights(seed=40)
    write_gpt2_hf(tmp_path, W, prefix)
    model = af.load_llm(tmp_path, max_context=32, device="reference")
    assert model.family == "gpt2" and model.vocab == GPT2.vocab
    oracle = Oracle(GPT2, {k: v.astype(np.float64) for k, v in W.items()})
    check_every_position(model, oracle)
    # KV reuse: the prompt's tail runs at positions 6.. after the resident first six tokens.
    model.logits(PROMPT[:6])
    assert model.generate(PROMPT, max_new_tokens=3, stop_at_eos=False, reuse_kv=True) == oracle.greedy(PROMPT, 3)
    assert model.stats()["prefilled_tokens"] == len(PROMPT) - 6
    # The learned positions matter: the same weights without them give other logits.
    no_pos = dict(oracle.W, pos_embed=np.zeros_like(oracle.W["pos_embed"]))
    assert cosine(Oracle(GPT2, no_pos).logits(PROMPT), oracle.logits(PROMPT)) < 0.999


def test_gpt2_gguf_matches_oracle_at_every_position(tmp_path):
    path = tmp_path / "gpt2.gguf"
    write_gpt2_gguf(path, gpt2_weights(seed=41))
    model = af.load_llm(path, max_context=32, device="reference")
    assert model.family == "gpt2"
    check_every_position(model, Oracle(GPT2, weights_from_gguf(str(path))))
    # The Q8_0 fused QKV is held as int8 blocks, one constant per third.
    rows = [r for r in model.compression_report() if r["name"] == "blk.0.attn_qkv.weight"]
    assert [tuple(r["shape"]) for r in rows] == [(GPT2.width, GPT2.width)] * 3
    assert {r["encoding"] for r in rows} == {"gguf"}


def test_gpt2_missing_position_embeddings_name_the_tensor(tmp_path):
    W = gpt2_weights(seed=42)
    write_gpt2_hf(tmp_path, W)
    st = tmp_path / "model.safetensors"
    tensors = load_file(str(st))
    del tensors["transformer.wpe.weight"]
    save_file(tensors, str(st))
    with pytest.raises(ValueError, match=r"'transformer\.wpe\.weight' \[64, 64\] is missing"):
        af.load_llm(tmp_path, device="reference")
    path = tmp_path / "nopos.gguf"
    write_gpt2_gguf(path, W, drop={"position_embd.weight"})
    with pytest.raises(ValueError, match=r"nopos\.gguf.*position_embd\.weight"):
        af.load_llm(path, device="reference")


def test_gpt2_fused_qkv_of_the_wrong_shape_names_the_tensor(tmp_path):
    W = gpt2_weights(seed=43)
    write_gpt2_hf(tmp_path, W)
    st = tmp_path / "model.safetensors"
    tensors = load_file(str(st))
    tensors["transformer.h.1.attn.c_attn.weight"] = np.zeros((64, 190), np.float32)
    save_file(tensors, str(st))
    with pytest.raises(
        ValueError, match=r"'transformer\.h\.1\.attn\.c_attn\.weight' has shape \[64, 190\], expected \[64, 192\]"
    ):
        af.load_llm(tmp_path, device="reference")
    path = tmp_path / "badqkv.gguf"
    write_gpt2_gguf(path, W, reshape=("blk.0.attn_qkv.weight", np.zeros((190, 64), np.float32)))
    with pytest.raises(
        ValueError, match=r"badqkv\.gguf.*'blk\.0\.attn_qkv\.weight' has shape \[190, 64\], expected \[192, 64\]"
    ):
        af.load_llm(path, device="reference")


TEXTS = [
    "Hello world, hello tokenizers!",
    "The quick brown fox jumps over the lazy dog's back.",
    "Numbers 12345 and 3.14 aren't words.",
    "  spaces   and\ttabs\nnewlines <|endoftext|> after",
    "naïve café 😀 UNSEEN zebra",
]


def test_gpt2_gguf_tokenizer_matches_the_tokenizers_package(tmp_path):
    # A byte-level BPE trained here, written as llama.cpp writes GPT-2 (model gpt2, pre gpt-2).
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    ref = Tokenizer(models.BPE())
    ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ref.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"]
    )
    ref.train_from_iterator(TEXTS[:3] * 20, trainer)
    tokens = sorted(ref.get_vocab(), key=ref.get_vocab().get)
    merges = json.loads(ref.to_str())["model"]["merges"]
    eos = ref.token_to_id("<|endoftext|>")
    vocab = {
        "tokenizer_model": "gpt2",
        "tokenizer_pre": "gpt-2",
        "token_list": tokens,
        "token_merges": [m if isinstance(m, str) else " ".join(m) for m in merges],
        "token_types": [3 if i == eos else 1 for i in range(len(tokens))],
        "eos_token_id": eos,
    }
    path = tmp_path / "tok.gguf"
    write_gpt2_gguf(path, gpt2_weights(seed=44, vocab=len(tokens)), vocab=vocab)
    model = af.load_llm(path, max_context=32, device="reference")
    assert model.vocab == len(tokens) and model.eos_token_id == eos
    for text in TEXTS:
        ids = ref.encode(text, add_special_tokens=False).ids
        assert model.encode(text) == ids and model.encode(text, True) == ids
        assert model.decode(ids) == ref.decode(ids)
    # Text prompts run: the greedy continuation is the oracle's.
    spec = dataclasses.replace(GPT2, vocab=len(tokens))
    ids = ref.encode("Hello world", add_special_tokens=False).ids
    want = Oracle(spec, weights_from_gguf(str(path))).greedy(ids, 5)
    assert model.generate(ids, max_new_tokens=5, stop_at_eos=False) == want
    pieces = list(model.generate("Hello world", max_new_tokens=5, stop_at_eos=False, stream=True))
    assert "".join(pieces) == ref.decode(want)
