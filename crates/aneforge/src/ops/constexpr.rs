//! Compressed weights: the iOS18 `constexpr_*` ops, which hold an encoded payload inline (typed
//! `BLOBFILE` arguments) and expand it into a dense fp16 tensor when the program is loaded:
//! int8 per-axis affine, 4-bit palette (LUT), sparse mask + values, blockwise int8, and GGUF
//! legacy blocks (int8 or uint4 codes with a per-block scale and optional minimum).

use std::sync::{Arc, Mutex, Weak};

use half::f16;

use super::io::expect_inputs;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::blob::{BlobType, Packed, Payload};
use crate::mil::{Literal, MilArgs, MilOp};

/// Declares the encodings once: each row is an [`Encoding`] variant and name, then (for a
/// `constexpr_*` encoding) its [`Encoded`] payload variant and fields and its MIL op; the first
/// row, without a payload, is the uncompressed fallback (listed last in `Encoding`). Generates
/// `Encoding`, `Encoding::name`, `Encoded`, `Encoded::encoding` and `Encoded::mil_name`.
macro_rules! encodings {
    ($(#[doc = $plain_doc:literal])* $plain:ident $plain_name:literal;
     $($(#[doc = $doc:literal])* $kind:ident $name:literal
        => $variant:ident { $($field:ident : $ty:ty),+ $(,)? } = $mil:ident;)+) => {
        /// A weight encoding, listed in the order the selection tries them.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Encoding {
            $($(#[doc = $doc])* $kind,)+
            $(#[doc = $plain_doc])* $plain,
        }

        impl Encoding {
            /// Lower-case name (`sparse`, `int4`, `blockwise`, `int8`, `fp16`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Encoding::$kind => $name,)+
                    Encoding::$plain => $plain_name,
                }
            }
        }

        /// The payloads of one encoding (every [`Encoding`] but the uncompressed one).
        #[derive(Clone, Debug, PartialEq)]
        pub enum Encoded {
            $($(#[doc = $doc])* $variant { $($field: $ty),+ },)+
        }

        impl Encoded {
            /// The encoding this payload belongs to.
            pub fn encoding(&self) -> Encoding {
                match self {
                    $(Encoded::$variant { .. } => Encoding::$kind,)+
                }
            }

            /// The `constexpr_*` MIL op that expands this payload.
            pub fn mil_name(&self) -> &'static str {
                match self {
                    $(Encoded::$variant { .. } => $mil,)+
                }
            }
        }
    };
}

encodings! {
    /// Left as fp16.
    Fp16 "fp16";
    /// Bitmask of non-zeros plus the packed non-zero values (lossless): a uint1 mask of the
    /// non-zeros and the non-zero values in C order.
    Sparse "sparse" => Sparse { mask: Packed, values: Arc<Vec<f16>> } = SPARSE;
    /// One 16-entry fp16 palette per tensor, uint4 indices: w = lut[index].
    Int4 "int4" => Lut { indices: Packed, lut: Arc<Vec<f16>> } = LUT;
    /// Symmetric int8 with one fp16 scale per row and block of the inner axis (`scale_shape`
    /// divides the shape axis by axis): w[i] = q[i] · scale[i / block].
    Blockwise "blockwise" => Blockwise {
        data: Arc<Vec<i8>>,
        scale_shape: Vec<usize>,
        scale: Arc<Vec<f16>>,
    } = BLOCKWISE;
    /// Symmetric int8 with one fp16 scale per index along `axis` (per output channel), zero
    /// point 0: w = q · scale[i_axis].
    Int8 "int8" => Affine {
        axis: usize,
        data: Arc<Vec<i8>>,
        scale: Arc<Vec<f16>>,
    } = AFFINE;
    /// GGUF legacy blocks as stored (made only by the GGUF loader): a rank-2 [rows, cols] weight,
    /// int8 or uint4 codes, one fp16 scale (and, for Q4_1/Q5_1, one fp16 minimum) per row and
    /// block of `cols / scale_shape[1]`: w = fp16(scale · q + offset), product and sum in f32
    /// as the GGUF dequantizer computes them. Printed as `constexpr_blockwise_shift_scale`,
    /// exactly without an offset; with one, as scale · (q − fp16(−offset / scale)), which is
    /// not exact (see [`Constexpr::mil_is_exact`]).
    Gguf "gguf" => Gguf {
        codes: Codes,
        scale_shape: Vec<usize>,
        scale: Arc<Vec<f16>>,
        offset: Option<Arc<Vec<f16>>>,
    } = BLOCKWISE;
}

/// The codes of a [`Encoded::Gguf`] weight, one per element in C order.
#[derive(Clone, Debug, PartialEq)]
pub enum Codes {
    /// Signed codes (Q8_0, Q4_0, Q5_0) or unsigned 5-bit ones (Q5_1).
    Int8(Arc<Vec<i8>>),
    /// Unsigned 4-bit codes (Q4_1), element i in nibble i (low nibble first).
    Uint4(Packed),
}

impl Codes {
    /// Number of codes.
    pub fn len(&self) -> usize {
        match self {
            Codes::Int8(v) => v.len(),
            Codes::Uint4(p) => p.len(),
        }
    }

    /// Whether there are no codes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the codes take.
    pub fn bytes(&self) -> usize {
        match self {
            Codes::Int8(v) => v.len(),
            Codes::Uint4(p) => p.bytes().len(),
        }
    }

    /// Code `i` as f32.
    pub fn get(&self, i: usize) -> f32 {
        match self {
            Codes::Int8(v) => f32::from(v[i]),
            Codes::Uint4(p) => f32::from(p.get(i)),
        }
    }

    /// The MIL payload (int8 or uint4 blob).
    fn payload(&self) -> Payload {
        match self {
            Codes::Int8(v) => Payload::Int8(v.clone()),
            Codes::Uint4(p) => Payload::Packed(p.clone()),
        }
    }
}

/// fp16(scale · q + offset) for a GGUF block weight (f32 product, then f32 sum, then one
/// rounding to fp16), the dequantizer's value rounded as any constant is.
pub fn gguf_value(q: f32, scale: f16, offset: Option<f16>) -> f32 {
    let v = scale.to_f32() * q;
    let v = offset.map_or(v, |m| v + m.to_f32());
    f16::from_f32(v).to_f32()
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[AFFINE, LUT, SPARSE, BLOCKWISE];

const AFFINE: &str = "constexpr_affine_dequantize";
const LUT: &str = "constexpr_lut_to_dense";
const SPARSE: &str = "constexpr_sparse_to_dense";
const BLOCKWISE: &str = "constexpr_blockwise_shift_scale";
/// Entries of a 4-bit palette.
pub const LUT_SIZE: usize = 16;

/// An encoded weight; evaluates to the dense fp16 tensor of `shape`. Build with [`Constexpr::new`].
#[derive(Clone, Debug, PartialEq)]
pub struct Constexpr {
    shape: Vec<usize>,
    enc: Encoded,
}

/// fp16(a · b): the product is exact in f32 (int8 × fp16), then rounded once.
fn mul_f16(q: i8, s: f16) -> f32 {
    f16::from_f32(q as f32 * s.to_f32()).to_f32()
}

impl Constexpr {
    /// Check the payloads against `shape` (counts, types, scale shapes, finite fp16 values).
    pub fn new(shape: Vec<usize>, enc: Encoded) -> Result<Constexpr> {
        let c = Constexpr { shape, enc };
        let n = crate::shape::numel(&c.shape);
        let fail = |msg: String| {
            Err(Error::value(
                c.name(),
                format!("weight {:?}: {msg}", c.shape),
            ))
        };
        let (count, fp16) = match &c.enc {
            Encoded::Affine { axis, data, scale } => {
                if *axis >= c.shape.len() || scale.len() != c.shape[*axis] {
                    return fail(format!(
                        "axis {axis} with {} scales does not match the shape",
                        scale.len()
                    ));
                }
                (data.len(), scale)
            }
            Encoded::Lut { indices, lut } => {
                if indices.ty() != BlobType::Uint4 || lut.len() != LUT_SIZE {
                    return fail(format!(
                        "needs uint4 indices and {LUT_SIZE} palette entries, got {} and {}",
                        indices.ty().mil(),
                        lut.len()
                    ));
                }
                (indices.len(), lut)
            }
            Encoded::Sparse { mask, values } => {
                let nnz = (0..mask.len()).filter(|&i| mask.get(i) == 1).count();
                if mask.ty() != BlobType::Uint1 || nnz != values.len() || nnz == 0 {
                    return fail(format!("the {} mask has {nnz} set bits but there are {} non-zero values (need >= 1)", mask.ty().mil(), values.len()));
                }
                (mask.len(), values)
            }
            Encoded::Blockwise {
                data,
                scale_shape,
                scale,
            } => {
                let divides = scale_shape.len() == c.shape.len()
                    && scale_shape
                        .iter()
                        .zip(&c.shape)
                        .all(|(&s, &d)| s > 0 && d % s == 0);
                if !divides || scale.len() != crate::shape::numel(scale_shape) {
                    return fail(format!("scale shape {scale_shape:?} ({} values) must have the weight's rank and divide each extent", scale.len()));
                }
                (data.len(), scale)
            }
            Encoded::Gguf {
                codes,
                scale_shape,
                scale,
                offset,
            } => {
                let fits = c.shape.len() == 2
                    && scale_shape.len() == 2
                    && scale_shape[0] == c.shape[0]
                    && scale_shape[1] > 0
                    && c.shape[1].is_multiple_of(scale_shape[1]);
                let n_scales = crate::shape::numel(scale_shape);
                if !fits || scale.len() != n_scales {
                    return fail(format!("scale shape {scale_shape:?} ({} values) must be [rows, blocks] with blocks dividing the columns", scale.len()));
                }
                if let Some(m) = offset {
                    if m.len() != n_scales {
                        return fail(format!("{} offsets for {n_scales} scales", m.len()));
                    }
                    if let Some(i) = m.iter().position(|v| !v.is_finite()) {
                        return fail(format!("offset {i} is {}", m[i]));
                    }
                }
                if matches!(codes, Codes::Uint4(p) if p.ty() != BlobType::Uint4) {
                    return fail("packed codes must be uint4".to_string());
                }
                (codes.len(), scale)
            }
        };
        if count != n {
            return fail(format!("payload has {count} elements, the shape needs {n}"));
        }
        if let Some(i) = fp16.iter().position(|v| !v.is_finite()) {
            return fail(format!("fp16 payload element {i} is {}", fp16[i]));
        }
        Ok(c)
    }

    /// The dense weight's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The payloads.
    pub fn encoded(&self) -> &Encoded {
        &self.enc
    }

    /// Which encoding this is.
    pub fn encoding(&self) -> Encoding {
        match self.enc {
            Encoded::Affine { .. } => Encoding::Int8,
            Encoded::Lut { .. } => Encoding::Int4,
            Encoded::Sparse { .. } => Encoding::Sparse,
            Encoded::Blockwise { .. } => Encoding::Blockwise,
            Encoded::Gguf { .. } => Encoding::Gguf,
        }
    }

    /// Whether the MIL spelling expands to the same values as [`Constexpr::expand`] (false only
    /// for GGUF blocks with a minimum: the opset's offset is subtracted before the scale).
    pub fn mil_is_exact(&self) -> bool {
        !matches!(
            &self.enc,
            Encoded::Gguf {
                offset: Some(_),
                ..
            }
        )
    }

    /// ‖W − W_mil‖₂ / ‖W‖₂ between [`Constexpr::expand`] and what the MIL spelling expands to,
    /// fp16(scale · (q − offset_mil)) (0 when [`Constexpr::mil_is_exact`]).
    pub fn mil_rel_error(&self) -> f64 {
        let Encoded::Gguf {
            codes,
            scale_shape,
            scale,
            offset: Some(offset),
        } = &self.enc
        else {
            return 0.0;
        };
        let shifted = mil_offset(scale, offset);
        let mut exact = vec![0f32; codes.len()];
        self.expand(&mut exact);
        let block = self.shape[1] / scale_shape[1];
        let (mut diff, mut norm) = (0f64, 0f64);
        for (i, &w) in exact.iter().enumerate() {
            let b = i / block;
            let mil = f16::from_f32(scale[b].to_f32() * (codes.get(i) - shifted[b].to_f32()));
            diff += (f64::from(w) - mil.to_f64()).powi(2);
            norm += f64::from(w).powi(2);
        }
        if norm == 0.0 {
            return if diff == 0.0 { 0.0 } else { f64::INFINITY };
        }
        (diff / norm).sqrt()
    }

    /// Bytes of payload data (what weights.bin stores, without descriptors and padding).
    pub fn payload_bytes(&self) -> usize {
        self.mil().blobs.iter().map(|(_, _, p)| p.data_len()).sum()
    }

    /// Write the dense weight (fp16 values as f32, C order) into `out`.
    pub fn expand(&self, out: &mut [f32]) {
        match &self.enc {
            Encoded::Affine { axis, data, scale } => {
                let inner: usize = self.shape[axis + 1..].iter().product();
                for (i, (o, &q)) in out.iter_mut().zip(data.iter()).enumerate() {
                    *o = mul_f16(q, scale[i / inner % self.shape[*axis]]);
                }
            }
            Encoded::Lut { indices, lut } => out
                .iter_mut()
                .enumerate()
                .for_each(|(i, o)| *o = lut[indices.get(i) as usize].to_f32()),
            Encoded::Sparse { mask, values } => {
                let mut next = values.iter();
                for (i, o) in out.iter_mut().enumerate() {
                    *o = if mask.get(i) == 1 {
                        next.next().map_or(0.0, |v| v.to_f32())
                    } else {
                        0.0
                    };
                }
            }
            Encoded::Blockwise {
                data,
                scale_shape,
                scale,
            } => {
                let (strides, sstrides) = (
                    crate::shape::strides(&self.shape),
                    crate::shape::strides(scale_shape),
                );
                for (i, (o, &q)) in out.iter_mut().zip(data.iter()).enumerate() {
                    let s: usize = (0..self.shape.len())
                        .map(|d| {
                            (i / strides[d] % self.shape[d]) / (self.shape[d] / scale_shape[d])
                                * sstrides[d]
                        })
                        .sum();
                    *o = mul_f16(q, scale[s]);
                }
            }
            Encoded::Gguf {
                codes,
                scale_shape,
                scale,
                offset,
            } => {
                let block = self.shape[1] / scale_shape[1];
                for (i, o) in out.iter_mut().enumerate() {
                    let b = i / block;
                    *o = gguf_value(codes.get(i), scale[b], offset.as_ref().map(|m| m[b]));
                }
            }
        }
    }
}

impl Family for Constexpr {
    fn name(&self) -> &'static str {
        self.enc.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 0)?;
        Ok(vec![TensorType::fp16(self.shape.clone())])
    }
    fn mil(&self) -> MilOp {
        let m = MilOp::new(self.name(), &[]);
        let s = &self.shape;
        match &self.enc {
            Encoded::Affine { axis, data, scale } => m
                .param("axis", Literal::Int32(*axis as i32))
                .param("zero_point", Literal::Int8(0))
                .blob("quantized_data", s, Payload::Int8(data.clone()))
                .blob("scale", &[s[*axis]], Payload::Fp16(scale.clone())),
            Encoded::Lut { indices, lut } => m
                .blob("indices", s, Payload::Packed(indices.clone()))
                .blob("lut", &lut_shape(s.len()), Payload::Fp16(lut.clone())),
            Encoded::Sparse { mask, values } => {
                m.blob("mask", s, Payload::Packed(mask.clone())).blob(
                    "nonzero_data",
                    &[values.len()],
                    Payload::Fp16(values.clone()),
                )
            }
            Encoded::Blockwise {
                data,
                scale_shape,
                scale,
            } => m.blob("data", s, Payload::Int8(data.clone())).blob(
                "scale",
                scale_shape,
                Payload::Fp16(scale.clone()),
            ),
            Encoded::Gguf {
                codes,
                scale_shape,
                scale,
                offset,
            } => {
                let m = m.blob("data", s, codes.payload()).blob(
                    "scale",
                    scale_shape,
                    Payload::Fp16(scale.clone()),
                );
                match offset {
                    None => m,
                    Some(o) => m.blob(
                        "offset",
                        scale_shape,
                        Payload::Fp16(shared_mil_offset(scale, o)),
                    ),
                }
            }
        }
    }
    fn eval(&self, _: &[&Buf], out: &mut [Buf]) -> Result<()> {
        self.expand(&mut out[0].data);
        Ok(())
    }
}

/// [`mil_offset`] of `(scale, offset)`, made once while both arrays and the result are alive:
/// every program lowered from the same GGUF constant shares one array instead of holding its
/// own (the cache's `Weak`s keep the keyed allocations from being reused by other arrays).
fn shared_mil_offset(scale: &Arc<Vec<f16>>, offset: &Arc<Vec<f16>>) -> Arc<Vec<f16>> {
    type Entry = (Weak<Vec<f16>>, Weak<Vec<f16>>, Weak<Vec<f16>>);
    static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|(s, o, m)| s.strong_count() > 0 && o.strong_count() > 0 && m.strong_count() > 0);
    let hit = cache.iter().find_map(|(s, o, m)| {
        (s.as_ptr() == Arc::as_ptr(scale) && o.as_ptr() == Arc::as_ptr(offset))
            .then(|| m.upgrade())
            .flatten()
    });
    hit.unwrap_or_else(|| {
        let m = mil_offset(scale, offset);
        cache.push((
            Arc::downgrade(scale),
            Arc::downgrade(offset),
            Arc::downgrade(&m),
        ));
        m
    })
}

/// The opset's offset for `scale · q + offset`: fp16(−offset / scale) so that
/// scale · (q − that) ≈ the value (0 where the scale is 0; not exact in general).
fn mil_offset(scale: &[f16], offset: &[f16]) -> Arc<Vec<f16>> {
    Arc::new(
        scale
            .iter()
            .zip(offset)
            .map(|(d, m)| match d.to_f32() {
                0.0 => f16::ZERO,
                d => f16::from_f32(-m.to_f32() / d),
            })
            .collect(),
    )
}

/// Shape of the palette of a rank-`rank` weight: `[1] * rank + [16, 1]`.
fn lut_shape(rank: usize) -> Vec<usize> {
    [vec![1; rank], vec![LUT_SIZE, 1]].concat()
}

/// Take an fp16 blob argument of exactly `shape`.
fn fp16_arg(args: &mut MilArgs, name: &str, shape: &[usize]) -> Result<Arc<Vec<f16>>> {
    match args.blob(name, BlobType::Fp16)? {
        (s, Payload::Fp16(v)) if s == shape => Ok(v),
        (s, _) => Err(args.error(format!(
            "argument '{name}' has shape {s:?}, expected {shape:?}"
        ))),
    }
}

/// Take an int8 blob argument: its shape and values.
fn int8_arg(args: &mut MilArgs, name: &str) -> Result<(Vec<usize>, Arc<Vec<i8>>)> {
    match args.blob(name, BlobType::Int8)? {
        (s, Payload::Int8(v)) => Ok((s, v)),
        _ => Err(args.error(format!("argument '{name}' must be int8"))),
    }
}

/// Take a sub-byte blob argument of type `ty`: its shape and values.
fn packed_arg(args: &mut MilArgs, name: &str, ty: BlobType) -> Result<(Vec<usize>, Packed)> {
    match args.blob(name, ty)? {
        (s, Payload::Packed(p)) => Ok((s, p)),
        _ => Err(args.error(format!("argument '{name}' must be {}", ty.mil()))),
    }
}

/// Parse the constexpr ops.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    if !MIL_OPS.contains(&op) {
        return None;
    }
    Some((|| {
        let (shape, enc) = match op {
            AFFINE => {
                let zp = args.int8("zero_point")?;
                if zp != 0 {
                    return Err(
                        args.error(format!("zero_point must be 0 (symmetric int8), got {zp}"))
                    );
                }
                let (shape, data) = int8_arg(args, "quantized_data")?;
                let a = args.int("axis")?;
                let axis = crate::shape::axis(op, a, shape.len())
                    .map_err(|e| args.error(e.to_string()))?;
                let scale = fp16_arg(args, "scale", &[shape[axis]])?;
                (shape, Encoded::Affine { axis, data, scale })
            }
            LUT => {
                let (shape, indices) = packed_arg(args, "indices", BlobType::Uint4)?;
                let lut = fp16_arg(args, "lut", &lut_shape(shape.len()))?;
                (shape, Encoded::Lut { indices, lut })
            }
            SPARSE => {
                let (shape, mask) = packed_arg(args, "mask", BlobType::Uint1)?;
                let (_, values) = match args.blob("nonzero_data", BlobType::Fp16)? {
                    (s, Payload::Fp16(v)) if s.len() == 1 => (s, v),
                    (s, _) => {
                        return Err(args.error(format!(
                            "argument 'nonzero_data' must be rank 1, got shape {s:?}"
                        )))
                    }
                };
                (shape, Encoded::Sparse { mask, values })
            }
            _ => {
                let (shape, data) = int8_arg(args, "data")?;
                let (scale_shape, scale) = match args.blob("scale", BlobType::Fp16)? {
                    (s, Payload::Fp16(v)) => (s, v),
                    _ => return Err(args.error("argument 'scale' must be fp16")),
                };
                (
                    shape,
                    Encoded::Blockwise {
                        data,
                        scale_shape,
                        scale,
                    },
                )
            }
        };
        Constexpr::new(shape, enc)
            .map(Op::Constexpr)
            .map_err(|e| args.error(e.to_string()))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[f32]) -> Arc<Vec<f16>> {
        Arc::new(v.iter().map(|&x| f16::from_f32(x)).collect())
    }

    /// Each payload names its encoding and its iOS18 `constexpr_*` op (names from the MIL spec).
    #[test]
    fn payloads_name_their_encoding_and_mil_op() {
        let data = Arc::new(vec![1i8, -2]);
        let affine = Encoded::Affine {
            axis: 0,
            data: data.clone(),
            scale: h(&[0.5]),
        };
        let blockwise = Encoded::Blockwise {
            data,
            scale_shape: vec![1],
            scale: h(&[0.5]),
        };
        assert_eq!(
            [&affine, &blockwise].map(|e| (e.encoding().to_string(), e.mil_name())),
            [
                ("int8".to_string(), "constexpr_affine_dequantize"),
                ("blockwise".to_string(), "constexpr_blockwise_shift_scale"),
            ]
        );
        assert_eq!(
            [Encoding::Sparse, Encoding::Int4, Encoding::Fp16].map(Encoding::name),
            ["sparse", "int4", "fp16"]
        );
    }

    fn dense(c: &Constexpr) -> Vec<f32> {
        let mut out = vec![f32::NAN; crate::shape::numel(c.shape())];
        c.expand(&mut out);
        out
    }

    /// One small case per encoding, with its expected dense values worked out by hand.
    fn cases() -> Vec<(Constexpr, Vec<f32>)> {
        let affine = Constexpr::new(
            vec![2, 3],
            Encoded::Affine {
                axis: 0,
                data: Arc::new(vec![1, -2, 127, 0, 5, -127]),
                scale: h(&[0.5, 0.25]),
            },
        )
        .unwrap();
        let affine1 = Constexpr::new(
            vec![2, 3],
            Encoded::Affine {
                axis: 1,
                data: Arc::new(vec![1, -2, 3, 4, 5, 6]),
                scale: h(&[1.0, 2.0, 0.5]),
            },
        )
        .unwrap();
        let lut: Vec<f32> = (0..16).map(|i| i as f32 - 8.0).collect();
        let lut = Constexpr::new(
            vec![3, 1],
            Encoded::Lut {
                indices: Packed::pack(BlobType::Uint4, [0u8, 15, 9].into_iter()),
                lut: h(&lut),
            },
        )
        .unwrap();
        let sparse = Constexpr::new(
            vec![2, 2, 1],
            Encoded::Sparse {
                mask: Packed::pack(BlobType::Uint1, [0u8, 1, 1, 0].into_iter()),
                values: h(&[3.0, -1.5]),
            },
        )
        .unwrap();
        let data = Arc::new(vec![1, 2, 3, 4, -1, -2, -3, -4]);
        let block = Constexpr::new(
            vec![2, 4],
            Encoded::Blockwise {
                data,
                scale_shape: vec![2, 2],
                scale: h(&[1.0, 10.0, 0.5, 0.125]),
            },
        )
        .unwrap();
        vec![
            (affine, vec![0.5, -1.0, 63.5, 0.0, 1.25, -31.75]),
            (affine1, vec![1.0, -4.0, 1.5, 4.0, 10.0, 3.0]),
            (lut, vec![-8.0, 7.0, 1.0]),
            (sparse, vec![0.0, 3.0, -1.5, 0.0]),
            (block, vec![1.0, 2.0, 30.0, 40.0, -0.5, -1.0, -0.375, -0.5]),
        ]
    }

    #[test]
    fn kernels_dequantize_as_specified() {
        for (c, want) in cases() {
            assert_eq!(dense(&c), want, "{}", c.name());
            assert_eq!(
                c.infer(&[]).unwrap(),
                [TensorType::fp16(c.shape().to_vec())]
            );
        }
    }

    fn parse(c: &Constexpr) -> Result<Op> {
        let m = c.mil();
        let mut args = MilArgs::new("model.mil", "w", Default::default());
        args.blobs = m
            .blobs
            .iter()
            .map(|(k, s, p)| (k.to_string(), (s.clone(), p.clone())))
            .collect();
        from_mil(m.op, &mut args).unwrap()
    }

    #[test]
    fn gguf_blocks_expand_exactly_and_say_when_their_mil_form_is_not() {
        // Block 2: [2, 4] weight, scales d, minimums m; w = fp16(d·q + m).
        let q4 = Constexpr::new(
            vec![2, 4],
            Encoded::Gguf {
                codes: Codes::Uint4(Packed::pack(
                    BlobType::Uint4,
                    [0u8, 15, 3, 7, 1, 2, 0, 9].into_iter(),
                )),
                scale_shape: vec![2, 2],
                scale: h(&[0.5, 0.1, 2.0, 0.0]),
                offset: Some(h(&[-1.0, 0.25, 0.0, 3.0])),
            },
        )
        .unwrap();
        // 0.1 is fp16 0.0999755859375: 3·that + 0.25 = 0.5499267578125 → fp16 0.5498046875,
        // 7·that + 0.25 = 0.9498291015625 → fp16 0.94970703125 (NumPy float16).
        let want = [-1.0, 6.5, 0.549_804_7, 0.949_707, 2.0, 4.0, 3.0, 3.0];
        for (g, w) in dense(&q4).iter().zip(want) {
            assert!((g - w).abs() < 1e-7, "{g} vs {w}");
        }
        // The MIL offset −m/d is rounded and a zero scale loses the minimum: not exact.
        assert!(!q4.mil_is_exact() && q4.mil_rel_error() > 0.1);
        let e = parse(&q4).unwrap_err().to_string();
        assert!(e.contains("'data' must be a int8 tensor, got uint4"), "{e}");
        // Signed codes without a minimum print as plain blockwise int8, exactly.
        let q8 = Constexpr::new(
            vec![1, 4],
            Encoded::Gguf {
                codes: Codes::Int8(Arc::new(vec![1, -2, 127, 0])),
                scale_shape: vec![1, 2],
                scale: h(&[0.5, 0.1]),
                offset: None,
            },
        )
        .unwrap();
        assert!(q8.mil_is_exact() && q8.mil_rel_error() == 0.0);
        let Op::Constexpr(back) = parse(&q8).unwrap() else {
            panic!("not a constexpr")
        };
        assert_eq!(back.encoding(), Encoding::Blockwise);
        assert_eq!(dense(&back), dense(&q8));
    }

    #[test]
    fn dequantized_products_round_once_to_fp16() {
        // 127 · fp16(0.1) = 12.6968994140625 is not an fp16 value: it rounds to 12.6953125.
        let c = Constexpr::new(
            vec![1, 1],
            Encoded::Affine {
                axis: 0,
                data: Arc::new(vec![127]),
                scale: h(&[0.1]),
            },
        )
        .unwrap();
        assert_eq!(dense(&c), [12.6953125]);
    }

    #[test]
    fn mil_round_trips_every_encoding() {
        for (c, _) in cases() {
            let m = c.mil();
            let mut args = MilArgs::new(
                "model.mil",
                "w",
                m.params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            );
            args.blobs = m
                .blobs
                .iter()
                .map(|(k, s, p)| (k.to_string(), (s.clone(), p.clone())))
                .collect();
            assert_eq!(
                from_mil(m.op, &mut args).unwrap().unwrap(),
                Op::Constexpr(c.clone())
            );
            assert!(
                args.params.is_empty() && args.blobs.is_empty(),
                "{}: unclaimed arguments",
                m.op
            );
            assert!(
                m.params.windows(2).all(|p| p[0].0 < p[1].0),
                "{}: params not in alphabetical order",
                m.op
            );
        }
        assert!(from_mil("conv", &mut MilArgs::new("m", "s", Default::default())).is_none());
    }

    #[test]
    fn new_rejects_inconsistent_payloads_naming_the_op_and_shape() {
        let bad = |shape: Vec<usize>, enc: Encoded, needle: &str| {
            let e = Constexpr::new(shape, enc).unwrap_err().to_string();
            assert!(e.starts_with("constexpr_") && e.contains(needle), "{e}");
        };
        bad(
            vec![2, 3],
            Encoded::Affine {
                axis: 0,
                data: Arc::new(vec![0; 6]),
                scale: h(&[1.0; 3]),
            },
            "axis 0 with 3 scales",
        );
        bad(
            vec![2, 3],
            Encoded::Affine {
                axis: 0,
                data: Arc::new(vec![0; 5]),
                scale: h(&[1.0; 2]),
            },
            "payload has 5 elements, the shape needs 6",
        );
        bad(
            vec![4],
            Encoded::Lut {
                indices: Packed::pack(BlobType::Uint4, [0u8; 4].into_iter()),
                lut: h(&[0.0; 15]),
            },
            "16 palette entries",
        );
        bad(
            vec![4],
            Encoded::Lut {
                indices: Packed::pack(BlobType::Uint1, [0u8; 4].into_iter()),
                lut: h(&[0.0; 16]),
            },
            "uint4 indices",
        );
        bad(
            vec![4],
            Encoded::Sparse {
                mask: Packed::pack(BlobType::Uint1, [1u8, 0, 1, 0].into_iter()),
                values: h(&[1.0]),
            },
            "2 set bits but there are 1",
        );
        bad(
            vec![4],
            Encoded::Sparse {
                mask: Packed::pack(BlobType::Uint1, [0u8; 4].into_iter()),
                values: h(&[]),
            },
            "need >= 1",
        );
        bad(
            vec![2, 4],
            Encoded::Blockwise {
                data: Arc::new(vec![0; 8]),
                scale_shape: vec![2, 3],
                scale: h(&[1.0; 6]),
            },
            "divide each extent",
        );
        bad(
            vec![2, 4],
            Encoded::Blockwise {
                data: Arc::new(vec![0; 8]),
                scale_shape: vec![2, 2],
                scale: h(&[1.0; 3]),
            },
            "(3 values)",
        );
        bad(
            vec![1, 2],
            Encoded::Affine {
                axis: 0,
                data: Arc::new(vec![0; 2]),
                scale: Arc::new(vec![f16::INFINITY]),
            },
            "element 0 is inf",
        );
    }

    #[test]
    fn from_mil_rejects_nonzero_zero_point_and_wrong_argument_types() {
        let (c, _) = cases().remove(0);
        let m = c.mil();
        let blobs: std::collections::BTreeMap<_, _> = m
            .blobs
            .iter()
            .map(|(k, s, p)| (k.to_string(), (s.clone(), p.clone())))
            .collect();
        let mut args = MilArgs::new(
            "model.mil",
            "w",
            [
                ("axis".to_string(), Literal::Int32(0)),
                ("zero_point".to_string(), Literal::Int8(3)),
            ]
            .into(),
        );
        args.blobs = blobs.clone();
        assert!(from_mil(AFFINE, &mut args)
            .unwrap()
            .unwrap_err()
            .to_string()
            .contains("zero_point must be 0"));
        let mut args = MilArgs::new("model.mil", "w", Default::default());
        args.blobs = [("indices".to_string(), blobs["quantized_data"].clone())].into();
        let e = from_mil(LUT, &mut args).unwrap().unwrap_err().to_string();
        assert!(
            e.contains("'indices' must be a uint4 tensor, got int8"),
            "{e}"
        );
    }
}
