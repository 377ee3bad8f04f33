//! The overflow-safe norm chain that `Tensor::layer_norm` and `Tensor::rms_norm` emit (over the
//! last axis) as one kernel. Eight rows at a time are held transposed in an L1 tile (row k in
//! lane k); every op of the chain is applied column by column with the fp16 rounding of the op
//! it stands for, and every reduction folds its row from 0 in element order, so the bits are
//! those of the ops run one by one.
//!
//! The chain, per row of `d` values (r(·) = round to fp16, n = d):
//! h = r(x·k) (optional) · m₁ = r(Σh/n) · d₁ = r(h − m₁) · m₂ = r(Σd₁/n) · v = r(d₁ − m₂)
//! (the centring, layer_norm only; rms_norm starts at v = x) · s = max(max|v|, floor) ·
//! u = r(v/s) · ms = r(Σr(u²)/n) · q = r(1/√(r(ms + r(r(ρ/s)²)) + ε)) · y = r(u·q), then
//! r(y·γⱼ) and r(· + βⱼ) when present.

use std::cell::Cell;

use super::kernel::for_chunks;
use super::simd_fp16::round1;

/// Rows per block: one row per f32 lane.
const ROWS: usize = 8;

/// The constants of one norm chain (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct NormChain {
    /// Row width (the last axis), ≥ 1.
    pub d: usize,
    /// The centring's leading multiplier k (layer_norm's ½); `None`: the chain reads x as h.
    pub scale: Option<f32>,
    /// Subtract the row mean twice (layer_norm); false: rms_norm, v = x.
    pub centre: bool,
    /// s = max(max |v|, floor).
    pub floor: f32,
    /// ρ in ρ / s.
    pub rho: f32,
    /// ε of the rsqrt.
    pub eps: f32,
}

thread_local! {
    /// Each thread's tile of 8 transposed rows, taken out of the cell while in use (so a
    /// nested call on the same thread gets a fresh one instead of a borrow panic).
    static TILE: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

impl NormChain {
    /// y [rows, d] = the chain on x [rows, d] (fp16 values held in f32), with γ and β [d] when
    /// given; blocks of 8 rows run on the rayon pool for large x. Lengths are the caller's
    /// contract (x and y equal, a multiple of d; γ, β of length d).
    pub fn run(&self, x: &[f32], gamma: Option<&[f32]>, beta: Option<&[f32]>, y: &mut [f32]) {
        let block = ROWS * self.d;
        for_chunks(y, block, x, block, |yb, xb| {
            // Every value of the tile is written by the load (stale ones included).
            let mut tile = TILE.take();
            tile.resize(block, 0.0);
            self.block(xb, gamma, beta, yb, &mut tile);
            TILE.set(tile);
        });
    }

    /// One block of up to 8 rows through the AVX2 lanes when present (falling back to the
    /// scalar lanes for a block holding a NaN or infinity, whose NaN bits the scalar order
    /// decides), else through the scalar lanes.
    fn block(
        &self,
        x: &[f32],
        gamma: Option<&[f32]>,
        beta: Option<&[f32]>,
        y: &mut [f32],
        tile: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if avx::available() {
            // SAFETY: AVX2, FMA and F16C were detected; the tile holds 8·d values and x, y
            // hold whole rows of d (the caller's contract).
            if unsafe { avx::block(self, x, gamma, beta, y, tile) } {
                return;
            }
        }
        load_columns(x, self.d, 0, tile);
        self.chain::<Scalar>(tile, gamma, beta);
        store_columns(tile, self.d, 0, y);
    }

    /// The chain on a transposed tile (column j at `tile[8j..8j + 8]`), in place; false (the
    /// tile then holds intermediates) when the lanes decline non-finite blocks and a row's mean
    /// square is not finite, i.e. the block holds a NaN or an infinity.
    #[inline(always)]
    fn chain<V: Lanes>(
        &self,
        tile: &mut [f32],
        gamma: Option<&[f32]>,
        beta: Option<&[f32]>,
    ) -> bool {
        let n = V::splat(self.d as f32);
        let mean = |sum: V| sum.div(n).round();
        if self.centre {
            let mut sum = V::splat(0.0);
            if let Some(k) = self.scale {
                let k = V::splat(k);
                for c in tile.chunks_exact_mut(ROWS) {
                    let h = V::load(c).mul(k).round();
                    h.store(c);
                    sum = sum.add(h);
                }
            } else {
                sum = tile.chunks_exact(ROWS).fold(sum, |s, c| s.add(V::load(c)));
            }
            for _ in 0..2 {
                let m = mean(sum);
                sum = V::splat(0.0);
                for c in tile.chunks_exact_mut(ROWS) {
                    let v = V::load(c).sub(m).round();
                    v.store(c);
                    sum = sum.add(v);
                }
            }
        }
        let max = (tile.chunks_exact(ROWS)).fold(V::splat(f32::NEG_INFINITY), |m, c| {
            m.max_of(V::load(c).abs())
        });
        let s = max.max_of(V::splat(self.floor)).round();
        let mut sum = V::splat(0.0);
        for c in tile.chunks_exact_mut(ROWS) {
            let u = V::load(c).div(s).round();
            u.store(c);
            sum = sum.add(u.mul(u).round());
        }
        let ms = mean(sum);
        if V::DECLINES_NON_FINITE && !ms.finite() {
            return false;
        }
        let rs = V::splat(self.rho).div(s).round();
        let t = ms.add(rs.mul(rs).round()).round();
        let q = V::splat(1.0).div(t.add(V::splat(self.eps)).sqrt()).round();
        for (j, c) in tile.chunks_exact_mut(ROWS).enumerate() {
            let mut o = V::load(c).mul(q).round();
            if let Some(g) = gamma {
                o = o.mul(V::splat(g[j])).round();
            }
            if let Some(b) = beta {
                o = o.add(V::splat(b[j])).round();
            }
            o.store(c);
        }
        true
    }
}

/// Columns `from..d` of x's rows (x: ≤ 8 rows of d) into the tile transposed (element (k, j)
/// at 8j + k), the lanes of missing rows in those columns as zeros.
fn load_columns(x: &[f32], d: usize, from: usize, tile: &mut [f32]) {
    let tile = &mut tile[ROWS * from..ROWS * d];
    tile.fill(0.0);
    for (k, row) in x.chunks_exact(d).enumerate() {
        for (j, &v) in row[from..].iter().enumerate() {
            tile[ROWS * j + k] = v;
        }
    }
}

/// The tile's columns `from..d` back into y's rows (≤ 8 rows of d), the inverse of
/// [`load_columns`].
fn store_columns(tile: &[f32], d: usize, from: usize, y: &mut [f32]) {
    let tile = &tile[ROWS * from..ROWS * d];
    for (k, row) in y.chunks_exact_mut(d).enumerate() {
        for (j, v) in row[from..].iter_mut().enumerate() {
            *v = tile[ROWS * j + k];
        }
    }
}

/// Eight independent f32 lanes (one row each) with the ops of the chain; every op is the f32
/// op of the reference kernels, `round` the fp16 rounding.
trait Lanes: Copy {
    /// The chain gives up on a block holding a NaN or an infinity (these lanes' NaN bits may
    /// differ from the scalar ops').
    const DECLINES_NON_FINITE: bool;
    fn splat(v: f32) -> Self;
    /// The first 8 values of `c`.
    fn load(c: &[f32]) -> Self;
    /// Into the first 8 values of `c`.
    fn store(self, c: &mut [f32]);
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    /// `reduce_max`'s and `maximum`'s step: f32::max(self, v).
    fn max_of(self, v: Self) -> Self;
    fn round(self) -> Self;
    /// Every lane finite.
    fn finite(self) -> bool;
}

/// The portable lanes.
#[derive(Clone, Copy)]
struct Scalar([f32; ROWS]);

impl Scalar {
    #[inline(always)]
    fn zip(self, b: Self, f: impl Fn(f32, f32) -> f32) -> Self {
        Scalar(std::array::from_fn(|k| f(self.0[k], b.0[k])))
    }
    #[inline(always)]
    fn each(self, f: impl Fn(f32) -> f32) -> Self {
        Scalar(self.0.map(f))
    }
}

impl Lanes for Scalar {
    const DECLINES_NON_FINITE: bool = false;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        Scalar([v; ROWS])
    }
    #[inline(always)]
    fn load(c: &[f32]) -> Self {
        Scalar(std::array::from_fn(|k| c[k]))
    }
    #[inline(always)]
    fn store(self, c: &mut [f32]) {
        c[..ROWS].copy_from_slice(&self.0);
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        self.zip(b, |a, b| a + b)
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        self.zip(b, |a, b| a - b)
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        self.zip(b, |a, b| a * b)
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        self.zip(b, |a, b| a / b)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        self.each(f32::sqrt)
    }
    #[inline(always)]
    fn abs(self) -> Self {
        self.each(f32::abs)
    }
    #[inline(always)]
    fn max_of(self, v: Self) -> Self {
        self.zip(v, f32::max)
    }
    #[inline(always)]
    fn round(self) -> Self {
        self.each(round1)
    }
    #[inline(always)]
    fn finite(self) -> bool {
        self.0.iter().all(|v| v.is_finite())
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    use super::{Lanes, NormChain, ROWS};
    use crate::ops::simd_transpose::transpose8;

    /// AVX2, FMA and F16C are present (the lanes need AVX and F16C; the target set is the
    /// executor's usual one).
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }

    /// [`NormChain::block`] in AVX lanes; false, with y untouched, when the block holds a NaN
    /// or an infinity (the caller then runs the scalar lanes).
    ///
    /// # Safety
    /// [`available`]; `tile.len() == 8·d`; x and y hold the same whole number (≤ 8) of rows
    /// of d; γ and β hold d values.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn block(
        chain: &NormChain,
        x: &[f32],
        gamma: Option<&[f32]>,
        beta: Option<&[f32]>,
        y: &mut [f32],
        tile: &mut [f32],
    ) -> bool {
        let d = chain.d;
        let rows = x.len() / d;
        // SAFETY (both calls): the lengths are this function's contract.
        unsafe { load(x, rows, d, tile) };
        if !chain.chain::<Avx>(tile, gamma, beta) {
            return false;
        }
        unsafe { store(tile, rows, d, y) };
        true
    }

    /// [`super::load_columns`] of all columns, whole 8×8 tiles transposed in registers.
    ///
    /// # Safety
    /// AVX; `x.len() == rows·d`, `rows ≤ 8`, `tile.len() == 8·d`.
    #[target_feature(enable = "avx")]
    unsafe fn load(x: &[f32], rows: usize, d: usize, tile: &mut [f32]) {
        let whole = if rows == ROWS { d / ROWS * ROWS } else { 0 };
        for j in (0..whole).step_by(ROWS) {
            // SAFETY: row k's columns j..j + 8 lie inside x (k < 8 = rows, j + 8 ≤ d); the
            // tile's columns j..j + 8 are tile[8j..8j + 64] ⊂ tile (j + 8 ≤ d).
            unsafe {
                let r = std::array::from_fn(|k| _mm256_loadu_ps(x.as_ptr().add(k * d + j)));
                for (i, c) in transpose8(r).into_iter().enumerate() {
                    _mm256_storeu_ps(tile.as_mut_ptr().add(ROWS * (j + i)), c);
                }
            }
        }
        super::load_columns(x, d, whole, tile);
    }

    /// [`super::store_columns`] of all columns, whole 8×8 tiles transposed in registers.
    ///
    /// # Safety
    /// AVX; `y.len() == rows·d`, `rows ≤ 8`, `tile.len() == 8·d`.
    #[target_feature(enable = "avx")]
    unsafe fn store(tile: &[f32], rows: usize, d: usize, y: &mut [f32]) {
        let whole = if rows == ROWS { d / ROWS * ROWS } else { 0 };
        for j in (0..whole).step_by(ROWS) {
            // SAFETY: as in `load`, with the roles of x and the tile exchanged.
            unsafe {
                let c = std::array::from_fn(|i| _mm256_loadu_ps(tile.as_ptr().add(ROWS * (j + i))));
                for (k, r) in transpose8(c).into_iter().enumerate() {
                    _mm256_storeu_ps(y.as_mut_ptr().add(k * d + j), r);
                }
            }
        }
        super::store_columns(tile, d, whole, y);
    }

    /// Eight f32 lanes in one AVX register; used only inside [`block`] (AVX2, FMA, F16C).
    #[derive(Clone, Copy)]
    struct Avx(__m256);

    // SAFETY (every method): inlined into `block`, whose target features cover the
    // intrinsics; loads and stores touch the first 8 values of a slice checked to hold 8.
    impl Lanes for Avx {
        const DECLINES_NON_FINITE: bool = true;
        #[inline(always)]
        fn splat(v: f32) -> Self {
            Avx(unsafe { _mm256_set1_ps(v) })
        }
        #[inline(always)]
        fn load(c: &[f32]) -> Self {
            assert!(c.len() >= ROWS);
            Avx(unsafe { _mm256_loadu_ps(c.as_ptr()) })
        }
        #[inline(always)]
        fn store(self, c: &mut [f32]) {
            assert!(c.len() >= ROWS);
            unsafe { _mm256_storeu_ps(c.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        fn add(self, b: Self) -> Self {
            Avx(unsafe { _mm256_add_ps(self.0, b.0) })
        }
        #[inline(always)]
        fn sub(self, b: Self) -> Self {
            Avx(unsafe { _mm256_sub_ps(self.0, b.0) })
        }
        #[inline(always)]
        fn mul(self, b: Self) -> Self {
            Avx(unsafe { _mm256_mul_ps(self.0, b.0) })
        }
        #[inline(always)]
        fn div(self, b: Self) -> Self {
            Avx(unsafe { _mm256_div_ps(self.0, b.0) })
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            Avx(unsafe { _mm256_sqrt_ps(self.0) })
        }
        #[inline(always)]
        fn abs(self) -> Self {
            Avx(unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), self.0) })
        }
        /// NaN lanes differ from f32::max, but a block with a NaN is redone in scalar lanes.
        #[inline(always)]
        fn max_of(self, v: Self) -> Self {
            Avx(unsafe { _mm256_max_ps(v.0, self.0) })
        }
        #[inline(always)]
        fn round(self) -> Self {
            Avx(unsafe { _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self.0)) })
        }
        #[inline(always)]
        fn finite(self) -> bool {
            // |v| < inf is false for inf and NaN.
            unsafe {
                let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(self.abs().0, _mm256_set1_ps(f32::INFINITY));
                _mm256_movemask_ps(lt) == 0xff
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chain written op by op in f32 with fp16 rounding after each op (the reference
    /// kernels' formulas), one row at a time.
    fn per_op(c: &NormChain, x: &[f32], gamma: Option<&[f32]>, beta: Option<&[f32]>) -> Vec<f32> {
        let r = round1;
        let mean = |v: &[f32]| r(v.iter().fold(0.0f32, |a, &b| a + b) / c.d as f32);
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks_exact(c.d) {
            let mut v: Vec<f32> = row.to_vec();
            if c.centre {
                if let Some(k) = c.scale {
                    v.iter_mut().for_each(|h| *h = r(*h * k));
                }
                for _ in 0..2 {
                    let m = mean(&v);
                    v.iter_mut().for_each(|h| *h = r(*h - m));
                }
            }
            let mx = v
                .iter()
                .map(|a| r(a.abs()))
                .fold(f32::NEG_INFINITY, f32::max);
            let s = r(mx.max(c.floor));
            let u: Vec<f32> = v.iter().map(|a| r(a / s)).collect();
            let sq: Vec<f32> = u.iter().map(|a| r(a * a)).collect();
            let rs = r(c.rho / s);
            let t = r(mean(&sq) + r(rs * rs));
            let q = r(1.0 / (t + c.eps).sqrt());
            for (j, &a) in u.iter().enumerate() {
                let mut o = r(a * q);
                if let Some(g) = gamma {
                    o = r(o * g[j]);
                }
                if let Some(b) = beta {
                    o = r(o + b[j]);
                }
                out.push(o);
            }
        }
        out
    }

    /// fp16 values from a seed: mostly moderate, some large (near the fp16 limit) and tiny.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let u = (s >> 11) as f32 / (1u64 << 53) as f32 - 0.5;
                let scale = match i % 37 {
                    0 => 60000.0,
                    1 => 1e-6,
                    _ => 8.0,
                };
                round1(u * 2.0 * scale)
            })
            .collect()
    }

    fn layer(d: usize) -> NormChain {
        NormChain {
            d,
            scale: Some(0.5),
            centre: true,
            floor: round1(4.7e-7),
            rho: round1(4.7e-7),
            eps: 0.0,
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Layer norm and RMS norm chains, with and without γ/β, on row counts that leave short
    /// blocks and widths that leave partial 8×8 tiles, equal the op-by-op bits, including
    /// rows holding an infinity or a NaN (the scalar lanes) and large blocks on the pool.
    #[test]
    fn chain_matches_the_ops_one_by_one_bit_for_bit() {
        let rms = |d| NormChain {
            d,
            scale: None,
            centre: false,
            floor: round1(1e-3),
            rho: round1(1e-3),
            eps: 0.0,
        };
        let centred_unscaled = |d| NormChain {
            scale: None,
            ..layer(d)
        };
        for (rows, d) in [
            (1, 1),
            (3, 7),
            (8, 8),
            (9, 13),
            (16, 384),
            (130, 384),
            (5, 100),
        ] {
            for (ci, chain) in [layer(d), rms(d), centred_unscaled(d)]
                .into_iter()
                .enumerate()
            {
                let mut x = values(rows * d, (rows * 31 + d + ci) as u64);
                if rows > 8 {
                    x[3 * d + 1] = f32::INFINITY;
                    x[9 * d - 1] = f32::NAN;
                }
                let g = values(d, 7);
                let b = values(d, 8);
                for (gamma, beta) in [
                    (None, None),
                    (Some(&g[..]), None),
                    (Some(&g[..]), Some(&b[..])),
                ] {
                    let mut y = vec![0.0; x.len()];
                    chain.run(&x, gamma, beta, &mut y);
                    let want = per_op(&chain, &x, gamma, beta);
                    assert_eq!(bits(&y), bits(&want), "rows {rows} d {d} chain {ci}");
                }
            }
        }
    }

    /// Constant rows (every deviation 0) normalise to exactly 0, not NaN.
    #[test]
    fn constant_rows_give_zero() {
        let chain = layer(24);
        let x = vec![3.5f32; 24 * 8];
        let mut y = vec![1.0; x.len()];
        chain.run(&x, None, None, &mut y);
        assert!(y.iter().all(|&v| v == 0.0), "{y:?}");
    }
}
