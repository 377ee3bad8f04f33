//! `aneforge calibrate`: measure the reference executor on this machine: the per-call floor;
//! per kind a rate curve by size from per-op probes (copies by bytes, permutes, elementwise ops
//! by form: binary, unary, scalar and broadcast, each as its own step and inside a fused run,
//! reductions by elements (softmax on its own, over pseudo-random values), gemm by min(K, N)
//! with a weight per op, conv by channels and by flops); the rate of ops folded into a conv's
//! output pass; the port conversion; and the fixed cost of a plan's region → host →
//! region cut. Every probe program is compiled twice and timed in rounds spread over the whole
//! run; each constant comes from the fastest round. Every constant is a measurement of the
//! executor as it is now (probes, not constants).

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

/// Rounds every probe program is timed in. Rounds run round-robin over all probes once every
/// probe is compiled, so a probe's rounds spread over the whole calibration: a phase of load
/// (another job's build sharing the host's cores and caches) that slows every program for a few
/// seconds slows one of its rounds, not all of them. A probe's value is its fastest round.
const ROUNDS: usize = 6;
/// Fresh programs compiled for each probe program; round r times instance r % INSTANCES, so a
/// program stuck in a slow state for its lifetime (its buffers' placement) cannot set a constant.
const INSTANCES: usize = 2;

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(ramp_at).collect()
}

/// Element `i` of [`ramp`].
fn ramp_at(i: usize) -> f32 {
    ((i % 13) as f32 - 6.0) / 16.0
}

/// `n` pseudo-random values, roughly normal with σ ≈ 2 (a sum of four xorshift uniforms), like
/// attention scores: a softmax over them takes its exp's slow path for most elements (the fp16
/// exp table serves only `x - max` exact in fp16, as on a ramp's evenly spaced values) and its
/// branches follow no pattern (on rows that repeat, the branch predictor learns them).
fn spread(n: usize) -> Vec<f32> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    (0..n)
        .map(|_| 1.7 * (uniform() + uniform() + uniform() + uniform()))
        .collect()
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
/// Channels = side of the convolution work probes (3×3 on c×c: 74 Kflop to 302 Mflop).
const CONV_WORK_CHANNELS: [usize; CURVE_POINTS] = [8, 16, 32, 64];

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

/// Programs timed together: [`INSTANCES`] compiled copies of each, and each one's fastest
/// round so far (µs per call).
struct Job {
    programs: Vec<Vec<Timed>>,
    best: Vec<f64>,
}

/// A per-op probe: programs `base` and `test` (job `job`) that differ by `n` ops of `work`.
struct OpProbe {
    name: &'static str,
    job: usize,
    n: usize,
    work: f64,
}

/// Builds the programs of a per-op probe with `n` extra ops: `(base, test)`.
type PairFn<'a> = &'a dyn Fn(usize) -> Result<(Tensor, Tensor)>;

/// The probes of one calibration run, each program measured by `clock` for `budget` in all.
struct Prober {
    budget: Duration,
    clock: Clock,
    jobs: Vec<Job>,
    probes: Vec<Probe>,
}

impl Prober {
    /// Compile [`INSTANCES`] copies of each program (`outputs`, `opts`) and time round 0.
    fn add(&mut self, programs: &[(Tensor, CompileOptions)]) -> Result<usize> {
        let programs = programs
            .iter()
            .map(|(y, opts)| {
                (0..INSTANCES)
                    .map(|_| Timed::new(std::slice::from_ref(y), opts))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let best = vec![f64::INFINITY; programs.len()];
        self.jobs.push(Job { programs, best });
        self.round(self.jobs.len() - 1, 0)?;
        Ok(self.jobs.len() - 1)
    }

    /// Time every program of `job` once (instance `r` % [`INSTANCES`], a [`ROUNDS`]-th of the
    /// budget), alternating, keeping each one's fastest median.
    fn round(&mut self, job: usize, r: usize) -> Result<()> {
        let slice = self.budget / ROUNDS as u32;
        let job = &mut self.jobs[job];
        for (p, best) in job.programs.iter_mut().zip(&mut job.best) {
            *best = best.min(p[r % INSTANCES].median_us(slice, self.clock)?);
        }
        Ok(())
    }

    /// Rounds 1.. of every job, round-robin over the jobs, then free the programs.
    fn finish(&mut self) -> Result<()> {
        for r in 1..ROUNDS {
            for job in 0..self.jobs.len() {
                self.round(job, r)?;
            }
        }
        self.jobs.iter_mut().for_each(|j| j.programs.clear());
        Ok(())
    }

    /// µs per call of `job`'s programs (their fastest round).
    fn best(&self, job: usize) -> &[f64] {
        &self.jobs[job].best
    }

    /// A per-op probe of `work` per op: `pair(n)` built for n = [`CHAIN`], lengthened 4× at a
    /// time up to 16 × [`CHAIN`] while round 0 cannot tell `test` from `base` (ops far cheaper
    /// than the call).
    fn per_op(&mut self, name: &'static str, pair: PairFn, work: f64) -> Result<OpProbe> {
        let opts = reference();
        let mut n = CHAIN;
        loop {
            let (base, test) = pair(n)?;
            let job = self.add(&[(base, opts.clone()), (test, opts.clone())])?;
            let t = self.best(job);
            if t[1] > t[0] || n >= 16 * CHAIN {
                return Ok(OpProbe { name, job, n, work });
            }
            self.jobs.pop();
            n *= 4;
        }
    }

    /// µs of one op of `p` after [`Prober::finish`]: (test − base) / n, recorded as a probe;
    /// not above 0 is an error.
    fn op_us(&mut self, p: &OpProbe) -> Result<f64> {
        let t = self.best(p.job);
        let (base, us) = (t[0], (t[1] - t[0]) / p.n as f64);
        self.probes.push(Probe {
            name: p.name,
            median_us: us,
            work: p.work,
        });
        if us <= 0.0 {
            return Err(Error::Runtime {
                op: "calibrate".into(),
                msg: format!("probe {}: {} more ops did not take longer ({base:.1} µs); rerun on an idle machine", p.name, p.n),
            });
        }
        Ok(us)
    }

    /// A chain probe of `op` at `shape`: one op against 1 + n ops (the call floor and the port
    /// conversion cancel). Consecutive elementwise ops run as one fused step, so for those this
    /// is the cost of an op inside a fused run.
    fn chain_op(
        &mut self,
        name: &'static str,
        shape: &[usize],
        op: &dyn Fn(&Tensor, usize) -> Result<Tensor>,
        bytes: bool,
    ) -> Result<OpProbe> {
        let work = probe_work(&chain(shape, 1, op)?, bytes)?;
        let pair = |n: usize| Ok((chain(shape, 1, op)?, chain(shape, 1 + n, op)?));
        self.per_op(name, &pair, work)
    }

    /// Chain probes for a curve, one per `(size, shape, op)`.
    fn curve(
        &mut self,
        name: &'static str,
        probes: Vec<ChainProbe>,
        bytes: bool,
    ) -> Result<Vec<(f64, OpProbe)>> {
        probes
            .into_iter()
            .map(|(size, shape, op)| Ok((size, self.chain_op(name, &shape, op.as_ref(), bytes)?)))
            .collect()
    }

    /// Standalone-step probes of an elementwise op for a curve: per side in [`SIDES`], n
    /// broadcast adds (`y + row`, never fused) against the same n each followed by `op`, so
    /// every `op` runs as its own step.
    fn standalone(
        &mut self,
        name: &'static str,
        op: fn(&Tensor) -> Result<Tensor>,
    ) -> Result<Vec<(f64, OpProbe)>> {
        SIDES
            .iter()
            .map(|&s| {
                let row = crate::constant("calibrate", HostArray::f32(&[s], &ramp(s)))?;
                let sep = |n: usize, with: bool| {
                    chain(&[s, s], n, &|y: &Tensor, _| {
                        let y = y.add(&row)?;
                        if with {
                            op(&y)
                        } else {
                            Ok(y)
                        }
                    })
                };
                let work = probe_work(&op(&input(&[s, s])?)?, false)?;
                let pair = |n: usize| Ok((sep(n, false)?, sep(n, true)?));
                Ok(((s * s) as f64, self.per_op(name, &pair, work)?))
            })
            .collect()
    }

    /// The rate curve `(size, work / per-op µs)` of finished probes.
    fn points(&mut self, probes: &[(f64, OpProbe)]) -> Result<RateCurve> {
        let mut points = Vec::with_capacity(probes.len());
        for (size, p) in probes {
            let us = self.op_us(p)?;
            points.push([*size, p.work / us]);
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

/// Softmax units `softmax(y − z)` with a spread `[n, n]` constant z, for every side in [`SIDES`]
/// (keyed by n²): each softmax reads ≈ −z (the previous one's output is below z's precision
/// mostly), pseudo-random like attention scores; the subtraction is a step of its own (its
/// neighbours are softmaxes; an add would join the softmax's step, see
/// `exec::reference::softmax_fuse`), costed at the elementwise curve and taken off (see
/// [`less_adds`]).
fn softmax_probes() -> Result<Vec<ChainProbe>> {
    SIDES
        .iter()
        .map(|&n| {
            let z = crate::constant("calibrate", HostArray::f32(&[n, n], &spread(n * n)))?;
            let op = move |y: &Tensor, _: usize| y.sub(&z)?.softmax(-1);
            Ok(((n * n) as f64, vec![n, n], Box::new(op) as ChainOp))
        })
        .collect()
}

/// The softmax curve from the finished softmax unit probes: each unit's µs less its add's
/// (n² elements at the `adds` curve's rate); a remainder lost in timing noise is an error.
fn less_adds(p: &mut Prober, probes: &[(f64, OpProbe)], adds: &RateCurve) -> Result<RateCurve> {
    let mut points = Vec::with_capacity(probes.len());
    for (size, probe) in probes {
        let add = adds.rate(*size).map_or(0.0, |r| size / r);
        let us = p.op_us(probe)? - add;
        if us <= 0.0 {
            return Err(Error::Runtime {
                op: "calibrate".into(),
                msg: format!("probe softmax at {size} elements: not slower than its add ({add:.1} µs); rerun on an idle machine"),
            });
        }
        points.push([*size, size / us]);
    }
    Ok(RateCurve::new(&points))
}

/// `y · w` with a ramp `[s, s]` weight, shifted per op of the chain.
fn gemm_probe(s: usize) -> Result<ChainProbe> {
    let m = ((1 << 19) / (s * s)).clamp(64, 4096);
    // Each op of the chain its own weight, as each layer of a model: a weight shared by the
    // chain would stay in cache and run faster than a model's.
    let op = move |y: &Tensor, i: usize| {
        let w: Vec<f32> = (0..s * s).map(|j| ramp_at(j + 7 * i)).collect();
        y.matmul(&crate::constant("calibrate", HostArray::f32(&[s, s], &w))?)
    };
    Ok((s as f64, vec![m, s], Box::new(op) as ChainOp))
}

/// A padded 3×3 convolution of `c` channels on an `h`×`h` image, h = clamp(⌊√(3e7 / 18c²)⌋, 10, 64).
fn conv_probe(c: usize) -> ChainProbe {
    let h = ((3e7 / (18.0 * (c * c) as f64)).sqrt() as usize).clamp(10, 64);
    (c as f64, vec![1, c, h, h], conv_op(c))
}

/// A padded 3×3 convolution of `c` channels on a `c`×`c` image, keyed by its flops (18c⁴).
fn conv_work_probe(c: usize) -> ChainProbe {
    ((18 * c * c * c * c) as f64, vec![1, c, c, c], conv_op(c))
}

/// One padded 3×3 convolution of `c` channels with a ramp weight.
fn conv_op(c: usize) -> ChainOp {
    let w = ramp(c * c * 9);
    Box::new(move |y: &Tensor, _: usize| {
        let opts = ConvOptions {
            pad: [1; 4],
            ..ConvOptions::default()
        };
        conv2d(y, HostArray::f32(&[c, c, 3, 3], &w), None, opts)
    })
}

/// Measure every constant by `clock`; `budget` is the time spent per probe program (over
/// [`ROUNDS`] rounds spread over the run). The floor comes from a chain of 1 and 33 tiny ops
/// (floor = t1 − per-op). Each kind's rate curve (copy by bytes, permute, elementwise and
/// reduce by elements, softmax by elements over pseudo-random values, gemm by min(K, N), conv by
/// channels and by flops) comes from per-op probes, so the
/// floor and the port conversion cancel: elementwise ops once as their own steps (between
/// broadcast adds) and once inside a fused run (chains); the port conversion, by size, is each
/// one-op `x · x` call minus the floor and that op as its own step; the per-cut µs comes from
/// a region → host → region plan net of everything else the model predicts.
pub fn calibrate(budget: Duration, clock: Clock) -> Result<(HostConstants, Vec<Probe>)> {
    let tiny = |n: usize| chain(&[1, 8], n, &|y: &Tensor, _: usize| y.add_scalar(1.0));
    let mut p = Prober {
        budget,
        clock,
        jobs: Vec::new(),
        probes: Vec::new(),
    };
    let floor_job = p.add(&[(tiny(1)?, reference()), (tiny(33)?, reference())])?;
    // Full-extent slices: a contiguous copy each (a reshape whose input dies moves its buffer
    // instead, so a chain of reshapes would cost nothing on the reference executor).
    let copy = p.curve(
        "copy",
        SIDES
            .iter()
            .map(|&n| {
                let op = move |y: &Tensor, _: usize| y.slice_by_size(&[0, 0], &[n, n]);
                (4.0 * (n * n) as f64, vec![n, n], Box::new(op) as ChainOp)
            })
            .collect(),
        true,
    )?;
    let permute = p.curve("permute", squares(|y, _| y.transpose(&[1, 0])), false)?;
    let elementwise = p.standalone("elementwise", |y| y.mul(y))?;
    let unary = p.standalone("unary", |y| y.relu())?;
    let scalar = p.standalone("scalar", |y| y.mul_scalar(0.5))?;
    let softmax = p.curve("softmax", softmax_probes()?, false)?;
    let fused_binary = p.curve("fused elementwise", squares(|y, _| y.mul(y)), false)?;
    let fused_unary = p.curve("fused unary", squares(|y, _| y.relu()), false)?;
    let fused_scalar = p.curve("fused scalar", squares(|y, _| y.mul_scalar(0.5)), false)?;
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
    let conv_work = p.curve(
        "conv work",
        CONV_WORK_CHANNELS
            .iter()
            .map(|&c| conv_work_probe(c))
            .collect(),
        false,
    )?;
    let epilogue = epilogue_job(&mut p)?;
    let cut = cut_job(&mut p)?;
    let host = host_job(&mut p)?;
    p.finish()?;

    let t = p.best(floor_job);
    let floor = (t[0] - (t[1] - t[0]) / 32.0).max(0.0);
    p.probes.push(Probe {
        name: "floor",
        median_us: floor,
        work: 0.0,
    });
    let copy = p.points(&copy)?;
    let permute = p.points(&permute)?;
    let elementwise = p.points(&elementwise)?;
    let unary = p.points(&unary)?;
    let scalar = p.points(&scalar)?;
    let fused_binary_curve = p.points(&fused_binary)?;
    let fused_unary_curve = p.points(&fused_unary)?;
    let fused_scalar_curve = p.points(&fused_scalar)?;
    let broadcast = p.points(&broadcast)?;
    let reduce = p.points(&reduce)?;
    let softmax = less_adds(&mut p, &softmax, &elementwise)?;
    let gemm = p.points(&gemm)?;
    let conv = p.points(&conv)?;
    let conv_work = p.points(&conv_work)?;
    // The port term per size: each one-op `x · x` call (the in-run probes' base) minus the
    // floor and the op as its own step, for its 2n² elements (a size whose remainder is lost
    // in timing noise gives no point).
    let last = |k: &RateCurve| k.points[CURVE_POINTS - 1][1];
    let mut port_points = Vec::new();
    let mut ports = 0.0;
    for (size, probe) in &fused_binary {
        let op = elementwise.rate(*size).map_or(0.0, |r| size / r);
        ports = p.best(probe.job)[0] - floor - op;
        if ports > 0.0 {
            port_points.push([2.0 * size, 2.0 * size / ports]);
        }
    }
    let n = SIDES[CURVE_POINTS - 1];
    let elems = (2 * n * n) as f64;
    p.probes.push(Probe {
        name: "ports",
        median_us: ports,
        work: elems,
    });
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
        conv_work_curve: conv_work,
        softmax_curve: softmax,
        permute_curve: permute,
        elementwise_curve: elementwise,
        reduce_curve: reduce,
        copy_curve: copy,
        port_elems_per_us: if ports > 0.0 { elems / ports } else { 0.0 },
        port_curve: RateCurve::new(&port_points),
        cut_us: 0.0,
        unary_curve: unary,
        scalar_curve: scalar,
        broadcast_curve: broadcast,
        epilogue_per_us: 0.0,
        fused_binary_curve,
        fused_unary_curve,
        fused_scalar_curve,
        host_curve: RateCurve::EMPTY,
    };
    c.validate()?;
    c.epilogue_per_us = epilogue_rate(&mut p, epilogue);
    c.cut_us = cut_us(&c, &mut p, cut)?;
    c.host_curve = host_curve(&c, &mut p, host)?;
    c.validate()?;
    Ok((c, p.probes))
}

/// The epilogue probe's programs: [`CHAIN`] 1×1 convs of 8 channels on 64×64, alone and each
/// followed by batch_norm and relu (both run in the conv's step); returns the job.
fn epilogue_job(p: &mut Prober) -> Result<usize> {
    let (c, h) = (EPILOGUE_CHANNELS, EPILOGUE_SIDE);
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
    p.add(&[(plain, reference()), (fused, reference())])
}

/// Channels and side of the epilogue probe's convs.
const EPILOGUE_CHANNELS: usize = 8;
const EPILOGUE_SIDE: usize = 64;

/// Elements per µs of ops folded into a conv's output pass, from the finished epilogue `job`:
/// the difference over the folded elements (2 per conv output element). A difference lost in
/// timing noise is taken as 1 % of the plain chain's time.
fn epilogue_rate(p: &mut Prober, job: usize) -> f64 {
    let t = p.best(job);
    let (c, h) = (EPILOGUE_CHANNELS, EPILOGUE_SIDE);
    let elements = (2 * CHAIN * c * h * h) as f64;
    let us = (t[1] - t[0]).max(0.01 * t[0]);
    p.probes.push(Probe {
        name: "epilogue",
        median_us: us / CHAIN as f64,
        work: elements / CHAIN as f64,
    });
    elements / us
}

/// The cut probe's plan: x → +1 (region) → flatten (host, `route="host"`) → +1 (region);
/// returns the job and its graph.
fn cut_job(p: &mut Prober) -> Result<(usize, Graph)> {
    let y = input(&[1, 4, 8, 8])?
        .add_scalar(1.0)?
        .flatten()?
        .add_scalar(1.0)?;
    let opts = CompileOptions {
        route: crate::options::Route::Host,
        ..reference()
    };
    let job = p.add(&[(y.clone(), opts)])?;
    Ok((job, Graph::from_outputs(&[(None, y)])?))
}

/// The host-op probe's plan: x [256, 256] → ·2 (region) → topk 8 (host) → +1 (region);
/// returns the job and its graph.
fn host_job(p: &mut Prober) -> Result<(usize, Graph)> {
    let (values, _) = input(&[256, 256])?
        .mul_scalar(2.0)?
        .topk(8, -1, true, true)?;
    let y = values.add_scalar(1.0)?;
    let job = p.add(&[(y.clone(), reference())])?;
    Ok((job, Graph::from_outputs(&[(None, y)])?))
}

/// The host-op rate (one point: elements per µs at the probe's size): the host-op probe's plan
/// measured, minus what `c` predicts for everything but its host op (cuts included); a
/// remainder lost in timing noise is taken as 1 % of the plan's time.
fn host_curve(c: &HostConstants, p: &mut Prober, (job, g): (usize, Graph)) -> Result<RateCurve> {
    let median = p.best(job)[0];
    let e = super::estimate_host(&g, c, "probe")?;
    let Some(op) = e.ops.iter().find(|o| o.work.kind == super::WorkKind::Host) else {
        return Err(Error::Runtime {
            op: "calibrate".into(),
            msg: "the host-op probe has no host op (topk was fused)".into(),
        });
    };
    let elements = op.work.flops as f64;
    let us = (median - (e.micros - op.micros)).max(0.01 * median);
    p.probes.push(Probe {
        name: "host",
        median_us: us,
        work: elements,
    });
    Ok(RateCurve::new(&[[elements, elements / us]]))
}

/// The per-cut µs: the cut probe's plan measured, minus what `c` (cut term 0) predicts for it,
/// over its host stages (≥ 0).
fn cut_us(c: &HostConstants, p: &mut Prober, (job, g): (usize, Graph)) -> Result<f64> {
    let median = p.best(job)[0];
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
