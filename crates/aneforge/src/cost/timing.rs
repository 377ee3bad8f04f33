//! Timing of reference-executor calls for calibration: a compiled probe program timed over a
//! budget (median of its calls) on a clock of `exec::clock`.

use std::time::{Duration, Instant};

use crate::compile::{compile, CompileOptions, Compiled, Device};
use crate::error::Result;
use crate::exec::clock::Clock;
use crate::exec::PortData;
use crate::graph::Tensor;

/// The reference executor's compile options.
pub fn reference() -> CompileOptions {
    CompileOptions {
        device: Device::Reference,
        ..CompileOptions::default()
    }
}

/// A compiled probe program, its seeded inputs and its output buffers, warmed up by one call.
/// Outputs are read into buffers allocated once, so a timed call allocates nothing: a large
/// per-call allocation costs page faults or not depending on the allocator's state (its
/// heap-top trimming), which would make one program persistently slower than its twin.
pub struct Timed {
    net: Compiled,
    data: Vec<Vec<f32>>,
    outs: Vec<Vec<f32>>,
}

impl Timed {
    /// Compile `outputs` with `opts`, feed seeded inputs and run one warm-up call.
    pub fn new(outputs: &[Tensor], opts: &CompileOptions) -> Result<Timed> {
        let outs: Vec<(Option<String>, Tensor)> =
            outputs.iter().map(|t| (None, t.clone())).collect();
        let net = compile(&outs, opts)?;
        let data = net
            .inputs()
            .iter()
            .map(|p| {
                let n: usize = p.shape.iter().product();
                (0..n).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect()
            })
            .collect();
        let outs = net.outputs().iter().map(|p| vec![0.0; p.numel()]).collect();
        let mut t = Timed { net, data, outs };
        t.call()?;
        Ok(t)
    }

    /// Feed the inputs, run, read every output into its buffer.
    fn call(&mut self) -> Result<()> {
        let loaded = self.net.loaded.as_mut();
        for (i, d) in self.data.iter().enumerate() {
            loaded.set_input(i, PortData::F32(d))?;
        }
        loaded.execute()?;
        for (i, out) in self.outs.iter_mut().enumerate() {
            loaded.read_output(i, out)?;
        }
        Ok(())
    }

    /// Median µs per call by `clock`, calling until `budget` of wall time has passed (at least
    /// 3 calls, at most 10 000).
    pub fn median_us(&mut self, budget: Duration, clock: Clock) -> Result<f64> {
        let mut times = Vec::new();
        let start = Instant::now();
        while times.len() < 3 || (start.elapsed() < budget && times.len() < 10_000) {
            let t = clock.now_us(start)?;
            self.call()?;
            times.push(clock.now_us(start)? - t);
        }
        Ok(median(&mut times))
    }
}

/// The median of `v` (the upper one of an even count; NaN for an empty slice).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
