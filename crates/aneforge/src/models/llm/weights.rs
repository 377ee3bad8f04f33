//! GGUF weights as constants shared by every program: each projection becomes one constant made
//! once and handed out again (the payloads are `Arc`s), so prefill buckets, decode and every
//! chunk hold one copy. Q8_0, Q4_0 and Q5_0 map exactly onto blockwise int8 (block 32 along the
//! input axis, the block's f16 scale: code · d, the values the `gguf` package's dequantize
//! gives, rounded to fp16 as any constant is). The opset has no blockwise 4-bit scale + offset
//! form for Q4_1/Q5_1 (w = d·q + m), and re-encoding them as int8 blocks measured last-position
//! logits cosine 0.9986 against the float64 oracle (below the 0.999 gate), so those and the
//! other types are held as the exact fp16 dense constant (fp16 of the dequantized values).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use aneforge_gguf::quant::exact::{int8_blocks, Int8Blocks, BLOCK};
use half::f16;

use crate::compress::CompressionEntry;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::constexpr::{Constexpr, Encoded, Encoding};
use crate::ops::io::{Const, HostArray};
use crate::ops::linear::MatMul;
use crate::ops::Op;

/// A projection constant: blockwise int8 (exact kinds) or dense fp16.
#[derive(Clone, Debug)]
pub enum Weight {
    Blockwise(Constexpr),
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
/// its compression-report row (exact either way: rel_error 0). Types without a dequantizer
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
    if req.cols == 0 || req.cols % block != 0 {
        return Err(fail(format!(
            "rows of {} elements are not whole {} blocks of {block}",
            req.cols,
            ty.name()
        )));
    }
    let row_bytes = req.cols / block * size;
    let rows = req.rows.len();
    let mut bytes = Vec::with_capacity(rows * row_bytes);
    for r in req.rows.clone() {
        let src = req.perm.map_or(r, |p| p[r]);
        let row = t
            .data()
            .get(src * row_bytes..(src + 1) * row_bytes)
            .ok_or_else(|| fail(format!("row {src} runs past the tensor data")))?;
        bytes.extend_from_slice(row);
    }
    let shape = vec![rows, req.cols];
    let exact = if req.cols % BLOCK == 0 {
        int8_blocks(ty, &bytes).and_then(|b| scaled(b, req.scale))
    } else {
        None
    };
    let (weight, encoding, bytes_encoded) = match exact {
        Some(b) => {
            let n = b.codes.len() + 2 * b.scales.len();
            let c = Constexpr::new(
                shape.clone(),
                Encoded::Blockwise {
                    data: Arc::new(b.codes),
                    scale_shape: vec![rows, req.cols / BLOCK],
                    scale: Arc::new(b.scales),
                },
            )?;
            (Weight::Blockwise(c), Encoding::Blockwise, n)
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
        rel_error: 0.0,
    };
    Ok((weight, entry))
}

/// x [S, in] @ W.T (+ bias [out]) for the [out, in] weight `w` (a `matmul` with `transpose_y`
/// over the constant, as `Tensor::linear` builds).
pub fn linear(x: &Tensor, w: Weight, bias: Option<&[f32]>) -> Result<Tensor> {
    let (out, op) = match w {
        Weight::Blockwise(c) => (c.shape()[0], Op::Constexpr(c)),
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

/// `b` with every scale multiplied by `scale`, or `None` when a product is not exactly an fp16
/// (then the caller re-encodes; a power-of-two scale in the normal range is always exact).
fn scaled(mut b: Int8Blocks, scale: f32) -> Option<Int8Blocks> {
    if scale == 1.0 {
        return Some(b);
    }
    for s in b.scales.iter_mut() {
        let want = s.to_f32() * scale;
        *s = f16::from_f32(want);
        if s.to_f32() != want {
            return None;
        }
    }
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_take_powers_of_two_exactly_and_refuse_the_rest() {
        let b = Int8Blocks {
            codes: vec![1; 32],
            scales: vec![f16::from_f32(0.625)],
        };
        assert_eq!(
            scaled(b.clone(), 0.125).unwrap().scales,
            [f16::from_f32(0.078125)]
        );
        assert!(scaled(b, 1.0 / 3.0).is_none());
    }
}
