//! Weights kept in their stored form: a `matmul(x, W, transpose_y = true)` whose W is a rank-2
//! blockwise-int8 or GGUF-block constexpr runs here, expanding W into a reused f32 scratch right
//! before the GEMM instead of holding an f32 copy for the program's life (payloads are shared
//! `Arc`s, so programs built from the same constants share one copy). The expanded values are
//! the constant's own (fp16(q · scale) or fp16(d · q + m), rounded to nearest even) and the GEMM
//! is the same `sgemm` call the dense matmul makes, so results are bit-identical to expanding at
//! load. Exception, a documented contract change: GGUF-block weights (made only by the LLM
//! loader) at every M run the fused kernel of [`gguf_gemv`] instead.
//! Dense fp16 constants are not packed: they are expanded to f32 once at load, like every
//! other constant.

use std::cell::RefCell;

use super::gguf_gemv::{self, BlockWeight};
use crate::error::Result;
use crate::graph::Graph;
use crate::ops::constexpr::{Constexpr, Encoded};
use crate::ops::gemm::sgemm;
use crate::ops::linear::MatMul;
use crate::ops::{Buf, Op};

thread_local! {
    /// The expanded weight of the running matmul (grown to the largest weight, then reused).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// A rank-2 weight [N, K] used as the transposed `y` of a matmul, in its stored form.
#[derive(Clone, Debug)]
pub enum PackedWeight {
    Blockwise(Constexpr),
    /// GGUF blocks of 32 along the input axis (the fused kernel's layout).
    Gguf(Constexpr),
}

/// For each node of `g`, the packed weight when it is a matmul this module runs: `x` rank 2,
/// `transpose_x` false, `transpose_y` true, `y` a rank-2 blockwise or GGUF-block constexpr.
pub fn packed_matmuls(g: &Graph) -> Vec<Option<PackedWeight>> {
    g.nodes
        .iter()
        .map(|n| {
            let Op::MatMul(MatMul {
                transpose_x: false,
                transpose_y: true,
            }) = n.op
            else {
                return None;
            };
            let (x, y) = (n.inputs.first()?, n.inputs.get(1)?);
            if g.ty(*x).shape.len() != 2 {
                return None;
            }
            match &g.nodes[y.node].op {
                Op::Constexpr(c)
                    if c.shape().len() == 2 && matches!(c.encoded(), Encoded::Blockwise { .. }) =>
                {
                    Some(PackedWeight::Blockwise(c.clone()))
                }
                Op::Constexpr(c) => match c.encoded() {
                    Encoded::Gguf { scale_shape, .. }
                        if c.shape()[1] == scale_shape[1] * gguf_gemv::BLOCK =>
                    {
                        Some(PackedWeight::Gguf(c.clone()))
                    }
                    _ => None,
                },
                _ => None,
            }
        })
        .collect()
}

/// fp16(x) as f32, round to nearest even (overflow to ±inf), branch-light for the hot loop:
/// normal results by mantissa rounding of the bits, subnormal ones by adding and removing 0.75
/// (whose f32 ulp is the fp16 subnormal step 2^-24). NaN never reaches it (finite codes/scales).
#[inline]
fn round_f16(x: f32) -> f32 {
    let a = x.abs();
    if a < 6.103_515_6e-5 {
        return ((x + 0.75) - 0.75).copysign(x);
    }
    let b = x.to_bits();
    let r = f32::from_bits((b + 0x0FFF + ((b >> 13) & 1)) & !0x1FFF);
    if r.abs() > 65504.0 {
        f32::INFINITY.copysign(x)
    } else {
        r
    }
}

impl PackedWeight {
    /// The constant.
    fn constexpr(&self) -> &Constexpr {
        match self {
            PackedWeight::Blockwise(c) | PackedWeight::Gguf(c) => c,
        }
    }

    /// Bytes held in the stored form (codes + fp16 scales and offsets).
    pub fn stored_bytes(&self) -> u64 {
        self.constexpr().payload_bytes() as u64
    }

    /// y [M, N] = x [M, K] @ Wᵀ (f32 accumulation; the caller rounds to fp16).
    pub fn matmul(&self, x: &Buf, y: &mut [f32]) -> Result<()> {
        let c = self.constexpr();
        let (n, k) = (c.shape()[0], c.shape()[1]);
        let m = x.shape[0];
        if let (
            PackedWeight::Gguf(_),
            Encoded::Gguf {
                codes,
                scale,
                offset,
                ..
            },
        ) = (self, c.encoded())
        {
            if m > 0 {
                let w = BlockWeight {
                    n,
                    k,
                    codes,
                    scale,
                    offset: offset.as_deref().map(|o| o.as_slice()),
                };
                w.gemm(&x.data, m, y);
                return Ok(());
            }
        }
        SCRATCH.with(|s| {
            let mut w = s.borrow_mut();
            w.resize(n * k, 0.0);
            self.expand(&mut w);
            sgemm(m, n, k, &x.data, k, 1, &w, 1, k, y, n, false);
        });
        Ok(())
    }

    /// The dense weight, the values the constant evaluates to.
    fn expand(&self, out: &mut [f32]) {
        let c = self.constexpr();
        let Encoded::Blockwise {
            data,
            scale_shape,
            scale,
        } = c.encoded()
        else {
            return c.expand(out);
        };
        let (n, k) = (c.shape()[0], c.shape()[1]);
        let (row_block, col_block) = (n / scale_shape[0], k / scale_shape[1]);
        for (r, (o, q)) in out
            .chunks_exact_mut(k)
            .zip(data.chunks_exact(k))
            .enumerate()
        {
            let srow = &scale[r / row_block * scale_shape[1]..];
            for ((o, q), s) in o
                .chunks_exact_mut(col_block)
                .zip(q.chunks_exact(col_block))
                .zip(srow)
            {
                let s = s.to_f32();
                for (o, &q) in o.iter_mut().zip(q) {
                    *o = round_f16(f32::from(q) * s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use std::sync::Arc;

    /// `f16::from_f32(v).to_f32()`, the rounding `round_f16` must reproduce.
    fn reference_round(v: f32) -> f32 {
        f16::from_f32(v).to_f32()
    }

    #[test]
    fn rounding_matches_half_for_every_int8_code_and_fp16_scale() {
        for bits in 0..=u16::MAX {
            let s = f16::from_bits(bits);
            if !s.is_finite() {
                continue;
            }
            for q in i8::MIN..=i8::MAX {
                let v = f32::from(q) * s.to_f32();
                let (got, want) = (round_f16(v), reference_round(v));
                assert_eq!(got.to_bits(), want.to_bits(), "q {q} scale {s}: {v}");
            }
        }
    }

    #[test]
    fn packed_matmul_is_bit_identical_to_the_dense_one() {
        let (n, k, m) = (48, 64, 3);
        let mut seed = 1u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            seed >> 8
        };
        let data: Vec<i8> = (0..n * k).map(|_| next() as u8 as i8).collect();
        let scale: Vec<f16> = (0..n * 2)
            .map(|_| f16::from_f32((next() % 1000) as f32 / 997.0 - 0.5))
            .collect();
        let c = Constexpr::new(
            vec![n, k],
            Encoded::Blockwise {
                data: Arc::new(data),
                scale_shape: vec![n, 2],
                scale: Arc::new(scale),
            },
        )
        .unwrap();
        let x = Buf {
            shape: vec![m, k],
            data: (0..m * k)
                .map(|_| reference_round((next() % 2000) as f32 / 1000.0 - 1.0))
                .collect(),
        };
        let mut dense = Buf::zeros(&[n, k]);
        c.expand(&mut dense.data);
        let mut want = Buf::zeros(&[m, n]);
        let mm = MatMul {
            transpose_x: false,
            transpose_y: true,
        };
        crate::ops::Family::eval(&mm, &[&x, &dense], std::slice::from_mut(&mut want)).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let mut got = vec![0f32; m * n];
        PackedWeight::Blockwise(c).matmul(&x, &mut got).unwrap();
        assert_eq!(bits(&got), bits(&want.data));
    }
}
