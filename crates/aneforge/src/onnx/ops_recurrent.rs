//! ONNX RNN, GRU and LSTM unrolled over the static sequence length from IR ops: per time step
//! the gate formulas of the ONNX operator spec are written out (forward, reverse and
//! bidirectional, the activation lists with their alpha/beta, clip, initial states, LSTM
//! peepholes, GRU linear_before_reset, both layouts). sequence_lens must be known at import;
//! a row past its length keeps its state and writes zeros to Y, as the spec says.

use super::node::Node;
use super::ops::{Args, OpFn, Value};
use crate::error::Result;
use crate::graph::build::io::constant;
use crate::graph::build::rearrange::stack;
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::ops::io::HostArray;

/// The mapping of recurrent op `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "RNN" | "GRU" | "LSTM" => recurrent,
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    /// Gate blocks stacked in W and R: RNN 1, GRU 3 (z r h), LSTM 4 (i o f c).
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The spec's default activations of one direction.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// One activation function of the `activations` attribute with its alpha/beta.
struct Activation {
    name: String,
    alpha: f32,
    beta: f32,
}

impl Activation {
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let (a, b) = (self.alpha, self.beta);
        match self.name.to_ascii_lowercase().as_str() {
            "tanh" => x.unary_named("tanh", &[]),
            "sigmoid" => x.unary_named("sigmoid", &[]),
            "relu" => x.unary_named("relu", &[]),
            "softsign" => x.unary_named("softsign", &[]),
            "softplus" => x.unary_named("softplus", &[]),
            "leakyrelu" => x.unary_named("leaky_relu", &[a]),
            "elu" => x.unary_named("elu", &[a]),
            "hardsigmoid" => x.unary_named("sigmoid_hard", &[a, b]),
            "affine" => x.mul_scalar(a)?.add_scalar(b),
            "scaledtanh" => x.mul_scalar(b)?.unary_named("tanh", &[])?.mul_scalar(a),
            "thresholdedrelu" => {
                let keep = x.compare_scalar(Compare::Greater, a)?;
                x.mul(&super::ops::to_fp16(&keep)?)
            }
            other => Err(crate::error::Error::NotImplemented(format!(
                "activation '{other}' is not an ONNX recurrent activation"
            ))),
        }
    }
}

/// Default (alpha, beta) of an activation and which of the two it reads from the lists.
fn activation_params(name: &str) -> (Option<f32>, Option<f32>) {
    match name.to_ascii_lowercase().as_str() {
        "leakyrelu" => (Some(0.01), None),
        "thresholdedrelu" | "elu" => (Some(1.0), None),
        "hardsigmoid" => (Some(0.2), Some(0.5)),
        "affine" | "scaledtanh" => (Some(1.0), Some(0.0)),
        _ => (None, None),
    }
}

/// The activations of each direction; alpha/beta lists are read in order by the activations
/// that take them (as ONNX Runtime does).
fn activations(n: &Node, cell: Cell, dirs: usize) -> Result<Vec<Vec<Activation>>> {
    let per = cell.default_activations().len();
    let names: Vec<String> = match n.proto.attribute.iter().find(|a| a.name() == "activations") {
        Some(attr) => attr
            .strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
        None => (0..dirs)
            .flat_map(|_| cell.default_activations().iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != per * dirs {
        return Err(n.bad(format!(
            "{} activations for {dirs} direction(s) of a {cell:?} (needs {})",
            names.len(),
            per * dirs
        )));
    }
    let alphas = n.floats("activation_alpha")?.unwrap_or_default();
    let betas = n.floats("activation_beta")?.unwrap_or_default();
    let (mut ia, mut ib) = (0, 0);
    let mut out: Vec<Vec<Activation>> = Vec::new();
    for chunk in names.chunks(per) {
        let mut dir = Vec::new();
        for name in chunk {
            let (da, db) = activation_params(name);
            let take = |default: Option<f32>, list: &[f32], i: &mut usize| {
                default.map_or(0.0, |d| {
                    let v = list.get(*i).copied().unwrap_or(d);
                    *i += 1;
                    v
                })
            };
            let alpha = take(da, &alphas, &mut ia);
            let beta = take(db, &betas, &mut ib);
            dir.push(Activation {
                name: name.clone(),
                alpha,
                beta,
            });
        }
        out.push(dir);
    }
    Ok(out)
}

/// Slice `[d]` of a `[dirs, ...]` tensor, without the leading axis.
fn dir_slice(t: &Tensor, d: usize) -> Result<Tensor> {
    let shape = t.shape().to_vec();
    let mut begin = vec![0; shape.len()];
    begin[0] = d;
    let mut size = shape.clone();
    size[0] = 1;
    let rest: Vec<i64> = shape[1..].iter().map(|&x| x as i64).collect();
    t.slice_by_size(&begin, &size)?.reshape(&rest)
}

/// Columns `k*h .. (k+1)*h` of a 2-D tensor (or entries of a 1-D one).
fn block(t: &Tensor, k: usize, h: usize) -> Result<Tensor> {
    let shape = t.shape().to_vec();
    let last = shape.len() - 1;
    let mut begin = vec![0; shape.len()];
    begin[last] = k * h;
    let mut size = shape;
    size[last] = h;
    t.slice_by_size(&begin, &size)
}

/// The static shape facts of one node.
struct Dims {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
}

/// The per-direction weights, biases and initial states (graph tensors).
struct DirParams {
    /// W^T: [input, G*h].
    wt: Tensor,
    /// R^T: [h, G*h].
    rt: Tensor,
    /// Wb and Rb, each [G*h] (None: zeros).
    bias: Option<(Tensor, Tensor)>,
    h0: Option<Tensor>,
    c0: Option<Tensor>,
    /// LSTM peepholes P_i, P_o, P_f, each [h].
    peep: Option<[Tensor; 3]>,
}

fn recurrent(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let cell = match n.op() {
        "RNN" => Cell::Rnn,
        "GRU" => Cell::Gru,
        _ => Cell::Lstm,
    };
    let dirs = match n.string("direction", "forward")?.as_str() {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => return Err(n.bad(format!("direction = '{other}'"))),
    };
    let reverse_only = n.string("direction", "forward")? == "reverse";
    let layout = n.int("layout", 0)?;
    if cell == Cell::Lstm && n.int("input_forget", 0)? != 0 {
        return Err(n.unsupported("LSTM input_forget = 1 (coupled input and forget gates)"));
    }
    let mut x = a.ftensor(0)?;
    if x.rank() != 3 {
        return Err(n.bad(format!("X has shape {:?}; expected rank 3", x.shape())));
    }
    if layout == 1 {
        x = x.transpose(&[1, 0, 2])?;
    }
    let (w, r) = (a.ftensor(1)?, a.ftensor(2)?);
    let g = cell.gates();
    let hidden = r.shape().last().copied().unwrap_or(0);
    let d = Dims {
        seq: x.shape()[0],
        batch: x.shape()[1],
        input: x.shape()[2],
        hidden,
    };
    if w.shape() != [dirs, g * hidden, d.input] || r.shape() != [dirs, g * hidden, hidden] {
        return Err(n.bad(format!(
            "W {:?} / R {:?} do not fit {dirs} direction(s), {g} gate(s), hidden {hidden}, input {}",
            w.shape(),
            r.shape(),
            d.input
        )));
    }
    if n.has("hidden_size") && n.int("hidden_size", 0)? != hidden as i64 {
        return Err(n.bad(format!("hidden_size disagrees with R's {hidden}")));
    }
    let masks = step_masks(a, &d)?;
    let acts = activations(n, cell, dirs)?;
    let clip = if n.has("clip") {
        Some(n.float("clip", 0.0)?)
    } else {
        None
    };
    let opt = |i: usize| a.get(i).map(|_| a.ftensor(i)).transpose();
    let (b, h0, c0, p) = (opt(3)?, opt(5)?, opt(6)?, opt(7)?);
    let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for (k, dir_acts) in acts.iter().enumerate() {
        let t = |m: &Tensor| -> Result<Tensor> { dir_slice(m, k)?.transpose(&[1, 0]) };
        let params = DirParams {
            wt: t(&w)?,
            rt: t(&r)?,
            bias: match &b {
                Some(b) => {
                    let bd = dir_slice(b, k)?;
                    Some((block(&bd, 0, g * hidden)?, block(&bd, 1, g * hidden)?))
                }
                None => None,
            },
            h0: h0.as_ref().map(|h| dir_slice(h, k)).transpose()?,
            c0: c0.as_ref().map(|c| dir_slice(c, k)).transpose()?,
            peep: match &p {
                Some(p) => {
                    let pd = dir_slice(p, k)?;
                    Some([
                        block(&pd, 0, hidden)?,
                        block(&pd, 1, hidden)?,
                        block(&pd, 2, hidden)?,
                    ])
                }
                None => None,
            },
        };
        let run = Run {
            cell,
            d: &d,
            acts: dir_acts,
            clip,
            masks: &masks,
            reverse: k == 1 || reverse_only,
            linear_before_reset: n.int("linear_before_reset", 0)? != 0,
        };
        let (y, h, c) = run.direction(&x, &params)?;
        ys.push(y);
        hs.push(h);
        cs.push(c);
    }
    let mut y = stack(&ys, 1)?; // [seq, dirs, batch, h]
    let (mut yh, mut yc) = (stack(&hs, 0)?, stack(&cs, 0)?); // [dirs, batch, h]
    if layout == 1 {
        y = y.transpose(&[2, 0, 1, 3])?;
        yh = yh.transpose(&[1, 0, 2])?;
        yc = yc.transpose(&[1, 0, 2])?;
    }
    let elem = a.req(0)?.elem();
    let out = |t: Tensor| Value::Graph { t, elem };
    let mut outs = vec![out(y), out(yh)];
    if cell == Cell::Lstm {
        outs.push(out(yc));
    }
    Ok(outs)
}

/// Per time step, a [batch, 1] 0/1 mask of the rows still inside their sequence_lens (None:
/// every row runs every step).
fn step_masks(a: &Args, d: &Dims) -> Result<Option<Vec<Tensor>>> {
    let n = a.node;
    let Some(lens) = a.ints(4, "sequence_lens")? else {
        return Ok(None);
    };
    if lens.len() != d.batch || lens.iter().any(|&l| l < 0 || l as usize > d.seq) {
        return Err(n.bad(format!(
            "sequence_lens {lens:?} must hold {} values in 0..={}",
            d.batch, d.seq
        )));
    }
    if lens.iter().all(|&l| l as usize == d.seq) {
        return Ok(None);
    }
    (0..d.seq)
        .map(|t| {
            let m: Vec<f32> = lens
                .iter()
                .map(|&l| f32::from(u8::from((t as i64) < l)))
                .collect();
            constant(&n.what, HostArray::f32(&[d.batch, 1], &m))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// One direction's unrolled recurrence.
struct Run<'r> {
    cell: Cell,
    d: &'r Dims,
    acts: &'r [Activation],
    clip: Option<f32>,
    masks: &'r Option<Vec<Tensor>>,
    reverse: bool,
    linear_before_reset: bool,
}

impl Run<'_> {
    fn clip(&self, x: Tensor) -> Result<Tensor> {
        match self.clip {
            Some(c) => x.maximum_scalar(-c)?.minimum_scalar(c),
            None => Ok(x),
        }
    }

    /// f(clip(x)) with activation `k` of this direction.
    fn act(&self, k: usize, x: Tensor) -> Result<Tensor> {
        self.acts[k].apply(&self.clip(x)?)
    }

    /// (Y [seq, batch, h], final H [batch, h], final C [batch, h] (H for RNN/GRU)).
    fn direction(&self, x: &Tensor, p: &DirParams) -> Result<(Tensor, Tensor, Tensor)> {
        let d = self.d;
        let (h, g) = (d.hidden, self.cell.gates());
        let zeros = || {
            constant(
                "recurrent state",
                HostArray::f32(&[d.batch, h], &vec![0.0; d.batch * h]),
            )
        };
        // X·W^T for every step at once, with Wb (and Rb, except GRU's h block) folded in.
        let mut xw = x
            .reshape(&[(d.seq * d.batch) as i64, d.input as i64])?
            .matmul(&p.wt)?;
        if let Some((wb, rb)) = &p.bias {
            xw = xw.add(&if self.cell == Cell::Gru {
                wb.clone()
            } else {
                wb.add(rb)?
            })?;
        }
        let xw = xw.reshape(&[d.seq as i64, d.batch as i64, (g * h) as i64])?;
        let mut hp = match &p.h0 {
            Some(t) => t.clone(),
            None => zeros()?,
        };
        let mut cp = match &p.c0 {
            Some(t) => t.clone(),
            None => zeros()?,
        };
        let mut ys: Vec<Option<Tensor>> = vec![None; d.seq];
        let steps: Vec<usize> = if self.reverse {
            (0..d.seq).rev().collect()
        } else {
            (0..d.seq).collect()
        };
        for t in steps {
            let xt = xw
                .slice_by_size(&[t, 0, 0], &[1, d.batch, g * h])?
                .reshape(&[d.batch as i64, (g * h) as i64])?;
            let (hn, cn) = match self.cell {
                Cell::Rnn => (self.act(0, xt.add(&hp.matmul(&p.rt)?)?)?, cp.clone()),
                Cell::Gru => (self.gru_step(&xt, &hp, p)?, cp.clone()),
                Cell::Lstm => self.lstm_step(&xt, &hp, &cp, p)?,
            };
            let (hn, y, cn) = match self.masks {
                // Rows past their length keep their state and write zeros.
                Some(m) => (
                    hp.add(&m[t].mul(&hn.sub(&hp)?)?)?,
                    m[t].mul(&hn)?,
                    cp.add(&m[t].mul(&cn.sub(&cp)?)?)?,
                ),
                None => (hn.clone(), hn, cn),
            };
            ys[t] = Some(y);
            hp = hn;
            cp = cn;
        }
        let ys: Vec<Tensor> = ys.into_iter().flatten().collect();
        let c = if self.cell == Cell::Lstm {
            cp
        } else {
            hp.clone()
        };
        Ok((stack(&ys, 0)?, hp, c))
    }

    /// z = f(Xz + H·Rz + b), r = f(Xr + H·Rr + b), h~ = g(Xh + (r⊙H)·Rh + Rbh) or, with
    /// linear_before_reset, g(Xh + r⊙(H·Rh + Rbh)); H' = (1 − z)⊙h~ + z⊙H.
    fn gru_step(&self, xt: &Tensor, hp: &Tensor, p: &DirParams) -> Result<Tensor> {
        let h = self.d.hidden;
        let rb = |k: usize| p.bias.as_ref().map(|(_, rb)| block(rb, k, h)).transpose();
        let with = |t: Tensor, b: Option<Tensor>| match b {
            Some(b) => t.add(&b),
            None => Ok(t),
        };
        let hr = |k: usize, state: &Tensor| with(state.matmul(&block(&p.rt, k, h)?)?, rb(k)?);
        let z = self.act(0, block(xt, 0, h)?.add(&hr(0, hp)?)?)?;
        let r = self.act(0, block(xt, 1, h)?.add(&hr(1, hp)?)?)?;
        let hh = if self.linear_before_reset {
            r.mul(&hr(2, hp)?)?
        } else {
            hr(2, &r.mul(hp)?)?
        };
        let ht = self.act(1, block(xt, 2, h)?.add(&hh)?)?;
        ht.add(&z.mul(&hp.sub(&ht)?)?)
    }

    /// i, o, f, c gates; peepholes P_i, P_f read C_{t-1}, P_o reads C_t.
    fn lstm_step(
        &self,
        xt: &Tensor,
        hp: &Tensor,
        cp: &Tensor,
        p: &DirParams,
    ) -> Result<(Tensor, Tensor)> {
        let h = self.d.hidden;
        let pre = xt.add(&hp.matmul(&p.rt)?)?;
        let peep = |k: usize, c: &Tensor, x: Tensor| -> Result<Tensor> {
            match &p.peep {
                Some(ps) => x.add(&ps[k].mul(c)?),
                None => Ok(x),
            }
        };
        let i = self.act(0, peep(0, cp, block(&pre, 0, h)?)?)?;
        let f = self.act(0, peep(2, cp, block(&pre, 2, h)?)?)?;
        let c = self.act(1, block(&pre, 3, h)?)?;
        let cn = f.mul(cp)?.add(&i.mul(&c)?)?;
        let o = self.act(0, peep(1, &cn, block(&pre, 1, h)?)?)?;
        Ok((o.mul(&self.acts[2].apply(&cn)?)?, cn))
    }
}
