//! Next-token selection on the host: greedy, or temperature / top-k / top-p sampling with a
//! repetition penalty, from a seeded generator (same seed, same tokens).

use crate::error::{Error, Result};

/// Sampling parameters; `Default` is greedy.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleOptions {
    /// 0 = greedy (argmax); otherwise logits are divided by it before the softmax.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p` (1 = all).
    pub top_p: f32,
    /// HF-style penalty on tokens already seen: positive logits divided by it, negative
    /// multiplied (1 = off).
    pub repetition_penalty: f32,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl SampleOptions {
    /// Value errors naming the field: temperature finite and ≥ 0, top_p in (0, 1],
    /// repetition_penalty finite and > 0.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, v: f32, want: &str| {
            Err(Error::value(
                "generate",
                format!("{field} = {v} must be {want}"),
            ))
        };
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad("temperature", self.temperature, "finite and >= 0");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", self.top_p, "in (0, 1]");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad(
                "repetition_penalty",
                self.repetition_penalty,
                "finite and > 0",
            );
        }
        Ok(())
    }
}

/// SplitMix64: a small seedable generator.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// A uniform draw in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A sampler: the options, the generator and the tokens seen so far (for the penalty).
#[derive(Clone, Debug)]
pub struct Sampler {
    opts: SampleOptions,
    rng: SplitMix,
    seen: Vec<u32>,
}

impl Sampler {
    /// A sampler over `opts` (validated) that has seen the prompt `seen`.
    pub fn new(opts: SampleOptions, seen: &[u32]) -> Result<Sampler> {
        opts.validate()?;
        Ok(Sampler {
            rng: SplitMix(opts.seed),
            opts,
            seen: seen.to_vec(),
        })
    }

    /// Choose the next token from `logits` (NaN logits are a Runtime error) and remember it.
    pub fn next(&mut self, logits: &[f32]) -> Result<u32> {
        if let Some(i) = logits.iter().position(|v| v.is_nan()) {
            return Err(Error::Runtime {
                op: "generate".into(),
                msg: format!("the model produced a NaN logit (token {i})"),
            });
        }
        let mut l: Vec<f64> = logits.iter().map(|&v| f64::from(v)).collect();
        let p = f64::from(self.opts.repetition_penalty);
        if p != 1.0 {
            let mut seen = self.seen.clone();
            seen.sort_unstable();
            seen.dedup();
            let n = l.len();
            for &t in seen.iter().filter(|&&t| (t as usize) < n) {
                let v = &mut l[t as usize];
                *v = if *v > 0.0 { *v / p } else { *v * p };
            }
        }
        let mut order: Vec<usize> = (0..l.len()).collect();
        order.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
        let token = if self.opts.temperature == 0.0 {
            order[0]
        } else {
            self.draw(&l, &order)
        };
        self.seen.push(token as u32);
        Ok(token as u32)
    }

    /// Softmax(l / T) over the top-k, cut to the top-p nucleus, one draw.
    fn draw(&mut self, l: &[f64], order: &[usize]) -> usize {
        let k = match self.opts.top_k {
            0 => order.len(),
            k => k.min(order.len()),
        };
        let t = f64::from(self.opts.temperature);
        let top = l[order[0]];
        let mut weights: Vec<f64> = order[..k]
            .iter()
            .map(|&i| ((l[i] - top) / t).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cut = weights
            .iter()
            .position(|w| {
                acc += w / total;
                acc >= f64::from(self.opts.top_p)
            })
            .map_or(k, |i| i + 1);
        weights.truncate(cut);
        let mut u = self.rng.next_f64() * weights.iter().sum::<f64>();
        for (j, w) in weights.iter().enumerate() {
            if u < *w {
                return order[j];
            }
            u -= w;
        }
        order[cut - 1]
    }
}
