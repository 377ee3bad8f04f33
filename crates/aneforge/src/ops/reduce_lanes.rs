//! Sums of 8 equal rows side by side on AVX lanes: row k's chain acc[k] = acc[k] + v in its own
//! element order, exactly the scalar fold's additions (IEEE f32 add, no reassociation), with
//! 8×8 transposes feeding each lane its row's next 8 values.

/// Fold the 8 equal rows of `rows` into `acc`, row k into `acc[k]` as `acc[k] + v` in row
/// order; false (nothing done) when the CPU lacks AVX.
pub(super) fn sum8(acc: &mut [f32; 8], rows: &[f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX was just detected.
        unsafe { x86::sum8(acc, rows) };
        return true;
    }
    let _ = (acc, rows);
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::ops::simd_transpose::transpose8;

    /// See [`super::sum8`].
    ///
    /// # Safety
    /// The CPU has AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn sum8(acc: &mut [f32; 8], rows: &[f32]) {
        let r = rows.len() / 8;
        let whole = r / 8 * 8;
        // SAFETY: `acc` holds 8 f32; row k's values p..p + 8 (p + 8 ≤ r) lie in `rows`.
        unsafe {
            let mut a = _mm256_loadu_ps(acc.as_ptr());
            for p in (0..whole).step_by(8) {
                let block = std::array::from_fn(|k| _mm256_loadu_ps(rows.as_ptr().add(k * r + p)));
                // Vector j holds value p + j of every row, lane k for row k.
                for v in transpose8(block) {
                    a = _mm256_add_ps(a, v);
                }
            }
            _mm256_storeu_ps(acc.as_mut_ptr(), a);
        }
        for p in whole..r {
            for (k, a) in acc.iter_mut().enumerate() {
                *a += rows[k * r + p];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::tests::rand_vec;

    /// Every row length 0..=40 and 3136 (tails of 0..7 values after whole blocks), starting
    /// sums and inputs with NaN, ±inf, −0 and values whose sum depends on the order: the bits
    /// of the scalar fold, row by row in order.
    #[test]
    fn sums_keep_the_scalar_bits() {
        if !sum8(&mut [0.0; 8], &[]) {
            return;
        }
        for r in (0..=40).chain([3136]) {
            let mut rows: Vec<f32> = rand_vec(8 * r, r as u64)
                .iter()
                .enumerate()
                .map(|(i, v)| v * [1.0, 1e8, 1e-8, 3.0][i % 4])
                .collect();
            if r > 3 {
                let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0];
                for (k, s) in specials.into_iter().enumerate() {
                    rows[(2 * k + 1) * r + (r / 2 + k) % r] = s;
                }
            }
            let start: [f32; 8] = std::array::from_fn(|k| [-0.0, 0.5, 1e7][k % 3]);
            let mut want = start;
            for (k, w) in want.iter_mut().enumerate() {
                *w = rows[k * r..(k + 1) * r].iter().fold(*w, |a, &v| a + v);
            }
            let mut got = start;
            assert!(sum8(&mut got, &rows));
            assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "rows of {r}");
        }
    }
}
