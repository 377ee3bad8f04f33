"""Streaming with stop strings on a tiny random-weight llama folder with a word-level tokenizer:
the streamed pieces never contain any part of a stop string that later completes (their
concatenation is exactly the text cut before it), and a stop-string prefix held back at the end
of the generation is released. Expected words come from the NumPy float64 oracle."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest
from llm_oracle import Oracle
from test_llm import PROMPT, random_weights, spec_for, word_tokenizer, write_hf


@pytest.fixture(scope="module")
def model_and_answer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("words")
    spec = spec_for("llama")
    W = random_weights(spec, seed=23)
    write_hf(folder, "llama", spec, W)
    (folder / "tokenizer.json").write_text(word_tokenizer(spec.vocab))
    answer = Oracle(spec, {k: v.astype(np.float64) for k, v in W.items()}).greedy(PROMPT, 5)
    model = af.load_llm(folder, max_context=32, device="reference")
    return model, [f"w{t}" for t in answer]


def stream(model, stop):
    prompt = " ".join(f"w{i}" for i in PROMPT)
    return list(model.generate(prompt, max_new_tokens=5, stop=[stop], stream=True))


def test_a_stop_string_is_never_streamed_in_part(model_and_answer):
    model, words = model_and_answer
    stop = f"{words[1]} {words[2]}"
    pieces = stream(model, stop)
    want = " ".join(words)[: " ".join(words).index(stop)]
    assert "".join(pieces) == want
    assert model.generate(" ".join(f"w{i}" for i in PROMPT), max_new_tokens=5, stop=[stop]) == want


def test_a_stop_prefix_left_at_the_end_is_released(model_and_answer):
    model, words = model_and_answer
    pieces = stream(model, f"{words[4]} never")
    assert "".join(pieces) == " ".join(words)
    assert pieces[-1].endswith(words[4])
