//! Training: parameters with fp32 master weights ([`param`]), losses ([`loss`]), optimizers
//! with their host and device updates ([`optim`]), the state dict ([`state`]) and its
//! safetensors checkpoints ([`checkpoint`]), dataset readers
//! ([`data`]) and the [`Trainer`] ([`trainer`]). Gradients come from [`crate::autograd::backward`].

#[cfg(feature = "safetensors")]
pub mod checkpoint;
pub mod data;
pub mod loss;
pub mod optim;
pub mod param;
pub mod state;
pub mod trainer;

pub use loss::{mse, softmax_cross_entropy, Loss, LossKind};
pub use optim::{update_graph, OptimConfig, Optimizer, Rule, StepOutcome};
pub use param::{conv2d, conv_param, Parameter};
pub use state::StateDict;
pub use trainer::{Batch, FitOptions, History, Mode, StepReport, Trainer};
