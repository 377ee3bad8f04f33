//! The one kernel behind `sort` / `argsort` and `topk` on fp16 values (held as f32).
//!
//! Each fp16 value maps to a 16-bit key whose unsigned order is the value order (NaN above
//! every number, −0 equal to +0; `host_radix`, one SIMD pass per lane); key and lane position
//! pack into one `u32` (`key << 16 | position`), so integer order is "by value, ties by lower
//! index" — stable. `sort` is a two-pass LSD radix sort on the key bytes (a pass whose byte is
//! the same everywhere is skipped); `topk` bounds the k-th best key by an evenly spaced sample
//! of a long lane, keeps the packed words within the bound, partitions them with
//! `select_nth_unstable` and sorts the k survivors. A values-only sort (no permutation) sorts
//! the bare keys: 16 lanes at a time by a network on columns when there are that many lanes of
//! a length in `COLUMN_LANES` (`host_sort_columns`), else one lane by a bitonic network for
//! short lanes (`host_sort_network`) or the radix sort. A lane holding a
//! value that is not exactly an fp16 number (fp32 precision), or longer than 65536, takes a
//! comparison sort with the same order.

use super::host_radix::{key, key_values, keys_at_most, lane_keys, radix_sort_by, LaneScan};
use super::host_sort_columns::{sort_lanes, Wire, ROWS};
use super::host_sort_network::sort_keys;
use crate::error::{Error, Result};

/// Lanes shorter than this sort the packed words by comparison (the 2 × 256-bucket histograms
/// of the radix sort cost more there).
const RADIX_MIN: usize = 64;

/// Values-only lanes up to this length sort by the network; longer ones (up to the network's
/// 512) by the radix sort, which is faster there than the network padded to 512.
const NETWORK_LANES: usize = 256;

/// Values-only lanes of these lengths sort 16 at a time by the column network
/// (`host_sort_columns`) when there are at least 16 of them.
const COLUMN_LANES: std::ops::RangeInclusive<usize> = 17..=512;

/// Keys a `topk` draws (evenly spaced) to bound the k-th best key before it scans the lane.
const SAMPLE: usize = 1024;

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
    words: Vec<u32>,
    scratch: Vec<u32>,
    order: Vec<u32>,
    keys: Vec<u16>,
    key_scratch: Vec<u16>,
    wires: Vec<Wire>,
}

/// Overwrite the blocks of `out` (the values of the sorted `keys` of `lane`) whose key stands
/// for several bit patterns (±0, NaN payloads) with the lane's own such values in position
/// order, as the stable sort leaves them.
fn refill_specials(keys: &[u16], lane: &[f32], descending: bool, out: &mut [f32]) {
    for (k, nan) in [(key(0, descending), false), (key(0x7E00, descending), true)] {
        let start = keys.partition_point(|&x| x < k);
        if keys.get(start) == Some(&k) {
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

impl Lanes {
    /// The sorted values of `lane` into `out` (same length; no permutation), bit for bit the
    /// values of the stable sort ([`Lanes::order`]): the fp16 keys (`host_radix`) sorted by the
    /// network (short lanes, `host_sort_network`) or a 16-bit radix sort and mapped back, then
    /// the blocks of equal keys holding different bits (±0, NaN payloads) refilled with the
    /// lane's own values in position order; a stable comparison sort when a value is not an
    /// fp16 number.
    fn sorted_values(&mut self, lane: &[f32], descending: bool, out: &mut [f32]) {
        self.keys.resize(lane.len(), 0);
        let scan = lane_keys(lane, descending, &mut self.keys);
        if !scan.exact {
            out.copy_from_slice(lane);
            out.sort_by(|a, b| compare((*a, 0), (*b, 0), descending));
            return;
        }
        if lane.len() > NETWORK_LANES || !sort_keys(&mut self.keys) {
            if lane.len() < RADIX_MIN {
                self.keys.sort_unstable();
            } else {
                radix_sort_by(&mut self.keys, &mut self.key_scratch, |k| k);
            }
        }
        key_values(&self.keys, descending, out);
        if scan.special {
            refill_specials(&self.keys, lane, descending, out);
        }
    }

    /// The sorted values of the 16 lanes of `x` (each `n` long, one after the other) into
    /// `out` (same layout), bit for bit those of [`Lanes::sorted_values`]: the lanes' keys
    /// sorted together by the column network (`host_sort_columns`); a lane holding a value that
    /// is not an fp16 number, or every lane on a CPU without the network, takes the one-lane
    /// path.
    fn sorted_values_16(&mut self, x: &[f32], n: usize, descending: bool, out: &mut [f32]) {
        self.keys.resize(ROWS * n, 0);
        let mut scans = [LaneScan {
            exact: true,
            special: false,
        }; ROWS];
        for ((scan, lane), keys) in scans
            .iter_mut()
            .zip(x.chunks_exact(n))
            .zip(self.keys.chunks_exact_mut(n))
        {
            *scan = lane_keys(lane, descending, keys);
        }
        let sorted = sort_lanes(&mut self.keys, n, &mut self.wires);
        let lanes = x.chunks_exact(n).zip(out.chunks_exact_mut(n));
        for ((scan, keys), (lane, out)) in scans.iter().zip(self.keys.chunks_exact(n)).zip(lanes) {
            if sorted && scan.exact {
                key_values(keys, descending, out);
                if scan.special {
                    refill_specials(keys, lane, descending, out);
                }
            }
        }
        // The one-lane path reuses `self.keys`: after every batch lane is out.
        let lanes = x.chunks_exact(n).zip(out.chunks_exact_mut(n));
        for (scan, (lane, out)) in scans.iter().zip(lanes) {
            if !(sorted && scan.exact) {
                self.sorted_values(lane, descending, out);
            }
        }
    }

    /// The packed words (`key << 16 | position`) of `self.keys` into `self.words`: all of them,
    /// or for a long lane and a small `k`, only those at most the k-th smallest key of an evenly
    /// spaced sample — at least the `k` best, since the sample alone holds `k` keys at most that
    /// bound.
    fn candidates(&mut self, k: usize) {
        let n = self.keys.len();
        self.words.clear();
        if n < 4 * SAMPLE || 8 * k > SAMPLE {
            self.words.extend(
                self.keys
                    .iter()
                    .enumerate()
                    .map(|(j, &key)| (key as u32) << 16 | j as u32),
            );
            return;
        }
        let step = n / SAMPLE;
        self.key_scratch.clear();
        self.key_scratch
            .extend(self.keys.iter().step_by(step).take(SAMPLE));
        let bound = *self.key_scratch.select_nth_unstable(k - 1).1;
        keys_at_most(&self.keys, bound, &mut self.words);
    }

    /// The order of `lane`: its `k` best positions, best first (all when `k == len`), left in
    /// `self.order`; in position order instead when not `sorted`.
    fn order(&mut self, lane: &[f32], k: usize, descending: bool, sorted: bool) {
        let n = lane.len();
        self.keys.resize(n, 0);
        let exact = n <= 1 << 16 && lane_keys(lane, descending, &mut self.keys).exact;
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
        self.candidates(if k < n { k } else { n });
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
        let mut first = 0;
        if inner == 1 && COLUMN_LANES.contains(&n) {
            for (x, out) in x
                .chunks_exact(ROWS * n)
                .zip(values.chunks_exact_mut(ROWS * n))
            {
                lanes.sorted_values_16(x, n, self.largest, out);
                first += ROWS;
            }
        }
        let (mut lane, mut sorted) = (Vec::new(), vec![0.0f32; n]);
        for o in first..outer {
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
    use half::f16;

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

    /// A lane of `n` fp16 values with ties, NaN payloads of both signs, ±inf and ±0.
    fn mixed_lane(n: usize, seed: u64) -> Vec<f32> {
        let mut g = super::super::host_sample::SplitMix64::new(seed);
        (0..n)
            .map(|_| match g.next_u64() % 16 {
                0 => f32::from_bits(0x7FC0_0000 | (g.next_u64() as u32 & 0x3F_E000)),
                1 => f32::from_bits(0xFFC0_0000 | (g.next_u64() as u32 & 0x3F_E000)),
                2 => [f32::INFINITY, f32::NEG_INFINITY][g.next_u64() as usize % 2],
                3 => [0.0, -0.0][g.next_u64() as usize % 2],
                4..=7 => (g.next_u64() % 5) as f32 - 2.0,
                _ => f16::from_f32(((g.next_unit() - 0.5) * 100.0) as f32).to_f32(),
            })
            .collect()
    }

    #[test]
    fn every_lane_length_class_sorts_and_selects_like_the_stable_comparison_sort() {
        let lengths = (1..=40).chain([
            63, 64, 65, 255, 256, 257, 383, 384, 511, 512, 513, 4096, 50_257,
        ]);
        for (s, n) in lengths.enumerate() {
            let x = mixed_lane(n, s as u64);
            for desc in [false, true] {
                let want = reference(&x, desc);
                let bits = |p: &u32| x[*p as usize].to_bits();
                let full = select(1, n, 1, n, desc);
                let (v, i) = full.collect("sort", &x).unwrap();
                assert_eq!(
                    i,
                    want.iter().map(|&p| p as i32).collect::<Vec<_>>(),
                    "n={n}"
                );
                assert!(v.iter().zip(&want).all(|(a, p)| a.to_bits() == bits(p)));
                let mut values = vec![0.0f32; n];
                full.sort_values("sort", &x, &mut values).unwrap();
                assert!(
                    values
                        .iter()
                        .zip(&want)
                        .all(|(a, p)| a.to_bits() == bits(p)),
                    "values-only n={n} desc={desc}"
                );
                for k in [1, 5, 50, n / 2].into_iter().filter(|&k| 1 <= k && k < n) {
                    let (v, i) = select(1, n, 1, k, desc).collect("topk", &x).unwrap();
                    assert_eq!(i, want[..k].iter().map(|&p| p as i32).collect::<Vec<_>>());
                    assert!(v.iter().zip(&want).all(|(a, p)| a.to_bits() == bits(p)));
                }
            }
        }
        assert!(select(1, 0, 1, 0, false).collect("sort", &[]).is_err());
    }

    #[test]
    fn batches_of_lanes_sort_like_the_stable_sort_with_specials_and_an_inexact_lane() {
        // 37 lanes: two batches of 16 and 5 left over; lane 3 holds a value fp16 does not.
        for n in [17usize, 100, 256, 384, 512] {
            let rows = 37;
            let mut x = mixed_lane(rows * n, n as u64);
            x[3 * n + 1] = 1.0001;
            for desc in [false, true] {
                let mut got = vec![0.0f32; rows * n];
                select(rows, n, 1, n, desc)
                    .sort_values("sort", &x, &mut got)
                    .unwrap();
                for (r, (lane, out)) in x.chunks(n).zip(got.chunks(n)).enumerate() {
                    let want = reference(lane, desc);
                    assert!(
                        out.iter()
                            .zip(&want)
                            .all(|(a, &p)| a.to_bits() == lane[p as usize].to_bits()),
                        "n={n} lane {r} desc={desc}"
                    );
                }
            }
        }
    }

    #[test]
    fn topk_on_long_sorted_lanes_keeps_the_best_whatever_the_sample_sees() {
        // Ascending, descending and constant lanes: the sample's bound is weakest there.
        let n = 20_000;
        let up: Vec<f32> = (0..n)
            .map(|j| f16::from_f32(j as f32 / 8.0).to_f32())
            .collect();
        let down: Vec<f32> = up.iter().rev().copied().collect();
        for x in [up, down, vec![1.5; n]] {
            for largest in [true, false] {
                let want = reference(&x, largest);
                for sorted in [true, false] {
                    let s = Select {
                        sorted,
                        ..select(1, n, 1, 64, largest)
                    };
                    let (_, i) = s.collect("topk", &x).unwrap();
                    let mut best: Vec<i32> = want[..64].iter().map(|&p| p as i32).collect();
                    if !sorted {
                        best.sort_unstable();
                    }
                    assert_eq!(i, best);
                }
            }
        }
    }

    #[test]
    fn values_that_are_not_fp16_take_the_comparison_path() {
        let x = [1.0001, 1.0002, 1.0, 1.0003];
        let (_, i) = select(1, 4, 1, 4, false).collect("sort", &x).unwrap();
        assert_eq!(i, [2, 0, 1, 3]);
    }
}
