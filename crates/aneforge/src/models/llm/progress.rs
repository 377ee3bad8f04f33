//! Load progress: the fp16 bytes of projection weights (layers and lm_head) made so far out of
//! the model's total, reported to a callback while the decode programs are built (the CLI
//! draws it as a bar with a percentage).

use std::cell::Cell;

use super::blocks::layer_bytes;
use super::config::LlmConfig;

/// A progress callback taking (bytes done, bytes total).
pub type ProgressFn<'a> = &'a dyn Fn(u64, u64);

/// Counts weight bytes against the model's total and reports every step to the callback.
pub struct LoadProgress<'a> {
    done: Cell<u64>,
    total: u64,
    sink: ProgressFn<'a>,
}

impl<'a> LoadProgress<'a> {
    /// A counter over `cfg`'s projections and lm_head (fp16 bytes, as
    /// [`layer_bytes`] counts a layer) reporting to `sink`.
    pub fn new(cfg: &LlmConfig, sink: ProgressFn<'a>) -> LoadProgress<'a> {
        let head = 2 * cfg.vocab as u64 * cfg.width as u64;
        LoadProgress {
            done: Cell::new(0),
            total: cfg.layers as u64 * layer_bytes(cfg) + head,
            sink,
        }
    }

    /// Count `elements` more weight values (2 bytes each as fp16) and report (done ≤ total).
    pub fn add(&self, elements: usize) {
        let done = (self.done.get() + 2 * elements as u64).min(self.total);
        self.done.set(done);
        (self.sink)(done, self.total);
    }
}
