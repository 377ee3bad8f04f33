//! The AVX2+FMA microkernel of the packed GEMM (`gemm_packed`): one tile of up to [`MR`] rows ×
//! [`NR`] columns of C over one depth block, in the `gemm` crate's per-element order
//! (`gemm_order`): a fused multiply-add chain from +0 in increasing depth, then C = acc (first
//! depth block) or C = C + acc.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of C per tile (broadcast operand A, read in place).
pub const MR: usize = 6;
/// Most rows of the narrower edge tile (Cout = 64 = 10·6 + 4 leaves 4 rows).
const EDGE_ROWS: usize = 4;
/// Columns of C per tile (vector operand B: panels hold NR values per depth step).
pub const NR: usize = 16;

/// Whether this kernel runs on this CPU (AVX2 and FMA).
pub fn usable() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("avx2") && has!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the packed kernel replaces the crate on this CPU for every product: AVX2 and FMA
/// without AVX-512 (where the crate runs its own AVX2 16×6 kernel, whose order this one
/// reproduces; on AVX-512 CPUs the crate's 16-lane kernel is faster on large products and
/// stays there, `gemm_packed::depth_block` says where).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        usable() && !std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One tile over depth `kb`: C[r, c] = Σ_p A[r, p]·B[p, c] for r < rows ≤ MR, c < cols ≤ NR,
/// with A[r, p] at `a[r·a_rs + p]`, B[p, c] at `b[p·b_rs + c]` (`b_rs` = NR for a panel, the
/// plane size for a pointwise conv's input read in place) and C[r, c] at `c[r·c_rs + c]`;
/// `overwrite` stores the sum, otherwise adds it to C. At most NR / 2 columns compute only the
/// first 8-lane half and at most [`EDGE_ROWS`] rows only those rows (fewer multiply-adds, the
/// same chain per element).
///
/// # Safety
/// The CPU has AVX2 and FMA; A's `rows` rows of `kb` values and NR values at each of B's `kb`
/// rows (8 when cols ≤ NR / 2) are readable; every addressed C element is writable and accessed by no one else meanwhile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile(
    kb: usize,
    a: *const f32,
    a_rs: usize,
    (b, b_rs): (*const f32, usize),
    c: *mut f32,
    c_rs: usize,
    rows: usize,
    cols: usize,
    overwrite: bool,
) {
    let (a, b, c) = ((a, a_rs), Strided(b, b_rs), (c, c_rs));
    tile_with(kb, a, b, c, [rows, cols], overwrite)
}

/// Where the kernel reads B's depth row p (its NR, or 8, values from the tile's first column).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub trait BRows: Copy {
    /// The address of row p.
    ///
    /// # Safety
    /// p is below the depth the caller's contract covers.
    unsafe fn row(self, p: usize) -> *const f32;
}

/// B's rows a constant stride apart: (row 0, stride).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub struct Strided(pub *const f32, pub usize);

impl BRows for Strided {
    #[inline(always)]
    unsafe fn row(self, p: usize) -> *const f32 {
        // SAFETY: the caller's contract.
        unsafe { self.0.add(p * self.1) }
    }
}

/// B's rows at offsets from a base: row p at `base + offsets[p]` (a conv's taps read from its
/// padded input planes, `conv_direct`).
#[derive(Clone, Copy)]
pub struct Offsets<'a>(pub *const f32, pub &'a [usize]);

impl BRows for Offsets<'_> {
    #[inline(always)]
    unsafe fn row(self, p: usize) -> *const f32 {
        // SAFETY: the caller's contract (p < offsets.len() is checked).
        unsafe { self.0.add(self.1[p]) }
    }
}

/// [`tile`] with B's rows found by `b` (e.g. [`Offsets`]): the same chain per element.
///
/// # Safety
/// As [`tile`], B's rows p < kb being where `b.row(p)` points.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn tile_with<B: BRows>(
    kb: usize,
    a: (*const f32, usize),
    b: B,
    c: (*mut f32, usize),
    [rows, cols]: [usize; 2],
    overwrite: bool,
) {
    let shape = [rows, cols];
    match (rows <= EDGE_ROWS, cols <= NR / 2) {
        (false, false) => halves::<MR, 2, _>(kb, a, b, c, shape, overwrite),
        (false, true) => halves::<MR, 1, _>(kb, a, b, c, shape, overwrite),
        (true, false) => halves::<EDGE_ROWS, 2, _>(kb, a, b, c, shape, overwrite),
        (true, true) => halves::<EDGE_ROWS, 1, _>(kb, a, b, c, shape, overwrite),
    }
}

/// [`tile`] computing the first `H` 8-lane halves of `R` rows (rows ≤ R, cols ≤ 8·H), B's
/// rows found by `b`.
///
/// # Safety
/// As [`tile`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn halves<const R: usize, const H: usize, B: BRows>(
    kb: usize,
    (a, a_rs): (*const f32, usize),
    b: B,
    (c, c_rs): (*mut f32, usize),
    [rows, cols]: [usize; 2],
    overwrite: bool,
) {
    // Rows past the edge re-read the last row; their sums are not stored.
    let ar: [*const f32; R] = std::array::from_fn(|r| a.add(r.min(rows - 1) * a_rs));
    let mut acc = [[_mm256_setzero_ps(); H]; R];
    for p in 0..kb {
        let bp = b.row(p);
        let mut bv = [_mm256_setzero_ps(); H];
        for (h, v) in bv.iter_mut().enumerate() {
            *v = _mm256_loadu_ps(bp.add(8 * h));
        }
        for (acc, ar) in acc.iter_mut().zip(&ar) {
            let x = _mm256_broadcast_ss(&*ar.add(p));
            for (acc, &bv) in acc.iter_mut().zip(&bv) {
                *acc = _mm256_fmadd_ps(x, bv, *acc);
            }
        }
    }
    if cols == 8 * H {
        for (r, acc) in acc.iter().enumerate().take(rows) {
            let d = c.add(r * c_rs);
            for (h, &v) in acc.iter().enumerate() {
                let d = d.add(8 * h);
                let v = if overwrite {
                    v
                } else {
                    _mm256_add_ps(_mm256_loadu_ps(d), v)
                };
                _mm256_storeu_ps(d, v);
            }
        }
        return;
    }
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mut masks = [lane; H];
    for (h, mk) in masks.iter_mut().enumerate() {
        *mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32 - 8 * h as i32), lane);
    }
    for (r, acc) in acc.iter().enumerate().take(rows) {
        let d = c.add(r * c_rs);
        for (h, (&v, &mk)) in acc.iter().zip(&masks).enumerate() {
            let d = d.add(8 * h);
            let v = if overwrite {
                v
            } else {
                _mm256_add_ps(_mm256_maskload_ps(d, mk), v)
            };
            _mm256_maskstore_ps(d, mk, v);
        }
    }
}

/// [`tile`] for the tile of C (m×n) at row `i0` and panel `jb` (columns jb·NR..) over depth
/// rows p0..p0 + kb: A and C given whole as (pointer, row stride), B as its row p0 (pointer,
/// row stride); the first depth block overwrites C unless `accumulate`.
///
/// # Safety
/// As [`tile`], for that tile.
pub unsafe fn tile_at(
    (p0, kb): (usize, usize),
    (i0, jb): (usize, usize),
    (m, n): (usize, usize),
    (a, a_rs): (*const f32, usize),
    b: (*const f32, usize),
    (c, c_rs): (*mut f32, usize),
    accumulate: bool,
) {
    let (rows, cols) = (MR.min(m - i0), NR.min(n - jb * NR));
    // SAFETY: the caller's contract, offset to the tile.
    unsafe {
        let (a, c) = (a.add(i0 * a_rs + p0), c.add(i0 * c_rs + jb * NR));
        tile(kb, a, a_rs, b, c, c_rs, rows, cols, p0 == 0 && !accumulate)
    }
}

/// Rows of the narrow edge tile ([`narrow_at`]): two strips, whose 12 independent
/// multiply-add chains keep the FMA units busy where a 6-row tile of one 8-lane half waits on
/// the latency of its 6 chains (5 cycles a depth step instead of 13 loads for 12 multiply-adds).
pub const NARROW_ROWS: usize = 2 * MR;

/// [`tile_at`] for a last panel of at most NR / 2 columns (n − jb·NR ≤ 8) at rows
/// i0..i0 + [`NARROW_ROWS`] (fewer at C's last rows): the same chain per element, two strips
/// at once.
///
/// # Safety
/// As [`tile`], for that panel's columns of those rows.
pub unsafe fn narrow_at(
    (p0, kb): (usize, usize),
    (i0, jb): (usize, usize),
    (m, n): (usize, usize),
    (a, a_rs): (*const f32, usize),
    b: (*const f32, usize),
    (c, c_rs): (*mut f32, usize),
    accumulate: bool,
) {
    let (rows, cols) = (NARROW_ROWS.min(m - i0), n - jb * NR);
    debug_assert!(cols <= NR / 2, "narrow_at on a panel of {cols} columns");
    let overwrite = p0 == 0 && !accumulate;
    // SAFETY: the caller's contract, offset to the tile.
    unsafe {
        let (a, c) = (a.add(i0 * a_rs + p0), c.add(i0 * c_rs + jb * NR));
        if rows <= MR {
            return tile(kb, a, a_rs, b, c, c_rs, rows, cols, overwrite);
        }
        narrow_tile(kb, (a, a_rs), b, (c, c_rs), [rows, cols], overwrite)
    }
}

/// [`halves`] of [`NARROW_ROWS`] rows and one 8-lane half.
///
/// # Safety
/// As [`tile`] with cols ≤ NR / 2 and rows ≤ [`NARROW_ROWS`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn narrow_tile(
    kb: usize,
    a: (*const f32, usize),
    b: (*const f32, usize),
    c: (*mut f32, usize),
    shape: [usize; 2],
    overwrite: bool,
) {
    halves::<NARROW_ROWS, 1, _>(kb, a, Strided(b.0, b.1), c, shape, overwrite)
}

/// Never called off x86_64 ([`available`] is false there).
///
/// # Safety
/// None needed: it panics.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn narrow_tile(
    _kb: usize,
    _a: (*const f32, usize),
    _b: (*const f32, usize),
    _c: (*mut f32, usize),
    _shape: [usize; 2],
    _overwrite: bool,
) {
    unreachable!("the AVX2 GEMM tile runs on x86_64 only")
}

/// Never called off x86_64 ([`available`] is false there); keeps callers arch-independent.
///
/// # Safety
/// None needed: it panics.
#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile(
    _kb: usize,
    _a: *const f32,
    _a_rs: usize,
    _b: (*const f32, usize),
    _c: *mut f32,
    _c_rs: usize,
    _rows: usize,
    _cols: usize,
    _overwrite: bool,
) {
    unreachable!("the AVX2 GEMM tile runs on x86_64 only")
}

/// Never called off x86_64 ([`available`] is false there); keeps callers arch-independent.
///
/// # Safety
/// None needed: it panics.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn tile_with<B: BRows>(
    _kb: usize,
    _a: (*const f32, usize),
    _b: B,
    _c: (*mut f32, usize),
    _shape: [usize; 2],
    _overwrite: bool,
) {
    unreachable!("the AVX2 GEMM tile runs on x86_64 only")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::gemm::tests::rand_vec;

    /// One edge call for C rows from `i0` of a product (as [`tile_at`] is called).
    pub(crate) type EdgeCall = unsafe fn(
        (usize, usize),
        (usize, usize),
        (usize, usize),
        (*const f32, usize),
        (*const f32, usize),
        (*mut f32, usize),
        bool,
    );

    /// `edge`, called at every `rows`-th row of C on a last panel of each of `cols` columns,
    /// gives every bit of one 6-row [`tile_at`] per strip: for C rows m in `ms` at depth 37 and
    /// for each (m, depth, p0, accumulate) in `more` (a later depth block when p0 > 0, C = C +
    /// acc when accumulating); A rows with a padded stride, B a panel (row stride NR).
    pub(crate) fn assert_edge_matches_tiles(
        edge: EdgeCall,
        rows: usize,
        cols: &[usize],
        ms: &[usize],
        more: &[(usize, usize, usize, bool)],
    ) {
        let cases: Vec<_> = (ms.iter().map(|&m| (m, 37, 0, false)))
            .chain(more.iter().copied())
            .collect();
        for (ci, &(m, kb, p0, accumulate)) in cases.iter().enumerate() {
            for &c in cols {
                let (n, jb, a_rs, c_rs) = (2 * NR + c, 2, p0 + kb + 3, 2 * NR + 13);
                let seed = 10 * ci as u64 + c as u64;
                let a = rand_vec(m * a_rs, seed);
                // B row p0 of the last panel (NR values read per depth step).
                let b = rand_vec(kb * NR, seed + 1);
                let c0 = rand_vec(m * c_rs, seed + 2);
                let (mut want, mut got) = (c0.clone(), c0);
                let (ap, bp) = ((a.as_ptr(), a_rs), (b.as_ptr(), NR));
                // SAFETY: the callers checked AVX2+FMA; A holds m rows of a_rs ≥ p0 + kb
                // values, B kb rows of NR, C m rows of c_rs ≥ jb·NR + 8; each call writes its
                // rows' columns jb·NR.. jb·NR + c.
                unsafe {
                    for i0 in (0..m).step_by(MR) {
                        let cw = (want.as_mut_ptr(), c_rs);
                        tile_at((p0, kb), (i0, jb), (m, n), ap, bp, cw, accumulate);
                    }
                    for i0 in (0..m).step_by(rows) {
                        let cg = (got.as_mut_ptr(), c_rs);
                        edge((p0, kb), (i0, jb), (m, n), ap, bp, cg, accumulate);
                    }
                }
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                let what = format!("m {m} cols {c} kb {kb} p0 {p0} accumulate {accumulate}");
                assert_eq!(bits(&got), bits(&want), "{what}");
            }
        }
    }

    /// The two-strip narrow tile gives every bit of one 6-row tile per strip on a last panel
    /// of 1, 4 and 8 columns: C rows m = 1…13, 17 and 512 (a last pair of one strip and of a
    /// partial one), depths below and past 8 and not multiples of 8, B a panel (row stride
    /// NR), C overwritten, and accumulated onto at a later depth block or with `accumulate`.
    #[test]
    fn narrow_matches_the_6_row_tiles_bit_for_bit() {
        if !usable() {
            return;
        }
        let ms = [1, 2, 5, 6, 7, 11, 12, 13, 17, 512];
        let more = [
            (13, 1, 0, false),
            (13, 8, 0, true),
            (19, 255, 3, false),
            (512, 520, 0, false),
        ];
        assert_edge_matches_tiles(narrow_at, NARROW_ROWS, &[1, 4, NR / 2], &ms, &more);
    }
}
