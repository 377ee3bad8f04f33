//! Training helpers built from graph ops: losses (the optimizers and the Trainer live in the
//! Python package; gradients come from [`crate::autograd::backward`]).

pub mod loss;

pub use loss::{mse, softmax_cross_entropy};
