//! `aneforge calibrate`: measure the reference executor on this machine (per-call floor, and per
//! kind — data, gemm, conv, elementwise, reduce — a per-op overhead and a rate from a small and
//! a large single-op probe).

use std::time::{Duration, Instant};

use super::host::{HostConstants, OpOverhead};
use super::work::graph_work;
use crate::compile::{compile, CompileOptions, Device};
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::{Graph, Tensor};
use crate::ops::io::HostArray;
use crate::{conv2d, input, ConvOptions};

/// One probe: its name, the constant it measures and the median µs per call.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub name: &'static str,
    pub median_us: f64,
    /// Bytes (bandwidth probe) or flops / elements (rate probes) of its one compute node.
    pub work: f64,
}

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
                "calibrate",
                format!("unknown clock '{s}' (expected wall or cpu)"),
            )),
        }
    }

    /// The clock's reading in µs (the wall reading counts from `origin`).
    fn now_us(self, origin: Instant) -> Result<f64> {
        match self {
            Clock::Wall => Ok(origin.elapsed().as_secs_f64() * 1e6),
            Clock::Cpu => process_cpu_us(),
        }
    }
}

/// CPU time of this process (every thread) in µs.
#[cfg(unix)]
fn process_cpu_us() -> Result<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(Error::Runtime {
            op: "calibrate".into(),
            msg: "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed".into(),
        });
    }
    Ok(ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3)
}

/// CPU time of this process: not available off Unix.
#[cfg(not(unix))]
fn process_cpu_us() -> Result<f64> {
    Err(Error::NotImplemented(
        "calibrate --clock cpu: process CPU time is read on Unix systems only".into(),
    ))
}

/// Median µs per call of `outputs` on the reference executor by `clock`: warm up, then repeat
/// until `budget` of wall time has passed (at least 5 calls).
pub fn median_call_us(outputs: &[Tensor], budget: Duration, clock: Clock) -> Result<f64> {
    let outs: Vec<(Option<String>, Tensor)> = outputs.iter().map(|t| (None, t.clone())).collect();
    let opts = CompileOptions {
        device: Device::Reference,
        ..CompileOptions::default()
    };
    let mut net = compile(&outs, &opts)?;
    let data: Vec<Vec<f32>> = net
        .inputs()
        .iter()
        .map(|p| {
            let n: usize = p.shape.iter().product();
            (0..n).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect()
        })
        .collect();
    let ports: Vec<PortData> = data.iter().map(|d| PortData::F32(d)).collect();
    net.run(&ports)?;
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 10_000) {
        let t = clock.now_us(start)?;
        net.run(&ports)?;
        times.push(clock.now_us(start)? - t);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i % 13) as f32 - 6.0) / 16.0).collect()
}

/// The work of the one compute node of `y` (bytes for the data probe, flops otherwise).
fn probe_work(y: &Tensor, bytes: bool) -> Result<f64> {
    let g = Graph::from_outputs(&[(None, y.clone())])?;
    let w = graph_work(&g);
    Ok(w.iter()
        .map(|n| if bytes { n.bytes } else { n.flops } as f64)
        .sum())
}

/// `x [m, k] · w [k, n]` with a ramp weight.
fn gemm(m: usize, k: usize, n: usize) -> Result<Tensor> {
    let w = ramp(k * n);
    input(&[m, k])?.matmul(&crate::constant("calibrate", HostArray::f32(&[k, n], &w))?)
}

/// A 3×3 convolution of `c` channels on an `h`×`h` image (valid padding).
fn conv(c: usize, h: usize) -> Result<Tensor> {
    let w = ramp(c * c * 9);
    conv2d(
        &input(&[1, c, h, h])?,
        HostArray::f32(&[c, c, 3, 3], &w),
        None,
        ConvOptions::default(),
    )
}

/// Per-op overhead and rate of one kind from a small and a large single-op probe (net of the
/// call floor): the line through both points; a negative intercept (noise) falls back to the
/// large probe's rate with no overhead.
fn fit(small: (f64, f64), large: (f64, f64)) -> (f64, f64) {
    let ((ws, ts), (wl, tl)) = (small, large);
    if tl > ts && wl > ws {
        let rate = (wl - ws) / (tl - ts);
        let op = ts - ws / rate;
        if op >= 0.0 {
            return (op, rate);
        }
    }
    (0.0, wl / tl)
}

/// Measure every constant by `clock`; `budget` is the wall time spent per probe. The floor comes from a chain
/// of 1 and 33 tiny ops (floor = t1 − per-op), each kind from a small and a large probe.
pub fn calibrate(budget: Duration, clock: Clock) -> Result<(HostConstants, Vec<Probe>)> {
    let tiny = |n: usize| -> Result<Tensor> {
        let mut y = input(&[1, 8])?;
        for _ in 0..n {
            y = y.add_scalar(1.0)?;
        }
        Ok(y)
    };
    let one = median_call_us(&[tiny(1)?], budget, clock)?;
    let chain = median_call_us(&[tiny(33)?], budget, clock)?;
    let floor = (one - (chain - one) / 32.0).max(0.0);
    let mut probes = vec![Probe {
        name: "floor",
        median_us: floor,
        work: 0.0,
    }];
    let mut measure = |name: &'static str, y: Tensor, bytes: bool| -> Result<(f64, f64)> {
        let median = median_call_us(std::slice::from_ref(&y), budget, clock)?;
        let work = probe_work(&y, bytes)?;
        probes.push(Probe {
            name,
            median_us: median,
            work,
        });
        let net = median - floor;
        if net <= 0.0 {
            return Err(Error::Runtime {
                op: "calibrate".into(),
                msg: format!("probe {name} ran in {median:.1} µs, not above the {floor:.1} µs floor; rerun on an idle machine"),
            });
        }
        Ok((work, net))
    };
    let data = fit(
        measure(
            "data small",
            input(&[1, 64, 128])?.transpose(&[0, 2, 1])?,
            true,
        )?,
        measure("data", input(&[1, 512, 1024])?.transpose(&[0, 2, 1])?, true)?,
    );
    let gemm = fit(
        measure("gemm small", gemm(32, 64, 64)?, false)?,
        measure("gemm", gemm(256, 512, 512)?, false)?,
    );
    let conv = fit(
        measure("conv small", conv(8, 18)?, false)?,
        measure("conv", conv(64, 58)?, false)?,
    );
    let square = |n: usize| -> Result<Tensor> {
        let x = input(&[1, n, n])?;
        x.mul(&x)
    };
    let elementwise = fit(
        measure("elementwise small", square(16)?, false)?,
        measure("elementwise", square(512)?, false)?,
    );
    let reduce = fit(
        measure("reduce small", input(&[16, 16])?.softmax(-1)?, false)?,
        measure("reduce", input(&[512, 512])?.softmax(-1)?, false)?,
    );
    let c = HostConstants {
        floor_us: floor,
        bytes_per_us: data.1,
        gemm_flops_per_us: gemm.1,
        conv_flops_per_us: conv.1,
        elementwise_per_us: elementwise.1,
        reduce_per_us: reduce.1,
        op_us: OpOverhead {
            gemm: gemm.0,
            conv: conv.0,
            elementwise: elementwise.0,
            reduce: reduce.0,
            data: data.0,
        },
    };
    c.validate()?;
    Ok((c, probes))
}
