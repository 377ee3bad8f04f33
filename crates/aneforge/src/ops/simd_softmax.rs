//! Last-axis softmax of rows in blocks of 8 with AVX2, the bits of `reduce`'s row-by-row f32
//! softmax: each row's max (exact whatever the order: rows holding a NaN are left to the caller),
//! x − max, e^x by `simd_exp`'s lanes, each row's sum in its own element order (8 rows transposed
//! into the lanes of one accumulator, 8×8 at a time), times 1 / sum. Also fused with the add of
//! a mask and the fp16 roundings around it (attention scores): three passes over each block.

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
        softmax_avx2(x.as_ptr(), y.as_mut_ptr(), n)
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
    n != 0 && n.is_multiple_of(8) && len == ROWS * n && super::simd_exp::available() && features()
}

/// What [`try_add_softmax_rows_rounded`] did with a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fused {
    /// y holds r(softmax(r(x + m))).
    Done,
    /// y holds r(x + m) and the block holds a NaN (its softmax is left to the caller).
    Sums,
    /// The lanes do not apply; nothing written.
    Declined,
}

/// r(softmax(r(x + m))) of the 8 rows of `n` elements of `x` into `y` (r: round to fp16) in
/// three passes over the block, where row k's m is `m[k]`: `n` values, or one broadcast along
/// the row. The bits of the add, a rounding pass, [`try_softmax_rows`] and a rounding pass;
/// see [`Fused`] for what is written when the lanes decline or meet a NaN.
pub fn try_add_softmax_rows_rounded(
    x: &[f32],
    m: &[&[f32]; ROWS],
    y: &mut [f32],
    n: usize,
) -> Fused {
    let fits = |mk: &&[f32]| mk.len() == n || mk.len() == 1;
    if x.len() != y.len() || !applies(y.len(), n) || !m.iter().all(fits) {
        return Fused::Declined;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `applies` detected AVX2, FMA and F16C and checked the lengths; each m[k] holds
    // n values or 1; x and y are distinct slices of 8·n values.
    unsafe {
        if add_softmax_avx2(x.as_ptr(), m, y.as_mut_ptr(), n) {
            Fused::Done
        } else {
            Fused::Sums
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    Fused::Declined
}

/// The kernel of [`try_add_softmax_rows_rounded`]: y = r(x + m) with each row's max (pass 1),
/// then as [`softmax_avx2`] in place from its second pass; false, with y = r(x + m), when
/// that holds a NaN.
///
/// # Safety
/// AVX2, FMA and F16C are available; `n` is a multiple of 8; x and y each point to 8·n valid
/// f32 and do not overlap; each m[k] holds n values or 1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn add_softmax_avx2(x: *const f32, m: &[&[f32]; ROWS], y: *mut f32, n: usize) -> bool {
    use std::arch::x86_64::*;
    let mut max = [_mm256_setzero_ps(); ROWS];
    let mut nan = _mm256_setzero_ps();
    for (k, (mx, mk)) in max.iter_mut().zip(m).enumerate() {
        let mut a = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut put = |p: usize, b: __m256| {
            // SAFETY (block): 8 f32 at k·n + p, p + 8 ≤ n, inside the 8 rows of x and of y.
            unsafe {
                let v = _mm256_add_ps(_mm256_loadu_ps(x.add(k * n + p)), b);
                let v = _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v));
                nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                a = _mm256_max_ps(a, v);
                _mm256_storeu_ps(y.add(k * n + p), v);
            }
        };
        if mk.len() == n {
            // SAFETY: m[k] holds n values; p + 8 ≤ n.
            (0..n)
                .step_by(8)
                .for_each(|p| put(p, unsafe { _mm256_loadu_ps(mk.as_ptr().add(p)) }));
        } else {
            let b = _mm256_set1_ps(mk[0]);
            (0..n).step_by(8).for_each(|p| put(p, b));
        }
        // SAFETY: AVX is available.
        *mx = unsafe { lane_max(a) };
    }
    if _mm256_movemask_ps(nan) != 0 {
        return false;
    }
    // SAFETY: y points to 8·n f32, n a multiple of 8; reading and writing y in place is allowed.
    unsafe { exp_scale(y, y, n, &max, true) };
    true
}

/// The kernel of [`try_softmax_rows`]: reads 8 rows of `n` values at `x`, writes their
/// softmax at `y`; false, with nothing written, when x holds a NaN.
///
/// # Safety
/// AVX2, FMA and F16C are available; `n` is a multiple of 8; x and y each point to 8·n valid
/// f32 and do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn softmax_avx2(x: *const f32, y: *mut f32, n: usize) -> bool {
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
            *m = lane_max(a);
        }
    }
    if _mm256_movemask_ps(nan) != 0 {
        return false;
    }
    // SAFETY: as this function's contract.
    unsafe { exp_scale(x, y, n, &max, false) };
    true
}

/// The maximum of the 8 lanes of `a` in every lane.
///
/// # Safety
/// AVX is available.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx")]
unsafe fn lane_max(a: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let a = _mm256_max_ps(a, _mm256_permute2f128_ps::<1>(a, a));
    let a = _mm256_max_ps(a, _mm256_shuffle_ps::<0b01_00_11_10>(a, a));
    _mm256_max_ps(a, _mm256_shuffle_ps::<0b10_11_00_01>(a, a))
}

/// The softmax of 8 NaN-free rows of `n` at `x` with row maxima `max` into `y`: e^(x − max)
/// by `simd_exp`'s lanes, each row's sum in its own element order (8 rows transposed into the
/// lanes of one accumulator, 8×8 at a time, as the exps are made), times 1 / sum (rounded to
/// fp16 when `round`). No NaN, so each max is exact whatever the order; a ±0 max gives the
/// same bits (v − ±0 = v for v ≠ 0, and e^±0 = 1). Each value is read before the same
/// position is written.
///
/// # Safety
/// AVX2, FMA and F16C are available; `n` is a multiple of 8; x and y each point to 8·n valid
/// f32 and are either the same values or do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn exp_scale(
    x: *const f32,
    y: *mut f32,
    n: usize,
    max: &[std::arch::x86_64::__m256; ROWS],
    round: bool,
) {
    use std::arch::x86_64::*;
    let mut sum = _mm256_setzero_ps();
    for p in (0..n).step_by(8) {
        // SAFETY: row k's 8 elements at p lie at k·n + p, p + 8 ≤ n, inside x and y; the
        // features `exp8x8` and `transpose8` need are this function's.
        unsafe {
            let mut v = [_mm256_setzero_ps(); ROWS];
            for (k, (v, &m)) in v.iter_mut().zip(max).enumerate() {
                *v = _mm256_sub_ps(_mm256_loadu_ps(x.add(k * n + p)), m);
            }
            let e = super::simd_exp::exp8x8(v);
            for (k, e) in e.iter().enumerate() {
                _mm256_storeu_ps(y.add(k * n + p), *e);
            }
            for c in super::simd_transpose::transpose8(e) {
                sum = _mm256_add_ps(sum, c);
            }
        }
    }
    let inv = _mm256_div_ps(_mm256_set1_ps(1.0), sum);
    let mut lanes = [0f32; ROWS];
    // SAFETY: `lanes` holds 8 f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), inv) };
    for (k, &s) in lanes.iter().enumerate() {
        let s = _mm256_set1_ps(s);
        for p in (0..n).step_by(8) {
            // SAFETY: 8 f32 at k·n + p inside the 8 rows of y.
            unsafe {
                let mut v = _mm256_mul_ps(_mm256_loadu_ps(y.add(k * n + p)), s);
                if round {
                    v = _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v));
                }
                _mm256_storeu_ps(y.add(k * n + p), v);
            }
        }
    }
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

    /// r(softmax(r(x + m))) one row at a time in scalar f32 (r: round to fp16): the add, the
    /// rounding, the row's max, v − max, `f32::exp`, the sum from 0 in element order, times
    /// 1 / sum, the rounding.
    fn steps(x: &[f32], m: &[&[f32]; ROWS], n: usize) -> Vec<f32> {
        let r = crate::ops::simd_fp16::round1;
        let mut y = Vec::with_capacity(x.len());
        for (xr, mk) in x.chunks_exact(n).zip(m) {
            let v: Vec<f32> = (0..n).map(|j| r(xr[j] + mk[j % mk.len()])).collect();
            let max = v.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            let e: Vec<f32> = v.iter().map(|&b| (b - max).exp()).collect();
            let inv = 1.0 / e.iter().fold(0.0f32, |a, &b| a + b);
            y.extend(e.iter().map(|&b| r(b * inv)));
        }
        y
    }

    /// The fused lanes give the scalar steps' bits on blocks of several widths with masks of
    /// whole rows (zeros, −10000s, small values) and broadcast values, scores with ±0, −inf,
    /// +inf (a row of NaN), values the add rounds to inf and a masked-out row; a block whose
    /// r(x + m) holds a NaN comes back as those sums; a width not a multiple of 8, a mask of
    /// another length or a block not of 8 rows is declined with nothing written.
    #[test]
    fn fused_lanes_equal_the_scalar_steps() {
        if !applies(8 * 8, 8) {
            return;
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for n in [8, 24, 128, 136] {
            let x: Vec<f32> = (0..8 * n)
                .map(|i| {
                    let v = ((i * 7919 % 1013) as f32 - 500.0) / 37.0;
                    crate::ops::simd_fp16::round1(v)
                })
                .collect();
            let full: Vec<Vec<f32>> = (0..4)
                .map(|k| {
                    (0..n)
                        .map(|j| match (j + k) % 7 {
                            0 => -10000.0,
                            1 => 0.5 * k as f32,
                            _ => 0.0,
                        })
                        .collect()
                })
                .collect();
            let (dead, one, neg) = (vec![-10000.0f32; n], [0.0f32], [-3.25f32]);
            let m: [&[f32]; ROWS] = [
                &full[0], &one, &full[1], &neg, &full[2], &dead, &full[3], &one,
            ];
            let mut x = x;
            x[3] = -0.0;
            x[n + 1] = f32::NEG_INFINITY;
            x[2 * n + 2] = 65504.0;
            x[4 * n + 5] = f32::INFINITY;
            let mut y = vec![7f32; x.len()];
            assert_eq!(try_add_softmax_rows_rounded(&x, &m, &mut y, n), Fused::Done);
            let want = steps(&x, &m, n);
            assert_eq!(bits(&y), bits(&want), "n = {n}");
            assert!(y[4 * n..5 * n].iter().all(|v| v.is_nan()), "the +inf row");
            let sum = |k: usize| y[k * n..(k + 1) * n].iter().sum::<f32>();
            assert!(
                sum(3) > 0.9 && sum(5) > 0.9,
                "n = {n}: {} {}",
                sum(3),
                sum(5)
            );
            let mut nan = x.clone();
            nan[6 * n + 3] = f32::NAN;
            let mut y = vec![7f32; x.len()];
            assert_eq!(
                try_add_softmax_rows_rounded(&nan, &m, &mut y, n),
                Fused::Sums
            );
            let sums: Vec<f32> = (0..8 * n)
                .map(|i| crate::ops::simd_fp16::round1(nan[i] + m[i / n][i % n % m[i / n].len()]))
                .collect();
            assert_eq!(bits(&y), bits(&sums), "n = {n}, NaN");
        }
        let x = vec![0.5f32; 8 * 12];
        let mut y = vec![7f32; x.len()];
        let row = [0.0f32; 12];
        let m: [&[f32]; ROWS] = [&row; ROWS];
        assert_eq!(
            try_add_softmax_rows_rounded(&x, &m, &mut y, 12),
            Fused::Declined
        );
        let m: [&[f32]; ROWS] = [&row[..6]; ROWS];
        let x = vec![0.5f32; 8 * 16];
        let mut y = vec![7f32; x.len()];
        assert_eq!(
            try_add_softmax_rows_rounded(&x, &m, &mut y, 16),
            Fused::Declined
        );
        let m: [&[f32]; ROWS] = [&row[..1]; ROWS];
        assert_eq!(
            try_add_softmax_rows_rounded(&x[..7 * 16], &m, &mut y[..7 * 16], 16),
            Fused::Declined
        );
        assert!(y.iter().all(|&v| v == 7.0));
    }

    /// The fused lanes give the scalar steps' bits on plain scores (every x − max inside the
    /// exp's fast range: the columns of 8 rows that skip the per-group tests), with zero masks
    /// and with a −10000 in one column of 8 of a row (those columns take the per-group path).
    #[test]
    fn fused_lanes_equal_the_scalar_steps_on_plain_scores() {
        if !applies(8 * 8, 8) {
            return;
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for n in [8, 64, 128, 136] {
            let x: Vec<f32> = (0..8 * n)
                .map(|i| crate::ops::simd_fp16::round1(((i * 7919 % 4093) as f32 - 2046.0) / 97.0))
                .collect();
            let zeros = vec![0f32; n];
            let masked: Vec<f32> = (0..n)
                .map(|j| if j % 24 == 5 { -10000.0 } else { 0.0 })
                .collect();
            for m in [
                [&zeros[..]; ROWS],
                [
                    &zeros, &masked, &zeros, &zeros, &masked, &zeros, &zeros, &zeros,
                ],
            ] {
                let mut y = vec![7f32; x.len()];
                assert_eq!(try_add_softmax_rows_rounded(&x, &m, &mut y, n), Fused::Done);
                assert_eq!(bits(&y), bits(&steps(&x, &m, n)), "n = {n}");
            }
        }
    }

    /// Not a check: ns per element of the exp lanes on 196608 attention-like values (x − max in
    /// [−20, 0]) and of the fused add + softmax on [12·128, 128] scores, the best of 200 runs.
    /// `cargo test --release -p aneforge --lib simd_softmax::tests::bench -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_exp_and_fused_softmax() {
        if !applies(8 * 8, 8) {
            return;
        }
        let r = crate::ops::simd_fp16::round1;
        let len = 12 * 128 * 128;
        let x: Vec<f32> = (0..len)
            .map(|i| r(((i * 7919 % 4093) as f32 / 4093.0) * 20.0 - 20.0))
            .collect();
        let best = |f: &mut dyn FnMut()| {
            (0..200)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_nanos() as f64 / len as f64
                })
                .fold(f64::INFINITY, f64::min)
        };
        let mut y = x.clone();
        let exp = best(&mut || {
            y.copy_from_slice(&x);
            crate::ops::simd_exp::try_exp_in_place(std::hint::black_box(&mut y)).unwrap();
        });
        let s: Vec<f32> = x.iter().map(|v| r(v * 0.6 + 6.0)).collect();
        let zeros = [0f32; 128];
        let m: [&[f32]; ROWS] = [&zeros; ROWS];
        let fused = best(&mut || {
            for (xb, yb) in s.chunks_exact(8 * 128).zip(y.chunks_exact_mut(8 * 128)) {
                let done = try_add_softmax_rows_rounded(xb, &m, yb, 128);
                assert_eq!(done, Fused::Done);
            }
        });
        println!("exp lanes {exp:.3} ns/elem, fused add+softmax {fused:.3} ns/elem");
    }
}
