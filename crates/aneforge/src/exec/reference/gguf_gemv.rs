//! Fused dequant-GEMV for GGUF block weights (the `gguf` constexpr encoding, made only by the
//! LLM loader) at small M (decode steps): y[m, r] = Σ_b (d[r, b] · Σ_j x[m, bj] · q[r, bj] plus
//! o[r, b] · Σ_j x[m, bj]), reading the int8 / 4-bit codes straight from the stored blocks and
//! accumulating in f32 (8 lanes per block, blocks in order). Contract change against expanding
//! the weight to fp16 and calling `sgemm`: the weights are the exact GGUF values d·q + m (not
//! rounded to fp16) and the summation order differs; ARCHITECTURE.md gives the measured
//! difference on SmolLM2 logits. x86-64 runs the AVX2+FMA build of the same loop when the CPU
//! has it (else the portable build); rows split across the rayon pool above [`PAR_MIN_WORK`].

use rayon::prelude::*;

use crate::ops::constexpr::Codes;
use half::f16;

/// Elements per GGUF legacy block (the only block size this kernel takes).
pub const BLOCK: usize = 32;
/// Largest M that takes this kernel (larger ones expand the weight once and call `sgemm`).
pub const MAX_ROWS: usize = 8;
/// Weight elements × rows above which weight rows are split across the rayon pool.
const PAR_MIN_WORK: usize = 1 << 20;
/// Weight rows per parallel task.
const ROWS_PER_TASK: usize = 64;

/// A rank-2 [n, k] GGUF block weight: codes, one scale and optional offset per 32-block.
pub struct BlockWeight<'a> {
    pub n: usize,
    pub k: usize,
    pub codes: &'a Codes,
    pub scale: &'a [f16],
    pub offset: Option<&'a [f16]>,
}

/// One x row prepared for the kernel: values (for uint4 codes, each block reordered as its
/// even then its odd elements, the order of low then high nibbles) and per-block sums.
struct PreparedRow {
    x: Vec<f32>,
    sums: Vec<f32>,
}

fn prepare(x: &[f32], uint4: bool) -> PreparedRow {
    let x = if uint4 {
        let mut p = vec![0f32; x.len()];
        for (dst, src) in p.chunks_exact_mut(BLOCK).zip(x.chunks_exact(BLOCK)) {
            for t in 0..BLOCK / 2 {
                dst[t] = src[2 * t];
                dst[BLOCK / 2 + t] = src[2 * t + 1];
            }
        }
        p
    } else {
        x.to_vec()
    };
    let sums = x.chunks_exact(BLOCK).map(|b| b.iter().sum()).collect();
    PreparedRow { x, sums }
}

impl BlockWeight<'_> {
    /// y [m, n] = x [m, k] @ Wᵀ for m ≤ [`MAX_ROWS`] (k a multiple of [`BLOCK`]; the caller checks).
    pub fn gemm(&self, x: &[f32], m: usize, y: &mut [f32]) {
        let uint4 = matches!(self.codes, Codes::Uint4(_));
        let rows: Vec<PreparedRow> = x.chunks_exact(self.k).map(|r| prepare(r, uint4)).collect();
        // Results as [n, m] (weight row major) so row tasks own contiguous output.
        let mut yt = vec![0f32; self.n * m];
        let task = |(t, out): (usize, &mut [f32])| {
            let first = t * ROWS_PER_TASK;
            self.rows(&rows, first, out);
        };
        if self.n * self.k * m >= PAR_MIN_WORK && rayon::current_num_threads() > 1 {
            yt.par_chunks_mut(ROWS_PER_TASK * m)
                .enumerate()
                .for_each(task);
        } else {
            yt.chunks_mut(ROWS_PER_TASK * m).enumerate().for_each(task);
        }
        for (r, v) in yt.chunks_exact(m).enumerate() {
            for (i, &v) in v.iter().enumerate() {
                y[i * self.n + r] = v;
            }
        }
    }

    /// Weight rows first.. into `out` ([rows, m]).
    fn rows(&self, x: &[PreparedRow], first: usize, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { self.rows_avx2(x, first, out) };
        }
        self.rows_portable(x, first, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_avx2(&self, x: &[PreparedRow], first: usize, out: &mut [f32]) {
        self.rows_portable(x, first, out)
    }

    #[inline(always)]
    fn rows_portable(&self, x: &[PreparedRow], first: usize, out: &mut [f32]) {
        let blocks = self.k / BLOCK;
        let m = x.len();
        for (i, o) in out.chunks_exact_mut(m).enumerate() {
            let r = first + i;
            let scale = &self.scale[r * blocks..(r + 1) * blocks];
            let offset = self.offset.map(|o| &o[r * blocks..(r + 1) * blocks]);
            for (o, xr) in o.iter_mut().zip(x) {
                let mut acc = 0f32;
                for b in 0..blocks {
                    let xb: &[f32; BLOCK] = xr.x[b * BLOCK..(b + 1) * BLOCK].try_into().unwrap();
                    let dot = match self.codes {
                        Codes::Int8(q) => {
                            let at = (r * blocks + b) * BLOCK;
                            dot_i8(xb, q[at..at + BLOCK].try_into().unwrap())
                        }
                        Codes::Uint4(p) => {
                            let at = (r * blocks + b) * BLOCK / 2;
                            dot_u4(xb, p.bytes()[at..at + BLOCK / 2].try_into().unwrap())
                        }
                    };
                    acc += scale[b].to_f32() * dot;
                    if let Some(off) = offset {
                        acc += off[b].to_f32() * xr.sums[b];
                    }
                }
                *o = acc;
            }
        }
    }
}

/// Horizontal sum of 8 lanes.
#[inline(always)]
fn hsum(a: [f32; 8]) -> f32 {
    ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

/// Σ x[j] · q[j] over one block of int8 codes (8 lanes).
#[inline(always)]
fn dot_i8(x: &[f32; BLOCK], q: &[i8; BLOCK]) -> f32 {
    let mut acc = [0f32; 8];
    for c in 0..BLOCK / 8 {
        for l in 0..8 {
            acc[l] += x[c * 8 + l] * f32::from(q[c * 8 + l]);
        }
    }
    hsum(acc)
}

/// Σ x[j] · q[j] over one block of uint4 codes (16 bytes, element 2t in the low nibble of byte
/// t); `x` is the block reordered as its even then its odd elements.
#[inline(always)]
fn dot_u4(x: &[f32; BLOCK], q: &[u8; BLOCK / 2]) -> f32 {
    let mut acc = [0f32; 8];
    for c in 0..2 {
        for l in 0..8 {
            let b = q[c * 8 + l];
            acc[l] += x[c * 8 + l] * f32::from(b & 15) + x[16 + c * 8 + l] * f32::from(b >> 4);
        }
    }
    hsum(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mil::blob::{BlobType, Packed};
    use std::sync::Arc;

    /// Float64 x · Wᵀ with W[r, j] = d·code(r·k + j) + o written out element by element.
    fn oracle(
        x: &[f32],
        (m, n, k): (usize, usize, usize),
        code: &dyn Fn(usize) -> f64,
        d: &[f16],
        o: Option<&[f16]>,
    ) -> Vec<f64> {
        let mut y = vec![0f64; m * n];
        for i in 0..m {
            for r in 0..n {
                y[i * n + r] = (0..k)
                    .map(|j| {
                        let b = (r * k + j) / BLOCK;
                        let w = d[b].to_f64() * code(r * k + j) + o.map_or(0.0, |o| o[b].to_f64());
                        f64::from(x[i * k + j]) * w
                    })
                    .sum();
            }
        }
        y
    }

    #[test]
    fn fused_products_match_float64_for_both_code_kinds() {
        let (n, k, m) = (70, 96, 3);
        let mut seed = 5u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            seed >> 8
        };
        let q: Vec<u8> = (0..n * k).map(|_| (next() % 16) as u8).collect();
        let d: Vec<f16> = (0..n * k / BLOCK)
            .map(|_| f16::from_f32((next() % 1000) as f32 / 4000.0 - 0.12))
            .collect();
        let o: Vec<f16> = (0..n * k / BLOCK)
            .map(|_| f16::from_f32((next() % 1000) as f32 / 2000.0 - 0.25))
            .collect();
        let x: Vec<f32> = (0..m * k)
            .map(|_| (next() % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let uint4 = Codes::Uint4(Packed::pack(BlobType::Uint4, q.iter().copied()));
        let int8 = Codes::Int8(Arc::new(q.iter().map(|&v| v as i8 - 8).collect()));
        let dims = (m, n, k);
        let cases = [
            (
                &uint4,
                Some(o.as_slice()),
                oracle(&x, dims, &|i| f64::from(q[i]), &d, Some(&o)),
            ),
            (
                &int8,
                None,
                oracle(&x, dims, &|i| f64::from(q[i] as i8 - 8), &d, None),
            ),
        ];
        for (codes, offset, want) in cases {
            let w = BlockWeight {
                n,
                k,
                codes,
                scale: &d,
                offset,
            };
            let mut y = vec![0f32; m * n];
            w.gemm(&x, m, &mut y);
            for (g, e) in y.iter().zip(&want) {
                assert!(
                    (f64::from(*g) - e).abs() <= 1e-5 * (1.0 + e.abs()),
                    "{g} vs {e}"
                );
            }
        }
    }
}
