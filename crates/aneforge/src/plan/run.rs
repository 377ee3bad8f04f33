//! Running a plan: each region loaded on the chosen executor, host stages in-process.
//!
//! Values crossing a cut stay where their producer wrote them. A region's output lives in that
//! region's own output buffer: a later region reading it is bound to that buffer at load when
//! the executor can ([`Loaded::bind_input`]: the ANE's port buffers); on the reference executor
//! the producer's f32 value buffer (fp16-exact numbers, [`crate::exec::reference::handoff`]: no
//! fp16 store or load pass) is lent to the consumer by swapping it with the consumer's input
//! buffer for its execute (see [`Feed::swap`]), else one buffer-to-buffer copy of the port
//! elements per call. A host result read by a reference region is lent the same way. A host stage's outputs live in its kernel's result
//! buffers (allocated once at load; in an fp16 plan rounded to fp16 in place unless the op only
//! moves its input values). A host stage borrows its arguments where they live — a reference
//! region's value buffer, an earlier host stage's results, an int32 or f32 plan input — and
//! copies only what needs converting (fp16 plan inputs, ports of other executors). Plan inputs
//! live in fp16 slots (int32 exact). With `precision="fp32"` slots and hand-offs stay f32 (no
//! rounding anywhere).

use std::collections::HashMap;
use std::path::Path;

use crate::ops::simd_fp16::{narrow, widen};
use half::f16;

use super::file::REGIONS;
use super::{CutValue, Plan, Stage};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::exec::profile::{Profile, SpanKind};
use crate::exec::reference::handoff::{ref_program, touch_pages};
use crate::exec::reference::{round_to_fp16, threads, RefProgram};
use crate::exec::{
    alias_ports, checked_input, checked_output, not_int32, Executor, Loaded, PortData, PortView,
    Precision,
};
use crate::ops::host::{Elems, ElemsRef, HostOp, HostRef, HostTensor};
use crate::ops::{Family, TensorType};
use crate::program::{PortSpec, KEY_LEN};

/// A plan input's slot.
enum Held {
    F16(Vec<f16>),
    /// fp16 values of a `precision="fp32"` plan (not rounded).
    F32(Vec<f32>),
    I32(Vec<i32>),
    U8(Vec<u8>),
}

impl Held {
    /// A zeroed slot for plan input `v`.
    fn zeros(v: &CutValue, round: bool) -> Result<Held> {
        let n = crate::shape::numel(&v.ty.shape);
        Ok(match v.ty.dtype {
            DType::Fp16 if round => Held::F16(vec![f16::ZERO; n]),
            DType::Fp16 => Held::F32(vec![0.0; n]),
            DType::Int32 => Held::I32(vec![0; n]),
            DType::Uint8 => Held::U8(vec![0; n]),
            d => {
                return Err(Error::dtype(
                    "plan",
                    format!(
                        "value '{}' is {d} {:?}; plan inputs are fp16, int32 or uint8",
                        v.name, v.ty.shape
                    ),
                ))
            }
        })
    }

    /// Map the slot's pages at load (see [`touch_pages`]).
    fn prefault(&mut self) {
        match self {
            Held::F16(v) => touch_pages(v),
            Held::F32(v) => touch_pages(v),
            Held::I32(v) => touch_pages(v),
            Held::U8(v) => touch_pages(v),
        }
    }
}

/// Where a plan value lives between stages.
#[derive(Clone, Copy, Debug)]
enum Home {
    /// The slot of a plan input.
    Slot(usize),
    /// Output `port` of the region run by step `step`: its port buffer itself.
    Port { step: usize, port: usize },
    /// Result `index` of the host stage run by step `step`: the kernel's result buffer.
    Result { step: usize, index: usize },
}

/// How a host stage gets one argument.
enum Arg {
    /// Read in place (an int32 or f32 slot, a host stage's result, a reference region's fp16
    /// value buffer) with this shape.
    Borrow(Home, Vec<usize>),
    /// Copied into this buffer before each call (fp16 slots widened, other executors' ports).
    Copy(Home, HostTensor),
}

/// How a region gets input `input` (one not bound to a producer's buffer at load) each call.
struct Feed {
    input: usize,
    from: Home,
    /// Lent without a copy: a reference region's fp16 value buffer or a host stage's f32 result
    /// swapped into this reference region's input buffer for its execute and swapped back after
    /// it (each source buffer lent once per region; others are copied).
    swap: bool,
}

enum Step {
    Region {
        loaded: Box<dyn Loaded>,
        feeds: Vec<Feed>,
        /// A region without inputs (constants only, such as a weight a host op reads): its
        /// outputs are the same every call, so it runs on the first call only. `None` for a
        /// region that runs every call, else whether its outputs are held.
        constant: Option<bool>,
    },
    Host {
        op: HostOp,
        args: Vec<Arg>,
        /// The kernel's results, allocated once at load: the homes of the stage's outputs.
        results: Vec<HostTensor>,
        /// Round the fp16 results to fp16 after each call (an fp16 plan, an op that computes).
        round: bool,
    },
}

/// What a host stage may borrow from an earlier step.
enum Src<'a> {
    Ref(&'a RefProgram),
    Results(&'a [HostTensor]),
    Other,
}

/// A plan loaded on an executor: implements [`Loaded`], so it runs wherever one program does.
pub struct PlanLoaded {
    device: &'static str,
    steps: Vec<Step>,
    slots: Vec<Held>,
    inputs: Vec<PortSpec>,
    input_slots: Vec<usize>,
    outputs: Vec<PortSpec>,
    output_homes: Vec<Home>,
    aliases: Vec<(usize, usize)>,
    /// An fp16 plan: host-stage fp16 results are fp16-exact.
    round: bool,
    executed: bool,
    /// Set only during `execute_profiled`: each stage becomes one span.
    timing: Option<Profile>,
    /// Elements the regions and host stages touch per call when every region runs on the
    /// reference executor (the thread policy's measure: the whole call enters the pool once),
    /// else 0 (stages run on the calling thread).
    work: usize,
}

fn port(v: &CutValue) -> PortSpec {
    PortSpec {
        name: v.name.clone(),
        dtype: v.ty.dtype,
        shape: v.ty.shape.clone(),
    }
}

/// Map the pages of a host stage's result buffer at load (see [`touch_pages`]).
fn prefault(t: &mut HostTensor) {
    match &mut t.data {
        Elems::F32(v) => touch_pages(v),
        Elems::I32(v) => touch_pages(v),
    }
}

/// Name the stage in an error raised while it ran (op-naming variants get a `stage k` prefix).
fn in_stage(e: Error, k: usize, what: &str) -> Error {
    let tag = |op: String| format!("stage {k} ({what}): {op}");
    match e {
        Error::Shape { op, msg } => Error::Shape { op: tag(op), msg },
        Error::DType { op, msg } => Error::DType { op: tag(op), msg },
        Error::Value { op, msg } => Error::Value { op: tag(op), msg },
        Error::Runtime { op, msg } => Error::Runtime { op: tag(op), msg },
        other => other,
    }
}

impl PlanLoaded {
    /// Load every region of `plan` (written under `dir/regions/`) on `executor`, binding each
    /// region input produced by an earlier region to that region's output buffer where the
    /// executor can; the plan was fully checked before, so a failure here is the executor's
    /// (and releases what loaded).
    pub fn load(
        plan: &Plan,
        dir: &Path,
        executor: &dyn Executor,
        precision: Precision,
    ) -> Result<PlanLoaded> {
        let round = precision == Precision::Fp16;
        let ty = |name: &str| -> Result<&TensorType> {
            plan.value(name).ok_or_else(|| {
                Error::value("plan", format!("value '{name}' is not in the values table"))
            })
        };
        let mut homes: HashMap<&str, Home> = HashMap::new();
        let mut slots = Vec::new();
        for v in &plan.inputs {
            let mut held = Held::zeros(v, round)?;
            held.prefault();
            slots.push(held);
            homes.insert(&v.name, Home::Slot(slots.len() - 1));
        }
        let home = |homes: &HashMap<&str, Home>, name: &str| -> Result<Home> {
            homes.get(name).copied().ok_or_else(|| {
                Error::value(
                    "plan",
                    format!("value '{name}' is read before it is written"),
                )
            })
        };
        let mut steps: Vec<Step> = Vec::with_capacity(plan.stages.len());
        let (mut work, mut all_reference) = (0usize, true);
        for (k, stage) in plan.stages.iter().enumerate() {
            let step = match stage {
                Stage::Region { program, .. } => {
                    let rdir = dir.join(REGIONS).join(&program.sha256[..KEY_LEN]);
                    let mut loaded = executor.load(program, &rdir, precision)?;
                    let constant = loaded.inputs().is_empty();
                    match ref_program(loaded.as_mut()) {
                        Some(r) => {
                            (0..program.outputs().len()).for_each(|q| r.lazy_output(q));
                            r.prefault();
                            if !constant {
                                work = work.saturating_add(r.work());
                            }
                        }
                        None => all_reference = false,
                    }
                    let mut feeds = Vec::new();
                    for j in 0..loaded.inputs().len() {
                        let from = home(&homes, &loaded.inputs()[j].name)?;
                        let bound = match from {
                            Home::Port { step, port } => {
                                loaded.bind_input(j, region(&mut steps[step]), port)?
                            }
                            Home::Slot(_) | Home::Result { .. } => false,
                        };
                        if !bound {
                            feeds.push(Feed {
                                input: j,
                                from,
                                swap: false,
                            });
                        }
                    }
                    mark_swaps(&mut feeds, loaded.as_mut(), &mut steps);
                    for (q, p) in loaded.outputs().iter().enumerate() {
                        let name = &plan.values[value_index(plan, &p.name)?].name;
                        homes.insert(name, Home::Port { step: k, port: q });
                    }
                    Step::Region {
                        loaded,
                        feeds,
                        constant: constant.then_some(false),
                    }
                }
                Stage::Host {
                    op,
                    inputs,
                    outputs,
                } => {
                    let mut args = Vec::with_capacity(inputs.len());
                    for n in inputs {
                        let (from, t) = (home(&homes, n)?, ty(n)?);
                        let borrow = match from {
                            Home::Slot(s) => matches!(slots[s], Held::F32(_) | Held::I32(_)),
                            Home::Port { step, .. } => {
                                t.dtype == DType::Fp16
                                    && ref_program(region(&mut steps[step])).is_some()
                            }
                            Home::Result { .. } => true,
                        };
                        args.push(if borrow {
                            Arg::Borrow(from, t.shape.clone())
                        } else {
                            Arg::Copy(from, HostTensor::zeros(t)?)
                        });
                    }
                    let mut results = outputs
                        .iter()
                        .map(|n| HostTensor::zeros(ty(n)?))
                        .collect::<Result<Vec<_>>>()?;
                    results.iter_mut().for_each(prefault);
                    work = (results.iter())
                        .fold(work, |w, t| w.saturating_add(crate::shape::numel(&t.shape)));
                    for (index, n) in outputs.iter().enumerate() {
                        let v = &plan.values[value_index(plan, n)?];
                        homes.insert(&v.name, Home::Result { step: k, index });
                    }
                    Step::Host {
                        op: op.clone(),
                        args,
                        results,
                        round: round && !moves_values(op),
                    }
                }
            };
            steps.push(step);
        }
        let input_slots = plan
            .inputs
            .iter()
            .map(|v| match homes[v.name.as_str()] {
                Home::Slot(s) => s,
                _ => unreachable!("plan inputs live in slots"),
            })
            .collect();
        let output_homes = plan
            .outputs
            .iter()
            .map(|v| home(&homes, &v.name))
            .collect::<Result<Vec<_>>>()?;
        Ok(PlanLoaded {
            device: executor.name(),
            steps,
            slots,
            inputs: plan.inputs.iter().map(port).collect(),
            input_slots,
            outputs: plan.outputs.iter().map(port).collect(),
            output_homes,
            aliases: Vec::new(),
            round,
            executed: false,
            timing: None,
            work: if all_reference { work } else { 0 },
        })
    }

    /// Run every stage in order; an error names the stage.
    fn run_stages(&mut self) -> Result<()> {
        for k in 0..self.steps.len() {
            let what = match &self.steps[k] {
                Step::Region {
                    constant: Some(_), ..
                } => "constant region",
                Step::Region { .. } => "region",
                Step::Host { op, .. } => op.name(),
            };
            let span = self.timing.as_mut().map(|p| {
                p.stage = Some(k);
                p.open()
            });
            let r = self.run_step(k);
            if let (Some(p), Some(o)) = (self.timing.as_mut(), span) {
                p.close(o, format!("stage {k} ({what})"), SpanKind::Stage, None);
                p.stage = None;
            }
            r.map_err(|e| in_stage(e, k, what))?;
        }
        Ok(())
    }

    /// Run step `k` (every earlier step has run).
    fn run_step(&mut self, k: usize) -> Result<()> {
        let (done, rest) = self.steps.split_at_mut(k);
        match &mut rest[0] {
            Step::Region {
                constant: Some(true),
                ..
            } => Ok(()),
            Step::Region {
                loaded,
                feeds,
                constant,
            } => {
                for f in feeds.iter().filter(|f| !f.swap) {
                    let j = f.input;
                    match f.from {
                        Home::Slot(s) => feed_slot(loaded.as_mut(), j, &self.slots[s])?,
                        Home::Port { step, port } => {
                            pass_port(region(&mut done[step]), port, loaded.as_mut(), j)?
                        }
                        Home::Result { step, index } => {
                            let r = &results_at(done, step)[index];
                            feed_result(loaded.as_mut(), j, r, self.round)?
                        }
                    }
                }
                let lends = || feeds.iter().filter(|f| f.swap);
                let mut lent = 0;
                let mut r = Ok(());
                for f in lends() {
                    r = lend(f, done, loaded.as_mut(), true);
                    if r.is_err() {
                        break;
                    }
                    lent += 1;
                }
                if r.is_ok() {
                    r = match self.timing.as_mut() {
                        Some(p) => loaded.execute_profiled(p),
                        None => loaded.execute(),
                    };
                }
                // Every lent buffer goes back to its owner, whatever happened.
                for f in lends().take(lent) {
                    r = r.and(lend(f, done, loaded.as_mut(), false));
                }
                if let Some(held) = constant {
                    *held = r.is_ok();
                }
                r
            }
            Step::Host {
                op,
                args,
                results,
                round,
            } => {
                for a in args.iter_mut() {
                    if let Arg::Copy(from, t) = a {
                        copy_arg(*from, t, done, &self.slots)?;
                    }
                }
                let srcs: Vec<Src> = done.iter_mut().map(source).collect();
                let views = args
                    .iter()
                    .map(|a| match a {
                        Arg::Copy(_, t) => Ok(t.view()),
                        Arg::Borrow(from, shape) => borrow(*from, shape, &srcs, &self.slots),
                    })
                    .collect::<Result<Vec<_>>>()?;
                op.kernel().run(&views, results)?;
                if *round {
                    for r in results.iter_mut() {
                        if let Elems::F32(d) = &mut r.data {
                            round_to_fp16(d);
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// The program of region step `step` (port homes only ever name region steps).
    fn region_at(&self, step: usize) -> &dyn Loaded {
        match &self.steps[step] {
            Step::Region { loaded, .. } => loaded.as_ref(),
            Step::Host { .. } => unreachable!("a port home names a region step"),
        }
    }

    /// Copy the value at `from` into slot `dst` (resident state after an execute).
    fn copy_home_to_slot(&mut self, from: Home, dst: usize) -> Result<()> {
        match from {
            Home::Slot(s) if s == dst => Ok(()),
            Home::Slot(s) => {
                let (a, b) = (s.min(dst), s.max(dst));
                let (lo, hi) = self.slots.split_at_mut(b);
                let (src, d) = if s < dst {
                    (&lo[a], &mut hi[0])
                } else {
                    (&hi[0], &mut lo[a])
                };
                match (src, d) {
                    (Held::F16(s), Held::F16(d)) => d.copy_from_slice(s),
                    (Held::F32(s), Held::F32(d)) => d.copy_from_slice(s),
                    (Held::I32(s), Held::I32(d)) => d.copy_from_slice(s),
                    (Held::U8(s), Held::U8(d)) => d.copy_from_slice(s),
                    _ => unreachable!("alias checked that the dtypes match"),
                }
                Ok(())
            }
            Home::Result { step, index } => {
                match (
                    &results_at(&self.steps, step)[index].data,
                    &mut self.slots[dst],
                ) {
                    (Elems::F32(s), Held::F16(d)) => narrow(s, d),
                    (Elems::F32(s), Held::F32(d)) => d.copy_from_slice(s),
                    (Elems::I32(s), Held::I32(d)) => d.copy_from_slice(s),
                    _ => unreachable!("alias checked that the dtypes match"),
                }
                Ok(())
            }
            Home::Port { step, port } => {
                let src = region(&mut self.steps[step]);
                match &mut self.slots[dst] {
                    Held::F32(d) => src.read_output(port, d),
                    Held::I32(d) => src.read_output_i32(port, d),
                    held => {
                        match (src.output_view(port)?, held) {
                            (PortView::F16(s), Held::F16(d)) => d.copy_from_slice(s),
                            (PortView::U8(s), Held::U8(d)) => d.copy_from_slice(s),
                            _ => unreachable!("alias checked that the dtypes match"),
                        }
                        Ok(())
                    }
                }
            }
        }
    }
}

/// Drop later stages first: a region bound to an earlier region's output buffer lets go of it
/// before that buffer is released.
impl Drop for PlanLoaded {
    fn drop(&mut self) {
        while let Some(step) = self.steps.pop() {
            drop(step);
        }
    }
}

/// Whether `op`'s fp16 outputs are only copies of its fp16 inputs (or exact 0/1), so they are
/// fp16-exact without rounding.
fn moves_values(op: &HostOp) -> bool {
    use crate::ops::host::scatter::ScatterReduce;
    match op {
        HostOp::Take(_)
        | HostOp::TopK(_)
        | HostOp::Sort(_)
        | HostOp::SortValues(_)
        | HostOp::TakeAlong(_)
        | HostOp::IndexPut(_)
        | HostOp::OneHot(_)
        | HostOp::Flatten(_)
        | HostOp::InputView(_)
        | HostOp::DynamicSlice(_)
        | HostOp::DynamicSliceAdd(_)
        | HostOp::BlockRearrange(_)
        | HostOp::IntReshape(_) => true,
        HostOp::Scatter(s) => s.reduce == ScatterReduce::Replace,
        _ => false,
    }
}

/// Position of value `name` in the plan's values table.
fn value_index(plan: &Plan, name: &str) -> Result<usize> {
    plan.values
        .iter()
        .position(|v| v.name == name)
        .ok_or_else(|| Error::value("plan", format!("value '{name}' is not in the values table")))
}

/// The program of a region step (homes of kind `Port` only ever name region steps).
fn region(step: &mut Step) -> &mut dyn Loaded {
    match step {
        Step::Region { loaded, .. } => loaded.as_mut(),
        Step::Host { .. } => unreachable!("a port home names a region step"),
    }
}

/// The results of a host step (homes of kind `Result` only ever name host steps).
fn results_at(steps: &[Step], step: usize) -> &[HostTensor] {
    match &steps[step] {
        Step::Host { results, .. } => results,
        Step::Region { .. } => unreachable!("a result home names a host step"),
    }
}

/// [`results_at`], mutable.
fn results_at_mut(steps: &mut [Step], step: usize) -> &mut [HostTensor] {
    match &mut steps[step] {
        Step::Host { results, .. } => results,
        Step::Region { .. } => unreachable!("a result home names a host step"),
    }
}

/// What a later host stage may borrow from `step`.
fn source(step: &mut Step) -> Src<'_> {
    match step {
        Step::Region { loaded, .. } => match ref_program(loaded.as_mut()) {
            Some(r) => Src::Ref(r),
            None => Src::Other,
        },
        Step::Host { results, .. } => Src::Results(results),
    }
}

/// Argument `from` read in place (the load chose `Borrow` only for the homes handled here).
fn borrow<'a>(
    from: Home,
    shape: &'a [usize],
    srcs: &[Src<'a>],
    slots: &'a [Held],
) -> Result<HostRef<'a>> {
    let data = match from {
        Home::Slot(s) => match &slots[s] {
            Held::F32(v) => ElemsRef::F32(v),
            Held::I32(v) => ElemsRef::I32(v),
            _ => unreachable!("fp16 and uint8 slots are copied"),
        },
        Home::Port { step, port } => match srcs[step] {
            Src::Ref(r) => ElemsRef::F32(r.handoff_output(port)?),
            _ => unreachable!("only a reference region's fp16 ports are borrowed"),
        },
        Home::Result { step, index } => match srcs[step] {
            Src::Results(r) => return Ok(r[index].view()),
            _ => unreachable!("a result home names a host step"),
        },
    };
    Ok(HostRef { shape, data })
}

/// Mark the feeds of region `dst` that can be lent by swapping buffers (see [`Feed::swap`]):
/// `dst` and the source are reference programs, the value is fp16 (or an f32 host result),
/// and no other feed of `dst` reads the same source buffer.
fn mark_swaps(feeds: &mut [Feed], dst: &mut dyn Loaded, steps: &mut [Step]) {
    let fp16_in = |j: usize, dst: &dyn Loaded| dst.inputs()[j].dtype == DType::Fp16;
    if ref_program(dst).is_none() {
        return;
    }
    // The source buffer each feed would lend: (step, output value buffer or result index).
    let keys: Vec<Option<(usize, usize)>> = feeds
        .iter()
        .map(|f| match f.from {
            _ if !fp16_in(f.input, dst) => None,
            Home::Port { step, port } => {
                let src = region(&mut steps[step]);
                let fp16 = src.outputs()[port].dtype == DType::Fp16;
                let r = ref_program(src)?;
                fp16.then(|| r.output_buffer(port).map(|b| (step, b)))?
            }
            Home::Result { step, index } => match &results_at(steps, step)[index].data {
                Elems::F32(_) => Some((step, index)),
                Elems::I32(_) => None,
            },
            Home::Slot(_) => None,
        })
        .collect();
    for (f, k) in feeds.iter_mut().zip(&keys) {
        f.swap = k.is_some() && keys.iter().filter(|o| *o == k).count() == 1;
    }
}

/// Swap the source buffer of lent feed `f` with region `dst`'s input buffer: in before the
/// execute (`feed`: the input is marked fed), back after it.
fn lend(f: &Feed, done: &mut [Step], dst: &mut dyn Loaded, feed: bool) -> Result<()> {
    let d = ref_program(dst).ok_or_else(|| lend_error(f))?;
    match f.from {
        Home::Port { step, port } => {
            let s = ref_program(region(&mut done[step])).ok_or_else(|| lend_error(f))?;
            d.swap_input(f.input, s.output_values_mut(port)?, feed)
        }
        Home::Result { step, index } => match &mut results_at_mut(done, step)[index].data {
            Elems::F32(v) => d.swap_input(f.input, v, feed),
            Elems::I32(_) => Err(lend_error(f)),
        },
        Home::Slot(_) => Err(lend_error(f)),
    }
}

fn lend_error(f: &Feed) -> Error {
    Error::Runtime {
        op: "plan".into(),
        msg: format!(
            "input {} is marked to be lent from {:?}, which is not a reference fp16 buffer",
            f.input, f.from
        ),
    }
}

/// Copy argument `from` into `arg`: an fp16 slot widened, an output port read (int32 as is).
fn copy_arg(from: Home, arg: &mut HostTensor, done: &[Step], slots: &[Held]) -> Result<()> {
    match (from, &mut arg.data) {
        (Home::Slot(s), Elems::F32(d)) => match &slots[s] {
            Held::F16(v) => widen(v, d),
            _ => return Err(arg_mismatch()),
        },
        (Home::Port { step, port }, data) => {
            let src = match &done[step] {
                Step::Region { loaded, .. } => loaded.as_ref(),
                Step::Host { .. } => unreachable!("a port home names a region step"),
            };
            match data {
                Elems::F32(d) => src.read_output(port, d)?,
                Elems::I32(d) => src.read_output_i32(port, d)?,
            }
        }
        _ => return Err(arg_mismatch()),
    }
    Ok(())
}

fn arg_mismatch() -> Error {
    Error::dtype(
        "plan",
        "a host stage argument's dtype differs from its value's",
    )
}

/// Write a plan input's slot into input `j` of a region: fp16 and int32 elements copied into
/// its buffer as they are (no conversion, no check: they are already fp16 / int32); f32 slots
/// (an fp32 plan's) by hand-off into a reference region's value buffer, else through
/// `set_input`.
fn feed_slot(loaded: &mut dyn Loaded, j: usize, held: &Held) -> Result<()> {
    match held {
        Held::F16(v) => match loaded.input_view(j)? {
            PortView::F16(d) => d.copy_from_slice(v),
            _ => return Err(port_mismatch(loaded.inputs(), j, "fp16")),
        },
        Held::F32(v) => feed_f32(loaded, j, v, false)?,
        Held::I32(v) => loaded.set_input(j, PortData::I32(v))?,
        Held::U8(v) => loaded.set_input(j, PortData::U8(v))?,
    }
    Ok(())
}

/// Write a host stage's result into input `j` of a region (fp16 results of an fp16 plan,
/// `exact`, are fp16-exact: converted into an fp16 port buffer without a check).
fn feed_result(loaded: &mut dyn Loaded, j: usize, result: &HostTensor, exact: bool) -> Result<()> {
    match &result.data {
        Elems::F32(v) => feed_f32(loaded, j, v, exact),
        Elems::I32(v) => loaded.set_input(j, PortData::I32(v)),
    }
}

/// f32 values into input `j`: by hand-off into a reference region's value buffer; else into its
/// fp16 port buffer when it has one and `exact` (fp16-exact values), else through `set_input`.
fn feed_f32(loaded: &mut dyn Loaded, j: usize, v: &[f32], exact: bool) -> Result<()> {
    if let Some(r) = ref_program(loaded) {
        r.handoff_input(j)?.copy_from_slice(v);
        return Ok(());
    }
    if exact {
        if let PortView::F16(d) = loaded.input_view(j)? {
            narrow(v, d);
            return Ok(());
        }
    }
    loaded.set_input(j, PortData::F32(v))
}

/// Pass output `port` of `src` to input `j` of `dst`: between reference regions an fp16 value
/// is handed over f32 buffer to f32 buffer (see [`crate::exec::reference::handoff`]); anything else is copied buffer to
/// buffer in the ports' dtype.
fn pass_port(src: &mut dyn Loaded, port: usize, dst: &mut dyn Loaded, j: usize) -> Result<()> {
    let fp16 = src.outputs()[port].dtype == DType::Fp16;
    if let (true, Some(s), Some(d)) = (fp16, ref_program(src), ref_program(dst)) {
        d.handoff_input(j)?.copy_from_slice(s.handoff_output(port)?);
        return Ok(());
    }
    match (src.output_view(port)?, dst.input_view(j)?) {
        (PortView::F16(s), PortView::F16(d)) => d.copy_from_slice(s),
        (PortView::I32(s), PortView::I32(d)) => d.copy_from_slice(s),
        (PortView::U8(s), PortView::U8(d)) => d.copy_from_slice(s),
        _ => return Err(port_mismatch(dst.inputs(), j, "its producer's dtype")),
    }
    Ok(())
}

fn port_mismatch(ports: &[PortSpec], j: usize, want: &str) -> Error {
    let p = &ports[j];
    Error::dtype(
        "plan",
        format!(
            "region input '{}' is {} {:?}, not {want}",
            p.name, p.dtype, p.shape
        ),
    )
}

impl Loaded for PlanLoaded {
    fn device(&self) -> &'static str {
        self.device
    }
    fn inputs(&self) -> &[PortSpec] {
        &self.inputs
    }
    fn outputs(&self) -> &[PortSpec] {
        &self.outputs
    }

    fn set_input(&mut self, index: usize, data: PortData) -> Result<()> {
        checked_input(&self.inputs, index, &data)?;
        match &mut self.slots[self.input_slots[index]] {
            Held::F16(d) => PortView::F16(d).write(data),
            Held::I32(d) => PortView::I32(d).write(data),
            Held::U8(d) => PortView::U8(d).write(data),
            Held::F32(d) => match data {
                PortData::F32(x) => d.copy_from_slice(x),
                PortData::F64(x) => d.iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
                PortData::F16(x) => widen(x, d),
                _ => unreachable!("checked_input matched the port dtype"),
            },
        }
        Ok(())
    }

    fn execute(&mut self) -> Result<()> {
        let work = self.work;
        threads::run(work, || self.run_stages())?;
        for a in 0..self.aliases.len() {
            let (o, i) = self.aliases[a];
            self.copy_home_to_slot(self.output_homes[o], self.input_slots[i])?;
        }
        self.executed = true;
        Ok(())
    }
    fn execute_profiled(&mut self, profile: &mut Profile) -> Result<()> {
        self.timing = Some(std::mem::take(profile));
        let r = self.execute();
        *profile = self.timing.take().unwrap_or_default();
        r
    }

    fn read_output(&self, index: usize, out: &mut [f32]) -> Result<()> {
        checked_output(&self.outputs, index, out.len())?;
        match self.output_homes[index] {
            Home::Port { step, port } => self.region_at(step).read_output(port, out)?,
            Home::Slot(s) => match &self.slots[s] {
                Held::F16(v) => widen(v, out),
                Held::F32(v) => out.copy_from_slice(v),
                Held::I32(v) => out.iter_mut().zip(v).for_each(|(o, &x)| *o = x as f32),
                Held::U8(v) => out.iter_mut().zip(v).for_each(|(o, &x)| *o = x as f32),
            },
            Home::Result { step, index } => match &results_at(&self.steps, step)[index].data {
                Elems::F32(v) => out.copy_from_slice(v),
                Elems::I32(v) => out.iter_mut().zip(v).for_each(|(o, &x)| *o = x as f32),
            },
        }
        Ok(())
    }

    fn read_output_i32(&self, index: usize, out: &mut [i32]) -> Result<()> {
        let port = checked_output(&self.outputs, index, out.len())?;
        match self.output_homes[index] {
            Home::Port { step, port } => self.region_at(step).read_output_i32(port, out)?,
            Home::Slot(s) => match &self.slots[s] {
                Held::I32(v) => out.copy_from_slice(v),
                _ => return Err(not_int32(port)),
            },
            Home::Result { step, index } => match &results_at(&self.steps, step)[index].data {
                Elems::I32(v) => out.copy_from_slice(v),
                Elems::F32(_) => return Err(not_int32(port)),
            },
        }
        Ok(())
    }

    fn alias(&mut self, output: &str, input: &str) -> Result<()> {
        let (oi, ii) = alias_ports(self.executed, &self.outputs, &self.inputs, output, input)?;
        self.aliases.push((oi, ii));
        Ok(())
    }

    fn input_view(&mut self, _index: usize) -> Result<PortView<'_>> {
        Err(Error::NotImplemented("input_view: views of a segmented plan's ports are not implemented (pass arrays to the call instead)".into()))
    }

    fn output_view(&mut self, _index: usize) -> Result<PortView<'_>> {
        Err(Error::NotImplemented("output_view: views of a segmented plan's ports are not implemented (read the call's result instead)".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_pages_changes_no_value() {
        for n in [0usize, 1, 1023, 1024, 1025, 5000] {
            let f: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
            let b: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let (mut f2, mut b2) = (f.clone(), b.clone());
            touch_pages(&mut f2);
            touch_pages(&mut b2);
            assert_eq!((f2, b2), (f, b), "n = {n}");
        }
    }
}
