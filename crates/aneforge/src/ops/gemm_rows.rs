//! A large GEMM split over the rayon pool by row blocks of A and C, each block one
//! single-threaded [`sgemm_with`] call. The `gemm` crate's own threading splits every K chunk
//! into one job per thread and has every thread pack the whole left operand of its view (the
//! weight of `x @ Wᵀ`), so at 2 threads a MiniLM-sized product costs ~40 % more CPU than at one.
//! When B's rows are contiguous and N is a multiple of 16 (a row-major `x @ W` weight, as
//! `shared_weight` stores it), blocks of at most [`MAX_BLOCK_ROWS`] rows stay below the crate's
//! packing threshold (it reads B in place), so the split adds no work; other layouts keep the
//! crate's threading, since every block would pack its own copy of B. Per output element the crate sums K in
//! chunks fixed by K alone on its blocked path, so a block gives the same bits as the whole
//! product; shapes where a block could leave that path (see [`block_rows`]) are not split.

use rayon::prelude::*;

use super::gemm::{sgemm, sgemm_with, PAR_MIN_MACS};

/// Most rows of C per block: the crate packs the left operand of its (transposed) view only
/// when a block has more than 8·6 = 48 rows, and blocks of 32 rows balance well on 2 threads.
pub const MAX_BLOCK_ROWS: usize = 32;

/// Rows per block when an m×n×k product is split over `threads` threads, or `None` to run it
/// whole: one thread, under [`PAR_MIN_MACS`], or a block that would leave the crate's blocked
/// path or change its K chunking (a block, the last included, of fewer than 2 rows or with
/// rows·n ≤ 256, or n ≤ 64 with k > 512, where blocks of ≤ 64 rows would take the
/// small-matrix chunking of K by 512).
pub fn block_rows(m: usize, n: usize, k: usize, threads: usize) -> Option<usize> {
    if threads < 2 || m.saturating_mul(n).saturating_mul(k) < PAR_MIN_MACS {
        return None;
    }
    let blocks = threads * m.div_ceil(MAX_BLOCK_ROWS * threads);
    let rows = m.div_ceil(blocks);
    let last = m - (m.div_ceil(rows) - 1) * rows;
    let blocked = last >= 2 && last * n > 256 && k >= 3 && n >= 2;
    (blocked && (n > 64 || k <= 512)).then_some(rows)
}

/// [`sgemm`] (C = A·B, or C += A·B when `accumulate`; same strides and bounds checks) on the
/// rayon pool in row blocks when B is read in place (`b_cs == 1`, `n % 16 == 0`) and
/// [`block_rows`] allows it, else [`sgemm`]; bit-identical to [`sgemm`] on one thread at any
/// thread count.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_rows(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    c: &mut [f32],
    c_rs: usize,
    accumulate: bool,
) {
    let in_place = b_cs == 1 && n % 16 == 0;
    let split = in_place.then(|| block_rows(m, n, k, rayon::current_num_threads()));
    let Some(rows) = split.flatten() else {
        return sgemm(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, accumulate);
    };
    // Rows are at least n apart, so C's m rows end at (m − 1)·c_rs + n.
    let c_len = (m - 1).saturating_mul(c_rs.max(n)).saturating_add(n);
    assert!(
        c_rs >= n && c_len <= c.len(),
        "sgemm: C {m}x{n} (row stride {c_rs}) exceeds {} elements or its rows overlap",
        c.len()
    );
    c[..c_len]
        .par_chunks_mut(rows * c_rs)
        .enumerate()
        .for_each(|(i, cb)| {
            let (r0, rb) = (i * rows, cb.len().div_ceil(c_rs));
            let a_off = r0.saturating_mul(a_rs).min(a.len());
            sgemm_with(
                false,
                rb,
                n,
                k,
                &a[a_off..],
                a_rs,
                a_cs,
                b,
                b_rs,
                b_cs,
                cb,
                c_rs,
                accumulate,
            );
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::tests::rand_vec;

    /// C from [`sgemm_rows`] on a pool of `threads`.
    #[allow(clippy::too_many_arguments)]
    fn rows_on(
        threads: usize,
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        at: bool,
        b: &[f32],
        c_rs: usize,
    ) -> Vec<f32> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let (a_rs, a_cs) = if at { (1, m) } else { (k, 1) };
        let mut c = vec![0.5f32; (m - 1) * c_rs + n];
        pool.install(|| sgemm_rows(m, n, k, a, a_rs, a_cs, b, n, 1, &mut c, c_rs, true));
        c
    }

    #[test]
    fn blocks_give_the_bits_of_the_whole_product() {
        // MiniLM's shapes, a transposed A, a padded C, K beyond one 512 chunk, a ragged M.
        for &(m, n, k, at, pad) in &[
            (128, 384, 384, false, 0),
            (128, 1536, 384, false, 0),
            (128, 384, 1536, true, 3),
            (77, 96, 700, false, 1),
            (200, 80, 1030, true, 0),
        ] {
            let (a, b) = (rand_vec(m * k, 5), rand_vec(k * n, 6));
            let c_rs = n + pad;
            let (a_rs, a_cs) = if at { (1, m) } else { (k, 1) };
            let mut whole = vec![0.5f32; (m - 1) * c_rs + n];
            sgemm_with(
                false, m, n, k, &a, a_rs, a_cs, &b, n, 1, &mut whole, c_rs, true,
            );
            // The whole product against an f64 oracle (0.5 + Σ a·b).
            let (i, j) = (m - 1, n / 2);
            let want: f64 = 0.5
                + (0..k)
                    .map(|p| a[i * a_rs + p * a_cs] as f64 * b[p * n + j] as f64)
                    .sum::<f64>();
            assert!((whole[i * c_rs + j] as f64 - want).abs() < 1e-4 * want.abs().max(1.0));
            assert!(block_rows(m, n, k, 2).is_some(), "{m}x{n}x{k} is split");
            for threads in [1, 2, 3] {
                let got = rows_on(threads, m, n, k, &a, at, &b, c_rs);
                let same = got
                    .iter()
                    .zip(&whole)
                    .all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(
                    same,
                    "{m}x{n}x{k} at {threads} threads differs from the whole product"
                );
            }
        }
    }

    #[test]
    fn block_rows_keeps_small_and_risky_shapes_whole() {
        assert_eq!(block_rows(128, 384, 384, 2), Some(32));
        assert_eq!(block_rows(100, 384, 384, 2), Some(25));
        assert_eq!(block_rows(1000, 384, 384, 4), Some(32));
        assert_eq!(block_rows(128, 384, 384, 1), None, "one thread");
        assert_eq!(block_rows(8, 8, 8, 2), None, "below PAR_MIN_MACS");
        assert_eq!(
            block_rows(4096, 8, 64, 2),
            None,
            "32 x 8 blocks take the horizontal path"
        );
        assert_eq!(
            block_rows(512, 64, 1000, 2),
            None,
            "K chunking would change"
        );
        assert_eq!(block_rows(512, 64, 512, 2), Some(32));
        assert_eq!(
            block_rows(3, 100_000, 100, 2),
            None,
            "a 1-row block is a GEMV"
        );
        assert_eq!(
            block_rows(65, 1000, 100, 2),
            Some(17),
            "blocks 17, 17, 17, 14"
        );
    }
}
