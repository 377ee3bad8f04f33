//! QDQ (QuantizeLinear / DequantizeLinear). A DequantizeLinear of an int8/uint8 initializer
//! becomes the int8 weight encoding (`constexpr_affine_dequantize`, per tensor or per axis) when
//! `q - zero_point` fits int8 and the scales are normal fp16 values; other constant inputs (e.g.
//! int32 biases) dequantize on the host. On runtime values QuantizeLinear is fake-quant
//! arithmetic, `clamp(round(x / scale) + zero_point, qmin, qmax)` (ties to even), whose result
//! is an integer-valued fp16 tensor tagged int8/uint8, and DequantizeLinear is
//! `(q - zero_point) · scale`.

use std::rc::Rc;
use std::sync::Arc;

use half::f16;

use super::ops::{to_graph, Args, Value};
use super::tensor::{Elem, HostTensor};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::constexpr::{Constexpr, Encoded};
use crate::ops::Op;

/// Whether `op` is one of the QDQ ops mapped here.
pub fn is_qdq(op: &str) -> bool {
    matches!(op, "QuantizeLinear" | "DequantizeLinear")
}

/// The output of a QDQ node. Errors name the node and the value: blocked quantization,
/// 4-bit/float8 types, runtime scales or zero points are NotImplemented; scale/zero-point
/// shapes that do not match the axis, or non-positive scales, are value errors.
pub fn map(a: &Args) -> Result<Vec<Value>> {
    let out = match a.node.op() {
        "DequantizeLinear" => dequantize(a)?,
        "QuantizeLinear" => quantize(a)?,
        other => return Err(a.node.bad(format!("{other} is not a QDQ op"))),
    };
    Ok(vec![out])
}

/// Scale and zero point of one QDQ node, broadcast along `axis` (None: per tensor).
struct Params {
    axis: Option<usize>,
    scale: Rc<HostTensor>,
    zero: Vec<f64>,
    /// The quantized type (the zero point's, else `output_dtype`, else uint8).
    qtype: Elem,
}

impl Params {
    /// Read inputs 1-2 and the attributes; `default` is the quantized type without a zero point.
    fn read(a: &Args, dims: &[usize], default: Elem) -> Result<Params> {
        let n = a.node;
        let rank = dims.len();
        if n.int("block_size", 0)? != 0 {
            return Err(n.unsupported("blocked quantization (block_size > 0)"));
        }
        let scale = a
            .host(1, "scale")?
            .ok_or_else(|| n.bad("input 1 (scale) is missing"))?;
        let zp = a.host(2, "zero point")?;
        let qtype = match (&zp, n.int("output_dtype", 0)?) {
            (Some(z), _) => z.elem,
            (None, 0) => default,
            (None, code) => Elem::from_code(code as i32, &n.what)?,
        };
        if !matches!(
            qtype,
            Elem::I8 | Elem::U8 | Elem::I16 | Elem::U16 | Elem::I32
        ) {
            return Err(n.unsupported(&format!(
                "{qtype:?} quantized values (8/16-bit integers and int32 only)"
            )));
        }
        let axis = if scale.numel() == 1 && scale.dims.len() <= 1 {
            None
        } else {
            let r = rank as i64;
            let ax = n.int("axis", 1)?;
            let ax = if ax < 0 { ax + r } else { ax };
            if !(0..r).contains(&ax) || scale.dims.len() != 1 || scale.numel() != dims[ax as usize]
            {
                return Err(n.bad(format!(
                    "{} scales (dims {:?}) with axis {} do not fit an input of dims {dims:?}",
                    scale.numel(),
                    scale.dims,
                    n.int("axis", 1)?
                )));
            }
            Some(ax as usize)
        };
        let zero = match zp {
            Some(z) if z.numel() != scale.numel() => {
                return Err(n.bad(format!(
                    "{} zero points for {} scales",
                    z.numel(),
                    scale.numel()
                )))
            }
            Some(z) => z.data.clone(),
            None => vec![0.0; scale.numel()],
        };
        if let Some(s) = scale.data.iter().find(|s| !s.is_finite() || **s <= 0.0) {
            return Err(n.bad(format!("scale {s} is not a finite positive number")));
        }
        Ok(Params {
            axis,
            scale,
            zero,
            qtype,
        })
    }

    /// Index into scale/zero of flat element `i` of a C-order tensor of `dims`.
    fn channel(&self, dims: &[usize], i: usize) -> usize {
        match self.axis {
            None => 0,
            Some(ax) => (i / dims[ax + 1..].iter().product::<usize>()) % dims[ax],
        }
    }

    /// Range of the quantized type.
    fn bounds(&self) -> (f64, f64) {
        match self.qtype {
            Elem::I8 => (-128.0, 127.0),
            Elem::U8 => (0.0, 255.0),
            Elem::I16 => (-32768.0, 32767.0),
            Elem::U16 => (0.0, 65535.0),
            _ => (i32::MIN as f64, i32::MAX as f64),
        }
    }

    /// `values` (one per scale) as a graph constant shaped to broadcast against a rank-`rank`
    /// input along the axis.
    fn broadcast_const(&self, a: &Args, values: &[f64], rank: usize) -> Result<Tensor> {
        let mut dims = vec![1; rank];
        if let Some(ax) = self.axis {
            dims[ax] = values.len();
        }
        let h = HostTensor::new(Elem::F32, dims, values.to_vec(), &a.node.what)?;
        to_graph(a.node, &Value::host(h))
    }
}

fn dequantize(a: &Args) -> Result<Value> {
    let x = a.req(0)?;
    let dims = x.dims();
    let p = Params::read(a, &dims, x.elem())?;
    if x.elem() != p.qtype {
        return Err(a.node.bad(format!(
            "x is {:?} but the zero point is {:?}",
            x.elem(),
            p.qtype
        )));
    }
    match x {
        Value::Host(h) => {
            if let Some(t) = int8_encoding(a, h, &p)? {
                return Ok(Value::float(t));
            }
            let data = (0..h.numel())
                .map(|i| {
                    let c = p.channel(&h.dims, i);
                    (h.data[i] - p.zero[c]) * p.scale.data[c]
                })
                .collect();
            Ok(Value::host(HostTensor::new(
                Elem::F32,
                h.dims.clone(),
                data,
                &a.node.what,
            )?))
        }
        Value::Graph { t, .. } => {
            // Runtime int8/uint8 codes are exact in fp16; wider codes are not.
            let t = match (t.dtype(), p.qtype) {
                (crate::dtype::DType::Int32, Elem::I8 | Elem::U8) => {
                    t.cast(crate::dtype::DType::Fp16)?
                }
                (crate::dtype::DType::Int32, q) => {
                    return Err(a.node.unsupported(&format!(
                        "runtime {q:?} quantized values (only 8-bit codes are exact in fp16)"
                    )))
                }
                _ => t.clone(),
            };
            let zero = p.broadcast_const(a, &p.zero, dims.len())?;
            let scale = p.broadcast_const(a, &p.scale.data, dims.len())?;
            Ok(Value::float(t.sub(&zero)?.mul(&scale)?))
        }
    }
}

/// The `constexpr_affine_dequantize` weight for int8/uint8 `h`, or None when it does not
/// qualify (rank 0, `q - zero_point` outside int8, or a scale that is not a normal fp16).
fn int8_encoding(a: &Args, h: &HostTensor, p: &Params) -> Result<Option<Tensor>> {
    let scale16: Vec<f16> = p.scale.data.iter().map(|&s| f16::from_f64(s)).collect();
    if h.dims.is_empty() || !matches!(h.elem, Elem::I8 | Elem::U8) {
        return Ok(None);
    }
    if scale16.iter().any(|s| !s.is_normal()) {
        return Ok(None);
    }
    let mut data = Vec::with_capacity(h.numel());
    for (i, &q) in h.data.iter().enumerate() {
        let v = q - p.zero[p.channel(&h.dims, i)];
        if !(-128.0..=127.0).contains(&v) {
            return Ok(None);
        }
        data.push(v as i8);
    }
    let (axis, scale) = match p.axis {
        Some(ax) => (ax, scale16),
        None => (0, vec![scale16[0]; h.dims[0]]),
    };
    let c = Constexpr::new(
        h.dims.clone(),
        Encoded::Affine {
            axis,
            data: Arc::new(data),
            scale: Arc::new(scale),
        },
    )
    .map_err(|e| a.node.bad(e.to_string()))?;
    Tensor::apply1(Op::Constexpr(c), vec![]).map(Some)
}

/// NumPy rounding: nearest integer, ties to even.
fn round_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 {
        2.0 * (v / 2.0).round()
    } else {
        r
    }
}

fn quantize(a: &Args) -> Result<Value> {
    let x = a.req(0)?;
    let dims = x.dims();
    let p = Params::read(a, &dims, Elem::U8)?;
    if !x.elem().is_float() {
        return Err(a
            .node
            .bad(format!("x is {:?}, not a float tensor", x.elem())));
    }
    let (lo, hi) = p.bounds();
    match x {
        Value::Host(h) => {
            let data = (0..h.numel())
                .map(|i| {
                    let c = p.channel(&h.dims, i);
                    (round_even(h.data[i] / p.scale.data[c]) + p.zero[c]).clamp(lo, hi)
                })
                .collect();
            Ok(Value::host(HostTensor::new(
                p.qtype,
                h.dims.clone(),
                data,
                &a.node.what,
            )?))
        }
        Value::Graph { t, .. } => {
            if !matches!(p.qtype, Elem::I8 | Elem::U8) {
                return Err(a.node.unsupported(&format!(
                    "{:?} quantized activations (values beyond fp16's integers; int8/uint8 only)",
                    p.qtype
                )));
            }
            let zero = p.broadcast_const(a, &p.zero, dims.len())?;
            let scale = p.broadcast_const(a, &p.scale.data, dims.len())?;
            let q = t
                .div(&scale)?
                .unary_named("round", &[])?
                .add(&zero)?
                .maximum_scalar(lo as f32)?
                .minimum_scalar(hi as f32)?;
            Ok(Value::Graph {
                t: q,
                elem: p.qtype,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::round_even;

    /// Ties go to the even neighbour (ONNX QuantizeLinear rounds like NumPy).
    #[test]
    fn rounding_ties_to_even() {
        let got: Vec<f64> = [0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6]
            .iter()
            .map(|&v| round_even(v))
            .collect();
        assert_eq!(got, vec![0.0, 2.0, 2.0, -0.0, -2.0, 2.0, -3.0]);
    }
}
