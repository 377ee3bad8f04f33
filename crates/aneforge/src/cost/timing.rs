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

/// A compiled probe program and its seeded inputs, warmed up by one call.
pub struct Timed {
    net: Compiled,
    data: Vec<Vec<f32>>,
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
        let mut t = Timed { net, data };
        t.call()?;
        Ok(t)
    }

    fn call(&mut self) -> Result<()> {
        let ports: Vec<PortData> = self.data.iter().map(|d| PortData::F32(d)).collect();
        self.net.run(&ports).map(drop)
    }

    /// Median µs per call by `clock`, calling until `budget` of wall time has passed (at least
    /// 5 calls, at most 10 000).
    pub fn median_us(&mut self, budget: Duration, clock: Clock) -> Result<f64> {
        let mut times = Vec::new();
        let start = Instant::now();
        while times.len() < 5 || (start.elapsed() < budget && times.len() < 10_000) {
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
