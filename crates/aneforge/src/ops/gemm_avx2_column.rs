//! The one-column edge of the packed GEMM (`gemm_packed`): C[r, 0] for up to [`COLUMN_ROWS`]
//! rows over one depth block, the rows in the lanes of [`GROUPS`] vectors. A product of
//! n = 16·q + 1 columns (7×7 conv outputs: 49) otherwise runs its last column as narrow tiles
//! (`gemm_avx2::narrow_at`): one broadcast of A and one 8-lane multiply-add per row and depth
//! step for one value. Here A's rows are read 8 depth steps at a time and transposed in
//! registers, so a depth step is one multiply-add per 8 rows, and the [`GROUPS`] independent
//! chains hide the multiply-add latency. Each lane is the same chain as the tile's: a fused
//! multiply-add A[r, p]·B[p] from +0 in increasing p, then C = acc or C = C + acc.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::gemm_avx2::MR;

/// Vectors of 8 rows each in flight (independent multiply-add chains).
const GROUPS: usize = 3;

/// Rows of C per column call: [`GROUPS`] vectors of 8 rows, 4 strips of [`MR`].
pub const COLUMN_ROWS: usize = 8 * GROUPS;

const _: () = assert!(
    COLUMN_ROWS.is_multiple_of(MR),
    "a column call covers whole strips"
);

/// Depth steps per transposed block of A (one 8×8 transpose per group).
#[cfg(target_arch = "x86_64")]
const STEPS: usize = 8;

/// C[r·c_rs] (+)= Σ_p A[r, p]·B[p] for r < rows ≤ [`COLUMN_ROWS`] over depth `kb`, with A[r, p]
/// at `a[r·a_rs + p]` and B[p] at `b[p·b_rs]`; `overwrite` stores the sum, otherwise adds it
/// to C. Every element's bits equal `gemm_avx2::tile`'s with cols = 1.
///
/// # Safety
/// The CPU has AVX2 and FMA; A's `rows` rows of `kb` values and B's `kb` values are readable;
/// the `rows` addressed C elements are writable and accessed by no one else meanwhile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn column(
    kb: usize,
    (a, a_rs): (*const f32, usize),
    (b, b_rs): (*const f32, usize),
    (c, c_rs): (*mut f32, usize),
    rows: usize,
    overwrite: bool,
) {
    debug_assert!((1..=COLUMN_ROWS).contains(&rows));
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mut acc = [_mm256_setzero_ps(); GROUPS];
    let mut p0 = 0;
    while p0 < kb {
        let steps = STEPS.min(kb - p0);
        // Lanes < steps of each row: a full block loads 8 values, the last one masks the rest
        // (never reading past a row's kb values).
        let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(steps as i32), lane);
        for (g, acc) in acc.iter_mut().enumerate() {
            let mut block = [_mm256_setzero_ps(); 8];
            for (i, v) in block.iter_mut().enumerate() {
                let r = 8 * g + i;
                if r >= rows {
                    break;
                }
                // SAFETY: row r < rows holds kb values from a + r·a_rs; p0 + steps ≤ kb.
                let src = a.add(r * a_rs + p0);
                *v = if steps == STEPS {
                    _mm256_loadu_ps(src)
                } else {
                    _mm256_maskload_ps(src, mask)
                };
            }
            // at[j] lane i = A[8g + i, p0 + j].
            let at = super::simd_transpose::transpose8(block);
            for (j, &col) in at.iter().enumerate().take(steps) {
                // SAFETY: p0 + j < kb, a readable value of B.
                let x = _mm256_broadcast_ss(&*b.add((p0 + j) * b_rs));
                *acc = _mm256_fmadd_ps(col, x, *acc);
            }
        }
        p0 += steps;
    }
    let mut sums = [0f32; COLUMN_ROWS];
    for (g, &v) in acc.iter().enumerate() {
        _mm256_storeu_ps(sums.as_mut_ptr().add(8 * g), v);
    }
    for (r, &s) in sums.iter().enumerate().take(rows) {
        // SAFETY: C element r of the `rows` writable ones.
        let d = c.add(r * c_rs);
        *d = if overwrite { s } else { *d + s };
    }
}

/// [`column`] for C's column `j` (m rows) at rows i0..i0 + [`COLUMN_ROWS`] (fewer at C's last
/// rows) over depth rows p0..p0 + kb: A and C given whole as (pointer, row stride), B as its
/// row p0 (pointer, row stride), the column's value first (`gemm_avx2::tile_at`'s arguments
/// for a one-column panel); the first depth block overwrites C unless `accumulate`.
///
/// # Safety
/// As [`column`], for that column of those rows.
pub unsafe fn column_at(
    (p0, kb): (usize, usize),
    (i0, j): (usize, usize),
    m: usize,
    (a, a_rs): (*const f32, usize),
    b: (*const f32, usize),
    (c, c_rs): (*mut f32, usize),
    accumulate: bool,
) {
    let rows = COLUMN_ROWS.min(m - i0);
    // SAFETY: the caller's contract, offset to the column.
    unsafe {
        let (a, c) = (a.add(i0 * a_rs + p0), c.add(i0 * c_rs + j));
        column(kb, (a, a_rs), b, (c, c_rs), rows, p0 == 0 && !accumulate)
    }
}

/// Never called off x86_64 (`gemm_avx2::available` is false there).
///
/// # Safety
/// None needed: it panics.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn column(
    _kb: usize,
    _a: (*const f32, usize),
    _b: (*const f32, usize),
    _c: (*mut f32, usize),
    _rows: usize,
    _overwrite: bool,
) {
    unreachable!("the AVX2 GEMM column runs on x86_64 only")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm_avx2::tests::assert_edge_matches_tiles;
    use crate::ops::gemm_avx2::{self as avx2, NR};

    /// The column gives every bit of the 6-row one-column tiles: C rows m = 1…25 and 512 (last
    /// calls of 1 to 24 rows, partial strips), depths below, at and past one 8-step block and
    /// not multiples of 8, a later depth block (p0 > 0) and `accumulate` (C = C + acc), A rows
    /// with a padded stride, B a panel (row stride NR).
    #[test]
    fn column_matches_the_one_column_tiles_bit_for_bit() {
        if !avx2::usable() {
            return;
        }
        /// [`column_at`] with `gemm_avx2::tile_at`'s arguments.
        unsafe fn at(
            depth: (usize, usize),
            (i0, jb): (usize, usize),
            (m, _): (usize, usize),
            a: (*const f32, usize),
            b: (*const f32, usize),
            c: (*mut f32, usize),
            accumulate: bool,
        ) {
            // SAFETY: the harness's contract.
            unsafe { column_at(depth, (i0, jb * NR), m, a, b, c, accumulate) }
        }
        let ms = [1, 2, 5, 6, 7, 8, 9, 13, 17, 23, 24, 25, 512];
        let more = [
            (24, 1, 0, false),
            (25, 8, 0, true),
            (31, 255, 3, false),
            (512, 520, 0, false),
            (48, 1153, 0, true),
        ];
        assert_edge_matches_tiles(at, COLUMN_ROWS, &[1], &ms, &more);
    }
}
