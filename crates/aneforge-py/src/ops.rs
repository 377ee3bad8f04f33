//! Free builder functions: ports, constants, conv, conv_transpose, concat/stack/split, select, batch_norm,
//! instance_norm, gather, crop, the depth/space shuffles, the resize ops, geglu and attention.

use aneforge::dynamic_conv as conv_dynamic;
use aneforge::ConvOptions;

use aneforge::conv2d;
use aneforge::conv_transpose2d;
use aneforge::AttentionWeights;
use aneforge::HostArray;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert::{
    floats, ints, opt_host, opt_weight, pad4, pair, sizes, tensor, tensor_like, type_name, Weight,
};
use crate::errors::IntoPy;
use crate::tensor::{wrap, PyTensor};

type R = PyResult<PyTensor>;

/// A program input port of `shape` (fp16 or uint8), fed in creation order or by name.
#[pyfunction]
#[pyo3(signature = (shape, dtype="fp16", name=None))]
pub fn input(shape: &Bound<'_, PyAny>, dtype: &str, name: Option<&str>) -> R {
    let dt = aneforge::DType::parse("input", dtype).py()?;
    wrap(aneforge::input_port(
        &sizes(shape, "input", "shape")?,
        dt,
        name,
    ))
}

/// A uint8 image port cast to fp16 and scaled: `x * scale + bias` (scalars or per-channel).
#[pyfunction]
#[pyo3(signature = (shape, scale=None, bias=None, name=None), text_signature = "(shape, scale=0.00392156862745098, bias=0.0, name=None)")]
pub fn image_input(
    shape: &Bound<'_, PyAny>,
    scale: Option<&Bound<'_, PyAny>>,
    bias: Option<&Bound<'_, PyAny>>,
    name: Option<&str>,
) -> R {
    let scale = match scale {
        Some(s) if !s.is_none() => floats(s, "image_input", "scale")?,
        _ => vec![1.0 / 255.0],
    };
    let bias = match bias {
        Some(b) if !b.is_none() => floats(b, "image_input", "bias")?,
        _ => vec![0.0],
    };
    wrap(aneforge::image_input(
        &sizes(shape, "image_input", "shape")?,
        &scale,
        &bias,
        name,
    ))
}

/// Bake a float array as an fp16 constant tensor.
#[pyfunction]
pub fn constant(array: &Bound<'_, PyAny>) -> R {
    Weight::extract(array, "constant")?
        .constant("constant")
        .map(PyTensor::from)
}

/// 2-D convolution of NCHW `x` with a baked weight [Cout, Cin/groups, kH, kW] and optional bias.
#[pyfunction]
#[pyo3(signature = (x, weight, stride=None, pad=None, dilation=None, groups=1, bias=None), text_signature = "(x, weight, stride=1, pad=0, dilation=1, groups=1, bias=None)")]
#[allow(clippy::too_many_arguments)]
pub fn conv(
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    pad: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: usize,
    bias: Option<&Bound<'_, PyAny>>,
) -> R {
    let options = conv_options("conv", stride, pad, dilation, groups)?;
    baked_conv("conv", x, weight, bias, options, conv2d)
}

/// 2-D transposed convolution of NCHW `x` with a baked weight [Cin, Cout/groups, kH, kW]; pad crops the output.
#[pyfunction]
#[pyo3(signature = (x, weight, stride=None, pad=None, dilation=None, groups=1, bias=None), text_signature = "(x, weight, stride=1, pad=0, dilation=1, groups=1, bias=None)")]
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose(
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    pad: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: usize,
    bias: Option<&Bound<'_, PyAny>>,
) -> R {
    let options = conv_options("conv_transpose", stride, pad, dilation, groups)?;
    baked_conv("conv_transpose", x, weight, bias, options, conv_transpose2d)
}

/// Convolution of NCHW x (batch 1) with a weight tensor [Cout, Cin/groups, kH, kW] computed in the graph.
#[pyfunction]
#[pyo3(signature = (x, weight, stride=None, pad=None, dilation=None, groups=1), text_signature = "(x, weight, stride=1, pad=0, dilation=1, groups=1)")]
pub fn dynamic_conv(
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    pad: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: usize,
) -> R {
    let op = "dynamic_conv";
    let (x, w) = (tensor(x, op, "x")?, tensor(weight, op, "weight")?);
    wrap(conv_dynamic(
        &x,
        &w,
        conv_options(op, stride, pad, dilation, groups)?,
    ))
}

/// A conv-like op `build(x, weight, bias, options)` with a baked weight and optional bias.
fn baked_conv(
    op: &str,
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    options: ConvOptions,
    build: fn(
        &aneforge::Tensor,
        HostArray<'_>,
        Option<HostArray<'_>>,
        ConvOptions,
    ) -> aneforge::Result<aneforge::Tensor>,
) -> R {
    let x = tensor(x, op, "x")?;
    let w = Weight::extract(weight, op)?;
    let b = opt_weight(bias, op)?;
    wrap(build(&x, w.host()?, opt_host(&b)?, options))
}

/// Stride, pad, dilation (None: 1, 0, 1) and groups of a conv-like op.
fn conv_options(
    op: &str,
    stride: Option<&Bound<'_, PyAny>>,
    pad: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: usize,
) -> PyResult<ConvOptions> {
    Ok(ConvOptions {
        stride: given(stride)
            .map(|s| pair(s, op, "stride"))
            .transpose()?
            .unwrap_or([1, 1]),
        pad: given(pad)
            .map(|p| pad4(p, op))
            .transpose()?
            .unwrap_or([0; 4]),
        dilation: given(dilation)
            .map(|d| pair(d, op, "dilation"))
            .transpose()?
            .unwrap_or([1, 1]),
        groups,
    })
}

/// GEGLU: weight [2*Dff, D] (bias [2*Dff]) split into value and gate halves; linear(value) * gelu(linear(gate)).
#[pyfunction]
#[pyo3(signature = (x, weight, bias=None))]
pub fn geglu(
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
) -> R {
    let w = Weight::extract(weight, "geglu")?;
    let b = opt_weight(bias, "geglu")?;
    wrap(tensor(x, "geglu", "x")?.geglu(w.host()?, opt_host(&b)?))
}

/// Decomposed, query-tiled softmax(q @ k^T * scale (+ mask)) @ v on [1, H, S, D] tensors.
#[pyfunction]
#[pyo3(signature = (q, k, v, scale=None, is_causal=false, attn_mask=None))]
pub fn sdpa(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    scale: Option<f32>,
    is_causal: bool,
    attn_mask: Option<&Bound<'_, PyAny>>,
) -> R {
    let (q, k, v) = (
        tensor(q, "sdpa", "q")?,
        tensor(k, "sdpa", "k")?,
        tensor(v, "sdpa", "v")?,
    );
    if let Some(Ok(mask)) = attn_mask.map(|m| m.cast::<PyTensor>()) {
        if is_causal {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "sdpa: pass either is_causal or attn_mask, not both",
            ));
        }
        return crate::host_ops_bridge::sdpa_host(q, k, v, Some(mask.get().t.clone()), scale);
    }
    let m = opt_weight(attn_mask, "sdpa")?;
    wrap(aneforge::sdpa(&q, &k, &v, scale, is_causal, opt_host(&m)?))
}

/// The eight projection arrays of an attention block, extracted (biases optional).
struct Projections<'py>([Weight<'py>; 4], [Option<Weight<'py>>; 4]);

impl<'py> Projections<'py> {
    fn extract(
        op: &str,
        w: [&Bound<'py, PyAny>; 4],
        b: [Option<&Bound<'py, PyAny>>; 4],
    ) -> PyResult<Self> {
        let [wq, wk, wv, wo] = w.map(|o| Weight::extract(o, op));
        let [bq, bk, bv, bo] = b.map(|o| opt_weight(o, op));
        Ok(Projections([wq?, wk?, wv?, wo?], [bq?, bk?, bv?, bo?]))
    }
    fn host(&self) -> PyResult<AttentionWeights<'_>> {
        let ([wq, wk, wv, wo], [bq, bk, bv, bo]) = (&self.0, &self.1);
        Ok(AttentionWeights {
            wq: wq.host()?,
            wk: wk.host()?,
            wv: wv.host()?,
            wo: wo.host()?,
            bq: opt_host(bq)?,
            bk: opt_host(bk)?,
            bv: opt_host(bv)?,
            bo: opt_host(bo)?,
        })
    }
}

/// Self-attention on x [S, D] (PyTorch linear weights [out, in]; biases may be None), query-tiled.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn mha<'py>(
    x: &Bound<'py, PyAny>,
    wq: &Bound<'py, PyAny>,
    bq: Option<&Bound<'py, PyAny>>,
    wk: &Bound<'py, PyAny>,
    bk: Option<&Bound<'py, PyAny>>,
    wv: &Bound<'py, PyAny>,
    bv: Option<&Bound<'py, PyAny>>,
    wo: &Bound<'py, PyAny>,
    bo: Option<&Bound<'py, PyAny>>,
    n_heads: usize,
) -> R {
    let p = Projections::extract("mha", [wq, wk, wv, wo], [bq, bk, bv, bo])?;
    wrap(tensor(x, "mha", "x")?.mha(p.host()?, n_heads))
}

/// Attention of x [S, D] over context [T, Dc]; query-tiled only when S >= 768 and T >= 512.
#[pyfunction]
#[pyo3(signature = (x, context, wq, wk, wv, wo, n_heads, bq=None, bk=None, bv=None, bo=None))]
#[allow(clippy::too_many_arguments)]
pub fn cross_attention<'py>(
    x: &Bound<'py, PyAny>,
    context: &Bound<'py, PyAny>,
    wq: &Bound<'py, PyAny>,
    wk: &Bound<'py, PyAny>,
    wv: &Bound<'py, PyAny>,
    wo: &Bound<'py, PyAny>,
    n_heads: usize,
    bq: Option<&Bound<'py, PyAny>>,
    bk: Option<&Bound<'py, PyAny>>,
    bv: Option<&Bound<'py, PyAny>>,
    bo: Option<&Bound<'py, PyAny>>,
) -> R {
    let p = Projections::extract("cross_attention", [wq, wk, wv, wo], [bq, bk, bv, bo])?;
    let ctx = tensor(context, "cross_attention", "context")?;
    wrap(tensor(x, "cross_attention", "x")?.cross_attention(&ctx, p.host()?, n_heads))
}

/// An optional argument that is present and not None.
fn given<'a, 'py>(o: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    o.filter(|v| !v.is_none())
}

/// The Tensors of a sequence argument; a non-sequence or non-Tensor item is a TypeError naming `op`.
fn tensor_list(tensors: &Bound<'_, PyAny>, op: &str) -> PyResult<Vec<aneforge::Tensor>> {
    let items = tensors.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{op}: expected a sequence of Tensors, got {}",
            type_name(tensors)
        ))
    })?;
    items.map(|t| tensor(&t?, op, "every item")).collect()
}

/// Join tensors along `axis`.
#[pyfunction]
#[pyo3(signature = (tensors, axis=1))]
pub fn concat(tensors: &Bound<'_, PyAny>, axis: i64) -> R {
    wrap(aneforge::concat(&tensor_list(tensors, "concat")?, axis))
}

/// Join equal-shaped tensors along a new axis.
#[pyfunction]
#[pyo3(signature = (tensors, axis=0))]
pub fn stack(tensors: &Bound<'_, PyAny>, axis: i64) -> R {
    wrap(aneforge::stack(&tensor_list(tensors, "stack")?, axis))
}

/// Elements of `x` at indices along `axis` (numpy.take): an int index drops the axis; static
/// ints become slices joined by concat (fused); an int32 Tensor of indices is read at run time
/// (the host op `take`).
#[pyfunction]
#[pyo3(signature = (x, indices, axis=0))]
pub fn gather(x: &Bound<'_, PyAny>, indices: &Bound<'_, PyAny>, axis: i64) -> R {
    let x = tensor(x, "gather", "x")?;
    if let Ok(idx) = indices.cast::<PyTensor>() {
        return wrap(x.take(&idx.get().t, axis));
    }
    match indices.extract::<i64>() {
        Ok(i) => wrap(x.take_index(i, axis)),
        Err(_) => wrap(x.gather(&ints(indices, "gather", "indices")?, axis)),
    }
}

/// Drop rows (top, bottom) and columns (left, right) of the last two axes.
#[pyfunction]
pub fn crop(x: &Bound<'_, PyAny>, top: usize, bottom: usize, left: usize, right: usize) -> R {
    wrap(tensor(x, "crop", "x")?.crop(top, bottom, left, right))
}

/// [N, C, H*r, W*r] -> [N, C*r*r, H, W], TensorFlow (DCR) channel order.
#[pyfunction]
#[pyo3(signature = (x, block_size=2))]
pub fn space_to_depth(x: &Bound<'_, PyAny>, block_size: usize) -> R {
    wrap(tensor(x, "space_to_depth", "x")?.space_to_depth(block_size))
}

/// [N, C*r*r, H, W] -> [N, C, H*r, W*r], TensorFlow (DCR) channel order.
#[pyfunction]
#[pyo3(signature = (x, block_size=2))]
pub fn depth_to_space(x: &Bound<'_, PyAny>, block_size: usize) -> R {
    wrap(tensor(x, "depth_to_space", "x")?.depth_to_space(block_size))
}

/// [N, C*r*r, H, W] -> [N, C, H*r, W*r], PyTorch channel order.
#[pyfunction]
pub fn pixel_shuffle(x: &Bound<'_, PyAny>, r: usize) -> R {
    wrap(tensor(x, "pixel_shuffle", "x")?.pixel_shuffle(r))
}

/// [N, C, H*r, W*r] -> [N, C*r*r, H, W], PyTorch channel order.
#[pyfunction]
pub fn pixel_unshuffle(x: &Bound<'_, PyAny>, r: usize) -> R {
    wrap(tensor(x, "pixel_unshuffle", "x")?.pixel_unshuffle(r))
}

/// Nearest-neighbour resize of the last two axes to (target_h, target_w): source index floor(i * in / out).
#[pyfunction]
pub fn resize_nearest_neighbor(x: &Bound<'_, PyAny>, target_h: usize, target_w: usize) -> R {
    wrap(tensor(x, "resize_nearest_neighbor", "x")?.resize_nearest_neighbor(target_h, target_w))
}

/// Bilinear resize of the last two axes to (target_h, target_w), half-pixel unless align_corners;
/// `sampling_mode` (a MIL spelling such as "DEFAULT") overrides align_corners.
#[pyfunction]
#[pyo3(signature = (x, target_h, target_w, align_corners=false, sampling_mode=None))]
pub fn resize_bilinear(
    x: &Bound<'_, PyAny>,
    target_h: usize,
    target_w: usize,
    align_corners: bool,
    sampling_mode: Option<&str>,
) -> R {
    let x = tensor(x, "resize_bilinear", "x")?;
    match sampling_mode {
        None => wrap(x.resize_bilinear(target_h, target_w, align_corners)),
        Some(_) if align_corners => Err(PyValueError::new_err(
            "resize_bilinear: give align_corners or sampling_mode, not both",
        )),
        Some(m) => wrap(
            aneforge::ops::resize::SamplingMode::from_mil_name(m)
                .and_then(|m| x.resize_bilinear_sampled(target_h, target_w, m)),
        ),
    }
}

/// Bilinear upsample of the last two axes by a factor (or (sh, sw)) to floor(in * s), half-pixel
/// unless align_corners; the ratio in/out (MIL op) or, with recompute_scale_factor=False, 1/s (two matmuls).
#[pyfunction]
#[pyo3(signature = (x, scale=None, align_corners=false, recompute_scale_factor=true), text_signature = "(x, scale=2.0, align_corners=False, recompute_scale_factor=True)")]
pub fn upsample_bilinear(
    x: &Bound<'_, PyAny>,
    scale: Option<&Bound<'_, PyAny>>,
    align_corners: bool,
    recompute_scale_factor: bool,
) -> R {
    let [sh, sw] = match given(scale)
        .map(|s| floats(s, "upsample_bilinear", "scale"))
        .transpose()?
        .as_deref()
    {
        None => [2.0, 2.0],
        Some(&[s]) => [s, s],
        Some(&[h, w]) => [h, w],
        Some(v) => {
            return Err(PyValueError::new_err(format!(
                "upsample_bilinear: scale must be a float or a pair, got {v:?}"
            )))
        }
    };
    let x = tensor(x, "upsample_bilinear", "x")?;
    match (recompute_scale_factor, align_corners) {
        (false, false) => wrap(x.upsample_bilinear_scale_mapped(sh, sw)),
        (false, true) => Err(PyValueError::new_err(
            "upsample_bilinear: align_corners=True maps by the sizes; recompute_scale_factor=False needs align_corners=False",
        )),
        (true, _) => wrap(x.upsample_bilinear(sh, sw, align_corners)),
    }
}

/// Split `x` into equal parts (int) or parts of the given sizes (sequence) along `axis`.
#[pyfunction]
#[pyo3(signature = (x, num_or_sizes, axis=0))]
pub fn split(
    x: &Bound<'_, PyAny>,
    num_or_sizes: &Bound<'_, PyAny>,
    axis: i64,
) -> PyResult<Vec<PyTensor>> {
    crate::tensor::split(&tensor(x, "split", "x")?, num_or_sizes, axis)
}

/// `a` where `cond` else `b` (broadcasting); `a` / `b` may be floats.
#[pyfunction]
pub fn select(cond: &Bound<'_, PyAny>, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    let c = tensor(cond, "select", "cond")?;
    wrap(aneforge::select(
        &c,
        &tensor_like(a, "select")?,
        &tensor_like(b, "select")?,
    ))
}

/// The tensor among two operands (the op is commutative).
fn commutative<'a, 'py>(
    a: &'a Bound<'py, PyAny>,
    b: &'a Bound<'py, PyAny>,
    op: &str,
) -> PyResult<(&'a Bound<'py, PyTensor>, &'a Bound<'py, PyAny>)> {
    match (a.cast::<PyTensor>(), b.cast::<PyTensor>()) {
        (Ok(t), _) => Ok((t, b)),
        (_, Ok(t)) => Ok((t, a)),
        _ => Err(PyTypeError::new_err(format!(
            "{op}: at least one argument must be a Tensor, got {} and {}",
            type_name(a),
            type_name(b)
        ))),
    }
}

/// Elementwise maximum of a Tensor and a Tensor, float or array.
#[pyfunction]
pub fn maximum(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    let (t, o) = commutative(a, b, "maximum")?;
    t.get().maximum(o)
}

/// Elementwise minimum of a Tensor and a Tensor, float or array.
#[pyfunction]
pub fn minimum(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    let (t, o) = commutative(a, b, "minimum")?;
    t.get().minimum(o)
}

/// Inference batch normalisation with per-channel statistics baked as weights.
#[pyfunction]
#[pyo3(signature = (x, mean, var, gamma=None, beta=None, eps=1e-5))]
pub fn batch_norm(
    x: &Bound<'_, PyAny>,
    mean: &Bound<'_, PyAny>,
    var: &Bound<'_, PyAny>,
    gamma: Option<&Bound<'_, PyAny>>,
    beta: Option<&Bound<'_, PyAny>>,
    eps: f32,
) -> R {
    let x = tensor(x, "batch_norm", "x")?;
    let (m, v) = (
        Weight::extract(mean, "batch_norm")?,
        Weight::extract(var, "batch_norm")?,
    );
    let (g, b) = (
        opt_weight(gamma, "batch_norm")?,
        opt_weight(beta, "batch_norm")?,
    );
    wrap(aneforge::batch_norm(
        &x,
        m.host()?,
        v.host()?,
        opt_host(&g)?,
        opt_host(&b)?,
        eps,
    ))
}

/// Per-(n, c) plane normalisation of x ([N, C, H, W]) with optional [C] gamma and beta.
#[pyfunction]
#[pyo3(signature = (x, gamma=None, beta=None, eps=1e-5))]
pub fn instance_norm(
    x: &Bound<'_, PyAny>,
    gamma: Option<&Bound<'_, PyAny>>,
    beta: Option<&Bound<'_, PyAny>>,
    eps: f32,
) -> R {
    let x = tensor(x, "instance_norm", "x")?;
    let (g, b) = (
        opt_weight(gamma, "instance_norm")?,
        opt_weight(beta, "instance_norm")?,
    );
    wrap(aneforge::graph::build::norm::instance_norm(
        &x,
        opt_host(&g)?,
        opt_host(&b)?,
        eps,
    ))
}

/// A Tensor argument as is, or a float array baked as an fp16 constant.
fn tensor_or_weight(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<aneforge::Tensor> {
    match obj.cast::<PyTensor>() {
        Ok(t) => Ok(t.get().t.clone()),
        Err(_) => Weight::extract(obj, op)?.constant(op),
    }
}

/// MIL local response normalisation of x (rank 3 or 4, [N, C, ...]) over `size` neighbouring
/// channels; `window` ("onnx" default, or "torch") places an even window.
#[pyfunction]
#[pyo3(signature = (x, size=5, alpha=1e-4, beta=0.75, k=1.0, window="onnx"))]
pub fn local_response_norm(
    x: &Bound<'_, PyAny>,
    size: usize,
    alpha: f32,
    beta: f32,
    k: f32,
    window: &str,
) -> R {
    let window = aneforge::graph::build::channel::LrnWindow::from_name(window).py()?;
    wrap(
        tensor(x, "local_response_norm", "x")?
            .local_response_norm_window(size, alpha, beta, k, window),
    )
}

/// x / (k + alpha * sum of squares over a clipped window of C channels)^beta (local_response_norm with size C, alpha * C).
#[pyfunction]
#[pyo3(signature = (x, alpha=1.0, beta=0.75, k=1.0))]
pub fn lrn(x: &Bound<'_, PyAny>, alpha: f32, beta: f32, k: f32) -> R {
    wrap(tensor(x, "lrn", "x")?.lrn(alpha, beta, k))
}

/// General two-operand einsum lowered to transpose/reshape/matmul; operands are Tensors or float arrays.
#[pyfunction]
pub fn einsum(equation: &str, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    wrap(aneforge::graph::build::einsum::einsum(
        equation,
        &tensor_or_weight(a, "einsum")?,
        &tensor_or_weight(b, "einsum")?,
    ))
}

/// The native MIL einsum ('nchw,nwhu->nchu' or 'chw,whu->chu'); operands are Tensors or float arrays.
#[pyfunction]
pub fn einsum_native(equation: &str, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    wrap(aneforge::graph::build::einsum::einsum_native(
        equation,
        &tensor_or_weight(a, "einsum")?,
        &tensor_or_weight(b, "einsum")?,
    ))
}

/// Bilinear affine warp of x [B, C, H, W] by transform [B or 1, 6] (Tensor or array) to [B, C, output_h, output_w]; zero padding, [-1, 1] coordinates.
#[pyfunction]
#[pyo3(signature = (x, transform, output_h, output_w, align_corners=false))]
pub fn affine(
    x: &Bound<'_, PyAny>,
    transform: &Bound<'_, PyAny>,
    output_h: usize,
    output_w: usize,
    align_corners: bool,
) -> R {
    let x = tensor(x, "affine", "x")?;
    wrap(aneforge::graph::build::affine::affine(
        &x,
        &tensor_or_weight(transform, "affine")?,
        output_h,
        output_w,
        align_corners,
    ))
}
