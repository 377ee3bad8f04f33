from os import PathLike
from typing import Any, final

import numpy as np
import numpy.typing as npt

__all__ = ["GgufFile", "open"]

@final
class GgufFile:
    """An open, validated GGUF file (memory-mapped)."""

    @property
    def path(self) -> str:
        """The path the file was opened with."""
    @property
    def version(self) -> int:
        """Format version: 2 or 3."""
    @property
    def alignment(self) -> int:
        """Data-section alignment in bytes."""
    @property
    def metadata(self) -> dict[str, Any]:
        """Key -> int, float, bool, str or (nested) list, in file order (a new dict per access)."""
    @property
    def tensors(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Tensor name -> (row-major shape, ggml type name such as "Q4_1")."""
    def architecture(self) -> str:
        """``general.architecture`` if it is a known family (llama, qwen2, qwen3, gemma, gemma2, gemma3); ValueError otherwise."""
    def dequantize(self, name: str) -> npt.NDArray[np.float32]:
        """Tensor ``name`` as float32 of its row-major shape; KeyError if absent, NotImplementedError for undecodable types."""

def open(path: str | PathLike[str]) -> GgufFile:
    """Open and validate the GGUF file at ``path``; OSError / ValueError naming the file on failure."""
