//! `sample(logits, temperature, top_k, top_p, seed)`: one int32 token id per row of `logits`
//! (last axis = vocabulary).
//!
//! Algorithm, per row in row-major order:
//! - temperature 0: greedy, the index of the first maximum (top_k / top_p ignored);
//! - otherwise `z = logits / temperature` (f64); candidates ordered by `z` descending, ties by
//!   index ascending; `top_k > 0` keeps the first `top_k`; probabilities
//!   `p = exp(z - z_max) / Σ exp(z - z_max)` over the kept candidates; `top_p` keeps the
//!   shortest prefix whose cumulative probability reaches `top_p` (at least one); a uniform
//!   `u` in [0, 1) times the kept mass picks the first candidate whose cumulative probability
//!   exceeds it (the last kept one if rounding leaves none).
//!
//! Generator: SplitMix64 (Steele, Lea, Flood 2014) with state `seed`; each row draws one
//! 64-bit word `w` and uses `u = (w >> 11) · 2^-53`. The same seed gives the same ids.

use super::host::{expect_dtypes, HostKernel, HostRef, HostTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::TensorType;

/// Op name used in errors.
pub const SAMPLE: &str = "sample";

/// Checked sampling parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleParams {
    /// Softmax temperature, >= 0 and finite; 0 = greedy.
    pub temperature: f64,
    /// Keep the `top_k` most likely ids; 0 = all.
    pub top_k: usize,
    /// Nucleus mass in (0, 1]; 1 = all.
    pub top_p: f64,
    /// Generator seed.
    pub seed: u64,
}

impl SampleParams {
    /// Check the parameters for a vocabulary of `vocab` ids: temperature finite and >= 0,
    /// 0 <= top_k <= vocab, top_p in (0, 1]; errors name the parameter and its value.
    pub fn new(temperature: f64, top_k: i64, top_p: f64, seed: u64, vocab: usize) -> Result<Self> {
        if !(temperature.is_finite() && temperature >= 0.0) {
            return Err(Error::value(
                SAMPLE,
                format!("temperature must be finite and >= 0, got {temperature}"),
            ));
        }
        if top_k < 0 || top_k as u64 > vocab as u64 {
            return Err(Error::value(
                SAMPLE,
                format!("top_k must be in 0..={vocab} (0 = all), got {top_k}"),
            ));
        }
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(Error::value(
                SAMPLE,
                format!("top_p must be in (0, 1], got {top_p}"),
            ));
        }
        Ok(SampleParams {
            temperature,
            top_k: top_k as usize,
            top_p,
            seed,
        })
    }
}

/// SplitMix64: the generator `sample` documents.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose state starts at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64-bit word.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform double in [0, 1) from the top 53 bits of the next word.
    pub fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// One token id per row of `logits` (`rows × vocab` values); non-finite logits are a value
/// error naming the row and position.
pub fn sample(logits: &[f32], vocab: usize, params: &SampleParams) -> Result<Vec<i32>> {
    if vocab == 0 || !logits.len().is_multiple_of(vocab) {
        return Err(Error::shape(
            SAMPLE,
            format!("{} logits do not split into rows of {vocab}", logits.len()),
        ));
    }
    let mut rng = SplitMix64::new(params.seed);
    let mut order: Vec<u32> = Vec::with_capacity(vocab);
    let mut probs: Vec<f64> = Vec::with_capacity(vocab);
    logits
        .chunks(vocab)
        .enumerate()
        .map(|(r, row)| {
            if let Some(i) = row.iter().position(|v| !v.is_finite()) {
                return Err(Error::value(
                    SAMPLE,
                    format!(
                        "logits row {r} holds the non-finite value {} at position {i}",
                        row[i]
                    ),
                ));
            }
            if params.temperature == 0.0 {
                return Ok(first_max(row) as i32);
            }
            let u = rng.next_unit();
            Ok(sample_row(row, params, u, &mut order, &mut probs) as i32)
        })
        .collect()
}

/// Index of the first maximum of a non-empty row.
fn first_max(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best
}

/// The id `u` selects in one row (see the module doc); `order` and `probs` are scratch space.
fn sample_row(
    row: &[f32],
    params: &SampleParams,
    u: f64,
    order: &mut Vec<u32>,
    probs: &mut Vec<f64>,
) -> usize {
    let by_logit = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
    order.clear();
    order.extend(0..row.len() as u32);
    let keep = if params.top_k == 0 {
        row.len()
    } else {
        params.top_k
    };
    if keep < row.len() {
        order.select_nth_unstable_by(keep - 1, by_logit);
        order.truncate(keep);
    }
    order.sort_unstable_by(by_logit);
    let z_max = row[order[0] as usize] as f64 / params.temperature;
    probs.clear();
    probs.extend(
        order
            .iter()
            .map(|&i| ((row[i as usize] as f64 / params.temperature) - z_max).exp()),
    );
    let total: f64 = probs.iter().sum();
    let mut mass = 0.0;
    let mut kept = 0;
    for p in probs.iter_mut() {
        *p /= total;
        mass += *p;
        kept += 1;
        if mass >= params.top_p {
            break;
        }
    }
    let target = u * mass;
    let mut cumulative = 0.0;
    for (j, p) in probs[..kept].iter().enumerate() {
        cumulative += p;
        if cumulative > target {
            return order[j] as usize;
        }
    }
    order[kept - 1] as usize
}

/// `sample` as a host op: fp16 logits `[..., V]` → int32 ids `[..., 1]` (the vocabulary axis
/// kept as extent 1). The parameters are re-checked on every load (plan files are user data).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    pub temperature: f64,
    pub top_k: usize,
    pub top_p: f64,
    pub seed: u64,
}

impl Sample {
    /// The checked parameters for a vocabulary of `vocab` ids.
    fn params(&self, vocab: usize) -> Result<SampleParams> {
        let top_k = i64::try_from(self.top_k).unwrap_or(i64::MAX);
        SampleParams::new(self.temperature, top_k, self.top_p, self.seed, vocab)
    }
}

impl HostKernel for Sample {
    fn name(&self) -> &'static str {
        SAMPLE
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(SAMPLE, inputs, &[DType::Fp16])?;
        let mut shape = inputs[0].shape.clone();
        let vocab = shape.last().copied().unwrap_or(0);
        self.params(vocab)?;
        if let Some(last) = shape.last_mut() {
            *last = 1;
        }
        Ok(vec![TensorType {
            dtype: DType::Int32,
            shape,
        }])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0];
        let vocab = x.shape.last().copied().unwrap_or(0);
        let ids = sample(x.f32s(SAMPLE)?, vocab, &self.params(vocab)?)?;
        outputs[0].i32s_mut(SAMPLE)?.copy_from_slice(&ids);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_published_reference_sequence() {
        // First outputs of the reference C implementation (splitmix64.c, Vigna) for seed 0.
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn greedy_takes_the_first_maximum_and_ignores_top_k() {
        let p = SampleParams::new(0.0, 1, 0.5, 7, 4).unwrap();
        assert_eq!(
            sample(&[1.0, 3.0, 3.0, 0.0, 5.0, 1.0, 2.0, 0.0], 4, &p).unwrap(),
            [1, 0]
        );
    }

    #[test]
    fn top_k_one_and_tiny_top_p_are_greedy_for_every_seed() {
        let row = [0.1, 2.0, -1.0, 1.9];
        for seed in 0..50 {
            let k1 = SampleParams::new(1.0, 1, 1.0, seed, 4).unwrap();
            let p0 = SampleParams::new(1.0, 0, 1e-6, seed, 4).unwrap();
            assert_eq!(sample(&row, 4, &k1).unwrap(), [1]);
            assert_eq!(sample(&row, 4, &p0).unwrap(), [1]);
        }
    }

    #[test]
    fn frequencies_follow_the_softmax() {
        // 20000 draws over seeds; softmax([0, ln 2, ln 3]) = [1/6, 2/6, 3/6] (closed form).
        let row = [0.0, 2f32.ln(), 3f32.ln()];
        let p = |seed| SampleParams::new(1.0, 0, 1.0, seed, 3).unwrap();
        let mut counts = [0usize; 3];
        for seed in 0..20000 {
            counts[sample(&row, 3, &p(seed)).unwrap()[0] as usize] += 1;
        }
        for (c, want) in counts.iter().zip([1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0]) {
            assert!((*c as f64 / 20000.0 - want).abs() < 0.015, "{counts:?}");
        }
    }

    #[test]
    fn bad_parameters_and_logits_name_themselves() {
        let msg = |r: Result<SampleParams>| r.unwrap_err().to_string();
        assert!(msg(SampleParams::new(f64::NAN, 0, 1.0, 0, 4)).contains("temperature"));
        assert!(msg(SampleParams::new(-1.0, 0, 1.0, 0, 4)).contains("-1"));
        assert!(msg(SampleParams::new(1.0, -2, 1.0, 0, 4)).contains("top_k"));
        assert!(msg(SampleParams::new(1.0, 5, 1.0, 0, 4)).contains("5"));
        assert!(msg(SampleParams::new(1.0, 0, 0.0, 0, 4)).contains("top_p"));
        assert!(msg(SampleParams::new(1.0, 0, 1.5, 0, 4)).contains("1.5"));
        let p = SampleParams::new(1.0, 0, 1.0, 0, 2).unwrap();
        let e = sample(&[0.0, 1.0, f32::NAN, 0.0], 2, &p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 1") && e.contains("NaN"), "{e}");
    }
}
