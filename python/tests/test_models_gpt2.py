"""GPT-2 decoder (Hugging Face layout, tiny random config) with the KV cache resident in the
program: next-token logits at every position against a NumPy float64 GPT-2 written here (full
causal forward), and generation (greedy against the oracle's argmax; sampling reproducible)."""

from __future__ import annotations

import json
import math

import aneforge as af
import numpy as np
import pytest
from safetensors.numpy import save_file

CFG = {
    "model_type": "gpt2",
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 48,
    "vocab_size": 97,
    "layer_norm_epsilon": 1e-5,
    "activation_function": "gelu_new",
}


# A word-level tokenizer over the tiny vocabulary: "w0" ... "w96".
TOKENIZER = json.dumps(
    {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {f"w{i}": i for i in range(CFG["vocab_size"])}, "unk_token": "w0"},
    }
)


def gpt2_state_dict(cfg, seed=0, prefix="transformer."):
    rng = np.random.default_rng(seed)
    d, v, p = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    shapes = {"wte.weight": (v, d), "wpe.weight": (p, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(cfg["n_layer"]):
        h = f"h.{i}."
        shapes.update(
            {
                h + "ln_1.weight": (d,),
                h + "ln_1.bias": (d,),
                h + "ln_2.weight": (d,),
                h + "ln_2.bias": (d,),
                h + "attn.c_attn.weight": (d, 3 * d),
                h + "attn.c_attn.bias": (3 * d,),
                h + "attn.c_proj.weight": (d, d),
                h + "attn.c_proj.bias": (d,),
                h + "mlp.c_fc.weight": (d, 4 * d),
                h + "mlp.c_fc.bias": (4 * d,),
                h + "mlp.c_proj.weight": (4 * d, d),
                h + "mlp.c_proj.bias": (d,),
            }
        )
    sd = {}
    for k, s in shapes.items():
        if k.endswith("ln_1.weight") or k.endswith("ln_2.weight") or k == "ln_f.weight":
            val = 1.0 + 0.1 * rng.standard_normal(s)
        elif len(s) == 2:
            val = rng.standard_normal(s) * (0.5 if k in ("wte.weight", "wpe.weight") else 1.0 / math.sqrt(s[0]))
        else:
            val = 0.05 * rng.standard_normal(s)
        sd[prefix + k] = val.astype(np.float32)
    return sd


def _ln(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def gpt2_logits(sd, cfg, ids, prefix="transformer."):
    """Causal GPT-2 forward in float64: logits [len, vocab] with the tied lm_head."""
    w = {k[len(prefix) :]: v.astype(np.float64) for k, v in sd.items()}
    n, d, h = len(ids), cfg["n_embd"], cfg["n_head"]
    dh = d // h
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    causal = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        a = _ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, j * d : (j + 1) * d].reshape(n, h, dh).transpose(1, 0, 2) for j in range(3))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh) + causal
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, d)
        x = x + ctx @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = _ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"]) @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        m = 0.5 * m * (1 + np.tanh(math.sqrt(2 / math.pi) * (m + 0.044715 * m**3)))
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    return _ln(x, w["ln_f.weight"], w["ln_f.bias"]) @ w["wte.weight"].T


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpt2")
    (d / "config.json").write_text(json.dumps(CFG))
    sd = gpt2_state_dict(CFG)
    save_file(sd, str(d / "model.safetensors"))
    (d / "tokenizer.json").write_text(TOKENIZER)
    return d, sd


def test_step_logits_match_float64_at_every_position(model_dir):
    d, sd = model_dir
    lm = af.load_gpt2(d, max_context=32, device="reference")
    assert lm.device == "reference" and lm.max_context == 32
    ids = [int(i) for i in np.random.default_rng(3).integers(0, CFG["vocab_size"], 24)]
    got = lm(ids)
    ref = gpt2_logits(sd, CFG, ids)
    assert got.shape == (24, CFG["vocab_size"])
    cos = [float(g @ r / (np.linalg.norm(g) * np.linalg.norm(r))) for g, r in zip(got.astype(np.float64), ref)]
    rel = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(f"GPT-2 tiny fp16 decode (resident KV) vs float64: min cosine {min(cos):.6f}, max rel err {rel:.2e}")
    assert min(cos) >= 0.9999
    # A second call resets the cache: same logits again, bit for bit.
    np.testing.assert_array_equal(lm(ids), got)


def test_greedy_generation_follows_the_oracle(model_dir):
    d, sd = model_dir
    lm = af.load_gpt2(d, max_context=32, device="reference")
    prompt = [5, 17, 42]
    new = lm.generate(prompt, max_new_tokens=12, temperature=0.0)
    assert len(new) == 12
    seq = prompt + new
    ref = gpt2_logits(sd, CFG, seq)
    for t, tok in enumerate(new):
        row = ref[len(prompt) - 1 + t]
        top2 = np.sort(row)[-2:]
        # Greedy picks the oracle's argmax unless the top two are within fp16 noise.
        assert tok == int(np.argmax(row)) or top2[1] - top2[0] < 1e-2 * abs(top2[1])


def test_sampling_is_seeded_and_respects_top_k(model_dir):
    d, sd = model_dir
    lm = af.load_gpt2(d, max_context=32, device="reference")
    a = lm.generate([1, 2], max_new_tokens=10, temperature=0.8, top_k=5, seed=7)
    assert a == lm.generate([1, 2], max_new_tokens=10, temperature=0.8, top_k=5, seed=7)
    assert all(0 <= t < CFG["vocab_size"] for t in a)
    seq = [1, 2] + a
    ref = gpt2_logits(sd, CFG, seq)
    for t, tok in enumerate(a):
        assert tok in np.argsort(ref[1 + t])[-6:]  # top-5 of ours; one slot of slack for fp16 ties
    assert lm.generate([1, 2], max_new_tokens=1, temperature=1.0, top_k=1) == [int(np.argmax(ref[1]))]


def test_gpt2_bad_inputs(model_dir, tmp_path):
    d, sd = model_dir
    lm = af.load_gpt2(d, max_context=4, device="reference")
    with pytest.raises(ValueError, match="context is full"):
        lm([1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm([CFG["vocab_size"]])
    with pytest.raises(ValueError, match="max_context"):
        af.load_gpt2(d, max_context=CFG["n_positions"] + 1)
    bad = dict(sd)
    bad["transformer.h.1.mlp.c_fc.weight"] = np.zeros((64, 255), np.float32)
    (tmp_path / "config.json").write_text(json.dumps(CFG))
    save_file(bad, str(tmp_path / "model.safetensors"))
    with pytest.raises(
        ValueError, match=r"'transformer\.h\.1\.mlp\.c_fc\.weight' has shape \[64, 255\], expected \[64, 256\]"
    ):
        af.load_gpt2(tmp_path)


def test_generate_text_uses_the_folder_tokenizer(model_dir):
    from tokenizers import Tokenizer

    d, _ = model_dir
    lm = af.load_gpt2(d, max_context=32, device="reference")
    ref = Tokenizer.from_str(TOKENIZER)
    prompt = "w5 w17 w42"
    ids = ref.encode(prompt, add_special_tokens=False).ids
    assert ids == [5, 17, 42]
    new = lm.generate(ids, max_new_tokens=6, temperature=0.0)
    assert lm.generate_text(prompt, max_new_tokens=6, temperature=0.0) == ref.decode(new)


def test_gpt2_runs_through_the_decoder_family(model_dir, tmp_path):
    d, sd = model_dir
    llm = af.load_llm(d, max_context=32, device="reference")
    assert llm.family == "gpt2"
    ids = [5, 17, 42, 3, 9]
    # The family's prefill program gives the last position's logits of the per-step wrapper.
    last = af.load_gpt2(d, max_context=32, device="reference")(ids)[-1].astype(np.float64)
    ref = gpt2_logits(sd, CFG, ids)[-1]
    got = llm.logits(ids).astype(np.float64)
    for x in (got, last):
        assert float(x @ ref / (np.linalg.norm(x) * np.linalg.norm(ref))) >= 0.9999
    assert int(np.argmax(got)) == int(np.argmax(ref))
    # A folder of another family is refused by name.
    from test_llm import random_weights, spec_for, write_hf

    spec = spec_for("llama", layers=1)
    write_hf(tmp_path, "llama", spec, random_weights(spec, seed=1))
    with pytest.raises(ValueError, match="holds a 'llama' model, not GPT-2"):
        af.load_gpt2(tmp_path, device="reference")
