//! `aneforge calibrate`: measure the reference executor on this machine: the per-call floor; per
//! kind (copy, gemm, conv, elementwise, reduce) a per-op overhead and a rate from a small and a
//! large single-op probe; rate curves by shape for gemm (min(K, N)), conv (channels) and
//! permutes (size: cache regime); and the fixed cost of a plan's region → host → region cut.
//! Every constant is a measurement of the executor as it is now (probes, not constants).

use std::time::{Duration, Instant};

use super::host::{HostConstants, OpOverhead, RateCurve, CURVE_POINTS};
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
    /// Bytes (copy probes) or flops / elements (rate probes) of its one compute node; for the
    /// cut probe, the µs the model predicts for it without a cut term.
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
    median_call_us_with(outputs, &reference(), budget, clock)
}

/// The reference executor's compile options.
fn reference() -> CompileOptions {
    CompileOptions {
        device: Device::Reference,
        ..CompileOptions::default()
    }
}

/// [`median_call_us`] of `outputs` compiled with `opts`.
fn median_call_us_with(
    outputs: &[Tensor],
    opts: &CompileOptions,
    budget: Duration,
    clock: Clock,
) -> Result<f64> {
    let outs: Vec<(Option<String>, Tensor)> = outputs.iter().map(|t| (None, t.clone())).collect();
    let mut net = compile(&outs, opts)?;
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

/// Matrix-product probe sizes: K = N = s with M rows, about 2–30 Mflop each.
const GEMM_SIZES: [usize; CURVE_POINTS] = [8, 32, 128, 512];
/// Convolution probe channel counts (3×3, so min(K, Cout) = c).
const CONV_CHANNELS: [usize; CURVE_POINTS] = [4, 16, 64, 256];
/// Permute probe sizes: a `[r, c]` matrix transposed (1 Ki to 1 Mi elements).
const PERMUTE_SHAPES: [[usize; 2]; CURVE_POINTS] = [[32, 32], [128, 128], [256, 512], [1024, 1024]];

/// The probes of one calibration run: each measured by `clock` for `budget`, net of the floor.
struct Prober {
    budget: Duration,
    clock: Clock,
    floor: f64,
    probes: Vec<Probe>,
}

impl Prober {
    /// Median µs of `y` minus the floor (an error when not above it) and its work (bytes, or
    /// flops / elements).
    fn measure(&mut self, name: &'static str, y: Tensor, bytes: bool) -> Result<(f64, f64)> {
        let median = median_call_us(std::slice::from_ref(&y), self.budget, self.clock)?;
        let work = probe_work(&y, bytes)?;
        self.probes.push(Probe {
            name,
            median_us: median,
            work,
        });
        let net = median - self.floor;
        if net <= 0.0 {
            return Err(Error::Runtime {
                op: "calibrate".into(),
                msg: format!("probe {name} ran in {median:.1} µs, not above the {:.1} µs floor; rerun on an idle machine", self.floor),
            });
        }
        Ok((work, net))
    }

    /// A rate curve from one probe per size: `(size, work / (net µs − overhead))`, the net time
    /// kept at ≥ 1 % of the probe's so noise cannot make a rate infinite.
    fn curve(
        &mut self,
        name: &'static str,
        overhead: f64,
        probes: Vec<(f64, Tensor)>,
    ) -> Result<RateCurve> {
        let mut points = Vec::with_capacity(probes.len());
        for (size, y) in probes {
            let (work, net) = self.measure(name, y, false)?;
            points.push([size, work / (net - overhead).max(0.01 * net)]);
        }
        Ok(RateCurve::new(&points))
    }
}

/// Measure every constant by `clock`; `budget` is the wall time spent per probe. The floor
/// comes from a chain of 1 and 33 tiny ops (floor = t1 − per-op); each kind's per-op overhead
/// and rate from a small and a large probe; the gemm, conv and permute rate curves from one
/// probe per size (net of the kind's overhead); the per-cut µs from a region → host → region
/// plan net of its modelled floors, ops and bytes.
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
    let mut p = Prober {
        budget,
        clock,
        floor,
        probes: vec![Probe {
            name: "floor",
            median_us: floor,
            work: 0.0,
        }],
    };
    let copy =
        |rows: usize, cols: usize| input(&[1, rows, cols])?.reshape(&[rows as i64, cols as i64]);
    let data = fit(
        p.measure("copy small", copy(8, 16)?, true)?,
        p.measure("copy", copy(512, 1024)?, true)?,
    );
    let permute = p.curve(
        "permute",
        data.0,
        PERMUTE_SHAPES
            .iter()
            .map(|&[r, c]| Ok(((r * c) as f64, input(&[r, c])?.transpose(&[1, 0])?)))
            .collect::<Result<_>>()?,
    )?;
    let gemm_fit = fit(
        p.measure("gemm small", gemm(32, 64, 64)?, false)?,
        p.measure("gemm", gemm(256, 512, 512)?, false)?,
    );
    let gemm_curve = p.curve(
        "gemm curve",
        gemm_fit.0,
        GEMM_SIZES
            .iter()
            .map(|&s| {
                Ok((
                    s as f64,
                    gemm(((1 << 21) / (s * s)).clamp(64, 16_384), s, s)?,
                ))
            })
            .collect::<Result<_>>()?,
    )?;
    let conv_fit = fit(
        p.measure("conv small", conv(8, 18)?, false)?,
        p.measure("conv", conv(64, 58)?, false)?,
    );
    let conv_curve = p.curve(
        "conv curve",
        conv_fit.0,
        CONV_CHANNELS
            .iter()
            .map(|&c| {
                // About 3e7 flops: 2·9·c²·h² with h in [10, 130].
                let h = ((3e7 / (18.0 * (c * c) as f64)).sqrt() as usize).clamp(10, 130);
                Ok((c as f64, conv(c, h)?))
            })
            .collect::<Result<_>>()?,
    )?;
    let square = |n: usize| -> Result<Tensor> {
        let x = input(&[1, n, n])?;
        x.mul(&x)
    };
    let elementwise = fit(
        p.measure("elementwise small", square(16)?, false)?,
        p.measure("elementwise", square(512)?, false)?,
    );
    let reduce = fit(
        p.measure("reduce small", input(&[16, 16])?.softmax(-1)?, false)?,
        p.measure("reduce", input(&[512, 512])?.softmax(-1)?, false)?,
    );
    let mut c = HostConstants {
        floor_us: floor,
        bytes_per_us: data.1,
        gemm_flops_per_us: gemm_fit.1,
        conv_flops_per_us: conv_fit.1,
        elementwise_per_us: elementwise.1,
        reduce_per_us: reduce.1,
        op_us: OpOverhead {
            gemm: gemm_fit.0,
            conv: conv_fit.0,
            elementwise: elementwise.0,
            reduce: reduce.0,
            data: data.0,
        },
        copy_bytes_per_us: data.1,
        gemm_curve,
        conv_curve,
        permute_curve: permute,
        cut_us: 0.0,
    };
    c.validate()?;
    c.cut_us = cut_probe(&c, &mut p)?;
    c.validate()?;
    Ok((c, p.probes))
}

/// The per-cut µs: a plan x → +1 (region) → flatten (host, `route="host"`) → +1 (region),
/// measured, minus what `c` (cut term 0) predicts for it, over its host stages (≥ 0).
fn cut_probe(c: &HostConstants, p: &mut Prober) -> Result<f64> {
    let y = input(&[1, 4, 8, 8])?
        .add_scalar(1.0)?
        .flatten()?
        .add_scalar(1.0)?;
    let opts = CompileOptions {
        route: crate::options::Route::Host,
        ..reference()
    };
    let median = median_call_us_with(std::slice::from_ref(&y), &opts, p.budget, p.clock)?;
    let g = Graph::from_outputs(&[(None, y)])?;
    let modelled = super::estimate_host(&g, c, "probe")?;
    let stages =
        super::plan_cost::plan_cost(&g, c.bytes_per_us, 0.0)?.map_or(0, |pc| pc.host_stages);
    if stages == 0 {
        return Err(Error::Runtime {
            op: "calibrate".into(),
            msg: "the cut probe has no host stage (flatten was fused)".into(),
        });
    }
    p.probes.push(Probe {
        name: "cut",
        median_us: median,
        work: modelled.micros,
    });
    Ok(((median - modelled.micros) / stages as f64).max(0.0))
}
