"""ViT (Hugging Face ViTForImageClassification layout, ViT-B/16 widths at reduced depth) and
ESPCN (PyTorch examples layout) loaders on random weights, against NumPy float64
implementations written here."""

from __future__ import annotations

import json
import math

import aneforge as af
import numpy as np
from safetensors.numpy import save_file

_erf = np.frompyfunc(math.erf, 1, 1)


def _metrics(got, ref):
    got, ref = np.asarray(got, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    cos = float(got @ ref / (np.linalg.norm(got) * np.linalg.norm(ref)))
    return cos, float(np.abs(got - ref).max() / np.abs(ref).max())


def _ln(x, g, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


VIT = {
    "hidden_size": 768,
    "num_hidden_layers": 2,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "image_size": 224,
    "patch_size": 16,
    "num_channels": 3,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
    "model_type": "vit",
}


def vit_state_dict(cfg, classes, seed=0):
    rng = np.random.default_rng(seed)
    d, f, p, c = cfg["hidden_size"], cfg["intermediate_size"], cfg["patch_size"], cfg["num_channels"]
    n = (cfg["image_size"] // p) ** 2 + 1
    shapes = {
        "vit.embeddings.cls_token": (1, 1, d),
        "vit.embeddings.position_embeddings": (1, n, d),
        "vit.embeddings.patch_embeddings.projection.weight": (d, c, p, p),
        "vit.embeddings.patch_embeddings.projection.bias": (d,),
        "vit.layernorm.weight": (d,),
        "vit.layernorm.bias": (d,),
        "classifier.weight": (classes, d),
        "classifier.bias": (classes,),
    }
    for i in range(cfg["num_hidden_layers"]):
        pre = f"vit.encoder.layer.{i}."
        for name, shape in [
            ("attention.attention.query", (d, d)),
            ("attention.attention.key", (d, d)),
            ("attention.attention.value", (d, d)),
            ("attention.output.dense", (d, d)),
            ("intermediate.dense", (f, d)),
            ("output.dense", (d, f)),
        ]:
            shapes[pre + name + ".weight"], shapes[pre + name + ".bias"] = shape, shape[:1]
        for name in ("layernorm_before", "layernorm_after"):
            shapes[pre + name + ".weight"], shapes[pre + name + ".bias"] = (d,), (d,)
    sd = {}
    for k, s in shapes.items():
        fan_in = int(np.prod(s[1:])) if len(s) > 1 and k.endswith("weight") else 1
        scale = 1.0 / math.sqrt(fan_in) if fan_in > 1 else 0.2
        v = rng.standard_normal(s) * scale
        if "layernorm" in k and k.endswith("weight"):
            v = 1.0 + 0.1 * rng.standard_normal(s)
        sd[k] = v.astype(np.float32)
    return sd


def vit_ref(sd, cfg, x):
    w = {k: v.astype(np.float64) for k, v in sd.items()}
    d, p, h = cfg["hidden_size"], cfg["patch_size"], cfg["num_attention_heads"]
    g = cfg["image_size"] // p
    c = cfg["num_channels"]
    patches = x[0].reshape(c, g, p, g, p).transpose(1, 3, 0, 2, 4).reshape(g * g, c * p * p)
    t = (
        patches @ w["vit.embeddings.patch_embeddings.projection.weight"].reshape(d, -1).T
        + w["vit.embeddings.patch_embeddings.projection.bias"]
    )
    t = np.concatenate([w["vit.embeddings.cls_token"][0], t]) + w["vit.embeddings.position_embeddings"][0]
    n, dh = t.shape[0], d // h
    for i in range(cfg["num_hidden_layers"]):
        pre = f"vit.encoder.layer.{i}."

        def dense(z, name, pre=pre):
            return z @ w[pre + name + ".weight"].T + w[pre + name + ".bias"]

        a = _ln(t, w[pre + "layernorm_before.weight"], w[pre + "layernorm_before.bias"])
        q, k, v = (
            dense(a, f"attention.attention.{m}").reshape(n, h, dh).transpose(1, 0, 2) for m in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, d)
        t = t + dense(ctx, "attention.output.dense")
        m = dense(_ln(t, w[pre + "layernorm_after.weight"], w[pre + "layernorm_after.bias"]), "intermediate.dense")
        m = 0.5 * m * (1.0 + _erf(m / math.sqrt(2.0)).astype(np.float64))
        t = t + dense(m, "output.dense")
    cls = _ln(t[:1], w["vit.layernorm.weight"], w["vit.layernorm.bias"])
    return cls @ w["classifier.weight"].T + w["classifier.bias"]


def test_vit_b16_reduced_depth_matches_float64(tmp_path):
    sd = vit_state_dict(VIT, classes=1000)
    (tmp_path / "config.json").write_text(json.dumps(VIT))
    save_file(sd, str(tmp_path / "model.safetensors"))
    net = af.load_vit(tmp_path, device="reference")
    assert net.input_shape == [1, 3, 224, 224] and net.output_shape == [1, 1000]
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    cos, rel = _metrics(net(x), vit_ref(sd, VIT, x.astype(np.float64)))
    print(f"ViT-B/16 (2 layers) fp16 reference executor vs float64: cosine {cos:.6f}, max rel err {rel:.2e}")
    assert cos >= 0.9999


def espcn_state_dict(c=1, r=3, seed=0):
    rng = np.random.default_rng(seed)
    sd = {}
    for name, (o, i, k) in {
        "conv1": (64, c, 5),
        "conv2": (64, 64, 3),
        "conv3": (32, 64, 3),
        "conv4": (c * r * r, 32, 3),
    }.items():
        sd[name + ".weight"] = (rng.standard_normal((o, i, k, k)) * math.sqrt(2.0 / (i * k * k))).astype(np.float32)
        sd[name + ".bias"] = rng.uniform(-0.1, 0.1, o).astype(np.float32)
    return sd


def _conv_same(x, w, b):
    c, h, wd = x.shape
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    cols = np.stack([xp[:, i : i + h, j : j + wd] for i in range(k) for j in range(k)], 1)  # [c, k*k, h, w]
    return (w.reshape(w.shape[0], -1) @ cols.reshape(c * k * k, -1)).reshape(-1, h, wd) + b[:, None, None]


def espcn_ref(sd, x, r):
    w = {k: v.astype(np.float64) for k, v in sd.items()}
    y = x[0]
    for i in range(1, 5):
        y = _conv_same(y, w[f"conv{i}.weight"], w[f"conv{i}.bias"])
        if i < 4:
            y = np.maximum(y, 0)
    c = y.shape[0] // (r * r)
    h, wd = y.shape[1:]
    return y.reshape(c, r, r, h, wd).transpose(0, 3, 1, 4, 2).reshape(1, c, h * r, wd * r)


def test_espcn_matches_float64(tmp_path):
    sd = espcn_state_dict(c=3, r=3)
    path = tmp_path / "espcn.safetensors"
    save_file(sd, str(path))
    net = af.load_espcn(path, 33, 40, device="reference")
    assert net.output_shape == [1, 3, 99, 120]
    x = np.random.default_rng(2).uniform(0, 1, (1, 3, 33, 40)).astype(np.float32)
    cos, rel = _metrics(net(x), espcn_ref(sd, x.astype(np.float64), 3))
    print(f"ESPCN x3 fp16 reference executor vs float64: cosine {cos:.6f}, max rel err {rel:.2e}")
    assert cos >= 0.9999
