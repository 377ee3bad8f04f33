"""Read GGUF files (llama.cpp's model format, versions 2 and 3): metadata, the tensor table,
and tensors dequantized to float32 (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
Q3_K, Q4_K, Q5_K, Q6_K, Q8_K), bit-identical to the ``gguf`` package's ``dequantize``.

The file is memory-mapped and validated when opened (every count, offset and size is checked
against the file length); a malformed file raises ``ValueError`` naming the file and the key,
tensor or byte offset, a missing key or tensor ``KeyError``, a quant type without a decoder
``NotImplementedError``.

    f = aneforge.gguf.open("model.gguf")
    f.metadata["llama.block_count"]          # int, float, bool, str or list
    f.tensors["token_embd.weight"]           # (row-major shape, ggml type name)
    w = f.dequantize("token_embd.weight")    # float32 array of that shape
"""

from __future__ import annotations

from os import PathLike

from aneforge._core import GgufFile
from aneforge._core import gguf_open as _gguf_open

__all__ = ["GgufFile", "open"]


def open(path: str | PathLike[str]) -> GgufFile:
    """Open and validate the GGUF file at ``path`` (a regular file)."""
    return _gguf_open(path)
