//! Fused dequant-GEMM for GGUF block weights (the `gguf` constexpr encoding, made only by the
//! LLM loader) at every M (decode steps M = 1, prefill M = the bucket): y[i, r] = Σ_j x[i, j] ·
//! w[r, j] with w = d · q + m, the exact GGUF value (not rounded to fp16), made in f32 from the
//! stored int8 / 4-bit codes block by block and never stored. Summation contract, the same for
//! the AVX2+FMA+F16C kernel (`gguf_gemv_avx2.rs`) and the portable one (bit-identical): element
//! j of a 32-block (4-bit codes: the block's even elements, then its odd ones) goes to lane
//! j mod 8 of an 8-lane f32 accumulator by fused multiply-add, blocks in order, and the lanes
//! are added as ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)); each (i, r) is therefore independent of M,
//! of the tiling and of the thread count. Contract change against expanding the weight to fp16
//! and calling `sgemm`: other weights (unrounded) and another summation order; ARCHITECTURE.md
//! and BENCHMARKS.md give the measured difference on SmolLM2 logits against float64.

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use crate::ops::constexpr::Codes;

/// Elements per GGUF legacy block (the only block size this kernel takes).
pub const BLOCK: usize = 32;
/// x rows per register tile (one dequantized weight block feeds this many accumulators).
const TILE: usize = 8;
/// Weight elements × rows above which weight rows are split across the rayon pool.
const PAR_MIN_WORK: usize = 1 << 20;
/// Weight rows per task (a task's weights stay in L2 while every x tile runs over them).
const ROWS_PER_TASK: usize = 64;

/// A rank-2 [n, k] GGUF block weight: codes, one scale and optional offset per 32-block.
pub struct BlockWeight<'a> {
    pub n: usize,
    pub k: usize,
    pub codes: &'a Codes,
    pub scale: &'a [f16],
    pub offset: Option<&'a [f16]>,
}

/// One weight row as the kernels read it: codes of `d.len()` blocks, their f32 scales and
/// offsets (zeros when the format has none).
#[derive(Clone, Copy)]
pub(super) struct Row<'a> {
    pub codes: RowCodes<'a>,
    pub d: &'a [f32],
    pub o: &'a [f32],
}

/// A row's codes: 32 signed bytes per block, or 16 bytes per block holding element 2t in the
/// low nibble and 2t + 1 in the high nibble of byte t.
#[derive(Clone, Copy)]
pub(super) enum RowCodes<'a> {
    Int8(&'a [i8]),
    Uint4(&'a [u8]),
}

/// The contract's final lane sum (what the AVX2 kernel's horizontal add computes).
#[inline(always)]
pub(super) fn hsum(a: [f32; 8]) -> f32 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

/// x rows of a block weight in kernel order: each 32-block of a 4-bit weight's x reordered as its
/// even then its odd elements (the order of low then high nibbles), int8 ones as they are.
fn prepare(x: &[f32], uint4: bool) -> Vec<f32> {
    if !uint4 {
        return x.to_vec();
    }
    let mut p = vec![0f32; x.len()];
    for (dst, src) in p.chunks_exact_mut(BLOCK).zip(x.chunks_exact(BLOCK)) {
        for t in 0..BLOCK / 2 {
            dst[t] = src[2 * t];
            dst[BLOCK / 2 + t] = src[2 * t + 1];
        }
    }
    p
}

/// Portable kernel: the dot products of `row` with the R x rows `x` (each ≥ blocks·32 long),
/// under the module's summation contract.
fn tile_portable<const R: usize>(row: Row, x: [&[f32]; R]) -> [f32; R] {
    let mut acc = [[0f32; 8]; R];
    let mut w = [0f32; BLOCK];
    for (b, (&d, &o)) in row.d.iter().zip(row.o).enumerate() {
        // d·q is exact in f32 (11-bit scale × ≤ 8-bit code), so d·q + o has the one rounding
        // of the AVX2 kernel's fused multiply-add.
        match row.codes {
            RowCodes::Int8(q) => {
                for (w, &q) in w.iter_mut().zip(&q[b * BLOCK..(b + 1) * BLOCK]) {
                    *w = d * f32::from(q) + o;
                }
            }
            RowCodes::Uint4(p) => {
                let p = &p[b * BLOCK / 2..(b + 1) * BLOCK / 2];
                for (t, &byte) in p.iter().enumerate() {
                    w[t] = d * f32::from(byte & 15) + o;
                    w[BLOCK / 2 + t] = d * f32::from(byte >> 4) + o;
                }
            }
        }
        for (a, xr) in acc.iter_mut().zip(&x) {
            let xb = &xr[b * BLOCK..(b + 1) * BLOCK];
            for (xc, wc) in xb.chunks_exact(8).zip(w.chunks_exact(8)) {
                for l in 0..8 {
                    a[l] = xc[l].mul_add(wc[l], a[l]);
                }
            }
        }
    }
    acc.map(hsum)
}

/// The dot products of `row` with the R x rows `x`: the AVX2 kernel when the CPU has AVX2 and
/// FMA, else the portable one (same bits).
#[inline]
fn tile<const R: usize>(row: Row, x: [&[f32]; R]) -> [f32; R] {
    #[cfg(target_arch = "x86_64")]
    if super::gguf_gemv_avx2::available() {
        return super::gguf_gemv_avx2::tile(row, x);
    }
    tile_portable(row, x)
}

/// Row r's dot products with the x rows from `x` ([m, k], kernel order) into `out` [m], tiles of
/// [`TILE`] rows then 4, 2, 1 for the rest.
fn row_products(row: Row, x: &[f32], k: usize, out: &mut [f32]) {
    let rows: Vec<&[f32]> = x.chunks_exact(k).collect();
    let mut i = 0;
    while i < rows.len() {
        let left = rows.len() - i;
        let r = &rows[i..];
        let step = if left >= TILE {
            out[i..i + TILE].copy_from_slice(&tile::<TILE>(row, std::array::from_fn(|t| r[t])));
            TILE
        } else if left >= 4 {
            out[i..i + 4].copy_from_slice(&tile::<4>(row, std::array::from_fn(|t| r[t])));
            4
        } else if left >= 2 {
            out[i..i + 2].copy_from_slice(&tile::<2>(row, [r[0], r[1]]));
            2
        } else {
            out[i] = tile::<1>(row, [r[0]])[0];
            1
        };
        i += step;
    }
}

impl BlockWeight<'_> {
    /// y [m, n] = x [m, k] @ Wᵀ for any m (k a multiple of [`BLOCK`] and the payload sizes
    /// matching n, k: the caller's constexpr guarantees both; violations panic in slicing,
    /// never read out of bounds).
    pub fn gemm(&self, x: &[f32], m: usize, y: &mut [f32]) {
        let (n, k) = (self.n, self.k);
        if m == 0 || n == 0 {
            return;
        }
        let blocks = k / BLOCK;
        let uint4 = matches!(self.codes, Codes::Uint4(_));
        let xp = prepare(&x[..m * k], uint4);
        // Results as [n, m] (weight row major) so row tasks own contiguous output.
        let mut yt = vec![0f32; n * m];
        let task = |(t, out): (usize, &mut [f32])| {
            let (mut d, mut o) = (vec![0f32; blocks], vec![0f32; blocks]);
            for (i, out) in out.chunks_exact_mut(m).enumerate() {
                let r = t * ROWS_PER_TASK + i;
                let span = r * blocks..(r + 1) * blocks;
                self.scale[span.clone()].convert_to_f32_slice(&mut d);
                if let Some(off) = self.offset {
                    off[span].convert_to_f32_slice(&mut o);
                }
                let codes = match self.codes {
                    Codes::Int8(q) => RowCodes::Int8(&q[r * k..(r + 1) * k]),
                    Codes::Uint4(p) => RowCodes::Uint4(&p.bytes()[r * k / 2..(r + 1) * k / 2]),
                };
                let row = Row {
                    codes,
                    d: &d,
                    o: &o,
                };
                row_products(row, &xp, k, out);
            }
        };
        if n * k * m >= PAR_MIN_WORK && rayon::current_num_threads() > 1 {
            (yt.par_chunks_mut(ROWS_PER_TASK * m).enumerate()).for_each(task);
        } else {
            yt.chunks_mut(ROWS_PER_TASK * m).enumerate().for_each(task);
        }
        for (r, v) in yt.chunks_exact(m).enumerate() {
            for (i, &v) in v.iter().enumerate() {
                y[i * n + r] = v;
            }
        }
    }
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

    /// A seeded linear congruential stream.
    fn stream(mut seed: u32) -> impl FnMut() -> u32 {
        move || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            seed >> 8
        }
    }

    /// Random (codes 0..16, scales, offsets, x) for an [n, k] weight and m rows.
    fn case(n: usize, k: usize, m: usize) -> (Vec<u8>, Vec<f16>, Vec<f16>, Vec<f32>) {
        let mut next = stream(5);
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
        (q, d, o, x)
    }

    #[test]
    fn fused_products_match_float64_for_both_code_kinds_and_every_tile_size() {
        // m = 15 runs tiles of 8, 4, 2 and 1 rows; n = 70 leaves a partial row task.
        let (n, k, m) = (70, 96, 15);
        let (q, d, o, x) = case(n, k, m);
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
            (
                &int8,
                Some(o.as_slice()),
                oracle(&x, dims, &|i| f64::from(q[i] as i8 - 8), &d, Some(&o)),
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

    #[test]
    fn each_row_is_bit_identical_whatever_m_and_whichever_kernel() {
        let (n, k, m) = (33, 160, 13);
        let (q, d, o, x) = case(n, k, m);
        let uint4 = Codes::Uint4(Packed::pack(BlobType::Uint4, q.iter().copied()));
        let w = BlockWeight {
            n,
            k,
            codes: &uint4,
            scale: &d,
            offset: Some(&o),
        };
        let mut all = vec![0f32; m * n];
        w.gemm(&x, m, &mut all);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for (i, want) in all.chunks_exact(n).enumerate() {
            let mut one = vec![0f32; n];
            w.gemm(&x[i * k..(i + 1) * k], 1, &mut one);
            assert_eq!(bits(&one), bits(want), "row {i}");
        }
        // The portable kernel gives the AVX2 kernel's bits (both code kinds).
        let xp = prepare(&x[..k], true);
        let xi = &x[..k];
        let (mut df, mut of) = (vec![0f32; k / BLOCK], vec![0f32; k / BLOCK]);
        d[..k / BLOCK].convert_to_f32_slice(&mut df);
        o[..k / BLOCK].convert_to_f32_slice(&mut of);
        let signed: Vec<i8> = q[..k]
            .iter()
            .map(|&v| (i16::from(v) * 17 - 128) as i8)
            .collect();
        let packed = Packed::pack(BlobType::Uint4, q[..k].iter().copied());
        for (codes, x) in [
            (RowCodes::Uint4(&packed.bytes()[..k / 2]), &xp[..]),
            (RowCodes::Int8(&signed), xi),
        ] {
            let row = Row {
                codes,
                d: &df,
                o: &of,
            };
            let fast = tile::<1>(row, [x]);
            let slow = tile_portable::<1>(row, [x]);
            assert_eq!(fast[0].to_bits(), slow[0].to_bits());
        }
    }
}
