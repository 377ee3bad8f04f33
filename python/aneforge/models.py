"""Pretrained-model loaders: ``load`` (program directories and Hugging Face BERT-family
sentence-encoder folders), ``load_resnet`` / ``load_resnet18`` / ``load_resnet34`` /
``load_resnet50`` (torchvision-layout safetensors state dicts), ``load_vit`` (Hugging Face
ViTForImageClassification folders), ``load_espcn`` (ESPCN super-resolution) and ``load_gpt2``
(Hugging Face GPT-2 with a resident KV cache)."""

import os

from aneforge import _core


def _is_encoder_dir(path):
    return os.path.isfile(os.path.join(path, "config.json")) and os.path.isfile(os.path.join(path, "model.safetensors"))


def load(path, device="auto", precision="fp16", compress=None, compress_atol=0.05, block_size=32, *, int8=False, **kwargs):
    """Load ``path``: a folder with ``config.json`` + ``model.safetensors`` (a Hugging Face
    BERT-family encoder; keywords ``pooling``, ``normalize``, ``build_dir``) returns an
    ``Encoder``; anything else is a program directory returning a ``Model``. ``int8=True`` is
    ``compress="int8"``."""
    path = os.fspath(path)
    if int8:
        if compress not in (None, "int8"):
            raise ValueError(f"load: int8=True means compress='int8', which conflicts with compress={compress!r}")
        compress = "int8"
    if _is_encoder_dir(path):
        return _core.load_encoder(path, device=device, precision=precision, compress=compress, compress_atol=compress_atol, block_size=block_size, **kwargs)
    return _core.load(path, device, precision, compress, compress_atol, block_size, **kwargs)


def load_resnet(depth, path, device="auto", precision="fp16", compress=None, compress_atol=0.05, image_size=224, uint8=False, build_dir=None):
    """Load a torchvision-layout ResNet-``depth`` state dict (safetensors) with BatchNorm folded into
    the convs: ``net(image [1, 3, S, S])`` → logits ``[1, classes]``; ``uint8=True`` takes uint8 RGB
    0..255 and applies the ImageNet normalisation in the program."""
    return _core.load_resnet(os.fspath(path), depth=depth, device=device, precision=precision, compress=compress, compress_atol=compress_atol, image_size=image_size, uint8=uint8, build_dir=build_dir)


def load_resnet18(path, **kwargs):
    """``load_resnet(18, path, **kwargs)``."""
    return load_resnet(18, path, **kwargs)


def load_resnet34(path, **kwargs):
    """``load_resnet(34, path, **kwargs)``."""
    return load_resnet(34, path, **kwargs)


def load_resnet50(path, **kwargs):
    """``load_resnet(50, path, **kwargs)``."""
    return load_resnet(50, path, **kwargs)


def load_vit(path, device="auto", precision="fp16", compress=None, compress_atol=0.05, build_dir=None):
    """Load a Hugging Face ViTForImageClassification folder (config.json + model.safetensors):
    ``net(image [1, C, S, S])`` (normalised pixels) → logits ``[1, classes]``."""
    return _core.load_vit(os.fspath(path), device=device, precision=precision, compress=compress, compress_atol=compress_atol, build_dir=build_dir)


def load_espcn(path, height, width, device="auto", precision="fp16", compress=None, compress_atol=0.05, build_dir=None):
    """Load an ESPCN state dict (safetensors; conv1..conv4 as in the PyTorch examples) for
    ``[1, C, height, width]`` inputs: ``net(image)`` → ``[1, C, height·r, width·r]``."""
    return _core.load_espcn(os.fspath(path), height, width, device=device, precision=precision, compress=compress, compress_atol=compress_atol, build_dir=build_dir)


def load_gpt2(path, max_context=None, device="auto", precision="fp16", compress=None, compress_atol=0.05, build_dir=None):
    """Load a Hugging Face GPT-2 folder (config.json + model.safetensors); the decode program keeps
    the KV cache resident for up to ``max_context`` tokens (default n_positions). ``lm(ids)`` →
    next-token logits ``[len, vocab]``; ``lm.generate(ids, max_new_tokens, temperature, top_k, seed)``."""
    return _core.load_gpt2(os.fspath(path), max_context=max_context, device=device, precision=precision, compress=compress, compress_atol=compress_atol, build_dir=build_dir)
