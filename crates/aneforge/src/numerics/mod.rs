//! Numerical methods built as static graphs from public graph ops (matmul, mul, add,
//! transpose, ...): FFT, linear algebra. Every function compiles one program per (shape,
//! iteration count, device) into a [`Plan`], cached process-wide, and called many times.
//!
//! Accumulation rule: dot products and sums are written as matmuls (the ANE accumulates matmul
//! wide) and never as fp16 `reduce_sum` (see [`dot`]). Host-computed tables the graph
//! multiplies elementwise (FFT twiddles) are fed as program inputs through [`Feeds`].

pub mod dsp;
pub mod fft;
pub mod linalg;
pub mod special;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::compile::{compile, CompileOptions, Compiled, Device};
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::Tensor;
use crate::input_port;
pub use crate::passes::reduce_to_matmul::sum_last;
use crate::DType;

/// Plans kept alive at once (the ANE runtime holds ~128 live programs per process).
pub const PLAN_CACHE_CAPACITY: usize = 64;

static COMPILES: AtomicUsize = AtomicUsize::new(0);

/// Number of programs the numerics plans have compiled in this process (cache hits do not count).
pub fn compile_count() -> usize {
    COMPILES.load(Ordering::Relaxed)
}

/// Host tables fed to a program as extra input ports (named `aux0`, `aux1`, ...), collected while building it.
#[derive(Default)]
pub struct Feeds {
    data: Vec<(String, Vec<f32>)>,
}

impl Feeds {
    /// A new fp16 input port of `shape` that the plan fills with `data` (f32, C order) on every call.
    pub fn input(&mut self, shape: &[usize], data: Vec<f32>) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if data.len() != n {
            return Err(Error::shape(
                "numerics",
                format!(
                    "auxiliary table has {} values but shape {shape:?} needs {n}",
                    data.len()
                ),
            ));
        }
        let name = format!("aux{}", self.data.len());
        let t = input_port(shape, DType::Fp16, Some(&name))?;
        self.data.push((name, data));
        Ok(t)
    }
}

/// A compiled program plus the auxiliary tables it is fed with; callers supply the named user ports.
pub struct Plan {
    compiled: Compiled,
    /// Per program input port: `Ok(user index)` or `Err(aux table)`.
    ports: Vec<std::result::Result<usize, Vec<f32>>>,
}

impl Plan {
    /// Compile `outputs` on `device`; `user` names the user input ports in call order.
    pub fn build(
        user: &[&str],
        outputs: &[(&str, Tensor)],
        feeds: Feeds,
        device: Device,
    ) -> Result<Plan> {
        let outs: Vec<(Option<String>, Tensor)> = outputs
            .iter()
            .map(|(n, t)| (Some(n.to_string()), t.clone()))
            .collect();
        let compiled = compile(
            &outs,
            &CompileOptions {
                device,
                ..Default::default()
            },
        )?;
        COMPILES.fetch_add(1, Ordering::Relaxed);
        let mut aux: HashMap<String, Vec<f32>> = feeds.data.into_iter().collect();
        let ports = compiled
            .inputs()
            .iter()
            .map(|p| match user.iter().position(|u| *u == p.name) {
                Some(i) => Ok(Ok(i)),
                None => aux.remove(&p.name).map(Err).ok_or_else(|| Error::value("numerics", format!("program input '{}' is neither a user port {user:?} nor an auxiliary table", p.name))),
            })
            .collect::<Result<_>>()?;
        Ok(Plan { compiled, ports })
    }

    /// The executor running the program (`ane` or `reference`).
    pub fn device(&self) -> &'static str {
        self.compiled.device()
    }

    /// The compiled program's MIL text.
    pub fn mil(&self) -> &str {
        &self.compiled.program.mil
    }

    /// Run with one f32 slice per user port (in the order given to [`Plan::build`]); returns every
    /// output as f32. A non-finite output from finite inputs is a `Runtime` error (fp16 overflow).
    pub fn run(&mut self, op: &str, user: &[&[f32]]) -> Result<Vec<Vec<f32>>> {
        let feeds: Vec<PortData> = self
            .ports
            .iter()
            .map(|p| match p {
                Ok(i) => user
                    .get(*i)
                    .map(|d| PortData::F32(d))
                    .ok_or_else(|| Error::value(op, format!("missing user input {i}"))),
                Err(table) => Ok(PortData::F32(table)),
            })
            .collect::<Result<_>>()?;
        let out = self.compiled.run(&feeds)?;
        if user.iter().all(|d| d.iter().all(|v| v.is_finite())) {
            if let Some((k, o)) = out
                .iter()
                .enumerate()
                .find(|(_, o)| o.iter().any(|v| !v.is_finite()))
            {
                let name = &self.compiled.outputs()[k].name;
                let big = o.iter().filter(|v| !v.is_finite()).count();
                return Err(Error::Runtime { op: op.into(), msg: format!("output '{name}' has {big} non-finite values from finite inputs: an intermediate overflowed fp16 (|x| > 65504); scale the input down") });
            }
        }
        Ok(out)
    }
}

/// A cached plan shared by every caller with the same key.
pub type SharedPlan = Arc<Mutex<Plan>>;

struct Cache {
    plans: HashMap<String, SharedPlan>,
    order: Vec<String>,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| {
        Mutex::new(Cache {
            plans: HashMap::new(),
            order: Vec::new(),
        })
    })
}

/// The plan cached under `key` (which must encode shapes, iteration counts and the device), else
/// `build()` it and cache it, evicting the oldest plan past [`PLAN_CACHE_CAPACITY`].
pub fn cached(key: String, build: impl FnOnce() -> Result<Plan>) -> Result<SharedPlan> {
    if let Some(p) = cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .plans
        .get(&key)
    {
        return Ok(p.clone());
    }
    let built = build()?;
    let plan = Arc::new(Mutex::new(built));
    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = c.plans.get(&key) {
        return Ok(p.clone());
    }
    if c.order.len() >= PLAN_CACHE_CAPACITY {
        let old = c.order.remove(0);
        c.plans.remove(&old);
    }
    c.order.push(key.clone());
    c.plans.insert(key, plan.clone());
    Ok(plan)
}

/// Run a shared plan (see [`Plan::run`]).
pub fn run(plan: &SharedPlan, op: &str, user: &[&[f32]]) -> Result<Vec<Vec<f32>>> {
    plan.lock().unwrap_or_else(|e| e.into_inner()).run(op, user)
}

/// `acc + step`, or `step` when nothing has been accumulated yet (an unrolled iterate starting at 0).
pub fn accumulate(acc: Option<Tensor>, step: Tensor) -> Result<Tensor> {
    match acc {
        None => Ok(step),
        Some(a) => a.add(&step),
    }
}

/// Dot products of `u` and `v` along the last axis, `(u * v) @ ones[K, 1]` (never fp16 `reduce_sum`).
pub fn dot(u: &Tensor, v: &Tensor) -> Result<Tensor> {
    sum_last(&u.mul(v)?)
}
