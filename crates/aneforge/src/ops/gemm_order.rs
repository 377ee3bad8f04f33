//! The f32 operation sequence the `gemm` crate performs per output element on its blocked
//! path, i.e. the bits every conv and matmul of the reference executor depends on. For
//! C (m×n) = A·B with depth k the crate cuts k into consecutive depth blocks of [`depth_block`]
//! elements (the last one shorter); per block it runs one fused multiply-add chain from +0 in
//! increasing depth order (acc = fma(a[p], b[p], acc)), then writes C = acc for the first block
//! of a product that does not accumulate, and C = C + acc (one rounding) otherwise. Vector
//! width, register tiling, packing, the (m, n) tiling and the thread count change none of this.
//! Its blocked path runs for m, n ≥ 2, k ≥ 3 and m·n > 256 ([`blocked_path`]); the block size
//! depends on which microkernel the crate dispatches to on this CPU and on the L1 cache
//! geometry it reads. The packed GEMM (`gemm_packed`, AVX2+FMA CPUs) reproduces
//! this sequence; the test below fails if a `gemm` upgrade changes it (the bit-identity hashes
//! would move). On AVX-512 CPUs the packed GEMM runs its own 16-lane tile (`gemm_avx512`) where
//! B is packed once or written into panels anyway (`gemm_packed::depth_block_wide`); other
//! products stay on the crate, except small ones, where its packing per call costs more
//! (`gemm_packed::depth_block`).

/// Smallest m·n the crate multiplies on its blocked path for every stride pattern (smaller
/// products with unit-stride depth take its horizontal kernel, whose order differs).
const MIN_OUTPUT: usize = 16 * 16 + 1;

/// Bound under which (m and n both at most it) the crate uses a depth block of min(k, 512).
const SMALL: usize = 64;

/// The crate's microkernel register tile (MR rows, NR columns) on this CPU when that kernel
/// accumulates with fused multiply-adds (AVX-512 or AVX2+FMA); `None` for its scalar kernel,
/// whose unfused mul-then-add this module does not model.
fn crate_tile() -> Option<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some((64, 6));
        }
        if std::arch::is_x86_feature_detected!("fma") {
            return Some((16, 6));
        }
    }
    None
}

/// Whether the crate runs C (m×n, depth k) on its blocked path whatever the strides.
pub(crate) fn blocked_path(m: usize, n: usize, k: usize) -> bool {
    m >= 2 && n >= 2 && k >= 3 && m * n >= MIN_OUTPUT
}

/// The crate's depth block for a blocked-path product (m×n, depth k ≥ 1) on this CPU, or `None`
/// when its kernel here is not one this module models (see [`crate_tile`]).
pub(crate) fn depth_block(m: usize, n: usize, k: usize) -> Option<usize> {
    let (mr, nr) = crate_tile()?;
    if m <= SMALL && n <= SMALL {
        return Some(k.min(512));
    }
    Some(gemm_common::cache::kernel_params(m, n, k, mr, nr, 4).kc)
}

/// C[i, j] (+)= Σ_p A[i, p]·B[p, j] in the crate's order (see the module doc) with depth block
/// `kc`: the scalar definition every fast kernel in this family must match bit for bit.
/// `a(i, p)` and `b(p, j)` read the operands; C is row-major with row stride `c_rs`.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn reference(
    m: usize,
    n: usize,
    k: usize,
    kc: usize,
    a: impl Fn(usize, usize) -> f32,
    b: impl Fn(usize, usize) -> f32,
    c: &mut [f32],
    c_rs: usize,
    accumulate: bool,
) {
    for i in 0..m {
        for j in 0..n {
            let dst = &mut c[i * c_rs + j];
            for (block, start) in (0..k).step_by(kc.max(1)).enumerate() {
                let acc = (start..(start + kc).min(k))
                    .fold(0.0f32, |acc, p| a(i, p).mul_add(b(p, j), acc));
                *dst = if block == 0 && !accumulate {
                    acc
                } else {
                    *dst + acc
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::sgemm;
    use crate::ops::gemm::tests::rand_vec;

    /// The scalar model gives every bit `sgemm` (the `gemm` crate) gives: ResNet conv products
    /// (weight [Cout, K] × columns [K, P]) and MiniLM matmuls (x [M, K] × Wᵀ stored [K, N] or
    /// read transposed from [N, K]), depth past one block (balanced or not), odd edges, the
    /// small-size blocking (m, n ≤ 64), accumulation into a bias, and the parallel path.
    #[test]
    fn scalar_model_matches_the_crate_bit_for_bit() {
        if crate_tile().is_none() {
            return;
        }
        let mut single_chain_differs = false;
        let shapes = [
            (64, 784, 147),
            (64, 400, 576),
            (128, 196, 1152),
            (72, 49, 4608),
            (96, 49, 2304),
            (2048, 9, 512),
            (64, 64, 576),
            (40, 60, 1100),
            (128, 384, 384),
            (32, 1536, 384),
            (32, 384, 1536),
            (77, 129, 1025),
            (3, 97, 3),
            (300, 5, 700),
            (17, 33, 513),
        ];
        for (si, &(m, n, k)) in shapes.iter().enumerate() {
            let seed = 10 * si as u64;
            let (a, b) = (rand_vec(m * k, seed + 1), rand_vec(k * n, seed + 2));
            let bias = rand_vec(m * n, seed + 3);
            assert!(blocked_path(m, n, k), "({m}, {n}, {k})");
            let kc = depth_block(m, n, k).unwrap();
            // (B row stride, B column stride): row-major [K, N] and column-major (from [N, K]).
            for (b_rs, b_cs) in [(n, 1), (1, k)] {
                for accumulate in [false, true] {
                    let mut want = bias.clone();
                    let (ar, br) = (|i, p| a[i * k + p], |p, j| b[p * b_rs + j * b_cs]);
                    reference(m, n, k, kc, ar, br, &mut want, n, accumulate);
                    let mut got = bias.clone();
                    sgemm(m, n, k, &a, k, 1, &b, b_rs, b_cs, &mut got, n, accumulate);
                    if kc < k && !accumulate {
                        let mut one = bias.clone();
                        reference(m, n, k, k, ar, br, &mut one, n, accumulate);
                        single_chain_differs |= one != want;
                    }
                    for (e, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(
                            g.to_bits(),
                            w.to_bits(),
                            "({m}, {n}, {k}) kc {kc} B strides ({b_rs}, {b_cs}) acc \
                             {accumulate} element {e}: crate {g}, model {w}"
                        );
                    }
                }
            }
        }
        // The depth blocking is observable: one chain over all of k gives other bits.
        assert!(single_chain_differs);
    }
}
