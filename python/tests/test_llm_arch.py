"""Decoder-family options beyond test_llm.py, each on a tiny random-weight model written by the
test and checked against the NumPy float64 oracle (llm_oracle.py): llama3 RoPE scaling (HF
`rope_scaling` and GGUF `rope_freqs.weight`, frequencies computed here from the published
rule), linear RoPE scaling, Mistral's sliding window from GGUF; and clear errors for what the
family does not implement (Gemma 2/3 options, yarn RoPE) and for broken HF folders."""

from __future__ import annotations

import json
import math

import aneforge as af
import gguf
import numpy as np
import pytest
from llm_oracle import Oracle, weights_from_gguf
from test_llm import check, cosine, random_weights, spec_for, write_gguf, write_hf

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
