"""`aneforge chat` on a tiny random-weight llama folder with a word-level tokenizer and a chat
template: two scripted turns on stdin, then EOF; each answer must be the greedy continuation of
the whole rendered conversation computed by the NumPy float64 oracle (llm_oracle.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from llm_oracle import Oracle
from test_llm import random_weights, spec_for, word_tokenizer, write_hf

# Renders each message's content followed by a space: the conversation is the words in order.
TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"


def words(ids):
    return " ".join(f"w{i}" for i in ids)


def run_cli(args, stdin, env=None):
    return subprocess.run(
        [sys.executable, "-c", "from aneforge._cli import main; main()", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def chat_folder(folder, template, seed):
    """A tiny llama folder with a word-level tokenizer and chat `template`; returns its oracle."""
    spec = spec_for("llama")
    W = random_weights(spec, seed=seed)
    write_hf(folder, "llama", spec, W)
    (folder / "tokenizer.json").write_text(word_tokenizer(spec.vocab))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return Oracle(spec, {k: v.astype(np.float64) for k, v in W.items()})


def test_cli_chat_answers_two_turns_from_the_whole_conversation_and_exits_on_eof(tmp_path):
    oracle = chat_folder(tmp_path, TEMPLATE, seed=21)
    first, second = [3, 17, 42, 5], [9, 60, 1]
    answer1 = oracle.greedy(first, 4)
    answer2 = oracle.greedy(first + answer1 + second, 4)
    run = run_cli(
        ["chat", str(tmp_path), "--max-new-tokens", "4", "--max-context", "32", "--device", "reference"],
        stdin=f"{words(first)}\n{words(second)}\n",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [words(answer1), words(answer2)]
    assert run.stderr.count("prefill:") == 2  # one speed line per turn


def test_cli_chat_context_overflow_is_a_clear_error(tmp_path):
    spec = spec_for("llama", layers=1)
    write_hf(tmp_path, "llama", spec, random_weights(spec, seed=22))
    (tmp_path / "tokenizer.json").write_text(word_tokenizer(spec.vocab))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    turn = words(range(10))
    run = run_cli(
        ["chat", str(tmp_path), "--max-new-tokens", "4", "--max-context", "32", "--device", "reference"],
        stdin=f"{turn}\n{turn}\n{turn}\n",
        env={"ANEFORGE_QUIET": "1"},
    )
    assert run.returncode != 0
    assert "exceeds max_context 32" in run.stderr
    assert "loaded" not in run.stderr  # ANEFORGE_QUIET silences the load notice
    assert len(run.stdout.splitlines()) == 2  # turns of 10+4 and 24+4 tokens fit, 38+4 does not
