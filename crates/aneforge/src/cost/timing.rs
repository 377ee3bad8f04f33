//! Timing of reference-executor calls for calibration: the clock read (wall or process CPU
//! time) and a compiled probe program timed over a budget (median of its calls).

use std::time::{Duration, Instant};

use crate::compile::{compile, CompileOptions, Compiled, Device};
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::Tensor;

/// The clock probes read: wall time, or the process's CPU time (all threads), which a machine
/// shared with other jobs does not inflate (with one executor thread it is the call's time on
/// an idle machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    Wall,
    Cpu,
}

impl Clock {
    /// Parse `wall` or `cpu`.
    pub fn parse(s: &str) -> Result<Clock> {
        match s {
            "wall" => Ok(Clock::Wall),
            "cpu" => Ok(Clock::Cpu),
            _ => Err(Error::value(
                "clock",
                format!("unknown clock '{s}' (expected wall or cpu)"),
            )),
        }
    }

    /// `wall` or `cpu`.
    pub fn name(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Cpu => "cpu",
        }
    }

    /// The clock's reading in µs (the wall reading counts from `origin`).
    pub fn now_us(self, origin: Instant) -> Result<f64> {
        match self {
            Clock::Wall => Ok(origin.elapsed().as_secs_f64() * 1e6),
            Clock::Cpu => process_cpu_us(),
        }
    }
}

/// CPU time of this process (every thread) in µs.
#[cfg(unix)]
pub fn process_cpu_us() -> Result<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(Error::Runtime {
            op: "clock".into(),
            msg: "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed".into(),
        });
    }
    Ok(ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3)
}

/// CPU time of this process: not available off Unix.
#[cfg(not(unix))]
pub fn process_cpu_us() -> Result<f64> {
    Err(Error::NotImplemented(
        "clock cpu: process CPU time is read on Unix systems only".into(),
    ))
}

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
