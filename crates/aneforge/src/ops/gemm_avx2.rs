//! The AVX2+FMA microkernel of the packed GEMM (see `gemm_packed`): one tile of up to
//! [`MR`] rows × [`NR`] columns of C over one depth block, in the `gemm` crate's per-element
//! order (`gemm_order`): a fused multiply-add chain from +0 in increasing depth, then
//! C = acc (first block of a product that does not accumulate) or C = C + acc.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of C per tile (broadcast operand: lhs panels hold MR values per depth step).
pub const MR: usize = 6;
/// Columns of C per tile (vector operand: rhs panels hold NR values per depth step).
pub const NR: usize = 16;

/// Whether this CPU runs the kernel (AVX2 and FMA, detected at run time).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One tile: C[r, c] for r < rows ≤ MR, c < cols ≤ NR, C[r, c] at `c[r·c_rs + c]`, over depth
/// `kb` with `lhs[p·MR + r]` and `rhs[p·NR + c]`; `overwrite` stores acc, otherwise adds it.
///
/// # Safety
/// The CPU has AVX2 and FMA ([`available`]); `lhs` holds kb·MR and `rhs` kb·NR readable
/// values; every addressed C element is inside one writable allocation no one else accesses.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile(
    kb: usize,
    lhs: *const f32,
    rhs: *const f32,
    c: *mut f32,
    c_rs: usize,
    rows: usize,
    cols: usize,
    overwrite: bool,
) {
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    for p in 0..kb {
        let b0 = _mm256_loadu_ps(rhs.add(p * NR));
        let b1 = _mm256_loadu_ps(rhs.add(p * NR + 8));
        let a = lhs.add(p * MR);
        for (r, acc) in acc.iter_mut().enumerate() {
            let ar = _mm256_broadcast_ss(&*a.add(r));
            acc[0] = _mm256_fmadd_ps(ar, b0, acc[0]);
            acc[1] = _mm256_fmadd_ps(ar, b1, acc[1]);
        }
    }
    if rows == MR && cols == NR {
        for (r, acc) in acc.iter().enumerate() {
            let dst = c.add(r * c_rs);
            for (h, &v) in acc.iter().enumerate() {
                let d = dst.add(8 * h);
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
    let mut spill = [[0f32; NR]; MR];
    for (s, acc) in spill.iter_mut().zip(&acc) {
        _mm256_storeu_ps(s.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(s.as_mut_ptr().add(8), acc[1]);
    }
    for (r, s) in spill.iter().enumerate().take(rows) {
        for (j, &v) in s.iter().enumerate().take(cols) {
            let d = c.add(r * c_rs + j);
            *d = if overwrite { v } else { *d + v };
        }
    }
}
