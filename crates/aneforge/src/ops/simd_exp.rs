//! e^x of f32 lanes, 8 at a time with AVX2+FMA (two halves of 4 in double), bit for bit glibc's
//! `expf` (its FMA variant, glibc ≥ 2.28, which `f32::exp` calls on x86-64 Linux): x·32/ln2 = k + r
//! in double, a 32-entry table of 2^(i/32), a cubic in r, one rounding to f32. Used only after a
//! check at first use that it equals this process's `f32::exp` on every fp16 value and a sweep of
//! other inputs; lanes below −104 give +0 (as `expf` does: an attention mask's −10000s), other
//! lanes with |x| ≥ 88 (overflow, underflow, inf, NaN) call `f32::exp`.

// The lanes and their scalar model exist on x86-64 only; elsewhere `available` is false.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::sync::OnceLock;

/// glibc's `__exp2f_data`: 2^(i/32) as double bits minus (i << 47), i = 0..32.
const TAB: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];
/// 32/ln2.
const INV_LN2_N: f64 = f64::from_bits(0x40471547652b82fe);
/// Below this e^x is below half the least f32 subnormal, so `expf` gives +0 (its own cut-off
/// is −103.972…).
const UNDERFLOW: f32 = -104.0;
/// 1.5·2^52: adding it rounds to an integer in the low mantissa bits.
const SHIFT: f64 = f64::from_bits(0x4338000000000000);
/// The cubic's coefficients (r³, r², r), scaled for N = 32.
const C: [f64; 3] = [
    f64::from_bits(0x3ebc6af84b912394),
    f64::from_bits(0x3f2ebfce50fac4f3),
    f64::from_bits(0x3f962e42ff0c52d6),
];

/// e^x by the algorithm of glibc's FMA `expf` for |x| < 88 (the scalar model of the lanes).
fn exp1(x: f32) -> f32 {
    if x.abs() >= 88.0 || x.is_nan() {
        return x.exp();
    }
    let xd = x as f64;
    let z = INV_LN2_N.mul_add(xd, SHIFT);
    let ki = z.to_bits();
    let kd = z - SHIFT;
    let r = INV_LN2_N.mul_add(xd, -kd);
    let s = f64::from_bits(TAB[(ki & 31) as usize].wrapping_add(ki << 47));
    let p = C[0].mul_add(r, C[1]);
    let y = p.mul_add(r * r, r.mul_add(C[2], 1.0));
    (y * s) as f32
}

/// Whether the lanes give this process's `f32::exp` bits (checked once: every fp16 value and
/// 2^16 other f32 inputs spread over (-88, 88)) and the CPU has AVX2 and FMA.
pub(super) fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            let fp16 = (0..=u16::MAX).map(|b| half::f16::from_bits(b).to_f32());
            let sweep = (0..1u32 << 16).map(|i| f32::from_bits(i.wrapping_mul(65_537) ^ 0x5a5a));
            let x: Vec<f32> = fp16.chain(sweep).collect();
            let mut y = x.clone();
            // SAFETY: the features the function is compiled for were just detected.
            unsafe { exp_avx2(&mut y) };
            return x.iter().zip(&y).all(|(v, e)| {
                let want = v.exp();
                want.to_bits() == e.to_bits() || (want.is_nan() && e.is_nan())
            });
        }
        false
    })
}

/// e^v of every element in place with the lanes, or `None` (nothing written) when they are
/// not available here (see the module doc).
pub fn try_exp_in_place(v: &mut [f32]) -> Option<()> {
    if !available() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `available` detected AVX2 and FMA.
    unsafe {
        exp_avx2(v)
    };
    Some(())
}

/// [`exp1`] of every element in place, 8 lanes a step with [`exp8`]; the tail takes [`exp1`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_avx2(v: &mut [f32]) {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};
    let mut chunks = v.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: each chunk holds exactly 8 f32, read and written unaligned; the features
        // `exp8` needs are this function's.
        unsafe { _mm256_storeu_ps(c.as_mut_ptr(), exp8(_mm256_loadu_ps(c.as_ptr()))) };
    }
    chunks
        .into_remainder()
        .iter_mut()
        .for_each(|x| *x = exp1(*x));
}

/// [`exp8`] of 8 groups of 8 lanes; when every lane has |x| < 88 (attention scores minus
/// their max) one test for all 64 and no per-group branch or call, so the groups' double
/// steps interleave in registers (the softmax lanes' column of 8 rows).
///
/// # Safety
/// As [`exp8`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn exp8x8(x: [std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let mut all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for &v in &x {
        // SAFETY: as this function's contract.
        all = _mm256_and_ps(all, unsafe { inside(v) });
    }
    let [a, b, c, d, e, f, g, h] = x;
    // SAFETY (both arms): as this function's contract; the halves' lanes are inside.
    if _mm256_movemask_ps(all) == 0xff {
        unsafe {
            [
                halves(a),
                halves(b),
                halves(c),
                halves(d),
                halves(e),
                halves(f),
                halves(g),
                halves(h),
            ]
        }
    } else {
        unsafe {
            [
                exp8(a),
                exp8(b),
                exp8(c),
                exp8(d),
                exp8(e),
                exp8(f),
                exp8(g),
                exp8(h),
            ]
        }
    }
}

/// [`exp1`] of 8 lanes (two halves of 4 in double), lanes below [`UNDERFLOW`] +0; when any
/// other lane is outside |x| < 88 every lane takes [`exp1`]. The kernel every exp lane runs.
///
/// # Safety
/// AVX2 and FMA are available; called from a function compiled for them (always inlined
/// there: a call across the feature boundary would pass the lanes through memory).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn exp8(xf: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // Lanes inside are computed, lanes below UNDERFLOW are +0.
    // SAFETY: as this function's contract.
    let inside = unsafe { inside(xf) };
    if _mm256_movemask_ps(inside) == 0xff {
        // SAFETY: as this function's contract.
        return unsafe { halves(xf) };
    }
    let zero = _mm256_cmp_ps::<_CMP_LT_OQ>(xf, _mm256_set1_ps(UNDERFLOW));
    if _mm256_movemask_ps(_mm256_or_ps(inside, zero)) != 0xff {
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` holds 8 f32, read and written unaligned.
        unsafe {
            _mm256_storeu_ps(lanes.as_mut_ptr(), xf);
            lanes.iter_mut().for_each(|x| *x = exp1(*x));
            return _mm256_loadu_ps(lanes.as_ptr());
        }
    }
    // SAFETY: as this function's contract.
    _mm256_andnot_ps(zero, unsafe { halves(_mm256_andnot_ps(zero, xf)) })
}

/// All ones in the lanes with |x| < 88, the range [`halves`] computes (not NaN).
///
/// # Safety
/// As [`exp8`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn inside(xf: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(xf, abs), _mm256_set1_ps(88.0))
}

/// [`exp4`] of each half of 8 lanes with |x| < 88.
///
/// # Safety
/// As [`exp8`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn halves(xf: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: as this function's contract.
    unsafe {
        let lo = exp4(_mm256_castps256_ps128(xf));
        _mm256_set_m128(exp4(_mm256_extractf128_ps::<1>(xf)), lo)
    }
}

/// e^x of 4 lanes with |x| < 88 in double ([`exp1`]'s steps); table indices are masked to
/// 0..32, inside TAB.
///
/// # Safety
/// As [`exp8`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn exp4(xf: std::arch::x86_64::__m128) -> std::arch::x86_64::__m128 {
    use std::arch::x86_64::*;
    let (inv, shift) = (_mm256_set1_pd(INV_LN2_N), _mm256_set1_pd(SHIFT));
    let xd = _mm256_cvtps_pd(xf);
    let z = _mm256_fmadd_pd(inv, xd, shift);
    let ki = _mm256_castpd_si256(z);
    let kd = _mm256_sub_pd(z, shift);
    let r = _mm256_fmsub_pd(inv, xd, kd);
    let mut ix = [0u64; 4];
    // SAFETY: `ix` holds 4 u64, written unaligned.
    unsafe { _mm256_storeu_si256(ix.as_mut_ptr() as *mut __m256i, ki) };
    let [t0, t1, t2, t3] = ix.map(|i| TAB[(i & 31) as usize] as i64);
    let t = _mm256_set_epi64x(t3, t2, t1, t0);
    let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
    let p = _mm256_fmadd_pd(_mm256_set1_pd(C[0]), r, _mm256_set1_pd(C[1]));
    let q = _mm256_fmadd_pd(r, _mm256_set1_pd(C[2]), _mm256_set1_pd(1.0));
    let y = _mm256_fmadd_pd(p, _mm256_mul_pd(r, r), q);
    _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalar model and the lanes give glibc's `expf` bits on a strided sweep of every f32
    /// bit pattern with |x| < 89 (the range the lanes compute), where that is this libm.
    #[test]
    fn lanes_and_model_match_glibc_expf() {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return;
        }
        let x: Vec<f32> = (0..u32::MAX / 251)
            .map(|i| f32::from_bits(i * 251))
            .filter(|v| v.abs() < 89.0)
            .collect();
        assert!(x.len() > 8_000_000, "{}", x.len());
        for v in &x {
            assert_eq!(exp1(*v).to_bits(), v.exp().to_bits(), "model exp({v})");
        }
        let mut y = x.clone();
        if try_exp_in_place(&mut y).is_none() {
            return;
        }
        for (v, e) in x.iter().zip(&y) {
            assert_eq!(e.to_bits(), v.exp().to_bits(), "lanes exp({v})");
        }
        // Specials go through f32::exp; groups of lanes below −104 (mask values) give +0.
        let mut s = [f32::NEG_INFINITY, -100.0, 88.5, f32::NAN, -0.0];
        try_exp_in_place(&mut s).unwrap();
        assert_eq!(s[..3], [0.0, (-100f32).exp(), 88.5f32.exp()]);
        assert!(s[3].is_nan() && s[4] == 1.0);
        let low: Vec<f32> = (0..4096)
            .map(|i| -103.0 - i as f32 * 2.45)
            .chain([
                -104.0,
                -104.001,
                -1e4,
                -65504.0,
                f32::MIN,
                f32::NEG_INFINITY,
                -1.5,
                2.0,
            ])
            .collect();
        let mut e = low.clone();
        try_exp_in_place(&mut e).unwrap();
        for (v, e) in low.iter().zip(&e) {
            assert_eq!(e.to_bits(), v.exp().to_bits(), "exp({v})");
        }
    }

    /// [`exp8x8`] of 64 values.
    ///
    /// # Safety
    /// AVX2 and FMA are available.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn exp64(x: &[f32; 64]) -> [f32; 64] {
        use std::arch::x86_64::{_mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps};
        let (mut v, mut y) = ([_mm256_setzero_ps(); 8], [0f32; 64]);
        // SAFETY: x and y hold 64 f32, read and written unaligned 8 at a time; the features
        // `exp8x8` needs are this function's.
        unsafe {
            for (k, v) in v.iter_mut().enumerate() {
                *v = _mm256_loadu_ps(x.as_ptr().add(8 * k));
            }
            for (k, e) in exp8x8(v).into_iter().enumerate() {
                _mm256_storeu_ps(y.as_mut_ptr().add(8 * k), e);
            }
        }
        y
    }

    /// The 64 lanes of [`exp8x8`] give `f32::exp`'s bits when all are inside |x| < 88 (spread
    /// over (−88, 88), or like attention scores) and when one lane at any of the 64 positions
    /// is outside (below −104, −100, ≥ 88, ±inf, NaN), the other lanes inside.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn groups_of_64_lanes_match_exp() {
        if !available() {
            return;
        }
        let run = |x: [f32; 64]| {
            // SAFETY: `available` detected AVX2 and FMA.
            let y = unsafe { exp64(&x) };
            for (v, e) in x.iter().zip(&y) {
                let want = v.exp();
                let same = want.to_bits() == e.to_bits() || (want.is_nan() && e.is_nan());
                assert!(same, "exp({v}) = {want}, lanes {e}");
            }
        };
        for g in 0..2000u32 {
            run(std::array::from_fn(|i| {
                let v =
                    f32::from_bits((g * 64 + i as u32).wrapping_mul(2_654_435_761) % 0x7f00_0000);
                if g % 2 == 0 {
                    v % 175.0 - 87.5
                } else {
                    -(v % 20.0)
                }
            }));
        }
        let specials = [
            -104.5,
            -1e4,
            -100.0,
            88.0,
            100.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        for (at, &s) in (0..64).flat_map(|at| specials.iter().map(move |s| (at, s))) {
            let mut x = std::array::from_fn(|i| -(i as f32) * 0.37 + 3.0);
            x[at] = s;
            run(x);
        }
    }
}
