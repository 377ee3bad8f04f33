//! Neural-network ONNX ops: Conv/ConvTranspose (1-D as 2-D), pools, Gemm/MatMul, the
//! normalizations, LRN, Softmax/LogSoftmax, Einsum.

use super::ops::{Args, OpFn, Value};
use crate::error::Result;
use crate::graph::build::conv::{conv2d, conv2d_const, dynamic_conv};
use crate::graph::build::conv_transpose::conv_transpose2d;
use crate::graph::build::einsum::einsum;
use crate::graph::build::io::constant;
use crate::graph::build::norm::instance_norm;
use crate::graph::Tensor;
use crate::onnx::node::Node;
use crate::onnx::tensor::HostTensor;
use crate::onnx::weights::{fp16_constant, RawF32};
use crate::ops::conv::ConvOptions;
use crate::ops::io::{HostArray, HostData};
use half::f16;

/// The mapping of neural-network op `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Conv" => conv,
        "ConvTranspose" => conv_transpose,
        "MaxPool" | "AveragePool" | "LpPool" => pool,
        "GlobalAveragePool" | "GlobalMaxPool" => global_pool,
        "Gemm" => gemm,
        "MatMul" => matmul,
        "BatchNormalization" => batch_normalization,
        "InstanceNormalization" => instance_normalization,
        "LayerNormalization" => layer_normalization,
        "RMSNormalization" => rms_normalization,
        "Trilu" => trilu,
        "GroupNormalization" => group_normalization,
        "LRN" => lrn,
        "Softmax" | "LogSoftmax" | "Hardmax" => softmax,
        "Einsum" => einsum_op,
        _ => return None,
    })
}

fn host_array(h: &HostTensor) -> HostArray<'_> {
    HostArray {
        shape: &h.dims,
        data: HostData::F64(&h.data),
    }
}

/// Spatial window attributes of a 1-D or 2-D Conv/Pool node, as 2-D values.
struct Window {
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
}

/// Read kernel/strides/dilations/pads/auto_pad for `spatial` input extents (1 or 2 of them).
fn window(n: &Node, spatial: &[usize], kernel: &[usize]) -> Result<Window> {
    let k = spatial.len();
    let two = |v: Vec<usize>| -> [usize; 2] {
        if k == 1 {
            [1, v[0]]
        } else {
            [v[0], v[1]]
        }
    };
    let list = |name: &str| -> Result<Vec<usize>> {
        match n.ints(name)? {
            None => Ok(vec![1; k]),
            Some(v) if v.len() == k && v.iter().all(|&x| x >= 1) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(n.bad(format!("{name} = {v:?} needs {k} values >= 1"))),
        }
    };
    let (stride, dilation) = (list("strides")?, list("dilations")?);
    let mut begin = vec![0usize; k];
    let mut end = vec![0usize; k];
    match n.string("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" => {
            if let Some(p) = n.ints("pads")? {
                if p.len() != 2 * k || p.iter().any(|&x| x < 0) {
                    return Err(n.bad(format!("pads = {p:?} needs {} values >= 0", 2 * k)));
                }
                for i in 0..k {
                    begin[i] = p[i] as usize;
                    end[i] = p[i + k] as usize;
                }
            }
        }
        "VALID" => {}
        mode @ ("SAME_UPPER" | "SAME_LOWER") => {
            for i in 0..k {
                let out = spatial[i].div_ceil(stride[i]);
                let span = (kernel[i] - 1) * dilation[i] + 1;
                let total = ((out - 1) * stride[i] + span).saturating_sub(spatial[i]);
                let small = total / 2;
                (begin[i], end[i]) = if mode == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
            }
        }
        other => {
            return Err(n.bad(format!(
                "auto_pad = '{other}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER"
            )))
        }
    }
    let pad = if k == 1 {
        [0, 0, begin[0], end[0]]
    } else {
        [begin[0], end[0], begin[1], end[1]]
    };
    Ok(Window {
        kernel: two(kernel.to_vec()),
        stride: two(stride),
        dilation: two(dilation),
        pad,
    })
}

/// `x` as 4-D (a 1-D [N, C, L] becomes [N, C, 1, L]); errors for 3-D convolutions.
fn as_4d(n: &Node, x: &Tensor) -> Result<Tensor> {
    match x.rank() {
        4 => Ok(x.clone()),
        3 => x.expand_dims(&[2]),
        r => Err(n.unsupported(&format!(
            "{}-D spatial input (rank {r}); only 1-D and 2-D",
            r.saturating_sub(2)
        ))),
    }
}

/// Undo [`as_4d`] for a rank-3 original.
fn from_4d(y: Tensor, rank: usize) -> Result<Tensor> {
    if rank == 3 {
        y.squeeze(&[2])
    } else {
        Ok(y)
    }
}

/// Fold constant BatchNormalization parameters (scale, shift per channel) into a weight whose
/// axis 0 is the output channel and a bias.
pub fn fold_bn(
    w: &HostTensor,
    b: Option<&HostTensor>,
    scale: &[f64],
    shift: &[f64],
) -> (HostTensor, HostTensor) {
    let per = w.numel() / scale.len().max(1);
    let mut wd = w.data.clone();
    for (i, v) in wd.iter_mut().enumerate() {
        *v *= scale[i / per];
    }
    let bias: Vec<f64> = (0..scale.len())
        .map(|c| b.map_or(0.0, |b| b.data[c]) * scale[c] + shift[c])
        .collect();
    (
        HostTensor {
            elem: w.elem,
            dims: w.dims.clone(),
            data: wd,
        },
        HostTensor {
            elem: w.elem,
            dims: vec![scale.len()],
            data: bias,
        },
    )
}

/// Raw f32 weight `w` (rows = output channels on axis 0) as fp16 values, times `alpha` and a
/// folded BatchNormalization (in f32, per row), and the bias [rows] that goes with it: `bias`
/// (already scaled) under the BN's scale plus its shift. Errors name the node.
fn raw_weight_f16(
    a: &Args,
    w: &RawF32,
    alpha: f64,
    bias: Option<HostTensor>,
) -> Result<(Vec<f16>, Option<HostTensor>)> {
    let n = a.node;
    let rows = w.dims.first().copied().unwrap_or(1);
    if let Some(b) = &bias {
        if b.numel() != rows {
            return Err(n.bad(format!(
                "bias has {} values for {rows} output channels",
                b.numel()
            )));
        }
    }
    let (scale, bias) = match &a.bn {
        Some((scale, shift)) => {
            if scale.len() != rows {
                return Err(n.bad(format!(
                    "the BatchNormalization that follows has {} channels for {rows} outputs",
                    scale.len()
                )));
            }
            let data = (0..rows)
                .map(|c| bias.as_ref().map_or(0.0, |b| b.data[c]) * scale[c] + shift[c])
                .collect();
            let row: Vec<f32> = scale.iter().map(|s| (s * alpha) as f32).collect();
            let elem = bias
                .as_ref()
                .map_or(crate::onnx::tensor::Elem::F32, |b| b.elem);
            (
                Some(row),
                Some(HostTensor {
                    elem,
                    dims: vec![rows],
                    data,
                }),
            )
        }
        None if alpha != 1.0 => (Some(vec![alpha as f32; rows]), bias),
        None => (None, bias),
    };
    Ok((w.to_f16(scale.as_deref(), &n.what)?, bias))
}

fn conv(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let rank = x.rank();
    let x4 = as_4d(n, &x)?;
    let wv = match &a.weight {
        Some(w) => w.dims.clone(),
        None => a.req(1)?.dims(),
    };
    if wv.len() != rank {
        return Err(n.bad(format!("weight dims {wv:?} do not match input rank {rank}")));
    }
    let win = window(n, &x.shape()[2..], &wv[2..])?;
    let opts = ConvOptions {
        stride: win.stride,
        pad: win.pad,
        dilation: win.dilation,
        groups: n.int("group", 1)?.max(1) as usize,
    };
    let y = match (&a.weight, a.host(1, "weight")) {
        (Some(w), _) => {
            let bias = a.host(2, "bias")?.map(|b| (*b).clone());
            let (values, bias) = raw_weight_f16(a, w, 1.0, bias)?;
            let mut dims = w.dims.clone();
            if rank == 3 {
                dims.insert(2, 1);
            }
            let bias = bias
                .map(|b| constant(&n.what, host_array(&b)))
                .transpose()?;
            conv2d_const(&x4, fp16_constant(&n.what, &dims, values)?, bias, opts)?
        }
        (None, Ok(Some(w))) => {
            let mut w = (*w).clone();
            let mut b = a.host(2, "bias")?.map(|b| (*b).clone());
            if let Some((scale, shift)) = &a.bn {
                let (fw, fb) = fold_bn(&w, b.as_ref(), scale, shift);
                (w, b) = (fw, Some(fb));
            }
            if rank == 3 {
                w.dims.insert(2, 1);
            }
            conv2d(&x4, host_array(&w), b.as_ref().map(host_array), opts)?
        }
        _ => {
            if x4.shape()[0] != 1 {
                return Err(n.unsupported(&format!(
                    "a runtime conv weight with batch {} (dynamic_conv takes batch 1)",
                    x4.shape()[0]
                )));
            }
            let y = dynamic_conv(&x4, &as_4d(n, &a.ftensor(1)?)?, opts)?;
            match a.get(2) {
                Some(_) => y.add(&a.ftensor(2)?.reshape(&[-1, 1, 1])?)?,
                None => y,
            }
        }
    };
    Ok(vec![Value::float(from_4d(y, rank)?)])
}

fn conv_transpose(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let rank = x.rank();
    let x4 = as_4d(n, &x)?;
    let mut w = (*a
        .host(1, "weight")?
        .ok_or_else(|| n.bad("weight is missing"))?)
    .clone();
    let b = a.host(2, "bias")?;
    if w.dims.len() != rank {
        return Err(n.bad(format!(
            "weight dims {:?} do not match input rank {rank}",
            w.dims
        )));
    }
    if n.has("output_shape") || n.string("auto_pad", "NOTSET")? != "NOTSET" {
        return Err(n.unsupported("output_shape / auto_pad on ConvTranspose; give explicit pads"));
    }
    if n.ints("output_padding")?
        .is_some_and(|p| p.iter().any(|&v| v != 0))
    {
        return Err(n.unsupported("output_padding != 0"));
    }
    let win = window(n, &x.shape()[2..], &w.dims[2..])?;
    if rank == 3 {
        w.dims.insert(2, 1);
    }
    let opts = ConvOptions {
        stride: win.stride,
        pad: win.pad,
        dilation: win.dilation,
        groups: n.int("group", 1)?.max(1) as usize,
    };
    let y = conv_transpose2d(&x4, host_array(&w), b.as_deref().map(host_array), opts)?;
    Ok(vec![Value::float(from_4d(y, rank)?)])
}

fn pool(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    if n.proto.output.len() > 1 && !n.proto.output[1].is_empty() {
        return Err(n.unsupported("the Indices output of MaxPool (runtime int64 indices)"));
    }
    let x = a.ftensor(0)?;
    let rank = x.rank();
    let x4 = as_4d(n, &x)?;
    let kernel: Vec<usize> = n
        .ints("kernel_shape")?
        .ok_or_else(|| n.bad("kernel_shape is missing"))?
        .iter()
        .map(|&v| v.max(1) as usize)
        .collect();
    let spatial = &x.shape()[2..];
    if kernel.len() != spatial.len() {
        return Err(n.bad(format!(
            "kernel_shape {kernel:?} does not match input {:?}",
            x.shape()
        )));
    }
    let mut win = window(n, spatial, &kernel)?;
    if win.dilation != [1, 1] {
        return Err(n.unsupported("pooling with dilations > 1"));
    }
    let is_max = n.op() == "MaxPool";
    // LpPool: (Σ |x|^p)^(1/p) over the window, the sum as a zero-padded average times its size.
    let lp = (n.op() == "LpPool").then(|| n.int("p", 2)).transpose()?;
    let x4 = match lp {
        Some(p) => x4.unary_named("abs", &[])?.pow_scalar(p as f32)?,
        None => x4,
    };
    let include_pad = lp.is_some() || (!is_max && n.int("count_include_pad", 0)? != 0);
    if n.int("ceil_mode", 0)? != 0 {
        // Extra end padding (never selected by max, excluded from the average) gives ceil outputs.
        let s4 = x4.shape();
        for i in 0..2 {
            let (ext, k, s) = (s4[2 + i], win.kernel[i], win.stride[i]);
            let (pb, pe) = (win.pad[2 * i], win.pad[2 * i + 1]);
            let padded = ext + pb + pe;
            if padded < k {
                continue;
            }
            let mut out = (padded - k).div_ceil(s) + 1;
            if (out - 1) * s >= ext + pb {
                out -= 1;
            }
            let extra = ((out - 1) * s + k).saturating_sub(padded);
            if extra > 0 && include_pad {
                return Err(n.unsupported("ceil_mode with count_include_pad = 1"));
            }
            win.pad[2 * i + 1] += extra;
        }
    }
    let y = if is_max {
        x4.max_pool(win.kernel, win.stride, win.pad)?
    } else {
        x4.avg_pool(win.kernel, win.stride, win.pad, include_pad)?
    };
    let y = match lp {
        Some(p) => y
            .mul_scalar((win.kernel[0] * win.kernel[1]) as f32)?
            .pow_scalar(1.0 / p as f32)?,
        None => y,
    };
    Ok(vec![Value::float(from_4d(y, rank)?)])
}

fn global_pool(a: &Args) -> Result<Vec<Value>> {
    let x = a.ftensor(0)?;
    let axes: Vec<i64> = (2..x.rank() as i64).collect();
    let y = if a.node.op() == "GlobalMaxPool" {
        x.amax(&axes, true)?
    } else {
        x.mean(&axes, true)?
    };
    Ok(vec![Value::float(y)])
}

/// Gemm's C times beta as the linear bias when it is a constant of `rows` values along the last
/// axis (None otherwise: [`gemm_runtime_c`] adds it).
fn gemm_bias(a: &Args, rows: usize, beta: f32) -> Option<HostTensor> {
    let c = a.host(2, "C").ok().flatten()?;
    (c.numel() == rows && c.dims.last() == Some(&rows)).then(|| HostTensor {
        elem: c.elem,
        dims: vec![rows],
        data: c.data.iter().map(|v| v * beta as f64).collect(),
    })
}

/// `y` plus beta·C when C is present but was not taken as the bias (`has_bias` false).
fn gemm_runtime_c(a: &Args, y: Tensor, has_bias: bool, beta: f32) -> Result<Tensor> {
    if !has_bias && a.get(2).is_some() && beta != 0.0 {
        y.add(&a.ftensor(2)?.mul_scalar(beta)?)
    } else {
        Ok(y)
    }
}

fn gemm(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let (alpha, beta) = (n.float("alpha", 1.0)?, n.float("beta", 1.0)?);
    let mut x = a.ftensor(0)?;
    if n.int("transA", 0)? != 0 {
        x = x.transpose(&[1, 0])?;
    }
    let trans_b = n.int("transB", 0)? != 0;
    let y = match (&a.weight, a.host(1, "B")) {
        (Some(w), _) => {
            // transB = 1 (a raw weight is taken only then): W [N, K] as linear takes it.
            let bias = gemm_bias(a, w.dims[0], beta);
            let has_c = bias.is_some();
            let (values, bias) = raw_weight_f16(a, w, alpha as f64, bias)?;
            let w = HostArray {
                shape: &w.dims,
                data: HostData::F16(&values),
            };
            gemm_runtime_c(a, x.linear(w, bias.as_ref().map(host_array))?, has_c, beta)?
        }
        (None, Ok(Some(b))) if b.dims.len() == 2 => {
            // linear takes W [N, K]: B^T, or B itself under transB; alpha and a folded BN scale it.
            let (k, m) = (b.dims[0], b.dims[1]);
            let mut w = if trans_b {
                (*b).clone()
            } else {
                HostTensor {
                    elem: b.elem,
                    dims: vec![m, k],
                    data: (0..k * m).map(|i| b.data[(i % k) * m + i / k]).collect(),
                }
            };
            w.data.iter_mut().for_each(|v| *v *= alpha as f64);
            let bias = gemm_bias(a, w.dims[0], beta);
            let has_c = bias.is_some();
            let (w, bias) = match &a.bn {
                Some((scale, shift)) => {
                    let (fw, fb) = fold_bn(&w, bias.as_ref(), scale, shift);
                    (fw, Some(fb))
                }
                None => (w, bias),
            };
            gemm_runtime_c(
                a,
                x.linear(host_array(&w), bias.as_ref().map(host_array))?,
                has_c,
                beta,
            )?
        }
        _ => {
            let mut b = a.ftensor(1)?;
            if trans_b {
                b = b.transpose(&[1, 0])?;
            }
            let mut y = x.matmul(&b)?;
            if alpha != 1.0 {
                y = y.mul_scalar(alpha)?;
            }
            if a.get(2).is_some() && beta != 0.0 {
                y = y.add(&a.ftensor(2)?.mul_scalar(beta)?)?;
            }
            y
        }
    };
    Ok(vec![Value::float(y)])
}

fn matmul(a: &Args) -> Result<Vec<Value>> {
    let x = a.ftensor(0)?;
    let y = match (&a.weight, a.host(1, "B")) {
        (Some(w), _) if x.rank() >= 2 => {
            let values = w.to_f16(None, &a.node.what)?;
            x.matmul_weight(HostArray {
                shape: &w.dims,
                data: HostData::F16(&values),
            })?
        }
        (Some(w), _) => x.matmul(&fp16_constant(
            &a.node.what,
            &w.dims,
            w.to_f16(None, &a.node.what)?,
        )?)?,
        (None, Ok(Some(b))) if b.dims.len() == 2 && x.rank() >= 2 => {
            x.matmul_weight(host_array(&b))?
        }
        _ => x.matmul(&a.ftensor(1)?)?,
    };
    Ok(vec![Value::float(y)])
}

/// (scale, shift) per channel of a BatchNormalization node with constant parameters.
pub fn bn_affine(a: &Args) -> Result<(Vec<f64>, Vec<f64>)> {
    let n = a.node;
    let eps = n.float("epsilon", 1e-5)? as f64;
    let get = |i: usize, what: &str| -> Result<std::rc::Rc<HostTensor>> {
        a.host(i, what)?
            .ok_or_else(|| n.bad(format!("{what} is missing")))
    };
    let (g, b, m, v) = (
        get(1, "scale")?,
        get(2, "B")?,
        get(3, "mean")?,
        get(4, "var")?,
    );
    let c = g.numel();
    if [b.numel(), m.numel(), v.numel()].iter().any(|&k| k != c) {
        return Err(n.bad(format!(
            "scale, B, mean and var must have equal lengths, got {c}, {}, {}, {}",
            b.numel(),
            m.numel(),
            v.numel()
        )));
    }
    let scale: Vec<f64> = (0..c)
        .map(|i| g.data[i] / (v.data[i] + eps).sqrt())
        .collect();
    let shift = (0..c).map(|i| b.data[i] - m.data[i] * scale[i]).collect();
    Ok((scale, shift))
}

fn batch_normalization(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    if n.int("training_mode", 0)? != 0 || n.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(n.unsupported("training-mode BatchNormalization (running statistics outputs)"));
    }
    let x = a.ftensor(0)?;
    if !a.all_host_from(1) {
        // Runtime statistics: (x − mean)/√(var + eps)·scale + B with [C, 1, ...] operands.
        let per_c = |i: usize| -> Result<Tensor> {
            let mut d = vec![-1i64];
            d.extend(std::iter::repeat_n(1, x.rank().saturating_sub(2)));
            a.ftensor(i)?.reshape(&d)
        };
        let inv = per_c(4)?.unary_named("rsqrt", &[n.float("epsilon", 1e-5)?])?;
        let y = x
            .sub(&per_c(3)?)?
            .mul(&inv)?
            .mul(&per_c(1)?)?
            .add(&per_c(2)?)?;
        return Ok(vec![Value::float(y)]);
    }
    let (scale, shift) = bn_affine(a)?;
    // Per-channel constants shaped [C, 1, ...] to broadcast over axis 1.
    let mut shape = vec![1usize; x.rank().saturating_sub(1).max(1)];
    shape[0] = scale.len();
    let k = |d: &[f64]| {
        constant(
            &n.what,
            HostArray {
                shape: &shape,
                data: HostData::F64(d),
            },
        )
    };
    Ok(vec![Value::float(x.mul(&k(&scale)?)?.add(&k(&shift)?)?)])
}

fn instance_normalization(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let eps = n.float("epsilon", 1e-5)?;
    if !a.all_host_from(1) {
        // Runtime scale/B: normalise, then the affine as graph arithmetic on [C, 1, ...].
        let x = a.ftensor(0)?;
        let mut d = vec![-1i64];
        d.extend(std::iter::repeat_n(1, x.rank().saturating_sub(2)));
        let y = instance_norm(&x, None, None, eps)?;
        let y = y
            .mul(&a.ftensor(1)?.reshape(&d)?)?
            .add(&a.ftensor(2)?.reshape(&d)?)?;
        return Ok(vec![Value::float(y)]);
    }
    let g = a.host(1, "scale")?;
    let b = a.host(2, "B")?;
    let y = instance_norm(
        &a.ftensor(0)?,
        g.as_deref().map(host_array),
        b.as_deref().map(host_array),
        eps,
    )?;
    Ok(vec![Value::float(y)])
}

fn layer_normalization(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let eps = n.float("epsilon", 1e-5)?;
    let axis = crate::shape::axis(&n.what, n.int("axis", -1)?, x.rank())?;
    let lead: Vec<i64> = x.shape()[..axis].iter().map(|&d| d as i64).collect();
    let flat = x.reshape(&[lead.clone(), vec![-1]].concat())?;
    let d = flat.shape()[flat.rank() - 1] as i64;
    let g = a.ftensor(1)?.reshape(&[d])?;
    let b = match a.get(2) {
        Some(_) => Some(a.ftensor(2)?.reshape(&[d])?),
        None => None,
    };
    let y = flat.layer_norm(Some(&g), b.as_ref(), eps)?;
    let y = y.reshape(&x.shape().iter().map(|&d| d as i64).collect::<Vec<_>>())?;
    // The optional Mean and InvStdDev outputs, over the normalised axes (kept as extent 1).
    let axes: Vec<i64> = (axis as i64..x.rank() as i64).collect();
    let mean = x.mean(&axes, true)?;
    let var = x.sub(&mean)?.square()?.mean(&axes, true)?;
    let inv_std = var.unary_named("rsqrt", &[eps])?;
    Ok(vec![
        Value::float(y),
        Value::float(mean),
        Value::float(inv_std),
    ])
}

fn rms_normalization(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let axis = crate::shape::axis(&n.what, n.int("axis", -1)?, x.rank())?;
    let axes: Vec<i64> = (axis as i64..x.rank() as i64).collect();
    let inv = x
        .square()?
        .mean(&axes, true)?
        .unary_named("rsqrt", &[n.float("epsilon", 1e-5)?])?;
    Ok(vec![Value::float(x.mul(&inv)?.mul(&a.ftensor(1)?)?)])
}

fn trilu(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let dims = a.req(0)?.dims();
    let k = a
        .ints(1, "k")?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let upper = n.int("upper", 1)? != 0;
    let r = dims.len();
    if r < 2 {
        return Err(n.bad(format!("input must have rank >= 2, got {dims:?}")));
    }
    let (rows, cols) = (dims[r - 2], dims[r - 1]);
    let mask: Vec<f64> = (0..rows * cols)
        .map(|p| {
            let (i, j) = ((p / cols) as i64, (p % cols) as i64);
            f64::from(u8::from(if upper { j - i >= k } else { j - i <= k }))
        })
        .collect();
    let m = constant(
        &n.what,
        HostArray {
            shape: &[rows, cols],
            data: HostData::F64(&mask),
        },
    )?;
    let t = match a.req(0)? {
        v if super::ops_int::is_runtime_int(v) => super::ops_int::mask_int(v, &m)?,
        _ => a.ftensor(0)?.mul(&m)?,
    };
    Ok(vec![Value::Graph {
        t,
        elem: a.req(0)?.elem(),
    }])
}

fn group_normalization(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let groups = n.int("num_groups", 0)?;
    if groups <= 0 {
        return Err(n.bad(format!("num_groups = {groups} must be >= 1")));
    }
    let c = x.shape().get(1).copied().unwrap_or(1);
    let per_channel = |i: usize| -> Result<Tensor> {
        let t = a.ftensor(i)?;
        if t.shape() == [c] {
            return Ok(t);
        }
        // Opset 18: one value per group, repeated over its channels.
        let rep = c / groups as usize;
        t.reshape(&[groups, 1])?
            .tile(&[1, rep])?
            .reshape(&[c as i64])
    };
    let y = x.group_norm(
        Some(&per_channel(1)?),
        Some(&per_channel(2)?),
        groups as usize,
        n.float("epsilon", 1e-5)?,
    )?;
    Ok(vec![Value::float(y)])
}

fn lrn(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let size = n.int("size", 0)?;
    if size < 1 {
        return Err(n.bad(format!("size = {size} must be >= 1")));
    }
    let y = a.ftensor(0)?.local_response_norm(
        size as usize,
        n.float("alpha", 1e-4)?,
        n.float("beta", 0.75)?,
        n.float("bias", 1.0)?,
    )?;
    Ok(vec![Value::float(y)])
}

fn softmax(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let log = n.op() == "LogSoftmax";
    let f = |t: &Tensor, axis: i64| -> Result<Tensor> {
        if n.op() == "Hardmax" {
            hardmax(t, axis)
        } else if log {
            t.sub(&t.log_sum_exp(&[axis], true)?)
        } else {
            t.softmax(axis)
        }
    };
    let y = if n.opset >= 13 {
        f(&x, n.int("axis", -1)?)?
    } else {
        // Opsets < 13 flatten to 2-D at `axis` and normalise each row.
        let axis = crate::shape::axis(&n.what, n.int("axis", 1)?, x.rank())?;
        let rows: usize = x.shape()[..axis].iter().product();
        let dims: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
        f(&x.reshape(&[rows as i64, -1])?, -1)?.reshape(&dims)?
    };
    Ok(vec![Value::float(y)])
}

/// 1 at the first largest element along `axis`, else 0: argmax → one_hot on the host.
fn hardmax(t: &Tensor, axis: i64) -> Result<Tensor> {
    let r = t.rank();
    let ax = crate::shape::axis("Hardmax", axis, r)?;
    let mut perm: Vec<i64> = (0..r as i64).filter(|&i| i != ax as i64).collect();
    perm.push(ax as i64);
    let last = t.transpose(&perm)?;
    let depth = t.shape()[ax];
    let idx = last.argmax(-1, true)?;
    let op = crate::ops::host::HostOp::OneHot(crate::ops::host_scan::OneHot { depth });
    let dims: Vec<i64> = last.shape().iter().map(|&d| d as i64).collect();
    let onehot = crate::graph::build::host::host(op, vec![idx])?
        .remove(0)
        .reshape(&dims)?;
    let mut inverse = vec![0i64; r];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p as usize] = i as i64;
    }
    onehot.transpose(&inverse)
}

fn einsum_op(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let eq = n.string("equation", "")?.replace(' ', "");
    if a.vals.len() != 2 {
        return Err(n.unsupported(&format!(
            "Einsum with {} operands (two are supported)",
            a.vals.len()
        )));
    }
    let letters = eq.replace(',', "");
    let implicit_scalar =
        !eq.contains("->") && letters.chars().all(|c| letters.matches(c).count() > 1);
    if eq.ends_with("->") || implicit_scalar {
        return Err(n.unsupported("an Einsum with a rank-0 result (rank-0 runtime tensors)"));
    }
    Ok(vec![Value::float(einsum(
        &eq,
        &a.ftensor(0)?,
        &a.ftensor(1)?,
    )?)])
}
