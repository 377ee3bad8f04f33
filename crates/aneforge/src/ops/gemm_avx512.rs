//! The AVX-512F microkernel of the packed GEMM (`gemm_packed`) on CPUs with AVX-512: one tile
//! of up to [`MR`] rows × one or two [`NR`]-column panels of C over one depth block, in the
//! `gemm` crate's per-element order (`gemm_order`): a fused multiply-add chain from +0 in
//! increasing depth, then C = acc (first depth block) or C = C + acc. Sixteen accumulators of
//! 16 lanes, each depth step one load per panel and one broadcast of A per row; columns past
//! C's last are masked (the panels' zero padding is read, never stored).

use super::gemm_avx2::NR;

/// Rows of C per tile (broadcast operand A, read in place).
pub const MR: usize = 8;

/// Most panels (NR columns each) one tile covers.
pub const PANELS: usize = 2;

/// Whether this kernel runs on this CPU (AVX-512F).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The tile of C (m×n) at row `i0` and panels `jb`, `jb + 1` (the second when C has columns
/// there) over depth rows p0..p0 + kb: A and C given whole as (pointer, row stride), B as panel
/// jb's depth row p0 and the distance between panels (k·NR); the first depth block overwrites
/// C unless `accumulate`. Returns the number of panels the tile covered (1 or 2).
///
/// # Safety
/// [`available`]; rows i0..i0 + min(MR, m − i0) of A hold kb values from column p0, each
/// covered panel holds NR values at each of its kb depth rows, every C element of the tile is
/// writable and accessed by no one else meanwhile.
pub unsafe fn tile_at(
    (p0, kb): (usize, usize),
    (i0, jb): (usize, usize),
    (m, n): (usize, usize),
    (a, a_rs): (*const f32, usize),
    (b, panel_stride): (*const f32, usize),
    (c, c_rs): (*mut f32, usize),
    accumulate: bool,
) -> usize {
    let (rows, cols) = (MR.min(m - i0), (PANELS * NR).min(n - jb * NR));
    let overwrite = p0 == 0 && !accumulate;
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kb, a, a_rs, b, panel_stride, c, c_rs, rows, overwrite);
        unreachable!("the AVX-512 GEMM tile runs on x86_64 only");
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller's contract, offset to the tile.
        unsafe {
            let (a, c) = (a.add(i0 * a_rs + p0), c.add(i0 * c_rs + jb * NR));
            let tile = Tile {
                kb,
                a: (a, a_rs),
                c: (c, c_rs),
                rows,
                cols,
                overwrite,
            };
            if cols > NR {
                x86::tile::<2>(tile, [b, b.add(panel_stride)]);
            } else {
                x86::tile::<1>(tile, [b]);
            }
        }
        cols.div_ceil(NR)
    }
}

/// One tile's operands: depth, A and C at the tile's first row (pointer, row stride), its rows
/// (≤ MR) and columns (≤ NR per panel), and whether it stores the sum or adds it to C.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Tile {
    kb: usize,
    a: (*const f32, usize),
    c: (*mut f32, usize),
    rows: usize,
    cols: usize,
    overwrite: bool,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Tile, MR, NR};

    /// The tile over `H` panels whose depth rows start at `b[h]` (NR values per row).
    ///
    /// # Safety
    /// As [`super::tile_at`] for this tile.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile<const H: usize>(t: Tile, b: [*const f32; H]) {
        let ((a, a_rs), (c, c_rs), rows) = (t.a, t.c, t.rows);
        // Rows past the edge re-read the last row; their sums are not stored.
        // SAFETY: row r.min(rows − 1) < rows of A is readable (the caller's contract).
        let ar: [*const f32; MR] =
            std::array::from_fn(|r| unsafe { a.add(r.min(rows - 1) * a_rs) });
        let mut acc = [[_mm512_setzero_ps(); H]; MR];
        for p in 0..t.kb {
            // SAFETY: p < kb: NR values of each panel's depth row p and A's column p of every
            // row read are inside the operands (the caller's contract); unaligned loads.
            unsafe {
                let bv: [__m512; H] = std::array::from_fn(|h| _mm512_loadu_ps(b[h].add(p * NR)));
                for (acc, ar) in acc.iter_mut().zip(&ar) {
                    let x = _mm512_set1_ps(*ar.add(p));
                    for (acc, &bv) in acc.iter_mut().zip(&bv) {
                        *acc = _mm512_fmadd_ps(x, bv, *acc);
                    }
                }
            }
        }
        let masks: [__mmask16; H] = std::array::from_fn(|h| {
            let left = t.cols.saturating_sub(h * NR).min(NR);
            ((1u32 << left) - 1) as __mmask16
        });
        for (r, acc) in acc.iter().enumerate().take(rows) {
            for (h, (&v, &k)) in acc.iter().zip(&masks).enumerate() {
                // SAFETY: row r < rows and the masked columns < cols of the tile are C
                // elements the caller gave us alone; masked lanes are neither read nor written.
                unsafe {
                    let d = c.add(r * c_rs + h * NR);
                    let v = match t.overwrite {
                        true => v,
                        false => _mm512_add_ps(_mm512_maskz_loadu_ps(k, d), v),
                    };
                    _mm512_mask_storeu_ps(d, k, v);
                }
            }
        }
    }
}
