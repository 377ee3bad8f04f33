"""Language models: ``load_llm`` loads a GGUF file or a Hugging Face folder (llama, mistral,
qwen2, qwen3, gemma, gpt2) into an ``LLM`` with ``generate`` (text or token ids, optionally
streamed), ``chat``, ``logits`` and the tokenizer / chat-template helpers. Everything runs in
the Rust core (``aneforge.models::llm``); this module only shapes the Python API."""

import os

from aneforge import _core


class LLM:
    """A decoder: prefill programs per prompt-length bucket, decode programs with the KV cache
    resident, the lm_head inside the program; tokenizer, chat template and sampling on the host."""

    def __init__(self, core):
        self._core = core

    @property
    def vocab(self):
        """Vocabulary size."""
        return self._core.vocab

    @property
    def max_context(self):
        """Maximum context (prompt + generated tokens)."""
        return self._core.max_context

    @property
    def family(self):
        """Decoder family: llama, mistral, qwen2, qwen3, gemma or gpt2."""
        return self._core.family

    @property
    def eos_token_id(self):
        """End-of-sequence token id (None if unknown)."""
        return self._core.eos_token_id

    def encode(self, text, add_special_tokens=False):
        """Token ids of ``text``; ``add_special_tokens=True`` applies the model's rule for raw
        prompts (BOS first when ``add_bos_token`` says so), as Hugging Face's ``encode`` does."""
        return self._core.encode(text, add_special_tokens)

    def decode(self, ids):
        """Text of ``ids`` (special tokens skipped)."""
        return self._core.decode(list(ids))

    def logits(self, ids):
        """Next-token logits [vocab] (float32) after the prompt ``ids`` (a str is encoded first)."""
        if isinstance(ids, str):
            ids = self.encode(ids)
        return self._core.logits(list(ids))

    def apply_chat_template(self, messages, add_generation_prompt=True):
        """The model's Jinja chat template rendered over ``messages`` (dicts with role and content)."""
        return self._core.apply_chat_template(list(messages), add_generation_prompt)

    def generate(self, prompt_or_ids, **options):
        """Continue a text prompt (returns the new text) or a list of token ids (returns the new
        ids). Keywords: ``max_new_tokens=64``, ``temperature=0.0`` (greedy; else softmax
        sampling over ``top_k=0`` (all) and the ``top_p=1.0`` nucleus with
        ``repetition_penalty=1.0``, seeded by ``seed=0``), ``stop=None`` strings,
        ``stop_at_eos=True``, ``stream=False``. ``stream=True`` returns a generator of text
        pieces (ids for an id prompt); text that could begin a stop string is held back until it
        cannot, so no part of a stop string is ever yielded. Prompt + max_new_tokens must fit
        max_context. A text prompt gets the model's BOS when it adds one."""
        text = isinstance(prompt_or_ids, str)
        ids = self.encode(prompt_or_ids, True) if text else [int(i) for i in prompt_or_ids]
        return self._run(ids, text, **options)

    def _run(
        self,
        ids,
        text,
        max_new_tokens=64,
        temperature=0.0,
        top_k=0,
        top_p=1.0,
        seed=0,
        stream=False,
        repetition_penalty=1.0,
        stop=None,
        stop_at_eos=True,
        reuse_kv=False,
    ):
        self._core.start(
            ids,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            repetition_penalty,
            seed,
            list(stop or []),
            stop_at_eos,
            reuse_kv,
        )
        pieces = self._pieces(text)
        if stream:
            return pieces
        items = list(pieces)
        return "".join(items) if text else items

    def _pieces(self, text):
        while (step := self._core.advance(text)) is not None:
            token, piece = step
            if not text:
                yield token
            elif piece:
                yield piece
        if text and (rest := self._core.finish()):
            yield rest

    def chat(self, messages, reuse_kv=True, **options):
        """Answer ``messages`` (dicts with role and content) with the chat template (rendered
        text tokenized without extra special tokens); keywords as in ``generate`` (returns the
        answer text, or a generator with ``stream=True``). With ``reuse_kv`` the keys/values of
        the previous turn stay resident and only the tokens beyond them run (extend programs)
        when the rendered conversation extends them token for token (else the whole prompt is
        prefilled); ``stats()["prefilled_tokens"]`` counts the tokens run."""
        ids = self.encode(self.apply_chat_template(messages), False)
        return self._run(ids, True, reuse_kv=reuse_kv, **options)

    def stats(self):
        """Last generation: dict with prompt_tokens, new_tokens, prefill_seconds,
        decode_seconds and prefilled_tokens (prompt tokens actually run)."""
        keys = ("prompt_tokens", "new_tokens", "prefill_seconds", "decode_seconds", "prefilled_tokens")
        return dict(zip(keys, self._core.stats()))

    def compression_report(self):
        """One dict per weight constant (name, site, shape, encoding, bytes_fp16, bytes_encoded,
        rel_error = ||W - decoded W|| / ||W||), sorted by name: GGUF weights as held (exact int8
        blocks or fp16), Hugging Face weights as fp16, or as ``compress=`` encoded them."""
        return self._core.compression_report()


def load_llm(path, max_context=None, **options):
    """Load a GGUF file or Hugging Face folder (config.json, safetensors, tokenizer.json) as an
    ``LLM`` with decode programs for ``max_context`` tokens (default min(trained, 1024));
    compile options as keywords (``device``, ``compress``, ...)."""
    return LLM(_core.load_llm(os.fspath(path), max_context, **options))
