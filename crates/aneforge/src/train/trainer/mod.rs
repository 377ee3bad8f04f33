//! The [`Trainer`]: compiles forward + backward for a loss over parameters and steps it, in one
//! of three [`Mode`]s — host update on fp32 master weights; a separate device update program
//! with weights and moments aliased output → input; or everything in one resident program.
//! Evaluation, `fit` and the data feeding live in [`eval`] and [`feed`].

mod eval;
mod feed;
mod ports;

use std::collections::BTreeMap;
use std::path::Path;

use super::loss::{Loss, LossKind};
use super::optim::{all_finite, update_graph, OptimConfig, Optimizer, StepOutcome};
use super::param::Parameter;
use super::state::StateDict;
use crate::compile::{compile, CompileOptions, Compiled};
use crate::error::{Error, Result};
use crate::exec::{checked_input, port_index, PortData, PortView, Precision};
use crate::graph::Tensor;
use crate::DType;

pub use eval::{FitOptions, History};
pub use feed::Batch;
use ports::Source;

/// Where the optimizer update runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Forward + backward program; the update on the host in fp32 (master weights).
    #[default]
    Host,
    /// The update is its own fp16 program whose weights and moments are aliased output → input;
    /// gradients and the learning rate are written per step.
    DeviceOptimizer,
    /// Forward + backward + update in one fp16 program with all state aliased: a step writes
    /// only the batch and the learning rate.
    Resident,
}

/// What one [`Trainer::step`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepReport {
    /// The loss: for cross-entropy recomputed in f64 from the program's logits and the target
    /// (the last data input); otherwise the program's fp16 loss.
    pub loss: f64,
    /// `Some(total)` when a non-finite value skipped the update (in resident mode the update
    /// already ran on the device and only the loss is checked); `total` counts every skip so far.
    pub skipped: Option<u64>,
}

/// The compiled programs (dropped by [`Trainer::release`]).
struct Programs {
    net: Compiled,
    update: Option<Compiled>,
    eval: Option<eval::EvalProgram>,
}

/// A data input of the training program: name, shape, port index and whether it is an int32
/// port (token ids fed as int32, not cast in-graph).
#[derive(Clone, Debug)]
struct DataPort {
    name: String,
    shape: Vec<usize>,
    index: usize,
    int32: bool,
}

/// A compiled training step over parameters (see the module docs for the modes).
pub struct Trainer {
    params: Vec<Parameter>,
    config: OptimConfig,
    mode: Mode,
    opts: CompileOptions,
    loss_kind: LossKind,
    logits: Option<Tensor>,
    programs: Option<Programs>,
    data: Vec<DataPort>,
    host: Option<Optimizer>,
    t: u64,
    skipped: u64,
    synced: bool,
}

fn released() -> Error {
    Error::Runtime {
        op: "Trainer".into(),
        msg: "its programs were released".into(),
    }
}

/// Index of input (`inputs`) or output port `name` of `c`.
fn port(c: &Compiled, name: &str, inputs: bool) -> Result<usize> {
    if inputs {
        port_index(c.inputs(), Some(name), "Trainer", "input")
    } else {
        port_index(c.outputs(), Some(name), "Trainer", "output")
    }
}

/// Input port `name`'s buffer as f32 (fp16 ports only).
fn read_input(c: &mut Compiled, name: &str) -> Result<Vec<f32>> {
    let i = port(c, name, true)?;
    match c.loaded.input_view(i)? {
        PortView::F16(v) => Ok(v.iter().map(|x| x.to_f32()).collect()),
        PortView::U8(_) | PortView::I32(_) => Err(Error::dtype(
            "Trainer",
            format!("input '{name}' is not fp16"),
        )),
    }
}

/// Output port `name` as f32.
fn read_output(c: &Compiled, name: &str) -> Result<Vec<f32>> {
    let i = port(c, name, false)?;
    let mut out = vec![0.0; c.outputs()[i].numel()];
    c.loaded.read_output(i, &mut out)?;
    Ok(out)
}

/// The `loss` and `logits` outputs of the training program (those it has), as f32.
fn small_outputs(c: &Compiled) -> Result<BTreeMap<String, Vec<f32>>> {
    ["loss", "logits"]
        .iter()
        .filter(|n| c.outputs().iter().any(|p| p.name == **n))
        .map(|n| Ok((n.to_string(), read_output(c, n)?)))
        .collect()
}

/// Write input port `name` (checked like any input).
fn write_input(c: &mut Compiled, name: &str, v: &[f32]) -> Result<()> {
    let i = port(c, name, true)?;
    c.loaded.set_input(i, PortData::F32(v))
}

impl Trainer {
    /// Compile a training step of `loss` over `params` (unique names) with `config` in `mode`,
    /// programs compiled with `opts`. Errors: invalid hyper-parameters or duplicate parameter
    /// names (Value), resident mode without fp16 precision (Value), backward and compile errors.
    pub fn new(
        loss: &Loss,
        params: &[Parameter],
        config: OptimConfig,
        mode: Mode,
        opts: CompileOptions,
    ) -> Result<Trainer> {
        config.validate()?;
        if mode == Mode::Resident && opts.precision != Precision::Fp16 {
            return Err(Error::value(
                "Trainer",
                "resident state needs precision fp16 (state lives in fp16 port buffers)",
            ));
        }
        let names: Vec<&str> = params.iter().map(Parameter::name).collect();
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(Error::value(
                    "Trainer",
                    format!("parameter name '{n}' appears twice; parameters need unique names"),
                ));
            }
        }
        let tensors: Vec<Tensor> = params.iter().map(|p| p.tensor().clone()).collect();
        let grads = crate::autograd::backward(&loss.value, &tensors, config.loss_scale, &[])?;
        let mut outs = vec![(Some("loss".to_string()), loss.value.clone())];
        if let Some(l) = &loss.logits {
            outs.push((Some("logits".into()), l.clone()));
        }
        if mode == Mode::Resident {
            outs.extend(update_outputs(&config, params, &tensors, &grads)?);
        } else {
            outs.extend(
                params
                    .iter()
                    .zip(grads)
                    .map(|(p, g)| (Some(format!("grad_{}", p.name())), g)),
            );
        }
        let mut net = compile(&outs, &opts)?;
        if mode != Mode::Resident {
            let grads = params
                .iter()
                .map(|p| port(&net, &format!("grad_{}", p.name()), false))
                .collect::<Result<Vec<_>>>()?;
            ports::lazy(&mut net, &grads);
        }
        let internal: Vec<String> = internal_inputs(&config, params);
        let data = net
            .inputs()
            .iter()
            .enumerate()
            .filter(|(_, p)| !internal.contains(&p.name))
            .map(|(index, p)| DataPort {
                name: p.name.clone(),
                shape: p.shape.clone(),
                index,
                int32: p.dtype == crate::DType::Int32,
            })
            .collect();
        let mut trainer = Trainer {
            params: params.to_vec(),
            config,
            mode,
            opts,
            loss_kind: loss.kind,
            logits: loss.logits.clone(),
            programs: Some(Programs {
                net,
                update: None,
                eval: None,
            }),
            data,
            host: None,
            t: 0,
            skipped: 0,
            synced: true,
        };
        match mode {
            Mode::Host => {
                let sizes: Vec<usize> = params.iter().map(|p| p.value().len()).collect();
                trainer.host = Some(Optimizer::new(config, &sizes)?);
            }
            Mode::DeviceOptimizer => {
                let update = trainer.update_program()?;
                trainer.programs_mut()?.update = Some(update);
                trainer.seed_state(None)?;
            }
            Mode::Resident => {
                alias_state(&mut trainer.programs_mut()?.net, &config, params)?;
                trainer.seed_state(None)?;
            }
        }
        Ok(trainer)
    }

    /// The device update program: `new_<w>` and `new_<s>_<w>` from inputs `<w>`, `grad_<w>`,
    /// `<s>_<w>` and `lr_t`, state aliased output → input.
    fn update_program(&self) -> Result<Compiled> {
        let inputs = self
            .params
            .iter()
            .map(|p| crate::input_port(p.shape(), DType::Fp16, Some(p.name())))
            .collect::<Result<Vec<_>>>()?;
        let grads = self
            .params
            .iter()
            .map(|p| crate::input_port(p.shape(), DType::Fp16, Some(&format!("grad_{}", p.name()))))
            .collect::<Result<Vec<_>>>()?;
        let outs = update_outputs(&self.config, &self.params, &inputs, &grads)?;
        let opts = CompileOptions {
            precision: Precision::Fp16,
            build_dir: self.opts.build_dir.as_ref().map(|d| d.join("update")),
            ..self.opts.clone()
        };
        let mut update = compile(&outs, &opts)?;
        alias_state(&mut update, &self.config, &self.params)?;
        Ok(update)
    }

    fn programs_mut(&mut self) -> Result<&mut Programs> {
        self.programs.as_mut().ok_or_else(released)
    }

    /// The program holding the resident weights and state (device modes), else None.
    fn state_program(&mut self) -> Result<Option<&mut Compiled>> {
        let mode = self.mode;
        let p = self.programs_mut()?;
        Ok(match mode {
            Mode::Host => None,
            Mode::DeviceOptimizer => p.update.as_mut(),
            Mode::Resident => Some(&mut p.net),
        })
    }

    /// Write the master weights and the state (zeros, or `state[s][k]`) into the resident buffers.
    fn seed_state(&mut self, state: Option<&[Vec<Vec<f32>>]>) -> Result<()> {
        let (config, params) = (self.config, self.params.clone());
        let Some(prog) = self.state_program()? else {
            return Ok(());
        };
        for (k, p) in params.iter().enumerate() {
            write_input(prog, p.name(), &p.value())?;
            for (s, name) in config.state_names().iter().enumerate() {
                let v = match state {
                    Some(st) => st[s][k].clone(),
                    None => vec![0.0; p.value().len()],
                };
                write_input(prog, &format!("{name}_{}", p.name()), &v)?;
            }
        }
        self.synced = true;
        Ok(())
    }

    /// The executor running the training program (`ane`, `reference`).
    pub fn device(&self) -> Result<&'static str> {
        Ok(self.programs.as_ref().ok_or_else(released)?.net.device())
    }

    /// Steps applied so far (restored by [`Trainer::load`]).
    pub fn t(&self) -> u64 {
        self.t
    }

    /// Steps skipped so far for non-finite gradients.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The parameters, in order.
    pub fn params(&self) -> &[Parameter] {
        &self.params
    }

    /// The batch size: the leading extent of the first data input (1 without data inputs).
    pub fn batch(&self) -> usize {
        self.data.first().map_or(1, |d| d.shape[0])
    }

    /// The data inputs `step` takes, in creation order: (name, shape).
    pub fn data_inputs(&self) -> Vec<(String, Vec<usize>)> {
        self.data
            .iter()
            .map(|d| (d.name.clone(), d.shape.clone()))
            .collect()
    }

    /// One training step on `batch` (one array per data input, in order; see [`Batch`] for the
    /// conversions). Errors: a wrong count (DType error: Python TypeError) or shape (Value)
    /// naming the input, a released trainer (Runtime), executor errors.
    pub fn step(&mut self, batch: &[Batch]) -> Result<StepReport> {
        let data = feed::fit_all(&self.data, batch)?;
        let ints = feed::int32_feeds(&self.data, &data)?;
        let (mode, config, precision) = (self.mode, self.config, self.opts.precision);
        let Programs { net, update, .. } = self.programs.as_mut().ok_or_else(released)?;
        for (k, d) in self.data.iter().enumerate() {
            let fed = match &ints[k] {
                Some(v) => PortData::I32(v),
                None => PortData::F32(&data[k]),
            };
            ports::feed(net, d.index, fed, precision)?;
        }
        let mut skipped = None;
        if mode == Mode::Resident {
            self.t += 1;
            write_input(net, "lr_t", &[config.device_lr(self.t) as f32])?;
            net.loaded.execute()?;
            let outs = small_outputs(net)?;
            if outs["loss"].iter().any(|x| !x.is_finite()) {
                self.skipped += 1;
                skipped = Some(self.skipped);
            }
            self.synced = false;
            let loss = self.loss_value(&outs, &data);
            return Ok(StepReport { loss, skipped });
        }
        match update.as_mut() {
            Some(u) => run_from_update(net, u, &self.params, precision)?,
            None => {
                for p in &self.params {
                    let ni = port(net, p.name(), true)?;
                    ports::feed(net, ni, PortData::F32(&p.master()), precision)?;
                }
                net.loaded.execute()?;
            }
        }
        let outs = small_outputs(net)?;
        let idx = self
            .params
            .iter()
            .map(|p| port(net, &format!("grad_{}", p.name()), false))
            .collect::<Result<Vec<_>>>()?;
        let mut store = Vec::new();
        let grads = ports::outputs(net, &idx, &mut store)?;
        let finite = grads.iter().all(|g| all_finite(g));
        skipped = match (self.host.as_mut(), update.as_mut()) {
            (Some(opt), _) => {
                let mut guards: Vec<_> = self.params.iter().map(|p| p.master()).collect();
                let mut ws: Vec<&mut [f32]> = guards.iter_mut().map(|g| g.as_mut_slice()).collect();
                match opt.step(&mut ws, &grads)? {
                    StepOutcome::Applied { t } => {
                        self.t = t;
                        None
                    }
                    StepOutcome::Skipped { skipped } => Some(skipped),
                }
            }
            (None, Some(u)) if !finite => {
                check_weights(net, u, &self.params)?;
                Some(self.skipped + 1)
            }
            (None, Some(u)) => {
                self.t += 1;
                write_input(u, "lr_t", &[config.device_lr(self.t) as f32])?;
                update_from_net(net, u, &self.params, precision)?;
                self.synced = false;
                None
            }
            (None, None) => unreachable!("host mode has a host optimizer"),
        };
        if let Some(s) = skipped {
            self.skipped = s;
        }
        let loss = self.loss_value(&outs, &data);
        Ok(StepReport { loss, skipped })
    }

    /// The reported loss (see [`StepReport::loss`]).
    fn loss_value(&self, outs: &BTreeMap<String, Vec<f32>>, data: &[Vec<f32>]) -> f64 {
        let target = self.data.last().zip(data.last());
        match (self.loss_kind, outs.get("logits"), target, &self.logits) {
            (LossKind::CrossEntropy, Some(z), Some((port, t)), Some(l)) => {
                let k = l.shape()[1];
                feed::host_cross_entropy(z, k, t, port.shape.len() == 2 && port.shape[1] == k)
            }
            _ => f64::from(outs["loss"][0]),
        }
    }

    /// Copy device-resident weights back into the master weights (a no-op in host mode).
    pub fn sync(&mut self) -> Result<()> {
        if self.synced {
            return Ok(());
        }
        let params = self.params.clone();
        if let Some(prog) = self.state_program()? {
            for p in &params {
                let v = read_input(prog, p.name())?;
                p.master().copy_from_slice(&v);
            }
        }
        self.synced = true;
        Ok(())
    }

    /// Parameters and optimizer state as fp32 tensors keyed by position: `params.<k>`, and
    /// `m.<k>` / `v.<k>` (Adam, AdamW) or `buf.<k>` (SGD with momentum); metadata `step`,
    /// `optimizer` and `names` (a JSON list).
    pub fn state_dict(&mut self) -> Result<StateDict> {
        self.sync()?;
        let mut sd = StateDict::default();
        for (k, p) in self.params.iter().enumerate() {
            sd.tensors
                .insert(format!("params.{k}"), (p.shape().to_vec(), p.value()));
        }
        let (config, params) = (self.config, self.params.clone());
        let host = self.host.clone();
        for name in config.state_names() {
            for (k, p) in params.iter().enumerate() {
                let v = match (&host, self.state_program()?) {
                    (Some(opt), _) => opt.state(name).expect("a state name of the rule")[k].clone(),
                    (None, Some(prog)) => read_input(prog, &format!("{name}_{}", p.name()))?,
                    (None, None) => unreachable!("host mode has a host optimizer"),
                };
                sd.tensors
                    .insert(format!("{name}.{k}"), (p.shape().to_vec(), v));
            }
        }
        let names = serde_json::to_string(&params.iter().map(Parameter::name).collect::<Vec<_>>())
            .expect("strings serialize");
        sd.metadata = BTreeMap::from([
            ("step".to_string(), self.t.to_string()),
            ("optimizer".to_string(), config.name().to_string()),
            ("names".to_string(), names),
        ]);
        Ok(sd)
    }

    /// Restore parameters (by position), optimizer state and the step count from `loaded`
    /// (as made by [`Trainer::state_dict`]); Format errors name `source` and a tensor that is
    /// missing or of another shape, or a bad `step`; nothing changes on those errors.
    pub fn load_state_dict(&mut self, mut loaded: StateDict, source: &Path) -> Result<()> {
        let current = self.state_dict()?;
        for (key, (shape, _)) in &current.tensors {
            if loaded.tensors.get(key).map(|t| &t.0) != Some(shape) {
                return Err(Error::format(
                    source,
                    None,
                    format!("tensor '{key}' missing or not of shape {shape:?}"),
                ));
            }
        }
        let step = loaded.metadata.get("step").map_or("0", String::as_str);
        let t: u64 = step.parse().map_err(|_| {
            Error::format(
                source,
                None,
                format!("metadata step '{step}' is not a step count"),
            )
        })?;
        let mut take = |key: String| loaded.tensors.remove(&key).expect("checked above").1;
        let weights: Vec<Vec<f32>> = (0..self.params.len())
            .map(|k| take(format!("params.{k}")))
            .collect();
        let state: Vec<Vec<Vec<f32>>> = self
            .config
            .state_names()
            .iter()
            .map(|s| {
                (0..self.params.len())
                    .map(|k| take(format!("{s}.{k}")))
                    .collect()
            })
            .collect();
        for (p, w) in self.params.iter().zip(&weights) {
            p.set_value(w)?;
        }
        self.t = t;
        match self.host.as_mut() {
            Some(opt) => opt.restore(t, state),
            None => self.seed_state(Some(&state)),
        }
    }

    /// Free the compiled programs now; later calls are Runtime errors.
    pub fn release(&mut self) {
        self.programs = None;
    }
}

/// Execute the training program `net` on the update program `u`'s weights: lent by swapping
/// buffers on the reference executor, else fed as copies.
fn run_from_update(
    net: &mut Compiled,
    u: &mut Compiled,
    params: &[Parameter],
    precision: Precision,
) -> Result<()> {
    let lent = params
        .iter()
        .map(|p| {
            Ok((
                Source::Carried(port(u, p.name(), true)?),
                port(net, p.name(), true)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(run) = ports::execute_lent(u, net, &lent) {
        return run;
    }
    for (p, &(_, ni)) in params.iter().zip(&lent) {
        let ui = port(u, p.name(), true)?;
        if let Some(w) = ports::carried(u, ui) {
            ports::feed_exact(net, ni, w)?;
            continue;
        }
        match u.loaded.input_view(ui)? {
            PortView::F16(w) => ports::feed(net, ni, PortData::F16(w), precision)?,
            PortView::U8(_) | PortView::I32(_) => {
                return Err(Error::dtype(
                    "Trainer",
                    format!("input '{}' is not fp16", p.name()),
                ))
            }
        }
    }
    net.loaded.execute()
}

/// Execute the update program `u` on the gradients `net` computed: lent by swapping buffers on
/// the reference executor in fp16 mode, else fed as copies (rounded to fp16 from an fp32 `net`).
fn update_from_net(
    net: &mut Compiled,
    u: &mut Compiled,
    params: &[Parameter],
    precision: Precision,
) -> Result<()> {
    let names: Vec<String> = params
        .iter()
        .map(|p| format!("grad_{}", p.name()))
        .collect();
    let lent = names
        .iter()
        .map(|g| Ok((Source::Output(port(net, g, false)?), port(u, g, true)?)))
        .collect::<Result<Vec<_>>>()?;
    if precision == Precision::Fp16 {
        if let Some(run) = ports::execute_lent(net, u, &lent) {
            return run;
        }
    }
    let idx: Vec<usize> = (lent.iter())
        .map(|&(s, _)| match s {
            Source::Output(o) => o,
            Source::Carried(_) => unreachable!("gradients are outputs"),
        })
        .collect();
    let mut store = Vec::new();
    for (g, &(_, gi)) in ports::outputs(net, &idx, &mut store)?
        .into_iter()
        .zip(&lent)
    {
        if precision == Precision::Fp16 {
            ports::feed_exact(u, gi, g)?;
        } else {
            ports::feed(u, gi, PortData::F32(g), Precision::Fp16)?;
        }
    }
    u.loaded.execute()
}

/// The check a copying feed of the update program's weights into `net` makes (every value a
/// finite fp16, else a Value error naming the input), for weights lent without it: a step whose
/// gradients are not finite reports non-finite weights this way rather than as a skip.
fn check_weights(net: &mut Compiled, u: &mut Compiled, params: &[Parameter]) -> Result<()> {
    for p in params {
        let (ni, ui) = (port(net, p.name(), true)?, port(u, p.name(), true)?);
        if let Some(w) = ports::carried(u, ui) {
            checked_input(net.inputs(), ni, &PortData::F32(w))?;
        }
    }
    Ok(())
}

/// Input names of the training program that are not data: parameters, state, `lr_t`.
fn internal_inputs(config: &OptimConfig, params: &[Parameter]) -> Vec<String> {
    let mut v: Vec<String> = vec!["lr_t".into()];
    for p in params {
        v.push(p.name().to_string());
        v.extend(
            config
                .state_names()
                .iter()
                .map(|s| format!("{s}_{}", p.name())),
        );
    }
    v
}

/// Outputs `new_<w>` / `new_<s>_<w>` of one update of `weights` from `grads` (state inputs
/// `<s>_<w>`, learning rate input `lr_t`).
fn update_outputs(
    config: &OptimConfig,
    params: &[Parameter],
    weights: &[Tensor],
    grads: &[Tensor],
) -> Result<Vec<(Option<String>, Tensor)>> {
    let lr_t = crate::input_port(&[1], DType::Fp16, Some("lr_t"))?;
    let mut outs = Vec::new();
    for ((p, w), g) in params.iter().zip(weights).zip(grads) {
        let state = config
            .state_names()
            .iter()
            .map(|s| crate::input_port(p.shape(), DType::Fp16, Some(&format!("{s}_{}", p.name()))))
            .collect::<Result<Vec<_>>>()?;
        let (w_new, s_new) = update_graph(config, w, g, &state, &lr_t)?;
        outs.push((Some(format!("new_{}", p.name())), w_new));
        for (s, t) in config.state_names().iter().zip(s_new) {
            outs.push((Some(format!("new_{s}_{}", p.name())), t));
        }
    }
    Ok(outs)
}

/// Alias every `new_<w>` / `new_<s>_<w>` output to its input (resident state); those outputs
/// are stored into their port buffers only on demand.
fn alias_state(c: &mut Compiled, config: &OptimConfig, params: &[Parameter]) -> Result<()> {
    let mut carried = Vec::new();
    for p in params {
        let pairs = std::iter::once((format!("new_{}", p.name()), p.name().to_string())).chain(
            config
                .state_names()
                .iter()
                .map(|s| (format!("new_{s}_{}", p.name()), format!("{s}_{}", p.name()))),
        );
        for (out, inp) in pairs {
            c.loaded.alias(&out, &inp)?;
            carried.push(port(c, &out, false)?);
        }
    }
    ports::lazy(c, &carried);
    ports::carry_in_f32(c);
    Ok(())
}
