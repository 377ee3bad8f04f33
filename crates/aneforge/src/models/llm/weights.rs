//! GGUF weights as constants shared by every program: each projection becomes one constant made
//! once and handed out again (the payloads are `Arc`s), so prefill buckets, decode and every
//! chunk hold one copy. Q8_0, Q4_0, Q5_0, Q4_1 and Q5_1 are kept as stored in the `gguf`
//! encoding (block 32 along the input axis, the block's f16 scale and, for the `_1` kinds, its
//! f16 minimum: fp16(d · q + m), the values the `gguf` package's dequantize gives rounded to
//! fp16 as any constant is). The other types (k-quants, floats) are held as the exact fp16
//! dense constant (fp16 of the dequantized values).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use aneforge_gguf::quant::exact::{affine_blocks, int8_blocks, BLOCK};
use aneforge_gguf::GgmlType;
use half::f16;

use crate::compress::CompressionEntry;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::mil::blob::{BlobType, Packed};
use crate::ops::constexpr::{Codes, Constexpr, Encoded, Encoding};
use crate::ops::io::{Const, HostArray};
use crate::ops::linear::MatMul;
use crate::ops::Op;

/// A projection constant: GGUF blocks as stored (legacy kinds) or dense fp16.
#[derive(Clone, Debug)]
pub enum Weight {
    Blocks(Constexpr),
    Fp16(Const),
}

/// A weight request: rows `rows` of the [out, cols] projection, rows reordered by `perm`
/// (HF row r is file row `perm[r]`) and every value multiplied by `scale`.
pub struct Request<'a> {
    pub cols: usize,
    pub rows: Range<usize>,
    pub perm: Option<&'a [usize]>,
    pub scale: f32,
}

/// The constant for `req` over GGUF tensor `t` of file `path` (file order [out, cols]) and
/// its compression-report row: the reference executor's values are exact either way, and
/// rel_error is that of the MIL spelling (non-zero only for Q4_1/Q5_1, whose opset form
/// subtracts an fp16-rounded offset before scaling, see `Constexpr::mil_rel_error`). Types without a dequantizer
/// and shapes whose rows are not whole blocks are Format errors naming the tensor.
pub fn encode(
    path: &Path,
    t: &aneforge_gguf::Tensor,
    req: &Request,
) -> Result<(Weight, CompressionEntry)> {
    let info = t.info();
    let ty = info.ggml_type;
    let (block, size) = (ty.block_size() as usize, ty.type_size() as usize);
    let fail = |msg: String| Error::format(path, None, format!("tensor '{}': {msg}", info.name));
    if req.cols == 0 || !req.cols.is_multiple_of(block) {
        return Err(fail(format!(
            "rows of {} elements are not whole {} blocks of {block}",
            req.cols,
            ty.name()
        )));
    }
    let row_bytes = req.cols / block * size;
    let rows = req.rows.len();
    let span = |a: usize, b: usize| {
        (t.data().get(a * row_bytes..b * row_bytes))
            .ok_or_else(|| fail(format!("row {} runs past the tensor data", b - 1)))
    };
    // Rows in file order are read straight from the map (no copy of a whole lm_head tile).
    let bytes: std::borrow::Cow<[u8]> = match req.perm {
        None => span(req.rows.start, req.rows.end)?.into(),
        Some(p) => {
            let mut bytes = Vec::with_capacity(rows * row_bytes);
            for r in req.rows.clone() {
                bytes.extend_from_slice(span(p[r], p[r] + 1)?);
            }
            bytes.into()
        }
    };
    let shape = vec![rows, req.cols];
    let blocks = if req.cols.is_multiple_of(BLOCK) {
        gguf_blocks(ty, &bytes, req.scale)
    } else {
        None
    };
    let (weight, encoding, bytes_encoded) = match blocks {
        Some((codes, scale, offset)) => {
            let n = codes.bytes() + 2 * scale.len() * if offset.is_some() { 2 } else { 1 };
            let c = Constexpr::new(
                shape.clone(),
                Encoded::Gguf {
                    codes,
                    scale_shape: vec![rows, req.cols / BLOCK],
                    scale: Arc::new(scale),
                    offset: offset.map(Arc::new),
                },
            )?;
            (Weight::Blocks(c), Encoding::Gguf, n)
        }
        None => {
            let kernel = aneforge_gguf::quant::kernel(ty)
                .ok_or_else(|| fail(format!("type {} has no dequantizer", ty.name())))?;
            let mut dense = vec![0f32; rows * req.cols];
            kernel(&bytes, &mut dense);
            let values: Vec<f16> = dense
                .iter()
                .map(|&v| f16::from_f32(v * req.scale))
                .collect();
            let c = Const {
                shape: shape.clone(),
                values: Arc::new(values),
            };
            (Weight::Fp16(c), Encoding::Fp16, 2 * rows * req.cols)
        }
    };
    let entry = CompressionEntry {
        name: info.name.clone(),
        site: "matmul",
        shape,
        encoding,
        bytes_fp16: 2 * rows * req.cols,
        bytes_encoded,
        rel_error: match &weight {
            Weight::Blocks(c) => c.mil_rel_error(),
            Weight::Fp16(_) => 0.0,
        },
    };
    Ok((weight, entry))
}

/// Compile and load one decoder program holding only what it reads again: the lowered weight
/// blob (written to the program directory; its Q4_1/Q5_1 MIL offsets are arrays of their own)
/// is dropped before the executor allocates its buffers, so the two are never resident
/// together, and on the reference executor the fp16 port buffers of the outputs are released
/// (the runtime reads outputs with `read_output` only, from the value buffers: the same bits).
pub fn compile_program(
    outputs: &[(Option<String>, Tensor)],
    opts: &crate::compile::CompileOptions,
) -> Result<crate::compile::Compiled> {
    let mut exported = crate::compile::export(outputs, opts)?;
    exported.program.weights = crate::mil::blob::Blob::new();
    let mut c = crate::compile::load_exported(exported, opts.device, opts.precision)?;
    let n = c.outputs().len();
    if let Some(p) = crate::exec::reference::handoff::ref_program(c.loaded.as_mut()) {
        (0..n).for_each(|o| p.lazy_output(o));
    }
    Ok(c)
}

/// x [S, in] @ W.T (+ bias [out]) for the [out, in] weight `w` (a `matmul` with `transpose_y`
/// over the constant, as `Tensor::linear` builds).
pub fn linear(x: &Tensor, w: Weight, bias: Option<&[f32]>) -> Result<Tensor> {
    let (out, op) = match w {
        Weight::Blocks(c) => (c.shape()[0], Op::Constexpr(c)),
        Weight::Fp16(c) => (c.shape[0], Op::Const(c)),
    };
    let w = Tensor::apply1(op, vec![])?;
    let y = Tensor::apply1(
        Op::MatMul(MatMul {
            transpose_x: false,
            transpose_y: true,
        }),
        vec![x.clone(), w],
    )?;
    match bias {
        Some(b) => y.add(&crate::constant("linear", HostArray::f32(&[out], b))?),
        None => Ok(y),
    }
}

/// Codes, scales and minimums of whole blocks of `ty` (Q8_0/Q4_0/Q5_0 as int8 codes without
/// minimum, Q4_1 as uint4 codes, Q5_1 as int8 codes 0..=31), scales and minimums multiplied by
/// `scale`; `None` for other types or when a product is not exactly an fp16 (then the caller
/// falls back to dense fp16; a power-of-two scale in the normal range is always exact).
fn gguf_blocks(
    ty: GgmlType,
    bytes: &[u8],
    scale: f32,
) -> Option<(Codes, Vec<f16>, Option<Vec<f16>>)> {
    if let Some(b) = int8_blocks(ty, bytes) {
        return Some((
            Codes::Int8(Arc::new(b.codes)),
            scaled(b.scales, scale)?,
            None,
        ));
    }
    let b = affine_blocks(ty, bytes)?;
    let codes = match b.bits {
        4 => Codes::Uint4(Packed::pack(BlobType::Uint4, b.codes.into_iter())),
        _ => Codes::Int8(Arc::new(b.codes.into_iter().map(|q| q as i8).collect())),
    };
    Some((
        codes,
        scaled(b.scales, scale)?,
        Some(scaled(b.mins, scale)?),
    ))
}

/// `v` with every value multiplied by `scale`, or `None` when a product is not exactly an fp16.
fn scaled(mut v: Vec<f16>, scale: f32) -> Option<Vec<f16>> {
    if scale == 1.0 {
        return Some(v);
    }
    for s in v.iter_mut() {
        let want = s.to_f32() * scale;
        *s = f16::from_f32(want);
        if s.to_f32() != want {
            return None;
        }
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q4_1/Q5_1/Q8_0 bytes kept as `gguf` blocks expand to exactly fp16 of the GGUF kernel's
    /// values (the kernel is bit-exact against `gguf.quants.dequantize`, python/tests/test_gguf.py).
    #[test]
    fn gguf_blocks_expand_to_the_rounded_dequantized_values() {
        let mut seed = 3u32;
        let mut byte = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (seed >> 16) as u8
        };
        for (ty, size, halves) in [
            (GgmlType::Q4_1, 20, 2),
            (GgmlType::Q5_1, 24, 2),
            (GgmlType::Q8_0, 34, 1),
        ] {
            let (rows, cols) = (3, 64);
            let mut bytes: Vec<u8> = (0..rows * cols / BLOCK * size).map(|_| byte()).collect();
            for b in bytes.chunks_exact_mut(size) {
                for h in 0..halves {
                    // finite scales and minimums of moderate size
                    b[2 * h + 1] = 0x20 | (b[2 * h + 1] & 0x9F);
                }
            }
            let (codes, scale, offset) = gguf_blocks(ty, &bytes, 1.0).unwrap();
            let c = Constexpr::new(
                vec![rows, cols],
                Encoded::Gguf {
                    codes,
                    scale_shape: vec![rows, cols / BLOCK],
                    scale: Arc::new(scale),
                    offset: offset.map(Arc::new),
                },
            )
            .unwrap();
            let mut got = vec![0f32; rows * cols];
            c.expand(&mut got);
            let mut want = vec![0f32; rows * cols];
            aneforge_gguf::quant::kernel(ty).unwrap()(&bytes, &mut want);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let w = f16::from_f32(*w).to_f32();
                assert_eq!(g.to_bits(), w.to_bits(), "{ty:?} element {i}");
            }
        }
    }

    #[test]
    fn scales_take_powers_of_two_exactly_and_refuse_the_rest() {
        let v = vec![f16::from_f32(0.625)];
        assert_eq!(scaled(v.clone(), 0.125).unwrap(), [f16::from_f32(0.078125)]);
        assert!(scaled(v, 1.0 / 3.0).is_none());
    }
}
