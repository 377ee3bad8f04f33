"""ONNX import: ``af.load_onnx`` compiles an ONNX model (path or serialized bytes) into the
same ``Model`` that ``af.compile`` returns; ``af.onnx_to_graph`` gives its input and output
tensors so a graph can be extended (a head trained on a frozen imported backbone). Reading,
shape folding and op mapping all happen in the Rust core (``aneforge::onnx``); this module
does not import the ``onnx`` package.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from aneforge._core import Model, Tensor, _onnx_import
from aneforge._core import compile as _compile

__all__ = ["load_onnx", "onnx_to_graph"]


def _shapes(input_shapes: Mapping[str, Sequence[int]] | None) -> list[tuple[str, list[int]]]:
    if input_shapes is None:
        return []
    if not isinstance(input_shapes, Mapping):
        raise TypeError(f"input_shapes must be a dict name -> shape, got {type(input_shapes).__name__}")
    return [(str(k), [int(d) for d in v]) for k, v in input_shapes.items()]


def _values(input_values: Mapping[str, object] | None) -> list[tuple[str, list[int], list[float]]]:
    if input_values is None:
        return []
    if not isinstance(input_values, Mapping):
        raise TypeError(f"input_values must be a dict name -> array, got {type(input_values).__name__}")
    out = []
    for k, v in input_values.items():
        a = np.asarray(v)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"input_values['{k}'] must be a numeric array, got dtype {a.dtype}")
        out.append((str(k), list(a.shape), a.astype(np.float64).ravel().tolist()))
    return out


def _model(model: str | os.PathLike[str] | bytes) -> str | os.PathLike[str] | bytes:
    # A ModelProto (from the onnx package) is accepted by serializing it.
    serialize = getattr(model, "SerializeToString", None)
    return serialize() if callable(serialize) else model


def onnx_to_graph(
    model: str | os.PathLike[str] | bytes,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, object] | None = None,
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Import an ONNX model (path, bytes or ModelProto) as graph tensors: (inputs, outputs), each
    a dict ONNX name -> Tensor in model order. ``input_shapes`` fixes symbolic input dims;
    ``input_values`` binds inputs to constants before folding (shape-determining inputs such as
    axes or Resize sizes; a bound input is no port). A rank-0 runtime input is a [1] port.
    Errors: ValueError (bad file, missing dim, a bound value that does not fit its input),
    NotImplementedError (unsupported ops, listed; a runtime input that must be bound, named)."""
    ins, outs = _onnx_import(_model(model), _shapes(input_shapes), _values(input_values))
    return {k: t for k, _, t in ins}, {k: t for k, _, t in outs}


def load_onnx(
    model: str | os.PathLike[str] | bytes,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, object] | None = None,
    **options: object,
) -> Model:
    """Import an ONNX model (path, bytes or ModelProto) and compile it with ``**options`` (as
    ``af.compile``); inputs are fed in ONNX order, outputs come back as a dict keyed by port
    name (ONNX names made identifiers). ``input_values`` binds inputs to constants at import.
    Errors as in ``onnx_to_graph``."""
    _, outs = _onnx_import(_model(model), _shapes(input_shapes), _values(input_values))
    return _compile({port: t for _, port, t in outs}, **options)
