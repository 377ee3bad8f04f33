"""Pretrained-model loaders: ``load`` (program directories and Hugging Face BERT-family
sentence-encoder folders), ``load_resnet`` / ``load_resnet18`` / ``load_resnet34`` /
``load_resnet50`` (torchvision-layout safetensors state dicts), ``load_vit`` (Hugging Face
ViTForImageClassification folders), ``load_espcn`` (ESPCN super-resolution) and ``load_gpt2``
(Hugging Face GPT-2: the ``load_llm`` decoder family's gpt2 architecture behind the GPT-2 API).

Every loader takes the compile options as keywords (``device``, ``precision``, ``compress``,
``int8``, ``compress_atol``, ``block_size``, ``build_dir``, ... or ``options=CompileOptions(...)``);
they are checked and defaulted in the core, see ``aneforge.CompileOptions``."""

import os

from aneforge import _core


def _is_encoder_dir(path):
    return os.path.isfile(os.path.join(path, "config.json")) and os.path.isfile(os.path.join(path, "model.safetensors"))


def load(path, **options):
    """Load ``path``: a folder with ``config.json`` + ``model.safetensors`` (a Hugging Face
    BERT-family encoder; also keywords ``pooling``, ``normalize``) returns an ``Encoder``;
    anything else is a program directory returning a ``Model``."""
    path = os.fspath(path)
    if _is_encoder_dir(path):
        return _core.load_encoder(path, **options)
    return _core.load(path, **options)


def load_resnet(depth, path, **kwargs):
    """Load a torchvision-layout ResNet-``depth`` state dict (safetensors) with BatchNorm folded into
    the convs: ``net(image [1, 3, S, S])`` → logits ``[1, classes]``; keywords ``image_size``,
    ``uint8`` (take uint8 RGB 0..255 and apply the ImageNet normalisation in the program) and
    the compile options."""
    return _core.load_resnet(os.fspath(path), depth, **kwargs)


def load_resnet18(path, **kwargs):
    """``load_resnet(18, path, **kwargs)``."""
    return load_resnet(18, path, **kwargs)


def load_resnet34(path, **kwargs):
    """``load_resnet(34, path, **kwargs)``."""
    return load_resnet(34, path, **kwargs)


def load_resnet50(path, **kwargs):
    """``load_resnet(50, path, **kwargs)``."""
    return load_resnet(50, path, **kwargs)


def load_vit(path, **options):
    """Load a Hugging Face ViTForImageClassification folder (config.json + model.safetensors):
    ``net(image [1, C, S, S])`` (normalised pixels) → logits ``[1, classes]``."""
    return _core.load_vit(os.fspath(path), **options)


def load_espcn(path, height, width, **options):
    """Load an ESPCN state dict (safetensors; conv1..conv4 as in the PyTorch examples) for
    ``[1, C, height, width]`` inputs: ``net(image)`` → ``[1, C, height·r, width·r]``."""
    return _core.load_espcn(os.fspath(path), height, width, **options)


def load_gpt2(path, max_context=None, **options):
    """Load a Hugging Face GPT-2 folder (config.json with model_type gpt2 + model.safetensors) as
    the decoder family's gpt2 architecture (``load_llm`` gives the full API: prefill programs,
    streaming, top-p, GGUF files), with decode programs keeping the KV cache resident for up to
    ``max_context`` tokens (default min(n_positions, 1024)). ``lm(ids)`` → next-token logits
    ``[len, vocab]`` (the first token prefilled, the rest decode steps);
    ``lm.generate(ids, max_new_tokens, temperature, top_k, seed)`` → new ids (no EOS stop)."""
    return _core.load_gpt2(os.fspath(path), max_context, **options)
