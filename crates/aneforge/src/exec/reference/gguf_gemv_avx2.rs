//! The AVX2+FMA kernel of `gguf_gemv.rs` (x86-64, runtime-detected): one weight block is
//! dequantized to four 8-lane f32 vectors (d · q + m by one fused multiply-add) and feeds the R
//! x rows' accumulators; bit-identical to the portable kernel under the contract stated there.
#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::gguf_gemv::{Row, RowCodes, BLOCK};

/// Whether this CPU runs the kernel (AVX2 and FMA; detection is cached by std).
#[inline]
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// The dot products of `row` with the R x rows `x` (each at least blocks · 32 long). Call only
/// when [`available`].
#[inline]
pub(super) fn tile<const R: usize>(row: Row, x: [&[f32]; R]) -> [f32; R] {
    let blocks = row.d.len().min(row.o.len());
    let whole = match row.codes {
        RowCodes::Int8(q) => q.len() >= blocks * BLOCK,
        RowCodes::Uint4(p) => p.len() >= blocks * BLOCK / 2,
    };
    assert!(whole && x.iter().all(|x| x.len() >= blocks * BLOCK));
    // SAFETY: the CPU has AVX2 and FMA (the caller checked `available`); the kernel reads
    // blocks·32 codes / x values and blocks·16 packed bytes, all checked just above.
    unsafe {
        match row.codes {
            RowCodes::Int8(q) => tile_blocks::<R, false>(q.as_ptr().cast(), row.d, row.o, x),
            RowCodes::Uint4(p) => tile_blocks::<R, true>(p.as_ptr(), row.d, row.o, x),
        }
    }
}

/// Eight codes (as i32 lanes) dequantized: d·q + o.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn affine(q: __m256i, d: __m256, o: __m256) -> __m256 {
    _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), o)
}

/// One block of 4-bit codes at `p` as d·q + o in the contract's order (low nibbles, then high).
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dequant_u4(p: *const u8, d: __m256, o: __m256) -> [__m256; 4] {
    let raw = _mm_loadu_si128(p.cast());
    let mask = _mm_set1_epi8(15);
    let lo = _mm_and_si128(raw, mask);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(raw), mask);
    [
        affine(_mm256_cvtepu8_epi32(lo), d, o),
        affine(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(lo)), d, o),
        affine(_mm256_cvtepu8_epi32(hi), d, o),
        affine(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(hi)), d, o),
    ]
}

/// One block of signed 8-bit codes at `q` as d·q + o, in element order.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dequant_i8(q: *const i8, d: __m256, o: __m256) -> [__m256; 4] {
    let eight = |c: usize| _mm_loadl_epi64(q.add(c * 8).cast());
    [
        affine(_mm256_cvtepi8_epi32(eight(0)), d, o),
        affine(_mm256_cvtepi8_epi32(eight(1)), d, o),
        affine(_mm256_cvtepi8_epi32(eight(2)), d, o),
        affine(_mm256_cvtepi8_epi32(eight(3)), d, o),
    ]
}

/// ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)), the contract's lane sum.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn hsum(a: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
}

/// The kernel over all blocks: codes at `codes` (4-bit when `U4`), scales `d`, offsets `o`.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_blocks<const R: usize, const U4: bool>(
    codes: *const u8,
    d: &[f32],
    o: &[f32],
    x: [&[f32]; R],
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    let xp: [*const f32; R] = std::array::from_fn(|i| x[i].as_ptr());
    for (b, (&d, &o)) in d.iter().zip(o).enumerate() {
        let (vd, vo) = (_mm256_set1_ps(d), _mm256_set1_ps(o));
        let w = if U4 {
            dequant_u4(codes.add(b * BLOCK / 2), vd, vo)
        } else {
            dequant_i8(codes.add(b * BLOCK).cast(), vd, vo)
        };
        for (a, p) in acc.iter_mut().zip(&xp) {
            let p = p.add(b * BLOCK);
            for (c, w) in w.iter().enumerate() {
                *a = _mm256_fmadd_ps(_mm256_loadu_ps(p.add(c * 8)), *w, *a);
            }
        }
    }
    let mut out = [0f32; R];
    for (o, a) in out.iter_mut().zip(acc) {
        *o = hsum(a);
    }
    out
}
