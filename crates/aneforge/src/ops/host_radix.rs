//! Order-preserving 16-bit keys of fp16 values (held as f32) and their LSD radix sort: the
//! passes behind the values-only `sort` and `topk` (`host_select`).
//!
//! The key of fp16 bits `b` is an unsigned 16-bit number whose order is the value order: NaN
//! (any payload) canonical and above every number, −0 the key of +0; a descending key is the
//! complement. [`lane_keys`] maps a lane of f32 to keys in one pass and reports whether every
//! value is exactly an fp16 number and whether any is −0 or NaN (whose bits the key drops);
//! [`key_values`] maps sorted keys back to f32. Both run 8 lanes a step with AVX2 + F16C when
//! the CPU has them, else a scalar loop giving the same keys and bits.

use half::f16;

/// Order-preserving 16-bit key of fp16 `bits` (NaN canonical and above every number, −0 as
/// +0; descending flips it).
pub fn key(bits: u16, descending: bool) -> u16 {
    let bits = if bits & 0x7FFF > 0x7C00 {
        0x7E00
    } else if bits == 0x8000 {
        0
    } else {
        bits
    };
    let k = bits ^ ((((bits as i16) >> 15) as u16) | 0x8000);
    if descending {
        !k
    } else {
        k
    }
}

/// The fp16 bits of key `k` (the inverse of [`key`] on canonical bits).
pub fn key_bits(k: u16, descending: bool) -> u16 {
    let k = if descending { !k } else { k };
    if k & 0x8000 != 0 {
        k ^ 0x8000
    } else {
        !k
    }
}

/// What [`lane_keys`] saw in a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneScan {
    /// Every value is exactly an fp16 number (NaN included): the keys are the lane's order.
    pub exact: bool,
    /// Some value is −0 or NaN (its key stands for +0 or the canonical NaN).
    pub special: bool,
}

/// The key of each value of `lane` (rounded to fp16) into `keys` (same length), and what the
/// lane holds.
pub fn lane_keys(lane: &[f32], descending: bool, keys: &mut [u16]) -> LaneScan {
    assert_eq!(lane.len(), keys.len(), "lane_keys: one key per value");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: the features the function is compiled for were just detected.
        return unsafe { lane_keys_avx2(lane, descending, keys) };
    }
    lane_keys_scalar(lane, descending, keys, 0)
}

/// [`lane_keys`] from element `from` on, one value at a time (`from` elements already done
/// count as exact and not special).
fn lane_keys_scalar(lane: &[f32], descending: bool, keys: &mut [u16], from: usize) -> LaneScan {
    let mut scan = LaneScan {
        exact: true,
        special: false,
    };
    for (k, &v) in keys[from..].iter_mut().zip(&lane[from..]) {
        let h = f16::from_f32(v);
        scan.exact &= h.to_f32() == v || v.is_nan();
        let b = h.to_bits();
        scan.special |= b == 0x8000 || b & 0x7FFF > 0x7C00;
        *k = key(b, descending);
    }
    scan
}

/// [`lane_keys`] 8 values a step: `vcvtps2ph` (round to nearest even) and back to test
/// exactness, the key formed on the 16-bit lanes; the tail by [`lane_keys_scalar`].
///
/// # Safety
/// The CPU has AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn lane_keys_avx2(lane: &[f32], descending: bool, keys: &mut [u16]) -> LaneScan {
    use std::arch::x86_64::*;
    let flip = _mm_set1_epi16(if descending { -1 } else { 0 });
    let (abs, inf, nan_key) = (
        _mm_set1_epi16(0x7FFF),
        _mm_set1_epi16(0x7C00),
        _mm_set1_epi16(0x7E00),
    );
    let sign = _mm_set1_epi16(i16::MIN);
    let (mut inexact, mut special) = (_mm256_setzero_ps(), _mm_setzero_si128());
    let body = lane.len() / 8 * 8;
    for i in (0..body).step_by(8) {
        let x = _mm256_loadu_ps(lane.as_ptr().add(i));
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
        // Unequal and ordered: a number that fp16 does not hold (NaN compares false).
        inexact = _mm256_or_ps(inexact, _mm256_cmp_ps::<_CMP_NEQ_OQ>(_mm256_cvtph_ps(h), x));
        let nan = _mm_cmpgt_epi16(_mm_and_si128(h, abs), inf);
        let neg_zero = _mm_cmpeq_epi16(h, sign);
        special = _mm_or_si128(special, _mm_or_si128(nan, neg_zero));
        let canon = _mm_blendv_epi8(_mm_andnot_si128(neg_zero, h), nan_key, nan);
        let k = _mm_xor_si128(canon, _mm_or_si128(_mm_srai_epi16::<15>(canon), sign));
        _mm_storeu_si128(
            keys.as_mut_ptr().add(i) as *mut __m128i,
            _mm_xor_si128(k, flip),
        );
    }
    let tail = lane_keys_scalar(lane, descending, keys, body);
    LaneScan {
        exact: tail.exact && _mm256_movemask_ps(inexact) == 0,
        special: tail.special || _mm_movemask_epi8(special) != 0,
    }
}

/// The f32 values of `keys` (fp16 numbers; NaN keys give the canonical NaN) into `out`.
pub fn key_values(keys: &[u16], descending: bool, out: &mut [f32]) {
    assert_eq!(keys.len(), out.len(), "key_values: one value per key");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: the features the function is compiled for were just detected.
        unsafe { key_values_avx2(keys, descending, out) };
        return;
    }
    key_values_scalar(keys, descending, out);
}

/// [`key_values`] one key at a time.
fn key_values_scalar(keys: &[u16], descending: bool, out: &mut [f32]) {
    for (o, &k) in out.iter_mut().zip(keys) {
        *o = f16::from_bits(key_bits(k, descending)).to_f32();
    }
}

/// [`key_values`] 8 keys a step (the bits formed on 16-bit lanes, widened by `vcvtph2ps`);
/// the tail by [`key_values_scalar`].
///
/// # Safety
/// The CPU has AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn key_values_avx2(keys: &[u16], descending: bool, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let flip = _mm_set1_epi16(if descending { -1 } else { 0 });
    let (ones, sign) = (_mm_set1_epi16(-1), _mm_set1_epi16(i16::MIN));
    let body = keys.len() / 8 * 8;
    for i in (0..body).step_by(8) {
        let k = _mm_xor_si128(
            _mm_loadu_si128(keys.as_ptr().add(i) as *const __m128i),
            flip,
        );
        // Top bit set: k ^ 0x8000; clear: !k.
        let low = _mm_xor_si128(_mm_srai_epi16::<15>(k), ones);
        let bits = _mm_xor_si128(k, _mm_or_si128(low, sign));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_cvtph_ps(bits));
    }
    key_values_scalar(&keys[body..], descending, &mut out[body..]);
}

/// Append to `words` the packed word `key << 16 | position` of every key of `keys` at most
/// `bound`, in position order (`keys` at most 2^16 long).
pub fn keys_at_most(keys: &[u16], bound: u16, words: &mut Vec<u32>) {
    assert!(keys.len() <= 1 << 16, "keys_at_most: positions fit 16 bits");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { keys_at_most_avx2(keys, bound, words) };
        return;
    }
    keys_at_most_scalar(keys, bound, 0, words);
}

/// [`keys_at_most`] from position `from` on, one key at a time.
fn keys_at_most_scalar(keys: &[u16], bound: u16, from: usize, words: &mut Vec<u32>) {
    for (j, &k) in keys.iter().enumerate().skip(from) {
        if k <= bound {
            words.push((k as u32) << 16 | j as u32);
        }
    }
}

/// [`keys_at_most`] 16 keys a step (`max(k, bound) == bound` on 16-bit lanes; a block with no
/// hit costs one compare); the tail by [`keys_at_most_scalar`].
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn keys_at_most_avx2(keys: &[u16], bound: u16, words: &mut Vec<u32>) {
    use std::arch::x86_64::*;
    let b = _mm256_set1_epi16(bound as i16);
    let body = keys.len() / 16 * 16;
    for i in (0..body).step_by(16) {
        let k = _mm256_loadu_si256(keys.as_ptr().add(i) as *const __m256i);
        let hit = _mm256_cmpeq_epi16(_mm256_max_epu16(k, b), b);
        // Two mask bits per 16-bit lane: keep the even ones.
        let mut m = (_mm256_movemask_epi8(hit) as u32) & 0x5555_5555;
        while m != 0 {
            let j = i + m.trailing_zeros() as usize / 2;
            words.push((keys[j] as u32) << 16 | j as u32);
            m &= m - 1;
        }
    }
    keys_at_most_scalar(keys, bound, body, words);
}

/// Stable LSD radix sort of `items` by the 16-bit `key` of each, two byte passes through
/// `scratch` (a pass whose byte is the same everywhere is skipped).
pub fn radix_sort_by<T: Copy + Default>(
    items: &mut Vec<T>,
    scratch: &mut Vec<T>,
    key: impl Fn(T) -> u16,
) {
    let mut counts = [[0u32; 256]; 2];
    for &item in items.iter() {
        let k = key(item);
        counts[0][(k & 0xFF) as usize] += 1;
        counts[1][(k >> 8) as usize] += 1;
    }
    for (pass, count) in counts.iter_mut().enumerate() {
        if count.contains(&(items.len() as u32)) {
            continue;
        }
        let mut at = 0;
        for c in count.iter_mut() {
            let here = *c;
            *c = at;
            at += here;
        }
        scratch.clear();
        scratch.resize(items.len(), T::default());
        let shift = 8 * pass;
        for &item in items.iter() {
            let slot = &mut count[(key(item) >> shift & 0xFF) as usize];
            scratch[*slot as usize] = item;
            *slot += 1;
        }
        std::mem::swap(items, scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fp16 bit pattern, as f32, in a lane whose length leaves a scalar tail.
    fn every_fp16() -> Vec<f32> {
        (0..=u16::MAX)
            .chain([0x3C00, 0x8000, 0x7E01])
            .map(|b| f16::from_bits(b).to_f32())
            .collect()
    }

    #[test]
    fn keys_of_every_fp16_pattern_match_the_scalar_map_and_order_values_in_both_directions() {
        let lane = every_fp16();
        for desc in [false, true] {
            let mut keys = vec![0u16; lane.len()];
            let scan = lane_keys(&lane, desc, &mut keys);
            assert_eq!(
                scan,
                LaneScan {
                    exact: true,
                    special: true
                }
            );
            for (&v, &k) in lane.iter().zip(&keys) {
                assert_eq!(k, key(f16::from_f32(v).to_bits(), desc), "{v}");
            }
            // Key order is value order (f64 oracle; NaN above all, −0 == +0).
            let rank = |v: f32| if v.is_nan() { f64::INFINITY } else { v as f64 };
            for (a, b) in [
                (0usize, 1usize),
                (100, 31_000),
                (40_000, 64_000),
                (3, 65_535),
            ]
            .into_iter()
            .chain((0..lane.len() - 1).map(|i| (i, i + 1)))
            {
                let (va, vb) = (rank(lane[a]), rank(lane[b]));
                let by_value = if va.is_infinite() && vb.is_infinite() && va == vb {
                    lane[a].is_nan().cmp(&lane[b].is_nan())
                } else {
                    va.partial_cmp(&vb).unwrap()
                };
                let want = if desc { by_value.reverse() } else { by_value };
                if lane[a].is_nan() && lane[b].is_nan() {
                    assert_eq!(keys[a], keys[b]);
                } else {
                    assert_eq!(keys[a].cmp(&keys[b]), want, "{} vs {}", lane[a], lane[b]);
                }
            }
            let mut back = vec![0.0f32; lane.len()];
            key_values(&keys, desc, &mut back);
            for (&v, &b) in lane.iter().zip(&back) {
                if v.is_nan() {
                    assert!(b.is_nan());
                } else {
                    // −0 comes back as +0 (its key is +0's); every other value bit for bit.
                    let want = if v == 0.0 { 0.0f32 } else { v };
                    assert_eq!(b.to_bits(), want.to_bits(), "{v}");
                }
            }
        }
    }

    #[test]
    fn scan_reports_inexact_values_and_specials_in_the_simd_body_and_the_tail() {
        for n in [1usize, 7, 8, 9, 16, 17, 40] {
            for at in [0, n / 2, n - 1] {
                let mut lane: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
                let mut keys = vec![0u16; n];
                let plain = lane_keys(&lane, false, &mut keys);
                assert_eq!((plain.exact, plain.special), (true, false));
                for (v, exact, special) in [
                    (1.0001f32, false, false),
                    (70_000.0, false, false),
                    (1e-10, false, false),
                    (-0.0, true, true),
                    (f32::NAN, true, true),
                    (f32::INFINITY, true, false),
                ] {
                    let old = lane[at];
                    lane[at] = v;
                    let s = lane_keys(&lane, true, &mut keys);
                    assert_eq!(
                        (s.exact, s.special),
                        (exact, special),
                        "n={n} at={at} v={v}"
                    );
                    lane[at] = old;
                }
            }
        }
    }

    #[test]
    fn keys_at_most_lists_every_hit_in_position_order_in_the_body_and_the_tail() {
        let mut g = crate::ops::host_sample::SplitMix64::new(5);
        for n in [0usize, 1, 15, 16, 17, 100, 1000] {
            let keys: Vec<u16> = (0..n).map(|_| (g.next_u64() % 40) as u16 * 1600).collect();
            for bound in [0u16, 1600, 30_000, u16::MAX] {
                let mut got = vec![7];
                keys_at_most(&keys, bound, &mut got);
                let want: Vec<u32> = std::iter::once(7)
                    .chain(
                        (0..n)
                            .filter(|&j| keys[j] <= bound)
                            .map(|j| (keys[j] as u32) << 16 | j as u32),
                    )
                    .collect();
                assert_eq!(got, want, "n={n} bound={bound}");
            }
        }
    }

    #[test]
    fn radix_sort_is_stable_on_equal_keys() {
        let items: Vec<u32> = (0..1000u32).map(|i| (i * 7919 % 13) << 16 | i).collect();
        let (mut got, mut scratch) = (items.clone(), Vec::new());
        radix_sort_by(&mut got, &mut scratch, |w| (w >> 16) as u16);
        let mut want = items;
        want.sort_by_key(|w| w >> 16);
        assert_eq!(got, want);
    }
}
