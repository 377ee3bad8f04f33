//! `aneforge calibrate`: measure the reference executor on this machine: the per-call floor;
//! per kind a rate curve by size from chain probes (copies by bytes, permutes, elementwise ops
//! by form: binary, unary, scalar and broadcast, reductions by elements, gemm by min(K, N), conv
//! by channels); the rate of ops folded into a conv's output pass; the port conversion; and
//! the fixed cost of a plan's region → host → region cut. Every probe pair is timed in
//! alternating rounds and each constant comes from the fastest round. Every constant is a
//! measurement of the executor as it is now (probes, not constants).

use std::time::Duration;

use super::host::{HostConstants, OpOverhead, RateCurve, CURVE_POINTS};
use super::timing::{reference, Timed};
use super::work::graph_work;
use crate::compile::CompileOptions;
use crate::error::{Error, Result};
pub use crate::exec::clock::Clock;
use crate::graph::{Graph, Tensor};
use crate::ops::io::HostArray;
use crate::{batch_norm, conv2d, input, ConvOptions};

/// One probe: its name, the constant it measures and the median µs per call.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub name: &'static str,
    pub median_us: f64,
    /// Bytes (copy probes) or flops / elements (rate probes) of its one compute node; for the
    /// cut probe, the µs the model predicts for it without a cut term.
    pub work: f64,
}

/// Times each probe pair is measured (alternating, each for a fifth of the budget); a probe's
/// value comes from its fastest round, so a round slowed by load or by a slow allocator mode
/// (page faults of freshly mapped buffers) cannot skew a constant.
const REPEATS: usize = 5;

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

/// Ops a chain probe adds to its one-op twin (per-op µs = the difference / this).
const CHAIN: usize = 4;
/// Elementwise, reduce, copy and permute probe sizes: `[n, n]` for these n (256 to 1 Mi elements).
const SIDES: [usize; CURVE_POINTS] = [16, 64, 256, 1024];
/// Matrix-product probe sizes: K = N = s with M = clamp(2^19 / s², 64, 4096) rows.
const GEMM_SIZES: [usize; CURVE_POINTS] = [8, 32, 128, 512];
/// Convolution probe channel counts (3×3, padded to keep the size, so min(K, Cout) = c).
const CONV_CHANNELS: [usize; CURVE_POINTS] = [4, 16, 64, 256];

/// `n` ops `op` applied one after another to a fresh input of `shape`.
fn chain(
    shape: &[usize],
    n: usize,
    op: &dyn Fn(&Tensor, usize) -> Result<Tensor>,
) -> Result<Tensor> {
    let mut y = input(shape)?;
    for i in 0..n {
        y = op(&y, i)?;
    }
    Ok(y)
}

/// The probes of one calibration run, each measured by `clock` for `budget`.
struct Prober {
    budget: Duration,
    clock: Clock,
    probes: Vec<Probe>,
}

impl Prober {
    /// `(a, b − a)` µs per call, each the fastest of [`REPEATS`] alternating rounds' medians
    /// (each round times `a` then `b` for a `REPEATS`-th of the budget).
    fn pair(&self, a: &Tensor, b: &Tensor) -> Result<(f64, f64)> {
        let mut ta = Timed::new(std::slice::from_ref(a), &reference())?;
        let mut tb = Timed::new(std::slice::from_ref(b), &reference())?;
        let slice = self.budget / REPEATS as u32;
        let (mut xa, mut xb) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..REPEATS {
            xa = xa.min(ta.median_us(slice, self.clock)?);
            xb = xb.min(tb.median_us(slice, self.clock)?);
        }
        Ok((xa, xb - xa))
    }

    /// µs of one `op` at `shape`: (a chain of 1 + n ops minus one op, see [`Prober::pair`])
    /// over n (the call floor and the port conversion cancel), n = [`CHAIN`], lengthened 4×
    /// at a time up to 16 × [`CHAIN`] while the difference is lost in timing noise (ops far
    /// cheaper than the call). Also returns the one-op call's median. Still not above 0 is an
    /// error.
    fn per_op(
        &mut self,
        name: &'static str,
        shape: &[usize],
        op: &dyn Fn(&Tensor, usize) -> Result<Tensor>,
        bytes: bool,
    ) -> Result<(f64, f64, f64)> {
        let one = chain(shape, 1, op)?;
        let mut n = CHAIN;
        let (us, t1) = loop {
            let (t1, d) = self.pair(&one, &chain(shape, 1 + n, op)?)?;
            let us = d / n as f64;
            if us > 0.0 || n >= 16 * CHAIN {
                break (us, t1);
            }
            n *= 4;
        };
        let work = probe_work(&one, bytes)?;
        self.probes.push(Probe {
            name,
            median_us: us,
            work,
        });
        if us <= 0.0 {
            return Err(Error::Runtime {
                op: "calibrate".into(),
                msg: format!("probe {name}: {n} more ops did not take longer than one ({t1:.1} µs); rerun on an idle machine"),
            });
        }
        Ok((work, us, t1))
    }

    /// A rate curve, one chain probe per `(size, shape, op)`: `(size, work / per-op µs)`.
    fn curve(
        &mut self,
        name: &'static str,
        probes: Vec<ChainProbe>,
        bytes: bool,
    ) -> Result<RateCurve> {
        let mut points = Vec::with_capacity(probes.len());
        for (size, shape, op) in probes {
            let (work, us, _) = self.per_op(name, &shape, op.as_ref(), bytes)?;
            points.push([size, work / us]);
        }
        Ok(RateCurve::new(&points))
    }
}

/// One op of a chain probe (the chain index is its argument).
type ChainOp = Box<dyn Fn(&Tensor, usize) -> Result<Tensor>>;

/// `(n², [n, n], op)` for every side in [`SIDES`].
type ChainProbe = (f64, Vec<usize>, ChainOp);

fn squares(op: fn(&Tensor, usize) -> Result<Tensor>) -> Vec<ChainProbe> {
    SIDES
        .iter()
        .map(|&n| ((n * n) as f64, vec![n, n], Box::new(op) as ChainOp))
        .collect()
}

/// `y + row` with a ramp `[n]` row broadcast over `[n, n]`, for every side in [`SIDES`].
fn broadcast_probes() -> Result<Vec<ChainProbe>> {
    SIDES
        .iter()
        .map(|&n| {
            let row = crate::constant("calibrate", HostArray::f32(&[n], &ramp(n)))?;
            let op = move |y: &Tensor, _: usize| y.add(&row);
            Ok(((n * n) as f64, vec![n, n], Box::new(op) as ChainOp))
        })
        .collect()
}

/// `y · w` with a ramp `[s, s]` weight (shared by the chain).
fn gemm_probe(s: usize) -> Result<ChainProbe> {
    let w = crate::constant("calibrate", HostArray::f32(&[s, s], &ramp(s * s)))?;
    let m = ((1 << 19) / (s * s)).clamp(64, 4096);
    Ok((
        s as f64,
        vec![m, s],
        Box::new(move |y: &Tensor, _: usize| y.matmul(&w)) as ChainOp,
    ))
}

/// A padded 3×3 convolution of `c` channels on an `h`×`h` image, h = clamp(⌊√(3e7 / 18c²)⌋, 10, 64).
fn conv_probe(c: usize) -> ChainProbe {
    let h = ((3e7 / (18.0 * (c * c) as f64)).sqrt() as usize).clamp(10, 64);
    let w = ramp(c * c * 9);
    let op = move |y: &Tensor, _: usize| {
        let opts = ConvOptions {
            pad: [1; 4],
            ..ConvOptions::default()
        };
        conv2d(y, HostArray::f32(&[c, c, 3, 3], &w), None, opts)
    };
    (c as f64, vec![1, c, h, h], Box::new(op) as ChainOp)
}

/// Measure every constant by `clock`; `budget` is the wall time spent per probe call. The floor
/// comes from a chain of 1 and 33 tiny ops (floor = t1 − per-op). Each kind's rate curve (copy
/// by bytes, permute, elementwise and reduce by elements, gemm by min(K, N), conv by channels)
/// comes from chain probes, so the floor and the port conversion cancel; the port conversion
/// is measured from the largest elementwise probe's one-op call (minus floor and op); the
/// per-cut µs from a region → host → region plan net of everything else the model predicts.
pub fn calibrate(budget: Duration, clock: Clock) -> Result<(HostConstants, Vec<Probe>)> {
    let tiny = |n: usize| chain(&[1, 8], n, &|y: &Tensor, _: usize| y.add_scalar(1.0));
    let mut p = Prober {
        budget,
        clock,
        probes: Vec::new(),
    };
    let (one, d) = p.pair(&tiny(1)?, &tiny(33)?)?;
    let floor = (one - d / 32.0).max(0.0);
    p.probes.push(Probe {
        name: "floor",
        median_us: floor,
        work: 0.0,
    });
    // Reshapes alternate [n, n] ↔ [n/2, 2n] (a contiguous copy each).
    let copy = p.curve(
        "copy",
        SIDES
            .iter()
            .map(|&n| {
                let op = move |y: &Tensor, i: usize| {
                    let s = if i % 2 == 0 {
                        [n as i64 / 2, 2 * n as i64]
                    } else {
                        [n as i64, n as i64]
                    };
                    y.reshape(&s)
                };
                (4.0 * (n * n) as f64, vec![n, n], Box::new(op) as ChainOp)
            })
            .collect(),
        true,
    )?;
    let permute = p.curve("permute", squares(|y, _| y.transpose(&[1, 0])), false)?;
    let elementwise = p.curve("elementwise", squares(|y, _| y.mul(y)), false)?;
    let unary = p.curve("unary", squares(|y, _| y.relu()), false)?;
    let scalar = p.curve("scalar", squares(|y, _| y.mul_scalar(0.5)), false)?;
    let broadcast = p.curve("broadcast", broadcast_probes()?, false)?;
    let reduce = p.curve("reduce", squares(|y, _| y.softmax(-1)), false)?;
    let gemm = p.curve(
        "gemm",
        GEMM_SIZES
            .iter()
            .map(|&s| gemm_probe(s))
            .collect::<Result<_>>()?,
        false,
    )?;
    let conv = p.curve(
        "conv",
        CONV_CHANNELS.iter().map(|&c| conv_probe(c)).collect(),
        false,
    )?;
    // The port term: the largest elementwise one-op call minus floor and op, for 2n² elements.
    let n = SIDES[CURVE_POINTS - 1];
    let (_, op_us, t1) = p.per_op("ports", &[n, n], &|y: &Tensor, _: usize| y.mul(y), false)?;
    let ports = t1 - floor - op_us;
    let last = |k: &RateCurve| k.points[CURVE_POINTS - 1][1];
    let mut c = HostConstants {
        floor_us: floor,
        bytes_per_us: last(&copy),
        gemm_flops_per_us: last(&gemm),
        conv_flops_per_us: last(&conv),
        elementwise_per_us: last(&elementwise),
        reduce_per_us: last(&reduce),
        op_us: OpOverhead::default(),
        copy_bytes_per_us: last(&copy),
        gemm_curve: gemm,
        conv_curve: conv,
        permute_curve: permute,
        elementwise_curve: elementwise,
        reduce_curve: reduce,
        copy_curve: copy,
        port_elems_per_us: if ports > 0.0 {
            (2 * n * n) as f64 / ports
        } else {
            0.0
        },
        cut_us: 0.0,
        unary_curve: unary,
        scalar_curve: scalar,
        broadcast_curve: broadcast,
        epilogue_per_us: 0.0,
    };
    c.validate()?;
    c.epilogue_per_us = epilogue_probe(&mut p)?;
    c.cut_us = cut_probe(&c, &mut p)?;
    c.validate()?;
    Ok((c, p.probes))
}

/// Elements per µs of ops folded into a conv's output pass: [`CHAIN`] 1×1 convs of 8 channels
/// on 64×64, each followed by batch_norm and relu (both run in the conv's step), against the
/// same convs alone: the difference over the folded elements (2 per conv output element). A
/// difference lost in timing noise is taken as 1 % of the plain chain's time.
fn epilogue_probe(p: &mut Prober) -> Result<f64> {
    let (c, h) = (8, 64);
    let (w, shape) = (ramp(c * c), [c, c, 1, 1]);
    let conv = |y: &Tensor| conv2d(y, HostArray::f32(&shape, &w), None, ConvOptions::default());
    let stats: Vec<Vec<f32>> = [0.1, 2.0, 0.5, 0.25].iter().map(|&v| vec![v; c]).collect();
    let stat = |i: usize| HostArray::f32(std::slice::from_ref(&c), &stats[i]);
    let x = input(&[1, c, h, h])?;
    let (mut plain, mut fused) = (x.clone(), x);
    for _ in 0..CHAIN {
        plain = conv(&plain)?;
        let y = conv(&fused)?;
        fused = batch_norm(&y, stat(0), stat(1), Some(stat(2)), Some(stat(3)), 1e-3)?.relu()?;
    }
    let (t_plain, d) = p.pair(&plain, &fused)?;
    let elements = (2 * CHAIN * c * h * h) as f64;
    let us = d.max(0.01 * t_plain);
    p.probes.push(Probe {
        name: "epilogue",
        median_us: us / CHAIN as f64,
        work: elements / CHAIN as f64,
    });
    Ok(elements / us)
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
    let median = Timed::new(std::slice::from_ref(&y), &opts)?.median_us(p.budget, p.clock)?;
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
