//! Last-axis softmax of rows in blocks of 8 with AVX2, the bits of `reduce`'s row-by-row f32
//! softmax: each row's max (exact whatever the order: rows holding a NaN are left to the caller),
//! x − max, e^x by `simd_exp`'s lanes, each row's sum in its own element order (8 rows transposed
//! into the lanes of one accumulator, 8×8 at a time), times 1 / sum.

// The lanes exist on x86-64 only; elsewhere `try_softmax_rows` always declines.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

/// Rows per accumulator: one row per f32 lane.
const ROWS: usize = 8;

/// Softmax of each of the 8 rows of `n` elements of `x` into `y` when the lanes apply: `n` a
/// multiple of 8, no NaN in `x`, AVX2 + FMA and `simd_exp`'s lanes available. Returns false
/// otherwise, having written nothing.
pub fn try_softmax_rows(x: &[f32], y: &mut [f32], n: usize) -> bool {
    if x.len() != y.len() || !applies(y.len(), n) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `applies` detected AVX2, FMA and F16C and checked the lengths; x and y are
    // distinct slices of 8·n values.
    unsafe {
        softmax_avx2(x.as_ptr(), y.as_mut_ptr(), n, false)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`try_softmax_rows`] on `y` in place, each result rounded to fp16 (the bits of the softmax
/// and then the executor's rounding pass). Returns false, having written nothing, when the
/// lanes do not apply.
pub fn try_softmax_rows_rounded_in_place(y: &mut [f32], n: usize) -> bool {
    if !applies(y.len(), n) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `try_softmax_rows`; source and destination are the same 8·n values, which
    // the kernel allows.
    unsafe {
        let p = y.as_mut_ptr();
        softmax_avx2(p, p, n, true)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The lanes take `len` values as 8 rows of `n`: `n` a multiple of 8, the CPU features there.
fn applies(len: usize, n: usize) -> bool {
    let features = || {
        #[cfg(target_arch = "x86_64")]
        return std::arch::is_x86_feature_detected!("f16c");
        #[cfg(not(target_arch = "x86_64"))]
        false
    };
    n != 0 && n % 8 == 0 && len == ROWS * n && super::simd_exp::available() && features()
}

/// The kernel of [`try_softmax_rows`]: reads 8 rows of `n` values at `x`, writes them at `y`
/// (rounded to fp16 when `round`); false, with nothing written, when x holds a NaN.
///
/// # Safety
/// AVX2, FMA and F16C are available; `n` is a multiple of 8; x and y each point to 8·n valid
/// f32 and are either the same values or do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn softmax_avx2(x: *const f32, y: *mut f32, n: usize, round: bool) -> bool {
    use std::arch::x86_64::*;
    let mut max = [_mm256_setzero_ps(); ROWS];
    let mut nan = _mm256_setzero_ps();
    for (k, m) in max.iter_mut().enumerate() {
        // SAFETY (block): every access is 8 f32 at k·n + p, p + 8 ≤ n, inside the 8 rows.
        unsafe {
            let mut a = _mm256_set1_ps(f32::NEG_INFINITY);
            for p in (0..n).step_by(8) {
                let v = _mm256_loadu_ps(x.add(k * n + p));
                nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                a = _mm256_max_ps(a, v);
            }
            let a = _mm256_max_ps(a, _mm256_permute2f128_ps::<1>(a, a));
            let a = _mm256_max_ps(a, _mm256_shuffle_ps::<0b01_00_11_10>(a, a));
            *m = _mm256_max_ps(a, _mm256_shuffle_ps::<0b10_11_00_01>(a, a));
        }
    }
    if _mm256_movemask_ps(nan) != 0 {
        return false;
    }
    // No NaN, so each max is exact whatever the order; a ±0 max gives the same bits below
    // (v − ±0 = v for v ≠ 0, and e^±0 = 1). Each value is read before the same position is
    // written, so x may be y.
    for (k, &m) in max.iter().enumerate() {
        // SAFETY: as above, 8 f32 at k·n + p inside the 8 rows of x and of y.
        unsafe {
            for p in (0..n).step_by(8) {
                let v = _mm256_sub_ps(_mm256_loadu_ps(x.add(k * n + p)), m);
                _mm256_storeu_ps(y.add(k * n + p), v);
            }
        }
    }
    // SAFETY: y points to 8·n f32 and x is not read again.
    let y = unsafe { std::slice::from_raw_parts_mut(y, ROWS * n) };
    super::simd_exp::try_exp_in_place(y).expect("checked by the caller");
    // SAFETY: y holds 8 rows of n elements, n a multiple of 8.
    let inv = _mm256_div_ps(_mm256_set1_ps(1.0), unsafe { row_sums(y, n) });
    let mut lanes = [0f32; ROWS];
    // SAFETY: `lanes` holds 8 f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), inv) };
    for (row, &s) in y.chunks_exact_mut(n).zip(&lanes) {
        let s = _mm256_set1_ps(s);
        for c in row.chunks_exact_mut(8) {
            // SAFETY: each chunk holds exactly 8 f32.
            unsafe {
                let mut v = _mm256_mul_ps(_mm256_loadu_ps(c.as_ptr()), s);
                if round {
                    v = _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v));
                }
                _mm256_storeu_ps(c.as_mut_ptr(), v);
            }
        }
    }
    true
}

/// Lane k = the sum of row k of the 8 rows of `n` elements in `block`, from 0 in element order
/// (each 8×8 tile transposed so that column j of every row is added at step j).
///
/// # Safety
/// AVX2 is available, `block.len() == 8 * n` and `n` is a multiple of 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn row_sums(block: &[f32], n: usize) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let mut acc = _mm256_setzero_ps();
    for p in (0..n).step_by(8) {
        // SAFETY: row k's 8 elements at p lie in block[k·n + p..k·n + p + 8], p + 8 ≤ n.
        let r: [__m256; 8] =
            std::array::from_fn(|k| unsafe { _mm256_loadu_ps(block.as_ptr().add(k * n + p)) });
        // SAFETY: AVX2 (hence AVX) is available.
        for c in unsafe { super::simd_transpose::transpose8(r) } {
            acc = _mm256_add_ps(acc, c);
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes take a NaN-free block of 8 rows (where AVX2 and the exp lanes exist) and
    /// decline a NaN, a width not a multiple of 8 and a block that is not 8 rows, writing
    /// nothing; the bits are checked in `reduce`'s last-axis softmax test.
    #[test]
    fn lanes_take_exactly_their_blocks() {
        let x: Vec<f32> = (0..8 * 24)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 8.0)
            .collect();
        let mut y = vec![7f32; x.len()];
        assert_eq!(
            try_softmax_rows(&x, &mut y, 24),
            crate::ops::simd_exp::available()
        );
        let mut z = vec![7f32; x.len()];
        let mut nan = x.clone();
        nan[100] = f32::NAN;
        assert!(!try_softmax_rows(&nan, &mut z, 24));
        assert!(!try_softmax_rows(&x, &mut z, 12));
        assert!(!try_softmax_rows(&x[..7 * 24], &mut z[..7 * 24], 24));
        assert!(z.iter().all(|&v| v == 7.0));
    }

    /// In place and rounded: the bits of the out-of-place lanes then the fp16 rounding pass,
    /// masked values (−10000, exp +0) included; a NaN block is declined with nothing written.
    #[test]
    fn rounded_in_place_equals_lanes_then_rounding() {
        if !crate::ops::simd_exp::available() {
            return;
        }
        let x: Vec<f32> = (0..8 * 40)
            .map(|i| match i % 40 {
                30.. => -10000.0,
                j => ((i * 37 % 101) as f32 - 50.0) / 8.0 + j as f32 / 16.0,
            })
            .collect();
        let mut want = vec![0f32; x.len()];
        assert!(try_softmax_rows(&x, &mut want, 40));
        crate::ops::simd_fp16::round_in_place(&mut want);
        let mut got = x.clone();
        assert!(try_softmax_rows_rounded_in_place(&mut got, 40));
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        assert!(got[35] == 0.0 && got[0] > 0.0);
        let mut nan = x.clone();
        nan[77] = f32::NAN;
        let before = bits(&nan);
        assert!(!try_softmax_rows_rounded_in_place(&mut nan, 40));
        assert_eq!(bits(&nan), before);
    }
}
