//! Row copies for the depthwise conv's padded scratch plane (`conv_depthwise`): many short
//! rows (7 to 112 values) between buffers with different row strides, in whole-vector moves
//! without a `memcpy` call per row, and the even / odd column split of a plane for stride 2.
//! Pure copies: every value keeps its bits.

/// dst row r (at r·`dst_step`) = src row r (at r·`src_step`), `n` values each, for r < `rows`.
/// Panics when a row would pass the end of either buffer.
pub(super) fn copy_rows(
    src: &[f32],
    src_step: usize,
    dst: &mut [f32],
    dst_step: usize,
    [rows, n]: [usize; 2],
) {
    if rows == 0 || n == 0 {
        return;
    }
    assert!(
        (rows - 1) * src_step + n <= src.len() && (rows - 1) * dst_step + n <= dst.len(),
        "copy_rows: a row passes the end of its buffer"
    );
    let (src, dst) = (src.as_ptr(), dst.as_mut_ptr());
    for r in 0..rows {
        // SAFETY: r·step + n ≤ (rows − 1)·step + n ≤ len for both buffers, checked above.
        unsafe { copy_row(src.add(r * src_step), dst.add(r * dst_step), n) };
    }
}

/// `n` values from `src` to `dst`: 8-value moves, the last one overlapping the one before
/// (4-value moves below 8 values, single values below 4).
///
/// # Safety
/// `src` readable and `dst` writable for `n` values; the two do not overlap.
#[inline(always)]
unsafe fn copy_row(src: *const f32, dst: *mut f32, n: usize) {
    let move4 = |i: usize| {
        let v = src.add(i).cast::<[f32; 4]>().read_unaligned();
        dst.add(i).cast::<[f32; 4]>().write_unaligned(v);
    };
    let move8 = |i: usize| {
        let v = src.add(i).cast::<[f32; 8]>().read_unaligned();
        dst.add(i).cast::<[f32; 8]>().write_unaligned(v);
    };
    match n {
        0..=3 => (0..n).for_each(|i| *dst.add(i) = *src.add(i)),
        4..=7 => {
            move4(0);
            move4(n - 4);
        }
        _ => {
            let mut i = 0;
            while i + 8 <= n {
                move8(i);
                i += 8;
            }
            if i < n {
                move8(n - 8);
            }
        }
    }
}

/// `out[..len/2]` = the values of `src` at even indices, `out[len/2..]` those at odd ones, in
/// order (len = src.len() = out.len(), even): a plane of even width split into its even and
/// odd columns, each a plane of half the width. Panics on other lengths.
pub(super) fn split_pairs(src: &[f32], out: &mut [f32]) {
    assert!(
        src.len() == out.len() && src.len().is_multiple_of(2),
        "split_pairs: lengths"
    );
    let half = src.len() / 2;
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the feature the function is compiled for was just detected.
        done = unsafe { x86::split_pairs(src, out) };
    }
    let (evens, odds) = out.split_at_mut(half);
    for j in done..half {
        evens[j] = src[2 * j];
        odds[j] = src[2 * j + 1];
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The first 8·⌊len/16⌋ pairs of [`super::split_pairs`] (two loads, two shuffles, two
    /// lane permutes per 8 pairs); returns how many pairs it split.
    ///
    /// # Safety
    /// The CPU has AVX2; src.len() = out.len() (even), as `super::split_pairs` checks.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn split_pairs(src: &[f32], out: &mut [f32]) -> usize {
        let half = src.len() / 2;
        let blocks = half / 8;
        let (s, evens) = (src.as_ptr(), out.as_mut_ptr());
        let odds = evens.add(half);
        for j in 0..blocks {
            // In bounds: 16·j + 16 ≤ src.len(), 8·j + 8 ≤ half for both halves of out.
            let (a, b) = (
                _mm256_loadu_ps(s.add(16 * j)),
                _mm256_loadu_ps(s.add(16 * j + 8)),
            );
            // Per 128-bit lane (a0 a2 b0 b2 | a4 a6 b4 b6), then 64-bit pairs in order 0, 2, 1, 3.
            let order = |v: __m256| {
                _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0b11_01_10_00))
            };
            let even = order(_mm256_shuffle_ps(a, b, 0b10_00_10_00));
            let odd = order(_mm256_shuffle_ps(a, b, 0b11_01_11_01));
            _mm256_storeu_ps(evens.add(8 * j), even);
            _mm256_storeu_ps(odds.add(8 * j), odd);
        }
        8 * blocks
    }
}

#[cfg(test)]
mod tests {
    use super::{copy_rows, split_pairs};

    /// Every row length 0–40 (single values, 4- and 8-value moves, overlapping last moves),
    /// 1–4 rows, strides wider than the rows: the copied values land where a plain loop puts
    /// them and nothing else in the destination changes.
    #[test]
    fn rows_land_where_a_plain_copy_puts_them() {
        let src: Vec<f32> = (0..400).map(|i| i as f32 + 0.5).collect();
        for n in 0..=40 {
            for rows in 1..=4 {
                let (src_step, dst_step) = (n + 3, n + 7);
                let mut got = vec![-1.0f32; 4 * dst_step + 8];
                let mut want = got.clone();
                copy_rows(&src[5..], src_step, &mut got, dst_step, [rows, n]);
                for r in 0..rows {
                    for i in 0..n {
                        want[r * dst_step + i] = src[5 + r * src_step + i];
                    }
                }
                assert_eq!(got, want, "n {n} rows {rows}");
            }
        }
    }

    /// A row that would pass the end of the source panics.
    #[test]
    #[should_panic(expected = "passes the end")]
    fn a_row_past_the_source_panics() {
        let mut dst = vec![0f32; 64];
        copy_rows(&[0f32; 20], 10, &mut dst, 20, [2, 11]);
    }

    /// Even and odd values land in their halves in order, bits kept (NaN payloads, −0), for
    /// lengths below, at and past the 16-value vector blocks.
    #[test]
    fn pairs_split_into_even_and_odd_halves() {
        for len in (0..=70).step_by(2) {
            let src: Vec<f32> = (0..len)
                .map(|i| match i % 7 {
                    0 => f32::from_bits(0x7fc0_0001 + i as u32),
                    3 => -0.0,
                    _ => i as f32 * 1.25,
                })
                .collect();
            let mut out = vec![0f32; len];
            split_pairs(&src, &mut out);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let evens: Vec<f32> = src.iter().step_by(2).copied().collect();
            let odds: Vec<f32> = src.iter().skip(1).step_by(2).copied().collect();
            assert_eq!(bits(&out[..len / 2]), bits(&evens), "len {len}");
            assert_eq!(bits(&out[len / 2..]), bits(&odds), "len {len}");
        }
    }
}
