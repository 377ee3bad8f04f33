//! A shared weight Wᵀ (K×N) stored as column blocks, `[K][w]` row-major per block of `w`
//! consecutive columns, so the `gemm` crate reads each block in place and in order: with Wᵀ as
//! its left operand it would otherwise copy (pack) the whole weight on every call, which on a
//! model larger than the last-level cache streams it from memory twice (MiniLM's six layers
//! hold 42 MB of f32 weights). Blocks are [`BLOCK`] columns wide, the last one 128–255 (or the
//! whole weight when N < 256, which is then plain row-major [K, N]).
//!
//! Every block is one `sgemm` call of its own columns, so each output element keeps the crate's
//! sequence (`ops::gemm_order`): the depth block depends on (m, n, k) only through the crate's
//! small-product rule (m and n both ≤ 64), which a block of ≥ 128 columns never meets, and a
//! call is on the crate's blocked path when it has at least 3 rows (one of 2 rows runs padded
//! to 3). Rows may be split between threads too: no bit depends on the split.

use std::ops::Range;

use rayon::prelude::*;

use super::conv_gemm::SyncPtr;
use super::gemm::{sgemm_raw, PAR_MIN_MACS};
use super::gemm_order;

/// Columns per block (the last block takes the remainder, up to 2·BLOCK − 1 columns).
pub const BLOCK: usize = 128;

/// Fewest rows of a block call: BLOCK·3 > 256 keeps it on the crate's blocked path.
const MIN_ROWS: usize = 3;

/// (first column, width) of each block of an N-column weight.
pub fn spans(n: usize) -> impl Iterator<Item = (usize, usize)> {
    let blocks = (n / BLOCK).max(1);
    (0..blocks).map(move |b| {
        let j0 = b * BLOCK;
        (j0, if b + 1 == blocks { n - j0 } else { BLOCK })
    })
}

/// Position of Wᵀ[p, j] (depth p, column j) in the blocks of a K×N weight.
pub fn index(n: usize, k: usize, p: usize, j: usize) -> usize {
    let j0 = (j / BLOCK).min((n / BLOCK).max(1) - 1) * BLOCK;
    let w = if n - j0 < 2 * BLOCK { n - j0 } else { BLOCK };
    j0 * k + p * w + (j - j0)
}

/// Whether blocks reproduce the crate's dense call on this CPU (its kernel is one
/// `gemm_order` models); elsewhere the weight stays one row-major block.
pub fn usable() -> bool {
    gemm_order::depth_block(BLOCK, BLOCK, 3).is_some()
}

/// y [m, n] = x [m, k] · Wᵀ with Wᵀ in `blocks` (see [`index`]); blocks (and row ranges)
/// on the rayon pool above `PAR_MIN_MACS`. Panics if a slice is shorter than its shape.
pub fn matmul(blocks: &[f32], (m, n, k): (usize, usize, usize), x: &[f32], y: &mut [f32]) {
    assert!(blocks.len() >= n * k && x.len() >= m * k && y.len() >= m * n);
    if m < MIN_ROWS && n >= 2 * BLOCK {
        let mut xp = vec![0f32; MIN_ROWS * k];
        xp[..m * k].copy_from_slice(&x[..m * k]);
        let mut yp = vec![0f32; MIN_ROWS * n];
        matmul(blocks, (MIN_ROWS, n, k), &xp, &mut yp);
        y[..m * n].copy_from_slice(&yp[..m * n]);
        return;
    }
    let threads = rayon::current_num_threads();
    let parts = if m * n * k >= PAR_MIN_MACS {
        threads.min(m / MIN_ROWS).max(1)
    } else {
        1
    };
    // Balanced row ranges: each holds at least ⌊m / parts⌋ ≥ MIN_ROWS rows.
    let tasks: Vec<(usize, usize, Range<usize>)> = spans(n)
        .flat_map(|(j0, w)| (0..parts).map(move |t| (j0, w, m * t / parts..m * (t + 1) / parts)))
        .collect();
    let out = SyncPtr(y.as_mut_ptr());
    let run = |(j0, w, rows): &(usize, usize, Range<usize>)| {
        let (j0, w, r0, r) = (*j0, *w, rows.start, rows.len());
        let start = r0 * n + j0;
        // SAFETY: the task's elements y[r0 + i, j0 + j] (i < r, j < w) lie inside `y` (len
        // ≥ m·n from `start`) and no other task writes them: tasks own disjoint (row range,
        // column block) rectangles, and `y` is borrowed mutably for the whole call.
        unsafe {
            let y = (out.get().add(start), m * n - start);
            block_product(blocks, (j0, w, k), (&x[r0 * k..], r, k, 1), y, n, false)
        }
    };
    if tasks.len() > 1 && m * n * k >= PAR_MIN_MACS {
        tasks.par_iter().for_each(run);
    } else {
        tasks.iter().for_each(run);
    }
}

/// y [r, w] (+)= x [r, k] · Wᵀ[:, j0..j0 + w] for the block of `blocks` at column j0 (w wide,
/// see [`spans`]), x at `x[i·x_rs + p·x_cs]`, y with row stride `y_rs`: one `sgemm` call, the
/// crate's chain per element (`accumulate`: y += acc per depth block). Panics if an operand
/// is shorter than its shape.
///
/// # Safety
/// `y` = (pointer, len) describes memory valid for writes that nothing else accesses during
/// the call.
pub unsafe fn block_product(
    blocks: &[f32],
    (j0, w, k): (usize, usize, usize),
    (x, r, x_rs, x_cs): (&[f32], usize, usize, usize),
    y: (*mut f32, usize),
    y_rs: usize,
    accumulate: bool,
) {
    let b = &blocks[j0 * k..];
    // SAFETY: the caller's contract on `y`; the operands' bounds are checked inside.
    unsafe { sgemm_raw(false, r, w, k, x, x_rs, x_cs, b, w, 1, y, y_rs, accumulate) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::sgemm;
    use crate::ops::gemm::tests::{on_threads, rand_vec};

    /// Blocks cover every column once, with widths BLOCK or the 128–255 remainder, and
    /// [`index`] is a bijection onto 0..n·k.
    #[test]
    fn blocks_tile_the_weight() {
        for n in [1, 5, 127, 128, 255, 256, 257, 384, 1000, 1536] {
            let s: Vec<_> = spans(n).collect();
            assert_eq!(s.iter().map(|b| b.1).sum::<usize>(), n, "n {n}");
            assert!(s.windows(2).all(|p| p[0].0 + p[0].1 == p[1].0));
            assert!(n < 2 * BLOCK || s.iter().all(|b| (BLOCK..2 * BLOCK).contains(&b.1)));
            let k = 3;
            let mut seen = vec![false; n * k];
            for p in 0..k {
                for j in 0..n {
                    let i = index(n, k, p, j);
                    assert!(!seen[i], "n {n} ({p}, {j}) → {i} twice");
                    seen[i] = true;
                }
            }
        }
    }

    /// Every bit of the dense call `sgemm(x, Wᵀ)` on the row-major weight: MiniLM's shapes,
    /// K past one depth block (1536, 1000, 700), remainders, 2 rows (padded), 1 to 3 threads.
    #[test]
    fn blocks_give_the_dense_bits() {
        if !usable() {
            return;
        }
        for (m, n, k) in [
            (128, 384, 384),
            (16, 1536, 384),
            (77, 384, 1536),
            (2, 300, 700),
            (5, 257, 1000),
            (40, 129, 31),
            (3, 640, 3),
            (10, 384, 1000),
        ] {
            let wt = rand_vec(k * n, 7 + m as u64);
            let x = rand_vec(m * k, 3);
            let mut dense = vec![0f32; m * n];
            sgemm(m, n, k, &x, k, 1, &wt, n, 1, &mut dense, n, false);
            let mut blocks = vec![f32::NAN; n * k];
            for p in 0..k {
                for j in 0..n {
                    blocks[index(n, k, p, j)] = wt[p * n + j];
                }
            }
            for threads in [1, 2, 3] {
                let mut got = vec![f32::NAN; m * n];
                on_threads(threads, || matmul(&blocks, (m, n, k), &x, &mut got));
                for (i, (g, d)) in got.iter().zip(&dense).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        d.to_bits(),
                        "({m}, {n}, {k}) {threads} threads, element {i}"
                    );
                }
            }
        }
    }
}
