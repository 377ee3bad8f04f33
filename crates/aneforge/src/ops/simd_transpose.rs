//! The 8×8 f32 transpose in AVX registers: eight rows of eight lanes in, eight columns out, so
//! row-wise data can be folded column by column with one row per lane.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{
    __m256, _mm256_permute2f128_ps, _mm256_shuffle_ps, _mm256_unpackhi_ps, _mm256_unpacklo_ps,
};

/// Lane k of output j = lane j of input k (an 8×8 transpose; its own inverse).
///
/// # Safety
/// AVX is available.
#[inline]
#[target_feature(enable = "avx")]
pub unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t = [0, 2, 4, 6].map(|k| _mm256_unpacklo_ps(r[k], r[k + 1]));
    let u = [0, 2, 4, 6].map(|k| _mm256_unpackhi_ps(r[k], r[k + 1]));
    // s[j] holds columns j and j + 4 of rows 0..4 (low halves), h[j] those of rows 4..8.
    let s = [
        _mm256_shuffle_ps::<0x44>(t[0], t[1]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[1]),
        _mm256_shuffle_ps::<0x44>(u[0], u[1]),
        _mm256_shuffle_ps::<0xEE>(u[0], u[1]),
    ];
    let h = [
        _mm256_shuffle_ps::<0x44>(t[2], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[2], t[3]),
        _mm256_shuffle_ps::<0x44>(u[2], u[3]),
        _mm256_shuffle_ps::<0xEE>(u[2], u[3]),
    ];
    std::array::from_fn(|j| {
        if j < 4 {
            _mm256_permute2f128_ps::<0x20>(s[j], h[j])
        } else {
            _mm256_permute2f128_ps::<0x31>(s[j - 4], h[j - 4])
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};

    /// Element (k, j) of the input is element (j, k) of the output, for all 64 positions.
    #[test]
    fn transposes_every_element() {
        if !std::arch::is_x86_feature_detected!("avx") {
            return;
        }
        let a: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let mut b = vec![0f32; 64];
        // SAFETY: AVX detected; every load and store is 8 f32 inside a 64-element buffer.
        unsafe {
            let r = std::array::from_fn(|k| _mm256_loadu_ps(a.as_ptr().add(8 * k)));
            for (j, c) in transpose8(r).into_iter().enumerate() {
                _mm256_storeu_ps(b.as_mut_ptr().add(8 * j), c);
            }
        }
        for k in 0..8 {
            for j in 0..8 {
                assert_eq!(b[8 * j + k], a[8 * k + j], "({k}, {j})");
            }
        }
    }
}
