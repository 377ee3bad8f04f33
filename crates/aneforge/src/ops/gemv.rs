//! Matrix-vector products (C with one row or one column, e.g. a batch-1 linear) in the `gemm`
//! crate's own order, reading the matrix in f32 or straight from fp16 (exact in f32, so the
//! same bits with half the memory traffic). The crate (gemm-common 0.19, `gemm_basic_generic`)
//! computes each element of such a product as a dot product u·v of a contiguous row of one
//! operand with the other operand's contiguous vector, in one of two orders (which one depends
//! on the shape and strides, see [`plan`]), with L = 8 lanes on AVX2+FMA CPUs and 16 on
//! AVX-512 ones:
//!
//! - [`Order::Horizontal`] (its horizontal microkernel): depth cut into blocks of 1024; per
//!   block L lane accumulators from +0, lane l = fma over the depths ≡ l (mod L) in increasing
//!   order, the block's last partial group loaded with zeros in the missing lanes
//!   (fma(0, 0, acc)); with L = 16 the lanes first fold to 8 as l + l(+8); the 8 lanes summed
//!   as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); C = that sum for the first block
//!   when not accumulating, else C + sum.
//! - [`Order::Rows`] (its row-major GEMV): eight L-lane accumulators over groups of 8·L depths,
//!   combined as ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)), then the remaining whole
//!   groups of L fma'd into that vector, its lanes summed in order (l0 + l1 + … + l(L−1)), the
//!   last depths by scalar fma; C = sum, or C + sum when accumulating. No depth blocks. Here
//!   an L-lane vector is L / 8 AVX2 registers (the same per-lane operations).
//!
//! [`run`] performs the same operations (several rows at a time, which changes no element's
//! sequence); the tests compare every bit with the crate on the f32 expansion.

use half::f16;
use rayon::prelude::*;

use super::conv_gemm::SyncPtr;
use super::gemm_avx2;

/// The crate's horizontal kernel's depth block.
const HORIZONTAL_BLOCK: usize = 1024;

/// Largest m·n the crate sends to its horizontal kernel.
const HORIZONTAL_MAX: usize = 16 * 16;

/// Multiply-adds from which [`run`] splits rows across the rayon pool (every element is still
/// computed whole by one thread).
const PAR_MIN_MACS: usize = 1 << 18;

/// Rows per parallel task.
const PAR_ROWS: usize = 64;

/// Which of the crate's per-element sequences a product takes (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Order {
    Horizontal,
    Rows,
}

/// A product the crate runs as one dot product per element of C: C's `rows` elements (`dst`
/// apart) are u_i·v with u_i the depth run of the matrix operand (A when n = 1, else B) at
/// i·`row_stride`, and v the other operand's depth run at 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub order: Order,
    /// The crate's vector width L here (8 or 16 f32 lanes).
    pub lanes: usize,
    pub rows: usize,
    pub matrix_is_a: bool,
    pub row_stride: usize,
    pub dst: usize,
}

/// The crate's f32 vector width on this CPU when its GEMV is one this module reproduces
/// (16 lanes where it dispatches to AVX-512, else 8 with AVX2 + FMA) and F16C is there.
fn crate_lanes() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if !std::arch::is_x86_feature_detected!("f16c") {
            return None;
        }
        if gemm_avx2::available() {
            return Some(8);
        }
        if gemm_avx2::usable() && std::arch::is_x86_feature_detected!("avx512f") {
            return Some(16);
        }
    }
    None
}

/// The crate's per-element sequence for C (m×n) = A·B with A[i, p] = a[i·a_rs + p·a_cs],
/// B[p, j] = b[p·b_rs + j·b_cs], C row stride `c_rs` (as `sgemm` passes them, m, n, k ≥ 1),
/// when C is one row or one column, this CPU takes the crate's AVX2 kernels, and the crate
/// runs it as dot products; `None` otherwise (its column-major GEMV, outer products, GEMMs).
pub fn plan(
    (m, n, k): (usize, usize, usize),
    (a_rs, a_cs): (usize, usize),
    (b_rs, b_cs): (usize, usize),
    c_rs: usize,
) -> Option<Plan> {
    if m != 1 && n != 1 {
        return None;
    }
    let lanes = crate_lanes()?;
    // `sgemm` hands the crate unit strides for unit extents; C's column stride is 1.
    let st = |extent: usize, s: usize| if extent == 1 { 1 } else { s };
    let (drs, lcs, lrs, rcs, rrs) = (
        st(m, c_rs),
        st(k, a_cs),
        st(m, a_rs),
        st(n, b_cs),
        st(k, b_rs),
    );
    // `gemm::gemm` transposes the product when C's row stride exceeds its column stride.
    let (m2, n2, dcs, drs, lcs, lrs, rcs, rrs) = if drs > 1 {
        (n, m, drs, 1, rrs, rcs, lrs, lcs)
    } else {
        (m, n, 1, drs, lcs, lrs, rcs, rrs)
    };
    // `gemm_basic_generic`'s dispatch, in its order.
    let unit_depth = lcs == 1 && rrs == 1;
    let order = if unit_depth && m2.saturating_mul(n2) <= HORIZONTAL_MAX {
        Order::Horizontal
    } else if k <= 2 || (n2 <= 1 && lrs == 1 && drs == 1) {
        return None;
    } else if n2 <= 1 && unit_depth {
        Order::Rows
    } else if m2 <= 1 && rcs == 1 && dcs == 1 {
        return None;
    } else if m2 <= 1 && unit_depth {
        Order::Rows
    } else {
        return None;
    };
    // Element (i, j) is A's row i against B's column j whichever operand the crate called lhs
    // (fma's product commutes).
    Some(if n == 1 {
        Plan {
            order,
            lanes,
            rows: m,
            matrix_is_a: true,
            row_stride: a_rs,
            dst: c_rs,
        }
    } else {
        Plan {
            order,
            lanes,
            rows: n,
            matrix_is_a: false,
            row_stride: b_cs,
            dst: 1,
        }
    })
}

/// A matrix element type the kernels read: f32, or fp16 widened exactly.
pub trait Elem: Copy + Send + Sync {
    /// The value as f32 (exact).
    fn f32(self) -> f32;
    /// Eight elements from `p` as f32.
    ///
    /// # Safety
    /// `p` is readable for 8 elements; the CPU has AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
    /// Elements 0..left (left < 8) from `p`, the other lanes +0 (the crate's partial load).
    ///
    /// # Safety
    /// `p` is readable for `left` elements; the CPU has AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn partial(p: *const Self, left: usize) -> std::arch::x86_64::__m256;
}

impl Elem for f32 {
    fn f32(self) -> f32 {
        self
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(p)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn partial(p: *const f32, left: usize) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(left as i32), lanes))
    }
}

impl Elem for f16 {
    fn f32(self) -> f32 {
        self.to_f32()
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn partial(p: *const f16, left: usize) -> std::arch::x86_64::__m256 {
        let mut lanes = [f16::ZERO; 8];
        std::ptr::copy_nonoverlapping(p, lanes.as_mut_ptr(), left);
        Self::load8(lanes.as_ptr())
    }
}

/// C per `plan` from its (k ≥ 1)-deep `matrix` rows and the vector `v`: C[i] = `c[i·plan.dst]`
/// (+= when `accumulate`), rows split across the rayon pool when `parallel` and large. Panics
/// if a row or `v` exceeds its slice or C is too short.
pub fn run<E: Elem>(
    plan: &Plan,
    k: usize,
    matrix: &[E],
    v: &[f32],
    c: &mut [f32],
    accumulate: bool,
    parallel: bool,
) {
    let v = &v[..k];
    if plan.rows == 0 {
        return;
    }
    let last = (plan.rows - 1) * plan.row_stride + k;
    assert!(
        matrix.len() >= last && c.len() > (plan.rows - 1) * plan.dst,
        "gemv: {} rows of depth {k} exceed the operands",
        plan.rows
    );
    let out = SyncPtr(c.as_mut_ptr());
    // SAFETY (every call): rows `range` write C[i·dst] for i in range only, inside `c` (checked
    // above); ranges of different calls are disjoint.
    let rows = |range: std::ops::Range<usize>| {
        let row = |i: usize| &matrix[i * plan.row_stride..i * plan.row_stride + k];
        let at = |i: usize| out.get().wrapping_add(i * plan.dst);
        #[cfg(target_arch = "x86_64")]
        {
            let step = match (plan.order, plan.lanes) {
                (Order::Rows, 8) => 1,
                _ => x86::ROWS,
            };
            let mut i = range.start;
            while i < range.end {
                let group = (range.end - i).min(step);
                let pick = |r: usize| i + r.min(group - 1);
                let rows: [&[E]; x86::ROWS] = std::array::from_fn(|r| row(pick(r)));
                let old: [f32; x86::ROWS] = std::array::from_fn(|r| unsafe { *at(pick(r)) });
                // SAFETY: `plan` exists only on CPUs with AVX2 and FMA; rows and v are k long.
                let sums = unsafe { x86::group(plan, group, rows, v, old, accumulate) };
                (0..group).for_each(|r| unsafe { *at(i + r) = sums[r] });
                i += group;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (range, row, at, accumulate);
            unreachable!("gemv::plan is None off x86_64");
        }
    };
    if parallel && rayon::current_num_threads() > 1 && plan.rows * k >= PAR_MIN_MACS {
        let tasks = plan.rows.div_ceil(PAR_ROWS);
        (0..tasks)
            .into_par_iter()
            .for_each(|t| rows(t * PAR_ROWS..((t + 1) * PAR_ROWS).min(plan.rows)));
    } else {
        rows(0..plan.rows);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Elem, Order, Plan, HORIZONTAL_BLOCK};

    /// Rows the horizontal order computes together (independent fma chains; a short last group
    /// repeats its last row). The row order computes one row at a time (eight chains already).
    pub(super) const ROWS: usize = 4;

    /// Sums of the first `used` of [`ROWS`] rows: `c` holds C's current values (used when
    /// `accumulate`).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; every row is as long as `v`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn group<E: Elem>(
        plan: &Plan,
        used: usize,
        rows: [&[E]; ROWS],
        v: &[f32],
        c: [f32; ROWS],
        accumulate: bool,
    ) -> [f32; ROWS] {
        sums(plan, used, rows.map(|r| r.as_ptr()), v, c, accumulate)
    }

    /// [`group`] on row pointers.
    #[inline(always)]
    unsafe fn sums<E: Elem>(
        plan: &Plan,
        used: usize,
        rows: [*const E; ROWS],
        v: &[f32],
        c: [f32; ROWS],
        accumulate: bool,
    ) -> [f32; ROWS] {
        let k = v.len();
        match plan.order {
            Order::Horizontal => {
                let mut out = c;
                let mut start = 0;
                while start < k {
                    let end = (start + HORIZONTAL_BLOCK).min(k);
                    let sums = match plan.lanes {
                        8 => horizontal::<E, 1>(rows, v.as_ptr(), start, end),
                        _ => horizontal::<E, 2>(rows, v.as_ptr(), start, end),
                    };
                    for r in 0..ROWS {
                        out[r] = if start == 0 && !accumulate {
                            sums[r]
                        } else {
                            sums[r] + out[r]
                        };
                    }
                    start = end;
                }
                out
            }
            Order::Rows => {
                let sums = match plan.lanes {
                    8 => std::array::from_fn(|r| match r < used {
                        true => by_rows::<E, 1, 1>([rows[r]], v.as_ptr(), k)[0],
                        false => 0.0,
                    }),
                    _ => by_rows::<E, 2, ROWS>(rows, v.as_ptr(), k),
                };
                std::array::from_fn(|r| if accumulate { sums[r] + c[r] } else { sums[r] })
            }
        }
    }

    /// The horizontal kernel's sums over depths start..end of each row (see the module doc)
    /// with L = 8·`H` lanes as `H` AVX2 registers; a last partial group of L loads zeros into
    /// every missing lane (whole registers included), and the L lanes fold to 8 as
    /// (lanes 0–7) + (lanes 8–15) before the 8-lane sum.
    #[inline(always)]
    unsafe fn horizontal<E: Elem, const H: usize>(
        rows: [*const E; ROWS],
        v: *const f32,
        start: usize,
        end: usize,
    ) -> [f32; ROWS] {
        let lanes = 8 * H;
        let mut acc = [[_mm256_setzero_ps(); H]; ROWS];
        let mut p = start;
        while p + lanes <= end {
            for h in 0..H {
                let x = _mm256_loadu_ps(v.add(p + 8 * h));
                for (a, row) in acc.iter_mut().zip(rows) {
                    a[h] = _mm256_fmadd_ps(E::load8(row.add(p + 8 * h)), x, a[h]);
                }
            }
            p += lanes;
        }
        if p < end {
            for h in 0..H {
                let (q, left) = (p + 8 * h, (end - p).saturating_sub(8 * h).min(8));
                let x = <f32 as Elem>::partial(v.add(q), left);
                for (a, row) in acc.iter_mut().zip(rows) {
                    a[h] = _mm256_fmadd_ps(E::partial(row.add(q), left), x, a[h]);
                }
            }
        }
        acc.map(|a| {
            let a = a[1..].iter().fold(a[0], |s, &hi| _mm256_add_ps(s, hi));
            let x = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
            let r0 = _mm_add_ps(x, _mm_movehl_ps(x, x));
            _mm_cvtss_f32(_mm_add_ss(r0, _mm_shuffle_ps::<0b0001>(r0, r0)))
        })
    }

    /// The row-major GEMV's sums of `R` rows (see the module doc) with L = 8·`H` lanes, each
    /// L-lane vector held as `H` AVX2 registers of consecutive depths; the rows' lane sums run
    /// interleaved (independent chains), each row's sequence unchanged.
    #[inline(always)]
    unsafe fn by_rows<E: Elem, const H: usize, const R: usize>(
        rows: [*const E; R],
        v: *const f32,
        k: usize,
    ) -> [f32; R] {
        let lanes = 8 * H;
        let fma = |s: __m256, row: *const E, q: usize| {
            _mm256_fmadd_ps(E::load8(row.add(q)), _mm256_loadu_ps(v.add(q)), s)
        };
        // Depths in whole groups of 8·L, then in whole L-lane vectors; the rest by scalar fma.
        let (whole, p) = (k / (8 * lanes) * (8 * lanes), k - k % lanes);
        // Each row's vector in one pass over it (the rows' passes are independent chains).
        let s: [[__m256; H]; R] = std::array::from_fn(|r| {
            let row = rows[r];
            let mut acc = [[_mm256_setzero_ps(); H]; 8];
            for q in (0..whole).step_by(8 * lanes) {
                for (j, a) in acc.iter_mut().enumerate() {
                    for (h, half) in a.iter_mut().enumerate() {
                        *half = fma(*half, row, q + lanes * j + 8 * h);
                    }
                }
            }
            let mut s = [_mm256_setzero_ps(); H];
            for (h, s) in s.iter_mut().enumerate() {
                let a = acc.map(|a| a[h]);
                let (a01, a23) = (_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
                let (a45, a67) = (_mm256_add_ps(a[4], a[5]), _mm256_add_ps(a[6], a[7]));
                *s = _mm256_add_ps(_mm256_add_ps(a01, a23), _mm256_add_ps(a45, a67));
            }
            for q in (whole..p).step_by(lanes) {
                for (h, half) in s.iter_mut().enumerate() {
                    *half = fma(*half, row, q + 8 * h);
                }
            }
            s
        });
        let mut l = [[0f32; 16]; R];
        for (l, s) in l.iter_mut().zip(&s) {
            for (h, half) in s.iter().enumerate() {
                _mm256_storeu_ps(l.as_mut_ptr().add(8 * h), *half);
            }
        }
        let mut t: [f32; R] = std::array::from_fn(|r| l[r][0]);
        for x in 1..lanes {
            for (t, l) in t.iter_mut().zip(&l) {
                *t += l[x];
            }
        }
        for q in p..k {
            for (t, &row) in t.iter_mut().zip(&rows) {
                *t = (*row.add(q)).f32().mul_add(*v.add(q), *t);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::sgemm;
    use crate::ops::gemm::tests::rand_vec;

    /// (m, n, k, A strides, B strides, C row stride).
    type Case = (usize, usize, usize, [usize; 2], [usize; 2], usize);

    /// Batch-1 linears (x [1, K] × W [N, K] read transposed: MobileNetV3's classifier
    /// 576 → 1024 → 1000, squeeze-excite-sized ones), 1×1 convs on one pixel (weight [m, k] × x),
    /// depths around the kernels' 8 / 16 / 64 / 128 / 1024 boundaries, both sides of the crate's
    /// horizontal bound m·n ≤ 256, a padded C column.
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for (n, k) in [
            (1024, 576),
            (1000, 1024),
            (8, 16),
            (64, 240),
            (256, 33),
            (257, 33),
        ] {
            v.push((1, n, k, [k, 1], [1, k], n));
        }
        for (m, k) in [(24, 96), (240, 64), (288, 72), (576, 144)] {
            v.push((m, 1, k, [k, 1], [1, 1], 1));
        }
        for k in [
            1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 71, 127, 128, 129, 143, 1023, 1024, 1025,
            2100,
        ] {
            v.push((5, 1, k, [k + 1, 1], [1, 1], 1));
            v.push((300, 1, k, [k, 1], [1, 1], 1));
            v.push((1, 3, k, [k, 1], [1, k + 2], 3));
            v.push((1, 1, k, [k, 1], [1, 1], 1));
        }
        v.push((7, 1, 40, [40, 1], [1, 1], 5));
        v.push((270, 1, 40, [40, 1], [1, 1], 3));
        v
    }

    /// Every GEMV gives the crate's bits, the matrix read as f32 or as fp16, writing and
    /// accumulating, on one thread or split over two, with random data and with a subnormal
    /// vector whose products underflow to ±0 and one whose products are all −0 (where the
    /// crate's zero-filled partial loads turn −0 lanes into +0, whole 8-lane halves of its
    /// 16-lane vectors included); the batch-1 linears of MobileNetV3 do take the GEMV.
    #[test]
    fn gemv_matches_the_crate_bit_for_bit() {
        if crate_lanes().is_none() {
            return;
        }
        assert!(plan((1, 1000, 1024), (1024, 1), (1, 1024), 1000).is_some());
        assert!(plan((1, 64, 240), (240, 1), (1, 240), 64).is_some());
        // Row-major B [K, N] with m = 1 is the crate's column-major GEMV: not this kernel's.
        assert!(plan((1, 64, 300), (300, 1), (64, 1), 64).is_none());
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let (mut horizontal, mut rows) = (0, 0);
        for (ci, &(m, n, k, [a_rs, a_cs], [b_rs, b_cs], c_rs)) in cases().iter().enumerate() {
            // Depth ≤ 2 with m·n > 256 is the crate's outer-product path (not a GEMV).
            let Some(g) = plan((m, n, k), (a_rs, a_cs), (b_rs, b_cs), c_rs) else {
                assert!(k <= 2 && m * n > 256, "({m}, {n}, {k}) is a GEMV");
                continue;
            };
            *(if g.order == Order::Rows {
                &mut rows
            } else {
                &mut horizontal
            }) += 1;
            let a_len = (m - 1) * a_rs + (k - 1) * a_cs + 1;
            let b_len = (k - 1) * b_rs + (n - 1) * b_cs + 1;
            let c0 = rand_vec((m - 1) * c_rs + n, 3 * ci as u64);
            // A matrix in [0, 0.45], so that a vector of the negative least subnormal makes every
            // product −0.
            let half: Vec<f16> = rand_vec(a_len.max(b_len), 3 * ci as u64 + 1)
                .into_iter()
                .map(|v| f16::from_f32(v.abs() * 0.45))
                .collect();
            let wide: Vec<f32> = half.iter().map(|h| h.to_f32()).collect();
            let least = f32::from_bits(1);
            for tiny in [None, Some(1e-40f32), Some(-least)] {
                let x: Vec<f32> = rand_vec(a_len.max(b_len), 3 * ci as u64 + 2)
                    .iter()
                    .map(|&v| match tiny {
                        None => v,
                        Some(s) if s == -least => s,
                        Some(s) => v * s,
                    })
                    .collect();
                let (a, b) = if g.matrix_is_a {
                    (&wide, &x)
                } else {
                    (&x, &wide)
                };
                for accumulate in [false, true] {
                    let mut want = c0.clone();
                    sgemm(
                        m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, &mut want, c_rs, accumulate,
                    );
                    for (threads, parallel) in [(1, false), (2, true)] {
                        let (mut from32, mut from16) = (c0.clone(), c0.clone());
                        two.install(|| {
                            let par = parallel && threads == 2;
                            run(&g, k, &wide, &x, &mut from32, accumulate, par);
                            run(&g, k, &half, &x, &mut from16, accumulate, par);
                        });
                        for (e, w) in want.iter().enumerate() {
                            let (g32, g16) = (from32[e], from16[e]);
                            assert!(
                                g32.to_bits() == w.to_bits() && g16.to_bits() == w.to_bits(),
                                "({m}, {n}, {k}) {:?} tiny {tiny:?} acc {accumulate} threads \
                                 {threads} element {e}: f32 {g32}, fp16 {g16}, crate {w}",
                                (a_rs, a_cs, b_rs, b_cs, c_rs)
                            );
                        }
                    }
                }
            }
        }
        assert!(horizontal > 10 && rows > 10, "{horizontal} {rows}");
    }

    /// A too-short matrix is a panic naming the sizes, not an out-of-bounds read.
    #[test]
    #[should_panic(expected = "exceed the operands")]
    fn short_operands_panic() {
        let g = Plan {
            order: Order::Rows,
            lanes: 8,
            rows: 3,
            matrix_is_a: true,
            row_stride: 10,
            dst: 1,
        };
        run(
            &g,
            10,
            &[0f32; 29],
            &[0f32; 10],
            &mut [0f32; 3],
            false,
            false,
        );
    }

    /// CPU time per call of MobileNetV3-small's classifier products (x [1, K] × W [N, K]ᵀ) through
    /// the crate (f32 weight) and this kernel (f32 and fp16 weight), with the weight in cache
    /// and evicted first, one thread (a benchmark, not a test: `--ignored --nocapture`, release).
    #[test]
    #[ignore]
    fn throughput_against_the_crate() {
        let mut evict = vec![1.0f32; 16 << 20];
        for (n, k) in [(1024, 576), (1000, 1024)] {
            let g = plan((1, n, k), (k, 1), (1, k), n).unwrap();
            let half: Vec<f16> = rand_vec(n * k, 1).into_iter().map(f16::from_f32).collect();
            let wide: Vec<f32> = half.iter().map(|h| h.to_f32()).collect();
            let x = rand_vec(k, 2);
            let mut c = vec![0.0; n];
            for cold in [false, true] {
                // Median over 41 calls of one call's CPU time (the eviction is not timed).
                let mut time = |f: &mut dyn FnMut(&mut [f32])| {
                    let mut t: Vec<f64> = (0..41)
                        .map(|_| {
                            if cold {
                                evict.iter_mut().for_each(|v| *v += 1.0);
                            }
                            let t0 = crate::exec::clock::process_cpu_us().unwrap();
                            f(&mut c);
                            crate::exec::clock::process_cpu_us().unwrap() - t0
                        })
                        .collect();
                    t.sort_by(f64::total_cmp);
                    t[20]
                };
                let t_crate = time(&mut |c| sgemm(1, n, k, &x, k, 1, &wide, 1, k, c, n, false));
                let t32 = time(&mut |c| run(&g, k, &wide, &x, c, false, false));
                let t16 = time(&mut |c| run(&g, k, &half, &x, c, false, false));
                println!(
                    "| ({n}, {k}) cold {cold} | {t_crate:.0} µs | {t32:.0} µs | {t16:.0} µs |"
                );
            }
        }
    }
}
