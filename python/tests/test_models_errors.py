"""Bad model files: missing tensors, wrong shapes or dtypes and truncated safetensors are
errors naming the tensor and the expected shape (or the file), never a crash."""

from __future__ import annotations

import json

import aneforge as af
import numpy as np
import pytest
from safetensors.numpy import save_file

CONFIG = {
    "model_type": "bert",
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 16,
    "vocab_size": 50,
    "max_position_embeddings": 32,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
}


def tiny_bert(seed=0):
    rng = np.random.default_rng(seed)
    d, f = 8, 16
    sd = {
        "embeddings.word_embeddings.weight": (50, d),
        "embeddings.position_embeddings.weight": (32, d),
        "embeddings.token_type_embeddings.weight": (2, d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    p = "encoder.layer.0."
    for name, shape in [
        ("attention.self.query", (d, d)),
        ("attention.self.key", (d, d)),
        ("attention.self.value", (d, d)),
        ("attention.output.dense", (d, d)),
        ("intermediate.dense", (f, d)),
        ("output.dense", (d, f)),
    ]:
        sd[p + name + ".weight"], sd[p + name + ".bias"] = shape, shape[:1]
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
        sd[p + name + ".weight"], sd[p + name + ".bias"] = (d,), (d,)
    return {k: (rng.standard_normal(s) * 0.3).astype(np.float32) for k, s in sd.items()}


def write_folder(tmp_path, sd, config=CONFIG):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file(sd, str(tmp_path / "model.safetensors"))
    return tmp_path


def test_tiny_folder_loads_and_encodes_ids(tmp_path):
    enc = af.load(write_folder(tmp_path, tiny_bert()), device="reference")
    assert isinstance(enc, af.Encoder) and enc.dim == 8 and enc.max_len == 32
    out = enc([[1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11, 12]])
    assert out.shape == (2, 8)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=2e-3)
    with pytest.raises(ValueError, match="no tokenizer.json"):
        enc(["text needs a tokenizer"])


def test_bert_prefixed_state_dict_gives_the_same_embeddings(tmp_path):
    sd = tiny_bert(seed=4)
    plain = af.load(write_folder(tmp_path / "plain", sd), device="reference")([[3, 1, 4, 1, 5]])
    prefixed = af.load(
        write_folder(tmp_path / "prefixed", {"bert." + k: v for k, v in sd.items()}), device="reference"
    )([[3, 1, 4, 1, 5]])
    np.testing.assert_array_equal(plain, prefixed)


def test_missing_tensor_names_it_and_its_shape(tmp_path):
    sd = tiny_bert()
    del sd["encoder.layer.0.attention.self.key.weight"]
    with pytest.raises(
        ValueError, match=r"'encoder\.layer\.0\.attention\.self\.key\.weight' is missing \(expected shape \[8, 8\]\)"
    ):
        af.load(write_folder(tmp_path, sd))


def test_wrong_shape_names_tensor_and_expected_shape(tmp_path):
    sd = tiny_bert()
    sd["encoder.layer.0.intermediate.dense.weight"] = np.zeros((16, 9), np.float32)
    with pytest.raises(
        ValueError, match=r"'encoder\.layer\.0\.intermediate\.dense\.weight' has shape \[16, 9\], expected \[16, 8\]"
    ):
        af.load(write_folder(tmp_path, sd))


def test_wrong_dtype_names_tensor(tmp_path):
    sd = tiny_bert()
    sd["embeddings.LayerNorm.bias"] = np.zeros(8, np.int32)
    enc = af.load(write_folder(tmp_path, sd), device="reference")
    with pytest.raises(ValueError, match=r"'embeddings\.LayerNorm\.bias' \(shape \[8\]\) has dtype I32"):
        enc([[1, 2]])


def test_truncated_safetensors(tmp_path):
    folder = write_folder(tmp_path, tiny_bert())
    f = folder / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) - 10])
    with pytest.raises(ValueError, match="model.safetensors.*truncated"):
        af.load(folder)
    f.write_bytes(data[:6])
    with pytest.raises(ValueError, match="model.safetensors.*truncated"):
        af.load(folder)


def test_bad_configs(tmp_path):
    with pytest.raises(ValueError, match="hidden_size"):
        af.load(write_folder(tmp_path, tiny_bert(), {k: v for k, v in CONFIG.items() if k != "hidden_size"}))
    with pytest.raises(NotImplementedError, match="gelu_new"):
        af.load(write_folder(tmp_path, tiny_bert(), {**CONFIG, "hidden_act": "gelu_new"}))
    with pytest.raises(NotImplementedError, match="mpnet"):
        af.load(write_folder(tmp_path, tiny_bert(), {**CONFIG, "model_type": "mpnet"}))


def test_resnet_bad_files(tmp_path):
    path = tmp_path / "r.safetensors"
    save_file({"conv1.weight": np.zeros((64, 3, 7, 7), np.float32)}, str(path))
    with pytest.raises(ValueError, match=r"'bn1\.weight' is missing \(expected shape \[64\]\)"):
        af.load_resnet18(path)
    save_file({"conv1.weight": np.zeros((64, 3, 3, 3), np.float32)}, str(path))
    with pytest.raises(ValueError, match=r"'conv1\.weight' has shape \[64, 3, 3, 3\], expected \[64, 3, 7, 7\]"):
        af.load_resnet18(path)
    with pytest.raises(ValueError, match="depth 19"):
        af.load_resnet(19, path)
    with pytest.raises(OSError):
        af.load_resnet18(tmp_path / "absent.safetensors")


def test_espcn_and_vit_bad_files(tmp_path):
    path = tmp_path / "espcn.safetensors"
    sd = {
        f"conv{i}.{k}": np.zeros(s if k == "weight" else s[:1], np.float32)
        for i, s in enumerate([(64, 1, 5, 5), (64, 64, 3, 3), (32, 64, 3, 3), (10, 32, 3, 3)], 1)
        for k in ("weight", "bias")
    }
    save_file(sd, str(path))
    with pytest.raises(ValueError, match=r"'conv4\.weight' has 10 outputs; expected C·r²"):
        af.load_espcn(path, 8, 8)
    del sd["conv2.bias"]
    sd["conv4.weight"] = np.zeros((4, 32, 3, 3), np.float32)
    save_file(sd, str(path))
    with pytest.raises(ValueError, match=r"'conv2\.bias' is missing \(expected shape \[64\]\)"):
        af.load_espcn(path, 8, 8)
    cfg = {
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "image_size": 8,
        "patch_size": 4,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(
        {"vit.embeddings.patch_embeddings.projection.weight": np.zeros((8, 3, 4, 4), np.float32)},
        str(tmp_path / "model.safetensors"),
    )
    with pytest.raises(
        ValueError, match=r"'vit\.embeddings\.patch_embeddings\.projection\.bias' is missing \(expected shape \[8\]\)"
    ):
        af.load_vit(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "patch_size": 3}))
    with pytest.raises(ValueError, match="patch_size"):
        af.load_vit(tmp_path)
