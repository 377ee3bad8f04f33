"""Pretrained-model loaders: ``load`` (program directories and Hugging Face BERT-family
sentence-encoder folders) and ``load_resnet`` / ``load_resnet18`` / ``load_resnet34`` /
``load_resnet50`` for torchvision-layout safetensors state dicts."""

import os

from aneforge import _core


def _is_encoder_dir(path):
    return os.path.isfile(os.path.join(path, "config.json")) and os.path.isfile(os.path.join(path, "model.safetensors"))


def load(path, device="auto", precision="fp16", compress=None, compress_atol=0.05, **kwargs):
    """Load ``path``: a folder with ``config.json`` + ``model.safetensors`` (a Hugging Face
    BERT-family encoder; keywords ``pooling``, ``normalize``, ``build_dir``) returns an
    ``Encoder``; anything else is a program directory (keyword ``block_size``) returning a ``Model``."""
    path = os.fspath(path)
    if _is_encoder_dir(path):
        return _core.load_encoder(path, device=device, precision=precision, compress=compress, compress_atol=compress_atol, **kwargs)
    return _core.load(path, device=device, precision=precision, compress=compress, compress_atol=compress_atol, **kwargs)


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
