"""The GGUF-embedded SentencePiece/llama tokenizer (`tokenizer.ggml.model = llama`: pieces,
scores, token types, byte fallback) against SentencePiece itself: the test trains a small BPE
model with the `sentencepiece` package, writes its vocabulary into a GGUF file with the `gguf`
package's writer, and compares aneforge's ids and decoded text with SentencePiece's on a
corpus (seen and unseen words, digits, runs of spaces, newlines, accents, emoji)."""

from __future__ import annotations

import io

import aneforge as af
import pytest
from test_llm import random_weights, spec_for, write_gguf

spm = pytest.importorskip("sentencepiece")

TRAIN = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, hello tokenizers!",
    "Numbers 12345 and 3.14 are here.",
    "A sentencepiece model splits words into pieces.",
    "  spaces   and\ttabs\nnewlines",
    "naïve café résumé",
    "tokenization tokenizer token tokens",
]

CORPUS = TRAIN + [
    "Hello  tokenizers\n987 ümlaut 😀 end",
    "the the the quick quick fox",
    "UNSEEN words: zebra, xylophone; qwerty?",
    "   leading spaces and trailing   ",
    "\n\nnew\nlines\n",
    "mixed 42 numbers 007 and 3.14159",
    "Ωμέγα 中文 日本語",
    "",
]

# SentencePiece piece kinds → GGUF token types.
NORMAL, UNKNOWN, CONTROL, UNUSED, BYTE = 1, 2, 3, 5, 6


def trained(add_dummy_prefix):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAIN * 20),
        model_writer=model,
        vocab_size=420,
        model_type="bpe",
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=add_dummy_prefix,
        character_coverage=1.0,
        minloglevel=2,
    )
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def token_type(sp, i):
    for kind, test in ((UNKNOWN, sp.is_unknown), (CONTROL, sp.is_control), (BYTE, sp.is_byte), (UNUSED, sp.is_unused)):
        if test(i):
            return kind
    return NORMAL


def gguf_with_vocab(path, sp, add_space_prefix, drop_scores=0, **scalars):
    """A tiny llama GGUF carrying `sp`'s vocabulary (the last `drop_scores` scores left out) and
    further GGUFWriter `add_<name>` `scalars`."""
    n = sp.get_piece_size()
    spec = spec_for("llama", layers=1, vocab=n)
    vocab = {
        "tokenizer_model": "llama",
        "token_list": [sp.id_to_piece(i) for i in range(n)],
        "token_scores": [sp.get_score(i) for i in range(n - drop_scores)],
        "token_types": [token_type(sp, i) for i in range(n)],
        "bos_token_id": sp.bos_id(),
        "eos_token_id": sp.eos_id(),
        "unk_token_id": sp.unk_id(),
        "add_space_prefix": add_space_prefix,
        **scalars,
    }
    write_gguf(path, "llama", spec, random_weights(spec, seed=5), scalars=vocab)


@pytest.mark.parametrize("prefix", [True, False])
def test_sentencepiece_gguf_ids_and_text_match_sentencepiece(tmp_path, prefix):
    sp = trained(add_dummy_prefix=prefix)
    path = tmp_path / "spm.gguf"
    gguf_with_vocab(path, sp, prefix)
    model = af.load_llm(path, max_context=32, device="reference")
    assert model.eos_token_id == sp.eos_id()
    byte_fallbacks = 0
    for text in CORPUS:
        want = sp.encode(text)
        assert model.encode(text) == want, text
        byte_fallbacks += sum(sp.is_byte(i) for i in want)
        assert model.decode(want) == sp.decode(want), text
    assert byte_fallbacks > 10  # the corpus exercises the byte fallback


def test_sentencepiece_scores_must_match_the_vocabulary(tmp_path):
    sp = trained(add_dummy_prefix=True)
    path = tmp_path / "bad.gguf"
    gguf_with_vocab(path, sp, True, drop_scores=3)
    with pytest.raises(ValueError, match=r"bad\.gguf.*tokenizer\.ggml\.scores must be 420"):
        af.load_llm(path, max_context=32, device="reference")


@pytest.mark.parametrize("add_bos", [True, False, None])
def test_raw_prompts_start_with_bos_as_the_metadata_says(tmp_path, add_bos):
    # HF rule (add_special_tokens=True): BOS first when add_bos_token; llama.cpp's default for
    # a SentencePiece ("llama") vocabulary without the key is to add it.
    sp = trained(add_dummy_prefix=True)
    path = tmp_path / "bos.gguf"
    extra = {} if add_bos is None else {"add_bos_token": add_bos}
    gguf_with_vocab(path, sp, True, **extra)
    model = af.load_llm(path, max_context=64, device="reference")
    bos = [sp.bos_id()] if add_bos in (True, None) else []
    for text in CORPUS[:4]:
        assert model.encode(text, add_special_tokens=True) == bos + sp.encode(text), text
        assert model.encode(text) == sp.encode(text), text  # chat-rendered text: nothing added
    model.generate(CORPUS[1], max_new_tokens=1, stop_at_eos=False)
    assert model.stats()["prompt_tokens"] == len(bos) + len(sp.encode(CORPUS[1]))
