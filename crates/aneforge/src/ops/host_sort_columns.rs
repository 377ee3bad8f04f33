//! Ascending sort of 16 lanes of 16-bit keys of one length at once, column-wise on AVX2: the
//! lanes are transposed so that one register ("wire") holds position `p` of all 16 lanes, and
//! a sorting network runs on the wires, each comparator one `min`/`max` pair over 16 lanes.
//! The network is a bitonic sort in standard form (every comparator puts the smaller key on the
//! lower wire), pruned to the length rounded up to 16: padding wires hold `0xFFFF`, at least
//! every key, so a comparator reaching past the last wire is a no-op and is skipped. Blocks of
//! 16 wires are sorted and merged at distances below 16 in registers; longer distances run
//! through memory. The values-only `sort` of batches of short lanes runs it (`host_select`);
//! any correct sort of the same keys gives the same keys, so it is bit-identical to the
//! one-lane paths.

/// Lanes sorted at once (lanes per register).
pub const ROWS: usize = 16;

/// One wire: position `p` of the 16 lanes, aligned for a register load.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, Default)]
pub struct Wire([u16; ROWS]);

/// Sort each of the 16 lanes of `keys` (lane `r` at `keys[r * n..(r + 1) * n]`) ascending in
/// place when the CPU has AVX2, through the wire buffer `wires`; false, keys untouched,
/// otherwise.
pub fn sort_lanes(keys: &mut [u16], n: usize, wires: &mut Vec<Wire>) -> bool {
    assert_eq!(keys.len(), ROWS * n, "sort_lanes: 16 lanes of n keys");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        wires.clear();
        wires.resize(n.next_multiple_of(ROWS), Wire::default());
        // SAFETY: the CPU has AVX2; `wires` holds `n` rounded up to 16.
        unsafe {
            transpose_in(keys, n, wires);
            network(wires);
            transpose_out(wires, n, keys);
        }
        return true;
    }
    let _ = wires;
    false
}

/// Compare-exchange of wires `$x[$a]` and `$x[$b]` for each listed pair (`$a < $b`): the
/// smaller key of each lane to `$a`.
#[cfg(target_arch = "x86_64")]
macro_rules! cx {
    ($x:ident; $($a:literal $b:literal),* $(,)?) => {$(
        let lo = _mm256_min_epu16($x[$a], $x[$b]);
        $x[$b] = _mm256_max_epu16($x[$a], $x[$b]);
        $x[$a] = lo;
    )*};
}

/// The 8×8 transposes of 16-bit elements inside each 128-bit half of `a[0..8]`: lane `c` of
/// half `h` of `a[r]` becomes lane `r` of half `h` of `out[c]`.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn transpose8x2(a: &[std::arch::x86_64::__m256i]) -> [std::arch::x86_64::__m256i; 8] {
    use std::arch::x86_64::*;
    let t = [
        _mm256_unpacklo_epi16(a[0], a[1]),
        _mm256_unpackhi_epi16(a[0], a[1]),
        _mm256_unpacklo_epi16(a[2], a[3]),
        _mm256_unpackhi_epi16(a[2], a[3]),
        _mm256_unpacklo_epi16(a[4], a[5]),
        _mm256_unpackhi_epi16(a[4], a[5]),
        _mm256_unpacklo_epi16(a[6], a[7]),
        _mm256_unpackhi_epi16(a[6], a[7]),
    ];
    let u = [
        _mm256_unpacklo_epi32(t[0], t[2]),
        _mm256_unpackhi_epi32(t[0], t[2]),
        _mm256_unpacklo_epi32(t[1], t[3]),
        _mm256_unpackhi_epi32(t[1], t[3]),
        _mm256_unpacklo_epi32(t[4], t[6]),
        _mm256_unpackhi_epi32(t[4], t[6]),
        _mm256_unpacklo_epi32(t[5], t[7]),
        _mm256_unpackhi_epi32(t[5], t[7]),
    ];
    [
        _mm256_unpacklo_epi64(u[0], u[4]),
        _mm256_unpackhi_epi64(u[0], u[4]),
        _mm256_unpacklo_epi64(u[1], u[5]),
        _mm256_unpackhi_epi64(u[1], u[5]),
        _mm256_unpacklo_epi64(u[2], u[6]),
        _mm256_unpackhi_epi64(u[2], u[6]),
        _mm256_unpacklo_epi64(u[3], u[7]),
        _mm256_unpackhi_epi64(u[3], u[7]),
    ]
}

/// The 16×16 transpose of 16-bit elements held in `x`: lane `c` of `x[r]` becomes lane `r` of
/// `x[c]` (8×8 transposes inside the 128-bit halves, then the halves exchanged).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn transpose16(x: &mut [std::arch::x86_64::__m256i; 16]) {
    use std::arch::x86_64::*;
    let (top, bottom) = (transpose8x2(&x[..8]), transpose8x2(&x[8..]));
    for c in 0..8 {
        x[c] = _mm256_permute2x128_si256::<0x20>(top[c], bottom[c]);
        x[c + 8] = _mm256_permute2x128_si256::<0x31>(top[c], bottom[c]);
    }
}

/// The 16 rows of `keys` (rows `n` long) at columns `c..c + 16` into `tile`, past `n` the
/// padding `0xFFFF`.
#[cfg(target_arch = "x86_64")]
fn tile_of(keys: &[u16], n: usize, c: usize, tile: &mut [[u16; ROWS]; ROWS]) {
    let w = (n - c).min(ROWS);
    for (r, row) in tile.iter_mut().enumerate() {
        row[..w].copy_from_slice(&keys[r * n + c..r * n + c + w]);
        row[w..].fill(0xFFFF);
    }
}

/// Lanes of `keys` (`n` long) into wires: wire `p` lane `r` = `keys[r * n + p]`; the padding
/// wires `0xFFFF`.
///
/// # Safety
/// The CPU has AVX2; `wires` holds `n` rounded up to 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_in(keys: &[u16], n: usize, wires: &mut [Wire]) {
    use std::arch::x86_64::*;
    let mut tile = [[0u16; ROWS]; ROWS];
    let mut x = [_mm256_setzero_si256(); ROWS];
    for c in (0..wires.len()).step_by(ROWS) {
        tile_of(keys, n, c, &mut tile);
        for (v, row) in x.iter_mut().zip(&tile) {
            *v = _mm256_loadu_si256(row.as_ptr() as *const __m256i);
        }
        transpose16(&mut x);
        store_block(&mut wires[c..c + ROWS], &x);
    }
}

/// Wires back into lanes: `keys[r * n + p]` = wire `p` lane `r` (the padding dropped).
///
/// # Safety
/// The CPU has AVX2; `wires` holds `n` rounded up to 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_out(wires: &[Wire], n: usize, keys: &mut [u16]) {
    use std::arch::x86_64::*;
    let mut tile = [[0u16; ROWS]; ROWS];
    for c in (0..wires.len()).step_by(ROWS) {
        let mut x = load_block(&wires[c..c + ROWS]);
        transpose16(&mut x);
        for (row, v) in tile.iter_mut().zip(x) {
            _mm256_storeu_si256(row.as_mut_ptr() as *mut __m256i, v);
        }
        let w = (n - c).min(ROWS);
        for (r, row) in tile.iter().enumerate() {
            keys[r * n + c..r * n + c + w].copy_from_slice(&row[..w]);
        }
    }
}

/// The 16 wires of `block` in registers.
///
/// # Safety
/// The CPU has AVX2; `block` holds 16 wires.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load_block(block: &[Wire]) -> [std::arch::x86_64::__m256i; ROWS] {
    use std::arch::x86_64::*;
    let mut x = [_mm256_setzero_si256(); ROWS];
    for (v, w) in x.iter_mut().zip(&block[..ROWS]) {
        *v = _mm256_load_si256(w.0.as_ptr() as *const __m256i);
    }
    x
}

/// Registers `x` into the 16 wires of `block`.
///
/// # Safety
/// The CPU has AVX2; `block` holds 16 wires.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn store_block(block: &mut [Wire], x: &[std::arch::x86_64::__m256i; ROWS]) {
    use std::arch::x86_64::*;
    for (w, v) in block[..ROWS].iter_mut().zip(x) {
        _mm256_store_si256(w.0.as_mut_ptr() as *mut __m256i, *v);
    }
}

/// Every block of 16 wires sorted in registers (Batcher's odd–even merge sort, 63
/// comparators) when `SORT`, else its merge steps at distances 8, 4, 2, 1.
///
/// # Safety
/// The CPU has AVX2; `wires.len()` is a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn each_block<const SORT: bool>(wires: &mut [Wire]) {
    use std::arch::x86_64::*;
    for block in wires.chunks_exact_mut(ROWS) {
        let mut x = load_block(block);
        if SORT {
            cx!(x; 0 1, 2 3, 4 5, 6 7, 8 9, 10 11, 12 13, 14 15, 0 2, 1 3, 4 6, 5 7, 8 10,
                9 11, 12 14, 13 15, 1 2, 5 6, 9 10, 13 14, 0 4, 1 5, 2 6, 3 7, 8 12, 9 13,
                10 14, 11 15, 2 4, 3 5, 10 12, 11 13, 1 2, 3 4, 5 6, 9 10, 11 12, 13 14, 0 8,
                1 9, 2 10, 3 11, 4 12, 5 13, 6 14, 7 15, 4 8, 5 9, 6 10, 7 11, 2 4, 3 5, 6 8,
                7 9, 10 12, 11 13, 1 2, 3 4, 5 6, 7 8, 9 10, 11 12, 13 14);
        } else {
            cx!(x; 0 8, 1 9, 2 10, 3 11, 4 12, 5 13, 6 14, 7 15, 0 4, 1 5, 2 6, 3 7, 8 12,
                9 13, 10 14, 11 15, 0 2, 1 3, 4 6, 5 7, 8 10, 9 11, 12 14, 13 15, 0 1, 2 3,
                4 5, 6 7, 8 9, 10 11, 12 13, 14 15);
        }
        store_block(block, &x);
    }
}

/// Compare-exchange of the wire pointers `a < b` (in memory).
///
/// # Safety
/// The CPU has AVX2; both point into the wire buffer.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn exchange(a: *mut Wire, b: *mut Wire) {
    use std::arch::x86_64::*;
    let (pa, pb) = (a as *mut __m256i, b as *mut __m256i);
    let (x, y) = (_mm256_load_si256(pa), _mm256_load_si256(pb));
    _mm256_store_si256(pa, _mm256_min_epu16(x, y));
    _mm256_store_si256(pb, _mm256_max_epu16(x, y));
}

/// The pruned bitonic network over `wires` (a multiple of 16 long): each block of 16 sorted
/// in registers; then for every merge of two
/// sorted runs of `p >= 16` wires, its first step (wire `b + i` against `b + 2p - 1 - i`) and
/// its steps at distances `p / 2 .. 16` in memory, the distances 8, 4, 2, 1 in registers.
///
/// # Safety
/// The CPU has AVX2; `wires.len()` is a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn network(wires: &mut [Wire]) {
    each_block::<true>(wires);
    let mut p = ROWS;
    while p < wires.len() {
        merge_far(wires, p);
        each_block::<false>(wires);
        p *= 2;
    }
}

/// The in-memory steps of the merge of sorted runs of `p` wires: wire `b + i` against
/// `b + 2p - 1 - i`, then the distances `p / 2 .. 16` (pairs past the last wire skipped).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn merge_far(wires: &mut [Wire], p: usize) {
    let n = wires.len();
    let w = wires.as_mut_ptr();
    for b in (0..n).step_by(2 * p) {
        // Wire b + 2p − 1 − i is below n from i = b + 2p − n on.
        for i in (b + 2 * p).saturating_sub(n)..p {
            exchange(w.add(b + i), w.add(b + 2 * p - 1 - i));
        }
    }
    let mut d = p / 2;
    while d >= ROWS {
        for b in (0..n).step_by(2 * d) {
            for i in b..(b + d).min(n.saturating_sub(d)) {
                exchange(w.add(i), w.add(i + d));
            }
        }
        d /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each lane sorted by the standard library.
    fn plain(keys: &[u16], n: usize) -> Vec<u16> {
        let mut want = keys.to_vec();
        for lane in want.chunks_mut(n.max(1)) {
            lane.sort_unstable();
        }
        want
    }

    fn check(keys: Vec<u16>, n: usize) {
        let mut got = keys.clone();
        if sort_lanes(&mut got, n, &mut Vec::new()) {
            assert_eq!(got, plain(&keys, n), "n = {n}");
        } else {
            assert_eq!(got, keys, "untouched when the network does not apply");
        }
    }

    #[test]
    fn every_length_up_to_600_sorts_like_a_plain_sort() {
        let mut g = crate::ops::host_sample::SplitMix64::new(12);
        for n in 0..=600usize {
            // Few distinct keys (ties, 0xFFFF among them) on odd lengths, any key on even.
            let keys = (0..ROWS * n)
                .map(|_| match n % 2 {
                    1 => [0u16, 7, 0x8000, 0xFFFF][g.next_u64() as usize % 4],
                    _ => g.next_u64() as u16,
                })
                .collect();
            check(keys, n);
        }
    }

    proptest! {
        #[test]
        fn any_batch_sorts_like_a_plain_sort(
            n in 1usize..700,
            seed in any::<u64>(),
            spread in prop::sample::select(vec![2u64, 64, 1 << 16]),
        ) {
            let mut g = crate::ops::host_sample::SplitMix64::new(seed);
            let keys = (0..ROWS * n).map(|_| (g.next_u64() % spread) as u16).collect();
            check(keys, n);
        }
    }
}
