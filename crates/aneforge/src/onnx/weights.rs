//! Float32 initializers kept as their little-endian bytes (a zero-copy slice of the model
//! file, or the bytes read from external data): Conv and Gemm weights become fp16 constants
//! straight from here, in chunks through the vectorised `half` slice conversion, with a folded
//! BatchNormalization (or Gemm alpha) applied per output row in f32 — no `Vec<f64>` copy of the
//! bulk of the model. Every other use decodes them into a [`HostTensor`] on demand.

use std::sync::Arc;

use half::f16;
use half::slice::HalfFloatSliceExt;
use prost::bytes::Bytes;

use super::proto::TensorProto;
use super::tensor::{checked_dims, Elem, HostTensor};
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::io::Const;
use crate::ops::Op;

/// Elements converted per chunk: the f32 staging buffer stays in L1/L2 and is reused.
const CHUNK: usize = 4096;

/// A float32 tensor as raw little-endian bytes (length checked against its dims).
#[derive(Clone, Debug)]
pub struct RawF32 {
    pub dims: Vec<usize>,
    bytes: Bytes,
}

impl RawF32 {
    /// `t` as raw f32 bytes when it is a float32 initializer stored in `raw_data` of exactly
    /// the size its dims need; None for every other storage form (they decode as before).
    pub fn of(t: &TensorProto) -> Option<RawF32> {
        let external = t.data_location() == super::proto::tensor_proto::DataLocation::External;
        if t.data_type() != Elem::F32.code() || external || t.segment.is_some() {
            return None;
        }
        let raw = t.raw_data.as_ref()?;
        let dims = checked_dims(&t.dims, t.name()).ok()?;
        let n: usize = dims.iter().product();
        (n.checked_mul(4) == Some(raw.len())).then(|| RawF32 {
            dims,
            bytes: raw.clone(),
        })
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.bytes.len() / 4
    }

    /// The values as a host tensor (f64), for the ops that read values on the host.
    pub fn decode(&self) -> HostTensor {
        HostTensor {
            elem: Elem::F32,
            dims: self.dims.clone(),
            data: self.f32s().map(f64::from).collect(),
        }
    }

    fn f32s(&self) -> impl Iterator<Item = f32> + '_ {
        self.bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// The values rounded to fp16, each row `r` (of `numel / row_scale.len()` elements along
    /// axis 0) first multiplied in f32 by `row_scale[r]` when given. Errors name `what` and the
    /// first element that is not finite or beyond fp16's range.
    pub fn to_f16(&self, row_scale: Option<&[f32]>, what: &str) -> Result<Vec<f16>> {
        let n = self.numel();
        if let Some(s) = row_scale {
            if self.dims.first() != Some(&s.len()) {
                return Err(Error::shape(
                    what,
                    format!(
                        "{} row scales for a weight of shape {:?}",
                        s.len(),
                        self.dims
                    ),
                ));
            }
        }
        let per = row_scale.map_or(n.max(1), |s| n / s.len()).max(1);
        // Filled chunk by chunk from reused staging buffers: no zeroing pass over the output.
        let mut out = Vec::with_capacity(n);
        let (mut stage, mut halves) = ([0f32; CHUNK], [f16::ZERO; CHUNK]);
        for (k, src) in self.bytes.chunks(4 * CHUNK).enumerate() {
            let stage = &mut stage[..src.len() / 4];
            let dst = &mut halves[..src.len() / 4];
            for (s, c) in stage.iter_mut().zip(src.chunks_exact(4)) {
                *s = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            if let Some(scale) = row_scale {
                // Row by row within the chunk: one broadcast multiply per run of a row.
                let mut j = 0;
                while j < stage.len() {
                    let at = k * CHUNK + j;
                    let run = (per - at % per).min(stage.len() - j);
                    let f = scale[at / per];
                    stage[j..j + run].iter_mut().for_each(|s| *s *= f);
                    j += run;
                }
            }
            dst.convert_from_f32_slice(stage);
            // Exponent all ones = inf/NaN; a branch-free scan first, the position only on error.
            let special = |h: &f16| h.to_bits() & 0x7c00 == 0x7c00;
            if !dst.iter().fold(false, |any, h| any | special(h)) {
                out.extend_from_slice(dst);
                continue;
            }
            if let Some(j) = dst.iter().position(special) {
                let (i, v) = (k * CHUNK + j, stage[j]);
                let why = if v.is_finite() {
                    "overflows fp16 (|x| > 65504)"
                } else {
                    "is not finite"
                };
                return Err(Error::value(
                    what,
                    format!("weight of shape {:?}: element {i} = {v} {why}", self.dims),
                ));
            }
        }
        Ok(out)
    }
}

/// An fp16 constant of `shape` holding `values` (moved, not copied); errors name `what`.
pub fn fp16_constant(what: &str, shape: &[usize], values: Vec<f16>) -> Result<Tensor> {
    crate::shape::check(what, shape)?;
    if crate::shape::numel(shape) != values.len() {
        return Err(Error::shape(
            what,
            format!("{} values for constant shape {shape:?}", values.len()),
        ));
    }
    Tensor::apply1(
        Op::Const(Const {
            shape: shape.to_vec(),
            values: Arc::new(values),
        }),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(dims: &[i64], values: &[f32]) -> TensorProto {
        TensorProto {
            name: Some("w".into()),
            dims: dims.to_vec(),
            data_type: Some(1),
            raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
            ..Default::default()
        }
    }

    /// fp16 conversion with and without row scales, across chunk boundaries, against the
    /// scalar `half` conversion of the f32 products (computed here, not by the code tested).
    #[test]
    fn raw_f32_converts_to_fp16_with_row_scales() {
        let rows = 3;
        let per = CHUNK + 7; // rows straddle the chunk boundary
        let values: Vec<f32> = (0..rows * per)
            .map(|i| ((i * 7919) % 2003) as f32 / 97.0 - 10.0)
            .collect();
        let w = RawF32::of(&raw(&[rows as i64, per as i64], &values)).unwrap();
        assert_eq!(w.decode().data[5], values[5] as f64);
        let plain = w.to_f16(None, "conv").unwrap();
        let scale = [0.5f32, -2.0, 3.25];
        let scaled = w.to_f16(Some(&scale), "conv").unwrap();
        for (i, &v) in values.iter().enumerate() {
            assert_eq!(plain[i], f16::from_f32(v), "element {i}");
            assert_eq!(scaled[i], f16::from_f32(v * scale[i / per]), "element {i}");
        }
    }

    /// Overflow and NaN name the tensor, the element and its value; other storage forms and
    /// length mismatches are not taken by the fast path.
    #[test]
    fn raw_f32_refuses_values_outside_fp16() {
        let w = RawF32::of(&raw(&[3], &[1.0, 70000.0, 0.0])).unwrap();
        let msg = w.to_f16(None, "node 'c'").unwrap_err().to_string();
        assert!(
            msg.contains("node 'c'")
                && msg.contains("element 1 = 70000")
                && msg.contains("overflows"),
            "{msg}"
        );
        let w = RawF32::of(&raw(&[2], &[f32::NAN, 0.0])).unwrap();
        let msg = w.to_f16(None, "x").unwrap_err().to_string();
        assert!(msg.contains("element 0 = NaN is not finite"), "{msg}");
        assert!(w
            .to_f16(Some(&[1.0; 3]), "x")
            .unwrap_err()
            .to_string()
            .contains("3 row scales for a weight of shape [2]"));
        assert!(RawF32::of(&raw(&[4], &[1.0, 2.0])).is_none());
        let mut typed = raw(&[1], &[1.0]);
        typed.raw_data = None;
        typed.float_data = vec![1.0];
        assert!(RawF32::of(&typed).is_none());
    }
}
