//! The one kernel behind `sort` / `argsort` and `topk` on fp16 values (held as f32).
//!
//! Each fp16 value maps to a 16-bit key whose unsigned order is the value order (NaN above
//! every number, −0 equal to +0); key and lane position pack into one `u32`
//! (`key << 16 | position`), so integer order is
//! "by value, ties by lower index" — stable. `sort` is a two-pass LSD radix sort on the key
//! bytes (a pass whose byte is the same everywhere is skipped); `topk` partitions the packed
//! words with `select_nth_unstable` and sorts the k survivors. A values-only sort (no
//! permutation) sorts the bare keys, by a bitonic network for short lanes
//! (`host_sort_network`). A lane holding a value that is not exactly an fp16 number (fp32
//! precision), or longer than 65536, takes a comparison sort with the same order.

use half::{f16, slice::HalfFloatSliceExt};

use super::host_sort_network::sort_keys;
use crate::error::{Error, Result};

/// Lanes shorter than this sort the packed words by comparison (the 2 × 256-bucket histograms
/// of the radix sort cost more there).
const RADIX_MIN: usize = 64;

/// Order-preserving 16-bit key of fp16 `bits` (NaN canonical and above every number, −0 as
/// +0; descending flips it).
fn key(bits: u16, descending: bool) -> u16 {
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
fn key_bits(k: u16, descending: bool) -> u16 {
    let k = if descending { !k } else { k };
    if k & 0x8000 != 0 {
        k ^ 0x8000
    } else {
        !k
    }
}

/// Stable LSD radix sort of `items` by the 16-bit `key` of each, two byte passes through
/// `scratch` (a pass whose byte is the same everywhere is skipped).
fn radix_sort_by<T: Copy + Default>(
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

/// Total order "by value (NaN last, −0 = +0), then by position", for the fallback path.
fn compare(a: (f32, u32), b: (f32, u32), descending: bool) -> std::cmp::Ordering {
    let canon = |v: f32| if v == 0.0 { 0.0 } else { v };
    let (x, y) = (canon(a.0), canon(b.0));
    let nan_last = |p: f32, q: f32| match (p.is_nan(), q.is_nan()) {
        (false, false) => p.total_cmp(&q),
        (m, n) => m.cmp(&n),
    };
    let by_value = if descending {
        nan_last(y, x)
    } else {
        nan_last(x, y)
    };
    by_value.then(a.1.cmp(&b.1))
}

/// Reusable buffers for ordering lanes.
#[derive(Default)]
struct Lanes {
    bits: Vec<f16>,
    back: Vec<f32>,
    words: Vec<u32>,
    scratch: Vec<u32>,
    order: Vec<u32>,
    keys: Vec<u16>,
    key_scratch: Vec<u16>,
}

impl Lanes {
    /// `lane` widened to fp16 bits in `self.bits`; whether every value is exactly an fp16
    /// number (NaN included).
    fn fp16_exact(&mut self, lane: &[f32]) -> bool {
        let n = lane.len();
        self.bits.resize(n, f16::ZERO);
        self.bits.convert_from_f32_slice(lane);
        self.back.resize(n, 0.0);
        self.bits.convert_to_f32_slice(&mut self.back);
        self.back
            .iter()
            .zip(lane)
            .all(|(b, v)| b == v || v.is_nan())
    }

    /// The sorted values of `lane` into `out` (same length; no permutation), bit for bit the
    /// values of the stable sort ([`Lanes::order`]): the fp16 keys sorted by the network
    /// (short lanes, `host_sort_network`) or a 16-bit radix sort, then the blocks of equal keys
    /// holding different bits (±0, NaN payloads) refilled with the lane's own values in position
    /// order; a stable comparison sort when a value is not an fp16 number.
    fn sorted_values(&mut self, lane: &[f32], descending: bool, out: &mut [f32]) {
        if !self.fp16_exact(lane) {
            out.copy_from_slice(lane);
            out.sort_by(|a, b| compare((*a, 0), (*b, 0), descending));
            return;
        }
        let special = self.bits.iter().fold(false, |acc, b| {
            let x = b.to_bits();
            acc | (x == 0x8000) | (x & 0x7FFF > 0x7C00)
        });
        self.keys.clear();
        self.keys
            .extend(self.bits.iter().map(|b| key(b.to_bits(), descending)));
        if !sort_keys(&mut self.keys) {
            if lane.len() < RADIX_MIN {
                self.keys.sort_unstable();
            } else {
                radix_sort_by(&mut self.keys, &mut self.key_scratch, |k| k);
            }
        }
        for (b, &k) in self.bits.iter_mut().zip(&self.keys) {
            *b = f16::from_bits(key_bits(k, descending));
        }
        self.bits.convert_to_f32_slice(out);
        if !special {
            return;
        }
        for (k, nan) in [(key(0, descending), false), (key(0x7E00, descending), true)] {
            if let Some(start) = self.keys.iter().position(|&x| x == k) {
                let block = lane
                    .iter()
                    .filter(|v| if nan { v.is_nan() } else { **v == 0.0 });
                out[start..]
                    .iter_mut()
                    .zip(block)
                    .for_each(|(o, &v)| *o = v);
            }
        }
    }

    /// The order of `lane`: its `k` best positions, best first (all when `k == len`), left in
    /// `self.order`; in position order instead when not `sorted`.
    fn order(&mut self, lane: &[f32], k: usize, descending: bool, sorted: bool) {
        let n = lane.len();
        let exact = n <= 1 << 16 && self.fp16_exact(lane);
        self.order.clear();
        if !exact {
            self.order.extend(0..n as u32);
            let cmp = |a: &u32, b: &u32| {
                compare((lane[*a as usize], *a), (lane[*b as usize], *b), descending)
            };
            if k < n {
                self.order.select_nth_unstable_by(k - 1, cmp);
                self.order.truncate(k);
            }
            if sorted {
                self.order.sort_unstable_by(cmp);
            } else {
                self.order.sort_unstable();
            }
            return;
        }
        self.words.clear();
        self.words.extend(
            self.bits
                .iter()
                .enumerate()
                .map(|(j, b)| (key(b.to_bits(), descending) as u32) << 16 | j as u32),
        );
        if k < n {
            self.words.select_nth_unstable(k - 1);
            self.words.truncate(k);
            if sorted {
                self.words.sort_unstable();
            }
        } else if n < RADIX_MIN {
            self.words.sort_unstable();
        } else {
            radix_sort_by(&mut self.words, &mut self.scratch, |w| (w >> 16) as u16);
        }
        self.order.extend(self.words.iter().map(|w| w & 0xFFFF));
        if !sorted {
            self.order.sort_unstable();
        }
    }
}

/// Check the lane layout of `x` and that `k` is in `1..=n`, naming `op`.
fn check_lanes(op: &str, x: &[f32], outer: usize, n: usize, inner: usize, k: usize) -> Result<()> {
    if n == 0 || n > u32::MAX as usize || x.len() != outer * n * inner {
        return Err(Error::shape(
            op,
            format!(
                "{} values do not form {outer} x {n} x {inner} lanes (extent 1..=2^32-1)",
                x.len()
            ),
        ));
    }
    if k == 0 || k > n {
        return Err(Error::value(op, format!("k = {k} must be in 1..={n}")));
    }
    Ok(())
}

/// How to order the lanes of a `topk` / `sort`: lanes `outer × n × inner` along `n`, keep the
/// `k` best (largest first when `largest`), best first when `sorted`, else in position order.
#[derive(Clone, Copy, Debug)]
pub struct Select {
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
    pub k: usize,
    pub largest: bool,
    pub sorted: bool,
}

impl Select {
    /// Write the chosen values and their int32 positions (layout `outer × k × inner`) of `x`
    /// into `values` / `indices`; ties by the lower position. Errors name `op`.
    pub fn run(&self, op: &str, x: &[f32], values: &mut [f32], indices: &mut [i32]) -> Result<()> {
        let Select {
            outer,
            n,
            inner,
            k,
            largest,
            sorted,
        } = *self;
        check_lanes(op, x, outer, n, inner, k)?;
        let m = outer * k * inner;
        if values.len() != m || indices.len() != m {
            return Err(Error::shape(
                op,
                format!(
                    "outputs hold {} and {} elements; {outer} x {k} x {inner} expected",
                    values.len(),
                    indices.len()
                ),
            ));
        }
        let mut lanes = Lanes::default();
        let mut lane = Vec::new();
        for o in 0..outer {
            for i in 0..inner {
                let base = o * n * inner + i;
                let view: &[f32] = if inner == 1 {
                    &x[base..base + n]
                } else {
                    lane.clear();
                    lane.extend((0..n).map(|j| x[base + j * inner]));
                    &lane
                };
                lanes.order(view, k, largest, sorted);
                let out = o * k * inner + i;
                for (j, &p) in lanes.order.iter().enumerate() {
                    values[out + j * inner] = view[p as usize];
                    indices[out + j * inner] = p as i32;
                }
            }
        }
        Ok(())
    }

    /// Values only of a full sort (`k == n`, `sorted`) into `values` (layout `outer × n ×
    /// inner`), bit-identical to the values [`Select::run`] writes; no permutation is
    /// computed. Errors name `op`.
    pub fn sort_values(&self, op: &str, x: &[f32], values: &mut [f32]) -> Result<()> {
        let Select {
            outer, n, inner, ..
        } = *self;
        check_lanes(op, x, outer, n, inner, n)?;
        if values.len() != x.len() {
            return Err(Error::shape(
                op,
                format!(
                    "output holds {} elements; {} expected",
                    values.len(),
                    x.len()
                ),
            ));
        }
        let mut lanes = Lanes::default();
        let (mut lane, mut sorted) = (Vec::new(), vec![0.0f32; n]);
        for o in 0..outer {
            for i in 0..inner {
                let base = o * n * inner + i;
                if inner == 1 {
                    lanes.sorted_values(
                        &x[base..base + n],
                        self.largest,
                        &mut values[base..base + n],
                    );
                    continue;
                }
                lane.clear();
                lane.extend((0..n).map(|j| x[base + j * inner]));
                lanes.sorted_values(&lane, self.largest, &mut sorted);
                for (j, &v) in sorted.iter().enumerate() {
                    values[base + j * inner] = v;
                }
            }
        }
        Ok(())
    }

    /// [`Select::run`] into freshly allocated (values, indices).
    pub fn collect(&self, op: &str, x: &[f32]) -> Result<(Vec<f32>, Vec<i32>)> {
        let m = self.outer * self.k.min(self.n) * self.inner;
        let (mut values, mut indices) = (vec![0.0f32; m], vec![0i32; m]);
        self.run(op, x, &mut values, &mut indices)?;
        Ok((values, indices))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: a stable sort of (value, position) pairs by a plain comparison loop.
    fn reference(lane: &[f32], descending: bool) -> Vec<u32> {
        let mut order: Vec<u32> = (0..lane.len() as u32).collect();
        order.sort_by(|&a, &b| compare((lane[a as usize], a), (lane[b as usize], b), descending));
        order
    }

    fn select(outer: usize, n: usize, inner: usize, k: usize, largest: bool) -> Select {
        Select {
            outer,
            n,
            inner,
            k,
            largest,
            sorted: true,
        }
    }

    #[test]
    fn unsorted_topk_lists_the_chosen_positions_in_order_on_both_paths() {
        let exact = [1.0f32, 5.0, 3.0, 5.0, -2.0, 4.0];
        let inexact = [1.0001f32, 5.0001, 3.0001, 5.0001, -2.0001, 4.0001];
        for x in [exact, inexact] {
            let s = Select {
                sorted: false,
                ..select(1, 6, 1, 3, true)
            };
            let (v, i) = s.collect("topk", &x).unwrap();
            assert_eq!(i, [1, 3, 5]);
            assert_eq!(v, [x[1], x[3], x[5]]);
        }
    }

    fn lane(n: usize, seed: u64) -> Vec<f32> {
        // fp16 values in [-4, 4) from the documented generator (a test-only source of data).
        let mut g = super::super::host_sample::SplitMix64::new(seed);
        (0..n)
            .map(|_| f16::from_f32(((g.next_unit() - 0.5) * 8.0) as f32).to_f32())
            .collect()
    }

    #[test]
    fn radix_sort_matches_a_stable_comparison_sort_with_ties_nan_and_signed_zero() {
        let mut x = lane(1000, 1);
        x[3] = f32::NAN;
        x[10] = -0.0;
        x[11] = 0.0;
        x[12] = f32::NEG_INFINITY;
        x[13] = x[14];
        for desc in [false, true] {
            let (v, i) = select(1, 1000, 1, 1000, desc).collect("sort", &x).unwrap();
            let want = reference(&x, desc);
            assert_eq!(i, want.iter().map(|&p| p as i32).collect::<Vec<_>>());
            assert!(v
                .iter()
                .zip(&want)
                .all(|(a, &p)| a.to_bits() == x[p as usize].to_bits()));
        }
    }

    #[test]
    fn topk_is_the_prefix_of_the_sort_on_every_lane_and_axis() {
        let x = lane(6 * 50 * 3, 2);
        for (largest, k) in [(true, 5), (false, 7), (true, 50)] {
            let (v, i) = select(6, 50, 3, k, largest).collect("topk", &x).unwrap();
            for o in 0..6 {
                for c in 0..3 {
                    let l: Vec<f32> = (0..50).map(|j| x[(o * 50 + j) * 3 + c]).collect();
                    let want = reference(&l, largest);
                    for j in 0..k {
                        assert_eq!(i[(o * k + j) * 3 + c], want[j] as i32);
                        assert_eq!(v[(o * k + j) * 3 + c], l[want[j] as usize]);
                    }
                }
            }
        }
        assert!(select(6, 50, 3, 51, true)
            .collect("topk", &x)
            .unwrap_err()
            .to_string()
            .contains("k = 51"));
    }

    #[test]
    fn lanes_longer_than_the_packed_position_sort_by_comparison() {
        let x = lane(70_000, 3);
        let (v, i) = select(1, 70_000, 1, 70_000, false)
            .collect("sort", &x)
            .unwrap();
        let want = reference(&x, false);
        assert_eq!(i, want.iter().map(|&p| p as i32).collect::<Vec<_>>());
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn values_only_sort_is_the_full_sorts_values_bit_for_bit_on_every_path_and_layout() {
        let mut x = lane(3 * 300 * 2, 4);
        x[7] = f32::NAN;
        x[8] = f32::from_bits(0xFFC0_0123);
        x[9] = -0.0;
        x[10] = 0.0;
        x[12] = -0.0;
        x[11] = f32::INFINITY;
        let inexact: Vec<f32> = x.iter().map(|v| v * 1.0001).collect();
        for data in [&x, &inexact] {
            for desc in [false, true] {
                for (outer, n, inner) in [
                    (1, 1800, 1),
                    (6, 300, 1),
                    (3, 300, 2),
                    (60, 30, 1),
                    (180, 10, 1),
                ] {
                    let s = select(outer, n, inner, n, desc);
                    let (want, _) = s.collect("sort", data).unwrap();
                    let mut got = vec![0.0; data.len()];
                    s.sort_values("sort", data, &mut got).unwrap();
                    // Bit for bit: −0 and +0 in position order, NaN payloads kept.
                    assert!(
                        got.iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{outer}x{n}x{inner} desc={desc}"
                    );
                }
            }
        }
        let mut short = vec![0.0; 4];
        assert!(select(1, 4, 1, 4, false)
            .sort_values("sort", &[1.0; 5], &mut short)
            .is_err());
    }

    #[test]
    fn values_that_are_not_fp16_take_the_comparison_path() {
        let x = [1.0001, 1.0002, 1.0, 1.0003];
        let (_, i) = select(1, 4, 1, 4, false).collect("sort", &x).unwrap();
        assert_eq!(i, [2, 0, 1, 3]);
    }
}
