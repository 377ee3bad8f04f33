//! Builders for the channel ops.

use crate::error::{Error, Result};
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::channel::Channel;
use crate::ops::elementwise::fp16_param;
use crate::ops::io::HostArray;
use crate::ops::Op;

/// Where an even local_response_norm window sits around channel c (odd windows are centred).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LrnWindow {
    /// ONNX/Caffe (the MIL op): channels c − (size−1)/2 ..= c + size/2 (integer division).
    Onnx,
    /// PyTorch `F.local_response_norm`: channels c − size/2 ..= c + (size−1)/2.
    Torch,
}

impl LrnWindow {
    /// The window spelled `name` ("onnx" or "torch"); a Value error otherwise.
    pub fn from_name(name: &str) -> Result<LrnWindow> {
        match name {
            "onnx" => Ok(LrnWindow::Onnx),
            "torch" => Ok(LrnWindow::Torch),
            _ => Err(Error::value(
                "local_response_norm",
                format!("window must be \"onnx\" or \"torch\", got {name:?}"),
            )),
        }
    }
}

/// Builders (x is `[N, C, ...]`, fp16).
impl Tensor {
    /// Per-channel leaky ReLU: x where x ≥ 0 else alpha[c]·x; alpha is `[C]` (C = shape[1]), x rank 3..=5.
    /// MIL prelu takes rank 3 and 5 only with one slope for every channel, so those ranks with
    /// distinct slopes run as rank 4 (`[N, C, L, 1]` / `[N, C, D, H·W]`) between two reshapes.
    pub fn prelu(&self, alpha: HostArray) -> Result<Tensor> {
        let slopes = alpha.to_fp16("prelu")?;
        let op = |x: &Tensor| {
            Tensor::apply1(
                Op::Channel(Channel::Prelu),
                vec![x.clone(), constant("prelu", alpha)?],
            )
        };
        let s = self.shape();
        if !matches!(s.len(), 3 | 5) || slopes.windows(2).all(|w| w[0] == w[1]) {
            return op(self);
        }
        let as4: Vec<i64> = if s.len() == 3 {
            vec![s[0] as i64, s[1] as i64, s[2] as i64, 1]
        } else {
            vec![s[0] as i64, s[1] as i64, s[2] as i64, (s[3] * s[4]) as i64]
        };
        op(&self.reshape(&as4)?)?.reshape(&s.iter().map(|&d| d as i64).collect::<Vec<_>>())
    }
    /// MIL local response normalisation over `size` neighbouring channels (see [`Channel::LocalResponseNorm`]);
    /// x rank 3 or 4, size ≥ 1, alpha/beta/k finite fp16 values, k > 0.
    pub fn local_response_norm(
        &self,
        size: usize,
        alpha: f32,
        beta: f32,
        k: f32,
    ) -> Result<Tensor> {
        const OP: &str = "local_response_norm";
        let (alpha, beta, k) = (
            fp16_param(OP, "alpha", alpha)?,
            fp16_param(OP, "beta", beta)?,
            fp16_param(OP, "k", k)?,
        );
        if k <= 0.0 || alpha < 0.0 {
            return Err(Error::value(OP, format!("k = {k} must be > 0 and alpha = {alpha} >= 0 (the base of the power must stay positive)")));
        }
        Tensor::apply1(
            Op::Channel(Channel::LocalResponseNorm {
                size,
                alpha,
                beta,
                k,
            }),
            vec![self.clone()],
        )
    }
    /// `local_response_norm` with the window placement `window` names; an even `size` with
    /// [`LrnWindow::Torch`] runs the native op between two channel reversals (mirroring the window).
    pub fn local_response_norm_window(
        &self,
        size: usize,
        alpha: f32,
        beta: f32,
        k: f32,
        window: LrnWindow,
    ) -> Result<Tensor> {
        if window == LrnWindow::Onnx || size % 2 == 1 {
            return self.local_response_norm(size, alpha, beta, k);
        }
        self.reverse(&[1])?
            .local_response_norm(size, alpha, beta, k)?
            .reverse(&[1])
    }
    /// `x / (k + alpha · Σ x[j]²)^beta` over the clipped window of C channels around each channel
    /// (the reference's `lrn` bridge op), lowered as `local_response_norm(size = C, alpha = alpha·C)`.
    pub fn lrn(&self, alpha: f32, beta: f32, k: f32) -> Result<Tensor> {
        let c = self.shape().get(1).copied().unwrap_or(1); // a bad rank is reported by `infer`
        self.local_response_norm(c, alpha * c as f32, beta, k)
    }
}
