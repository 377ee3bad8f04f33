//! Optimizers: SGD (momentum, L2 weight decay), Adam (bias correction, L2 weight decay) and
//! AdamW (decoupled weight decay), with loss scaling and a non-finite-gradient skip. The host
//! update runs on fp32 master weights ([`Optimizer`]); [`update_graph`] builds the same update as
//! graph nodes for the device programs (state aliased output → input by the Trainer).

use crate::error::{Error, Result};
use crate::graph::Tensor;

/// fp16's smallest normal: the floor of the device Adam epsilon (in loss-scaled units).
const FP16_MIN_NORMAL: f32 = 6.103_515_6e-5;

/// The update rule and its own hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// buf = momentum·buf + d; w −= lr·buf (w −= lr·d without momentum).
    Sgd { momentum: f32 },
    /// Bias-corrected Adam; weight decay is L2 (added to the gradient).
    Adam { betas: (f32, f32), eps: f32 },
    /// Adam with decoupled weight decay: w −= lr·weight_decay·w before the Adam step.
    AdamW { betas: (f32, f32), eps: f32 },
}

/// An optimizer: its rule, learning rate, weight decay and the loss scale gradients arrive multiplied by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptimConfig {
    pub rule: Rule,
    pub lr: f32,
    pub weight_decay: f32,
    pub loss_scale: f32,
}

impl OptimConfig {
    /// Check the hyper-parameters: finite lr ≥ 0, weight decay ≥ 0, loss scale > 0, betas in
    /// [0, 1), eps > 0, momentum in [0, 1]; the Value error names the offending one and its value.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str, v: f32| {
            Err(Error::value(
                "optimizer",
                format!("{what} = {v} is out of range"),
            ))
        };
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return bad("lr", self.lr);
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay", self.weight_decay);
        }
        if !(self.loss_scale.is_finite() && self.loss_scale > 0.0) {
            return bad("loss_scale", self.loss_scale);
        }
        match self.rule {
            Rule::Sgd { momentum } if !(0.0..=1.0).contains(&momentum) => bad("momentum", momentum),
            Rule::Adam { betas, eps } | Rule::AdamW { betas, eps } => {
                for (w, b) in [("betas[0]", betas.0), ("betas[1]", betas.1)] {
                    if !(0.0..1.0).contains(&b) {
                        return bad(w, b);
                    }
                }
                if !(eps.is_finite() && eps > 0.0) {
                    return bad("eps", eps);
                }
                Ok(())
            }
            Rule::Sgd { .. } => Ok(()),
        }
    }

    /// The rule's name as written in checkpoints: `sgd`, `adam` or `adamw`.
    pub fn name(&self) -> &'static str {
        match self.rule {
            Rule::Sgd { .. } => "sgd",
            Rule::Adam { .. } => "adam",
            Rule::AdamW { .. } => "adamw",
        }
    }

    /// Names of the per-parameter state buffers: `m`, `v` (Adam, AdamW), `buf` (SGD with momentum) or none.
    pub fn state_names(&self) -> &'static [&'static str] {
        match self.rule {
            Rule::Adam { .. } | Rule::AdamW { .. } => &["m", "v"],
            Rule::Sgd { momentum } if momentum != 0.0 => &["buf"],
            Rule::Sgd { .. } => &[],
        }
    }

    /// The learning rate the device update is fed at step `t` (≥ 1): Adam/AdamW fold in the
    /// bias correction, lr·√(1−β₂ᵗ)/(1−β₁ᵗ) (the loss scale cancels in m/√v); SGD lr/loss_scale.
    pub fn device_lr(&self, t: u64) -> f64 {
        let lr = f64::from(self.lr);
        match self.rule {
            Rule::Adam { betas, .. } | Rule::AdamW { betas, .. } => {
                let (c1, c2) = bias_corrections(betas, t);
                lr * c2.sqrt() / c1
            }
            Rule::Sgd { .. } => lr / f64::from(self.loss_scale),
        }
    }
}

/// (1 − β₁ᵗ, 1 − β₂ᵗ) in f64.
fn bias_corrections(betas: (f32, f32), t: u64) -> (f64, f64) {
    let t = t.min(i32::MAX as u64) as i32;
    (
        1.0 - f64::from(betas.0).powi(t),
        1.0 - f64::from(betas.1).powi(t),
    )
}

/// What one [`Optimizer::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    /// The update was applied; the step count is now `t`.
    Applied { t: u64 },
    /// A gradient had a non-finite value: nothing changed; `skipped` steps were skipped so far.
    Skipped { skipped: u64 },
}

/// A host optimizer over fp32 weights: its state (zeros at start) and step count.
#[derive(Clone, Debug)]
pub struct Optimizer {
    config: OptimConfig,
    sizes: Vec<usize>,
    /// `state[s][k]`: state buffer `state_names()[s]` of parameter k.
    state: Vec<Vec<Vec<f32>>>,
    t: u64,
    skipped: u64,
}

impl Optimizer {
    /// An optimizer for parameters of `sizes` elements each (Value error from [`OptimConfig::validate`]).
    pub fn new(config: OptimConfig, sizes: &[usize]) -> Result<Optimizer> {
        config.validate()?;
        let state = config
            .state_names()
            .iter()
            .map(|_| sizes.iter().map(|&n| vec![0.0; n]).collect())
            .collect();
        Ok(Optimizer {
            config,
            sizes: sizes.to_vec(),
            state,
            t: 0,
            skipped: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OptimConfig {
        &self.config
    }

    /// Steps applied so far.
    pub fn t(&self) -> u64 {
        self.t
    }

    /// Steps skipped so far for non-finite gradients.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// State buffer `name` (see [`OptimConfig::state_names`]) of every parameter, or None.
    pub fn state(&self, name: &str) -> Option<&[Vec<f32>]> {
        let s = self.config.state_names().iter().position(|&n| n == name)?;
        Some(&self.state[s])
    }

    /// Restore the step count and the state buffers (`state[s][k]` as in [`Optimizer::state`]);
    /// a Shape error names a buffer of the wrong count or length.
    pub fn restore(&mut self, t: u64, state: Vec<Vec<Vec<f32>>>) -> Result<()> {
        let names = self.config.state_names();
        let ok = state.len() == names.len()
            && state.iter().all(|per| {
                per.len() == self.sizes.len()
                    && per.iter().zip(&self.sizes).all(|(b, &n)| b.len() == n)
            });
        if !ok {
            return Err(Error::shape(
                "Optimizer.restore",
                format!(
                    "expected buffers {names:?} for parameter sizes {:?}",
                    self.sizes
                ),
            ));
        }
        self.state = state;
        self.t = t;
        Ok(())
    }

    /// One update of `weights` (one slice per parameter, in order) from `grads` (multiplied by
    /// the loss scale). Any non-finite gradient skips the step (nothing changes). Shape error
    /// when the counts or lengths differ from the sizes given to [`Optimizer::new`].
    pub fn step(&mut self, weights: &mut [&mut [f32]], grads: &[&[f32]]) -> Result<StepOutcome> {
        let lens_ok = weights.len() == self.sizes.len()
            && grads.len() == self.sizes.len()
            && self
                .sizes
                .iter()
                .zip(weights.iter().zip(grads))
                .all(|(&n, (w, g))| w.len() == n && g.len() == n);
        if !lens_ok {
            return Err(Error::shape(
                "Optimizer.step",
                format!(
                    "expected {} weights and gradients of sizes {:?}, got sizes {:?} and {:?}",
                    self.sizes.len(),
                    self.sizes,
                    weights.iter().map(|w| w.len()).collect::<Vec<_>>(),
                    grads.iter().map(|g| g.len()).collect::<Vec<_>>()
                ),
            ));
        }
        if !grads.iter().all(|g| all_finite(g)) {
            self.skipped += 1;
            return Ok(StepOutcome::Skipped {
                skipped: self.skipped,
            });
        }
        self.t += 1;
        let OptimConfig {
            rule,
            lr,
            weight_decay: wd,
            loss_scale,
        } = self.config;
        for (k, (w, g)) in weights.iter_mut().zip(grads).enumerate() {
            // Zipped loops (no bounds checks) vectorise; each element's arithmetic is unchanged.
            match rule {
                Rule::Sgd { momentum } => match self.state.first_mut() {
                    Some(s) => {
                        for ((w, &g), b) in w.iter_mut().zip(*g).zip(s[k].iter_mut()) {
                            *b = momentum * *b + (g / loss_scale + wd * *w);
                            *w -= lr * *b;
                        }
                    }
                    None => {
                        for (w, &g) in w.iter_mut().zip(*g) {
                            *w -= lr * (g / loss_scale + wd * *w);
                        }
                    }
                },
                Rule::Adam { betas, eps } | Rule::AdamW { betas, eps } => {
                    let (c1, c2) = bias_corrections(betas, self.t);
                    let (c1, c2) = (c1 as f32, c2 as f32);
                    let (l2, decoupled) = match rule {
                        Rule::AdamW { .. } => (0.0, lr * wd),
                        _ => (wd, 0.0),
                    };
                    let [m, v] = &mut self.state[..] else {
                        unreachable!("Adam keeps two state buffers")
                    };
                    let wgmv = w
                        .iter_mut()
                        .zip(*g)
                        .zip(m[k].iter_mut().zip(v[k].iter_mut()));
                    for ((w, &g), (m, v)) in wgmv {
                        let gi = g / loss_scale + l2 * *w;
                        *m = betas.0 * *m + (1.0 - betas.0) * gi;
                        *v = betas.1 * *v + (1.0 - betas.1) * gi * gi;
                        *w *= 1.0 - decoupled;
                        *w -= lr * (*m / c1) / ((*v / c2).sqrt() + eps);
                    }
                }
            }
        }
        Ok(StepOutcome::Applied { t: self.t })
    }
}

/// Whether every value of `g` is finite (a branch-free pass that vectorises).
pub(crate) fn all_finite(g: &[f32]) -> bool {
    g.iter().fold(true, |ok, x| ok & x.is_finite())
}

/// One optimizer step as graph nodes (fp16 on the device): new weight and new state tensors
/// (in [`OptimConfig::state_names`] order) from weight `w`, loss-scaled gradient `g`, `state`
/// and the per-step learning rate input `lr_t` [1] (fed [`OptimConfig::device_lr`]). Adam's eps
/// is in loss-scaled units, floored at fp16's smallest normal so an underflowed v cannot blow
/// the step up. Shape error when `state` does not hold one tensor per state name.
pub fn update_graph(
    config: &OptimConfig,
    w: &Tensor,
    g: &Tensor,
    state: &[Tensor],
    lr_t: &Tensor,
) -> Result<(Tensor, Vec<Tensor>)> {
    if state.len() != config.state_names().len() {
        return Err(Error::shape(
            "update_graph",
            format!(
                "expected state {:?}, got {} tensors",
                config.state_names(),
                state.len()
            ),
        ));
    }
    let OptimConfig {
        rule,
        lr,
        weight_decay: wd,
        loss_scale,
    } = *config;
    let l2 = |g: &Tensor| -> Result<Tensor> {
        if wd != 0.0 {
            g.add(&w.mul_scalar(wd * loss_scale)?)
        } else {
            Ok(g.clone())
        }
    };
    match rule {
        Rule::Sgd { momentum } => {
            let d = l2(g)?;
            if state.is_empty() {
                return Ok((w.sub(&lr_t.mul(&d)?)?, vec![]));
            }
            let buf = state[0].mul_scalar(momentum)?.add(&d)?;
            Ok((w.sub(&lr_t.mul(&buf)?)?, vec![buf]))
        }
        Rule::Adam { betas, eps } | Rule::AdamW { betas, eps } => {
            let (g, w0) = match rule {
                Rule::AdamW { .. } if wd != 0.0 => (g.clone(), w.mul_scalar(1.0 - lr * wd)?),
                Rule::AdamW { .. } => (g.clone(), w.clone()),
                _ => (l2(g)?, w.clone()),
            };
            let m = state[0]
                .mul_scalar(betas.0)?
                .add(&g.mul_scalar(1.0 - betas.0)?)?;
            let v = state[1]
                .mul_scalar(betas.1)?
                .add(&g.square()?.mul_scalar(1.0 - betas.1)?)?;
            let denom = v
                .sqrt()?
                .add_scalar((eps * loss_scale).max(FP16_MIN_NORMAL))?;
            let w_new = w0.sub(&lr_t.mul(&m)?.div(&denom)?)?;
            Ok((w_new, vec![m, v]))
        }
    }
}
