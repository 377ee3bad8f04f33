"""NumPy float64 decoder oracle for the language-model tests, written from the published model
definitions (Hugging Face transformers' Llama/Mistral/Qwen2/Qwen3/Gemma/GPT-2 and llama.cpp's
GGUF conventions), independent of aneforge: RMSNorm x/sqrt(mean(x^2)+eps)*w or LayerNorm with
bias (GPT-2), RoPE (rotate-half, or llama.cpp's adjacent-pair "NORM" rope on GGUF llama weights)
or learned absolute position embeddings (GPT-2), grouped-query causal attention with an optional
sliding window, SwiGLU/GeGLU MLP or GPT-2's biased GELU MLP, final norm and lm_head, with a KV
cache."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Spec:
    """Hyper-parameters and conventions of one decoder."""

    layers: int
    width: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    rope_base: float = 10000.0
    eps: float = 1e-5
    interleaved_rope: bool = False  # llama.cpp NORM rope (GGUF llama weights)
    norm_plus_one: bool = False  # Gemma HF checkpoints: x * (1 + w)
    qkv_bias: bool = False
    qk_norm: bool = False
    gelu: bool = False  # GeGLU with tanh GELU
    scale_embed: bool = False
    window: int | None = None
    rope_divisors: tuple | None = None  # RoPE scaling: inverse frequencies divided by these
    layer_norm: bool = False  # GPT-2: LayerNorm (x - mean) / sqrt(var + eps) * w + b (bias `<norm>_b`)
    learned_pos: bool = False  # GPT-2: W["pos_embed"][position] added to the embeddings, no RoPE
    gated: bool = True  # False: GPT-2's down(act(up x + bup)) + bdown, attention output + bo


def rms(x, w, eps, plus_one):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * ((1.0 + w) if plus_one else w)


def rope(x, positions, base, interleaved, divisors=None):
    """x [T, H, dh] rotated by the angles of `positions` (inverse frequencies / `divisors`)."""
    dh = x.shape[-1]
    inv = base ** (-np.arange(0, dh, 2, dtype=np.float64) / dh)
    if divisors is not None:
        inv = inv / np.asarray(divisors, dtype=np.float64)
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    else:
        h = dh // 2
        a, b = x[..., :h], x[..., h:]
        out[..., :h], out[..., h:] = a * c - b * s, a * s + b * c
    return out


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


@dataclass
class Oracle:
    """The decoder over float64 weights W (names: embed, lm_head, final_norm, and per layer
    `{l}.attn_norm`, `{l}.q`, `{l}.k`, `{l}.v`, `{l}.o`, `{l}.ffn_norm`, `{l}.gate`, `{l}.up`,
    `{l}.down`, optional `{l}.bq/bk/bv`, `{l}.q_norm/k_norm`; GPT-2 adds pos_embed, the norm
    biases `<norm>_b` and `{l}.bo/bup/bdown`, and has no gate; projections [out, in])."""

    spec: Spec
    W: dict
    cache: list = field(default_factory=list)

    def reset(self):
        self.cache = [([], []) for _ in range(self.spec.layers)]

    def feed(self, ids):
        """Append `ids` to the cache; returns the logits [vocab] after the last one."""
        sp, W = self.spec, self.W
        if not self.cache:
            self.reset()
        start = len(self.cache[0][0])
        pos = np.arange(start, start + len(ids))
        x = W["embed"][np.asarray(ids)].astype(np.float64)
        if sp.scale_embed:
            x = x * math.sqrt(sp.width)
        if sp.learned_pos:
            x = x + W["pos_embed"][pos]

        def norm(x, name):
            if sp.layer_norm:
                return layer_norm(x, W[name], W[name + "_b"], sp.eps)
            return rms(x, W[name], sp.eps, sp.norm_plus_one)

        group = sp.heads // sp.kv_heads
        for layer in range(sp.layers):
            p = f"{layer}."
            a = norm(x, p + "attn_norm")

            def proj(name, bias, n_heads, a=a, p=p):
                y = a @ W[p + name].T
                if sp.qkv_bias:
                    y = y + W[p + bias]
                return y.reshape(len(ids), n_heads, sp.head_dim)

            q, k, v = proj("q", "bq", sp.heads), proj("k", "bk", sp.kv_heads), proj("v", "bv", sp.kv_heads)
            if sp.qk_norm:
                q = rms(q, W[p + "q_norm"], sp.eps, sp.norm_plus_one)
                k = rms(k, W[p + "k_norm"], sp.eps, sp.norm_plus_one)
            if not sp.learned_pos:
                q = rope(q, pos, sp.rope_base, sp.interleaved_rope, sp.rope_divisors)
                k = rope(k, pos, sp.rope_base, sp.interleaved_rope, sp.rope_divisors)
            ks, vs = self.cache[layer]
            ks.extend(k)
            vs.extend(v)
            K, V = np.stack(ks), np.stack(vs)  # [T, KV, dh]
            keys = np.arange(len(ks))
            allowed = keys[None, :] <= pos[:, None]
            if sp.window is not None:
                allowed &= pos[:, None] - keys[None, :] < sp.window
            ctx = np.empty((len(ids), sp.heads, sp.head_dim))
            for h in range(sp.heads):
                s = q[:, h] @ K[:, h // group].T / math.sqrt(sp.head_dim)
                s = np.where(allowed, s, -np.inf)
                e = np.exp(s - s.max(axis=-1, keepdims=True))
                ctx[:, h] = (e / e.sum(axis=-1, keepdims=True)) @ V[:, h // group]
            x = x + ctx.reshape(len(ids), -1) @ W[p + "o"].T
            if not sp.gated:
                x = x + W[p + "bo"]
            f = norm(x, p + "ffn_norm")
            if sp.gated:
                g = f @ W[p + "gate"].T
                act = gelu_tanh(g) if sp.gelu else g / (1.0 + np.exp(-g))
                x = x + (act * (f @ W[p + "up"].T)) @ W[p + "down"].T
            else:
                x = x + gelu_tanh(f @ W[p + "up"].T + W[p + "bup"]) @ W[p + "down"].T + W[p + "bdown"]
        h = norm(x[-1], "final_norm")
        return h @ W["lm_head"].T

    def logits(self, ids):
        self.reset()
        return self.feed(ids)

    def greedy(self, ids, n):
        """`n` greedy tokens after the prompt `ids`."""
        out = []
        logits = self.logits(ids)
        for _ in range(n):
            out.append(int(np.argmax(logits)))
            logits = self.feed([out[-1]])
        return out


GGUF_NAMES = {
    "attn_norm": "attn_norm.weight",
    "q": "attn_q.weight",
    "k": "attn_k.weight",
    "v": "attn_v.weight",
    "bq": "attn_q.bias",
    "bk": "attn_k.bias",
    "bv": "attn_v.bias",
    "q_norm": "attn_q_norm.weight",
    "k_norm": "attn_k_norm.weight",
    "o": "attn_output.weight",
    "ffn_norm": "ffn_norm.weight",
    "gate": "ffn_gate.weight",
    "up": "ffn_up.weight",
    "down": "ffn_down.weight",
    "attn_norm_b": "attn_norm.bias",
    "ffn_norm_b": "ffn_norm.bias",
    "bo": "attn_output.bias",
    "bup": "ffn_up.bias",
    "bdown": "ffn_down.bias",
}


def weights_from_gguf(path):
    """Oracle weights from a GGUF file, dequantized by the `gguf` package (float64); GPT-2's
    fused `attn_qkv` (rows q, k, v) is split into q/k/v and bq/bk/bv."""
    import gguf

    reader = gguf.GGUFReader(path)
    raw = {}
    for t in reader.tensors:
        arr = gguf.quants.dequantize(t.data, t.tensor_type)
        raw[t.name] = np.asarray(arr, dtype=np.float64).reshape(tuple(int(d) for d in reversed(t.shape)))
    W = {"embed": raw["token_embd.weight"], "final_norm": raw["output_norm.weight"]}
    W["lm_head"] = raw.get("output.weight", W["embed"])
    for short, name in (("pos_embed", "position_embd.weight"), ("final_norm_b", "output_norm.bias")):
        if name in raw:
            W[short] = raw[name]
    for name in raw:
        if name.startswith("blk."):
            _, layer, rest = name.split(".", 2)
            for short, full in GGUF_NAMES.items():
                if rest == full:
                    W[f"{layer}.{short}"] = raw[name]
            for suffix, parts in (("weight", ("q", "k", "v")), ("bias", ("bq", "bk", "bv"))):
                if rest == f"attn_qkv.{suffix}":
                    for short, third in zip(parts, np.split(raw[name], 3, axis=0)):
                        W[f"{layer}.{short}"] = third
    return W
