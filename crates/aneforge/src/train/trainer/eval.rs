//! Evaluation and the training loop: `predict`, `accuracy` and `fit` (seeded shuffling, a log
//! line callback, per-epoch test accuracy).

use std::time::Instant;

use super::feed::Batch;
use super::{port, released, Trainer};
use crate::compile::{compile, Compiled};
use crate::error::{Error, Result};
use crate::exec::PortData;

/// The compiled logits program and its single data input (index, shape).
pub(super) struct EvalProgram {
    model: Compiled,
    x: usize,
    x_shape: Vec<usize>,
}

/// What [`Trainer::fit`] recorded: the loss of every step and the test accuracy per epoch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub loss: Vec<f64>,
    pub accuracy: Vec<f64>,
}

/// Options of [`Trainer::fit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FitOptions {
    pub epochs: usize,
    /// Seeds the per-epoch shuffles.
    pub seed: u64,
    /// Log the mean loss every this many steps (0 = never).
    pub log_every: usize,
}

/// SplitMix64: a small, well-mixed, seedable generator for the shuffles.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniformly shuffled 0..n (Fisher–Yates).
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
        v
    }
}

impl Trainer {
    /// The logits for `x` (any number of examples of the logits' data input, row-major), in
    /// batches of the compiled size (the last one zero-padded); returns the logits [n, K]
    /// row-major and K.
    /// Errors: no logits (Value), logits depending on other than exactly one data input
    /// (Value), `x` not a whole number of examples (Shape), a released trainer (Runtime).
    pub fn predict(&mut self, x: &[f32]) -> Result<(Vec<f32>, usize)> {
        let Some(logits) = self.logits.clone() else {
            return Err(Error::value(
                "Trainer.predict/accuracy",
                "need logits: use softmax_cross_entropy or pass logits= to Trainer",
            ));
        };
        self.sync()?;
        if self.programs.as_ref().ok_or_else(released)?.eval.is_none() {
            let opts = crate::CompileOptions {
                build_dir: self.opts.build_dir.as_ref().map(|d| d.join("eval")),
                ..self.opts.clone()
            };
            let model = compile(&[(Some("logits".into()), logits)], &opts)?;
            let data: Vec<usize> = (0..model.inputs().len())
                .filter(|&i| {
                    self.params
                        .iter()
                        .all(|p| p.name() != model.inputs()[i].name)
                })
                .collect();
            let &[x] = data.as_slice() else {
                return Err(Error::value(
                    "Trainer.accuracy",
                    format!(
                        "the logits depend on {} data inputs; expected exactly one",
                        data.len()
                    ),
                ));
            };
            let x_shape = model.inputs()[x].shape.clone();
            self.programs.as_mut().ok_or_else(released)?.eval =
                Some(EvalProgram { model, x, x_shape });
        }
        let masters: Vec<Vec<f32>> = self.params.iter().map(|p| p.value()).collect();
        let names: Vec<String> = self.params.iter().map(|p| p.name().to_string()).collect();
        let ev = self
            .programs
            .as_mut()
            .ok_or_else(released)?
            .eval
            .as_mut()
            .expect("compiled above");
        let b = ev.x_shape[0];
        let per: usize = ev.x_shape[1..].iter().product();
        if !x.len().is_multiple_of(per) {
            return Err(Error::shape(
                "Trainer.predict",
                format!(
                    "{} values are not a whole number of examples of shape {:?}",
                    x.len(),
                    &ev.x_shape[1..]
                ),
            ));
        }
        let n = x.len() / per;
        let mut param_index = Vec::with_capacity(names.len());
        for name in &names {
            param_index.push(port(&ev.model, name, true).ok());
        }
        let mut out = Vec::new();
        let k = ev.model.outputs()[0].numel() / b;
        let mut chunk = vec![0.0; b * per];
        for start in (0..n).step_by(b) {
            let rows = b.min(n - start);
            chunk.fill(0.0);
            chunk[..rows * per].copy_from_slice(&x[start * per..(start + rows) * per]);
            let mut feeds = vec![PortData::F32(&chunk); ev.model.inputs().len()];
            for (k, i) in param_index.iter().enumerate() {
                if let Some(i) = *i {
                    feeds[i] = PortData::F32(&masters[k]);
                }
            }
            feeds[ev.x] = PortData::F32(&chunk);
            let y = ev.model.run(&feeds)?.remove(0);
            out.extend_from_slice(&y[..rows * k]);
        }
        Ok((out, k))
    }

    /// Fraction of the examples `x` whose argmax logit (first maximum) equals `labels[i]`;
    /// errors as [`Trainer::predict`], plus a Shape error when the counts differ.
    pub fn accuracy(&mut self, x: &[f32], labels: &[usize]) -> Result<f64> {
        let (z, k) = self.predict(x)?;
        if labels.is_empty() || z.len() != labels.len() * k {
            return Err(Error::shape(
                "Trainer.accuracy",
                format!("{} labels for {} examples", labels.len(), z.len() / k),
            ));
        }
        let hits = z
            .chunks_exact(k)
            .zip(labels)
            .filter(|(row, &l)| {
                let best = row
                    .iter()
                    .enumerate()
                    .fold(0, |b, (i, &v)| if v > row[b] { i } else { b });
                best == l
            })
            .count();
        Ok(hits as f64 / labels.len() as f64)
    }

    /// Minibatch training over examples `x` [N, ...] and targets `y` [N] or [N, K] for
    /// `opts.epochs` (reshuffled each epoch from `opts.seed`; the last partial batch of each
    /// epoch is dropped), passing log lines to `log` (mean loss every `log_every` steps; the
    /// test accuracy at each epoch end when `test = (x, labels)` is given). Errors as
    /// [`Trainer::step`] and [`Trainer::accuracy`], plus a Shape error when x and y disagree on N.
    pub fn fit(
        &mut self,
        x: &Batch,
        y: &Batch,
        opts: &FitOptions,
        test: Option<(&[f32], &[usize])>,
        log: &mut dyn FnMut(&str),
    ) -> Result<History> {
        let n = x.shape.first().copied().unwrap_or(0);
        if y.shape.first() != Some(&n) {
            return Err(Error::shape(
                "Trainer.fit",
                format!("x {:?} and y {:?} differ in examples", x.shape, y.shape),
            ));
        }
        let (batch, t0) = (self.batch(), Instant::now());
        let steps = n / batch;
        let mut rng = SplitMix64(opts.seed);
        let mut hist = History::default();
        for epoch in 1..=opts.epochs {
            let order = rng.permutation(n);
            for s in 0..steps {
                let idx = &order[s * batch..(s + 1) * batch];
                let report = self.step(&[x.gather(idx), y.gather(idx)])?;
                hist.loss.push(report.loss);
                if opts.log_every > 0 && (s + 1) % opts.log_every == 0 {
                    let recent = &hist.loss[hist.loss.len() - opts.log_every..];
                    let mean = recent.iter().sum::<f64>() / recent.len() as f64;
                    log(&format!(
                        "epoch {epoch} step {}/{steps} loss {mean:.4} {:.1}s",
                        s + 1,
                        t0.elapsed().as_secs_f64()
                    ));
                }
            }
            if let Some((tx, ty)) = test {
                let acc = self.accuracy(tx, ty)?;
                hist.accuracy.push(acc);
                log(&format!(
                    "epoch {epoch} test accuracy {:.2}% {:.1}s",
                    100.0 * acc,
                    t0.elapsed().as_secs_f64()
                ));
            }
        }
        Ok(hist)
    }
}
