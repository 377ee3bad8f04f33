//! Losses as graph builders: each returns a `[1, ..., 1]` fp16 tensor that `backward` can seed.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::ops::io;

/// Mean over every axis of (prediction − target)², target broadcasting against prediction;
/// shape `[1; rank]`. Errors name the shapes when they do not broadcast.
pub fn mse(prediction: &Tensor, target: &Tensor) -> Result<Tensor> {
    let d = prediction.sub(target)?;
    let axes: Vec<i64> = (0..d.rank() as i64).collect();
    d.square()?.mean(&axes, true)
}

/// Mean over the batch of −log softmax(logits)[label], computed stably as
/// logsumexp(logits) − ⟨onehot, logits⟩; `logits` is [N, K], `target` one-hot [N, K] or class
/// indices [N] / [N, 1] (fp16 holds indices exactly up to 2048). Result `[1, 1]`.
pub fn softmax_cross_entropy(logits: &Tensor, target: &Tensor) -> Result<Tensor> {
    let op = "softmax_cross_entropy";
    let &[n, k] = logits.shape() else {
        return Err(Error::shape(
            op,
            format!("logits must be [N, K], got {:?}", logits.shape()),
        ));
    };
    let onehot = if target.shape() == [n, k] {
        target.clone()
    } else if target.shape() == [n] || target.shape() == [n, 1] {
        if k > 2048 {
            return Err(Error::shape(op, format!("{k} classes: fp16 class indices are exact only up to 2048; pass a one-hot target")));
        }
        let iota: Vec<f32> = (0..k).map(|i| i as f32).collect();
        let iota = crate::constant(op, io::HostArray::f32(&[1, k], &iota))?;
        let hit = target
            .reshape(&[n as i64, 1])?
            .compare(Compare::Equal, &iota)?;
        crate::select(&hit, &crate::scalar(op, 1.0)?, &crate::scalar(op, 0.0)?)?
    } else {
        return Err(Error::shape(
            op,
            format!(
                "target must be one-hot [{n}, {k}] or class indices [{n}] / [{n}, 1], got {:?}",
                target.shape()
            ),
        ));
    };
    let picked = onehot.mul(logits)?.sum(&[1], true)?;
    logits
        .log_sum_exp(&[1], true)?
        .sub(&picked)?
        .mean(&[0], true)
}

/// Which loss a [`Loss`] is: it decides how the Trainer reports the loss value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    /// [`mse`]: the program's fp16 loss is reported.
    Mse,
    /// [`softmax_cross_entropy`]: the loss is recomputed in fp32 on the host from the logits.
    CrossEntropy,
    /// Any other scalar-shaped graph: the program's fp16 loss is reported.
    Custom,
}

/// A loss graph with what the Trainer needs to know about it: its kind and, for
/// classification, the logits [N, K] it compares (for `predict` / `accuracy`).
#[derive(Clone, Debug)]
pub struct Loss {
    /// The loss tensor (`[1; rank]`, fp16).
    pub value: Tensor,
    pub kind: LossKind,
    pub logits: Option<Tensor>,
}

impl Loss {
    /// [`mse`] of `prediction` against `target` as a [`Loss`] of kind `Mse` (same errors).
    pub fn mse(prediction: &Tensor, target: &Tensor) -> Result<Loss> {
        Ok(Loss {
            value: mse(prediction, target)?,
            kind: LossKind::Mse,
            logits: None,
        })
    }

    /// [`softmax_cross_entropy`] as a [`Loss`] of kind `CrossEntropy` carrying `logits` (same errors).
    pub fn cross_entropy(logits: &Tensor, target: &Tensor) -> Result<Loss> {
        Ok(Loss {
            value: softmax_cross_entropy(logits, target)?,
            kind: LossKind::CrossEntropy,
            logits: Some(logits.clone()),
        })
    }

    /// Any fp16 tensor as a loss of kind `Custom`, with optional `logits` [N, K] for evaluation.
    pub fn custom(value: Tensor, logits: Option<Tensor>) -> Loss {
        Loss {
            value,
            kind: LossKind::Custom,
            logits,
        }
    }
}
