//! Layer and RMS norms as one step: the overflow-safe chain `Tensor::layer_norm` / `rms_norm`
//! emit over the last axis (11 to 18 ops, see `ops::row_norm`) is found in the graph and run by
//! one kernel over 8 rows at a time, with the same bits as the ops one by one. A chain is taken
//! only when every intermediate value is read by the chain alone (not a graph output), every op
//! is free (no other fusion took it) and fp16, and its constants are single values.

use super::row_fuse::{either, Matcher};
use crate::dtype::DType;
use crate::graph::Value;
use crate::ops::elementwise::Binary;
use crate::ops::reduce::ReduceKind;
use crate::ops::row_norm::NormChain;
use crate::ops::unary::Unary;
use crate::ops::{Buf, Op};

/// A norm chain found in the graph: its constants, the values the step reads and the nodes it
/// runs (its last node's value is the step's output).
#[derive(Debug)]
pub(super) struct RowNorm {
    pub chain: NormChain,
    /// x, then γ and β when present.
    pub inputs: Vec<Value>,
    gamma: bool,
    beta: bool,
    /// Every node of the chain in graph order, the last one included.
    pub nodes: Vec<usize>,
}

impl RowNorm {
    /// What a profile calls the step.
    pub fn name(&self) -> &'static str {
        if self.chain.centre {
            "layer_norm"
        } else {
            "rms_norm"
        }
    }

    /// Run on the step's input buffers (x, then γ and β when present) into `y`.
    pub fn run(&self, ins: &[&Buf], y: &mut [f32]) {
        let mut rest = ins[1..].iter().map(|b| b.data.as_slice());
        let gamma = if self.gamma { rest.next() } else { None };
        let beta = if self.beta { rest.next() } else { None };
        self.chain.run(&ins[0].data, gamma, beta, y);
    }
}

impl Matcher<'_> {
    /// The chain around rsqrt node `q`, widest form first (halved and centred, centred, bare).
    pub(super) fn at_rsqrt(&self, q: usize) -> Option<RowNorm> {
        let Op::Unary(Unary::Rsqrt { eps }) = self.g.nodes[q].op else {
            return None;
        };
        let t = self.input(q, 0)?;
        let (ms, rs2) = either(self.binary(t, Binary::Add)?, |a, _| {
            self.reduce(a, ReduceKind::Mean).is_some()
        })?;
        let sq = self.reduce(ms, ReduceKind::Mean)?;
        let (u, u2) = self.binary(sq, Binary::Mul)?;
        let (r, r2) = self.binary(rs2, Binary::Mul)?;
        let (rho, s) = self.binary(r, Binary::RealDiv)?;
        let (v, s2) = self.binary(u, Binary::RealDiv)?;
        let (mx, floor) = either(self.binary(s, Binary::Maximum)?, |a, b| {
            self.scalar(b).is_some() && self.reduce(a, ReduceKind::Max).is_some()
        })?;
        let a = self.reduce(mx, ReduceKind::Max)?;
        let y = self.sole_reader(q)?;
        let (u3, q2) = either(self.binary(y, Binary::Mul)?, |_, b| b == q)?;
        let abs_of_v =
            matches!(self.g.nodes[a].op, Op::Unary(Unary::Abs)) && self.input(a, 0)? == v;
        if u2 != u || r2 != r || s2 != s || u3 != u || q2 != q || !abs_of_v {
            return None;
        }
        let full = self.shape(u)?;
        let d = *full.last()?;
        let mut row = full.to_vec();
        *row.last_mut()? = 1;
        let rows_ok = [ms, rs2, r, s, mx, q, t]
            .iter()
            .all(|&i| self.shape(i) == Some(&row[..]));
        let full_ok = [sq, a, y, v].iter().all(|&i| self.shape(i) == Some(full));
        if !rows_ok || !full_ok || d == 0 {
            return None;
        }
        let core = [a, mx, s, u, sq, ms, r, rs2, t, q, y];
        let chain = NormChain {
            d,
            scale: None,
            centre: false,
            floor: self.scalar(floor)?,
            rho: self.scalar(rho)?,
            eps,
        };
        let (mut tail, mut gamma, mut beta) = (vec![], None, None);
        let mut end = y;
        if let Some((z, p)) = self.affine(end, Binary::Mul, d) {
            (end, gamma) = (z, Some(p));
            tail.push(z);
        }
        if let Some((z, p)) = self.affine(end, Binary::Add, d) {
            (end, beta) = (z, Some(p));
            tail.push(z);
        }
        // (x, halving k and node, centring nodes): halved and centred, centred, bare.
        let port0 = |node| Value { node, port: 0 };
        let centred = self.centring(v);
        let forms = [
            centred.and_then(|(h, c)| {
                let (x, k) = self.halving(h)?;
                Some((x, Some((k, h)), Some(c)))
            }),
            centred.map(|(h, c)| (port0(h), None, Some(c))),
            Some((port0(v), None, None)),
        ];
        forms
            .into_iter()
            .flatten()
            .find_map(|(x, halving, centre)| {
                let mut nodes: Vec<usize> = halving.map(|(_, h)| h).into_iter().collect();
                nodes.extend(centre.iter().flatten().chain(&core).chain(&tail));
                nodes.sort_unstable();
                nodes.dedup();
                let inside = |i: usize| nodes.binary_search(&i).is_ok();
                // Every intermediate (the halving's output included) read inside alone.
                let closed = nodes.iter().filter(|&&i| i != end).all(|&i| {
                    self.readers[i]
                        .iter()
                        .all(|&r| r != usize::MAX && inside(r))
                });
                let fp16 = nodes.iter().all(|&i| self.fp16(i));
                let inputs: Vec<Value> = std::iter::once(x).chain(gamma).chain(beta).collect();
                let outside = inputs.iter().all(|v| !inside(v.node));
                (closed && fp16 && outside && *nodes.last()? == end).then(|| RowNorm {
                    chain: NormChain {
                        scale: halving.map(|(k, _)| k),
                        centre: centre.is_some(),
                        ..chain.clone()
                    },
                    inputs,
                    gamma: gamma.is_some(),
                    beta: beta.is_some(),
                    nodes,
                })
            })
    }

    /// The centring before v = sub(d₁, mean(d₁)), d₁ = sub(h, mean(h)): h and the nodes
    /// [m₁, d₁, m₂, v].
    fn centring(&self, v: usize) -> Option<(usize, [usize; 4])> {
        let (d1, m2) = self.binary(v, Binary::Sub)?;
        let (h, m1) = self.binary(d1, Binary::Sub)?;
        let same =
            self.reduce(m2, ReduceKind::Mean)? == d1 && self.reduce(m1, ReduceKind::Mean)? == h;
        let full = self.shape(v)?;
        (same && self.shape(d1) == Some(full) && self.shape(h) == Some(full))
            .then_some((h, [m1, d1, m2, v]))
    }

    /// h = mul(x, k) with k a single value (either order) and x of h's shape: (x, k).
    fn halving(&self, h: usize) -> Option<(Value, f32)> {
        let ins = self.binary_values(h, Binary::Mul)?;
        let (i, k) = (0..2).find_map(|i| Some((i, self.scalar(ins[i].node)?)))?;
        let x = ins[1 - i];
        (self.g.ty(x).shape == self.g.nodes[h].outputs[0].shape).then_some((x, k))
    }

    /// The op `kind` reading node `z` and a [.., d] value p (all leading dims 1) as its
    /// operands (either order), when it is z's sole reader: (that node, p).
    fn affine(&self, z: usize, kind: Binary, d: usize) -> Option<(usize, Value)> {
        let next = self.sole_reader(z)?;
        let ins = self.binary_values(next, kind)?;
        let k = ins.iter().position(|v| v.node == z && v.port == 0)?;
        let p = ins[1 - k];
        let s = &self.g.ty(p).shape;
        let vector = s.last() == Some(&d) && s.iter().rev().skip(1).all(|&e| e == 1);
        let same = self.shape(next) == self.shape(z);
        (vector && same && self.g.ty(p).dtype == DType::Fp16 && p.node != z).then_some((next, p))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use crate::compile::{compile, CompileOptions, Device};
    use crate::exec::reference::handoff::ref_program;
    use crate::exec::reference::round_to_fp16;
    use crate::exec::{PortData, Precision};
    use crate::graph::{Graph, Tensor};
    use crate::ops::{Buf, Op};

    /// Every node of `g` evaluated by its op's own kernel, one at a time, each fp16 output
    /// rounded (the contract the fused step must keep), fed `x` as the one input.
    fn op_by_op(g: &Graph, x: &[f32]) -> Vec<Vec<f32>> {
        let mut vals: Vec<Vec<Buf>> = Vec::new();
        for node in &g.nodes {
            let ins: Vec<&Buf> = node.inputs.iter().map(|v| &vals[v.node][v.port]).collect();
            let mut outs: Vec<Buf> = node.outputs.iter().map(|t| Buf::zeros(&t.shape)).collect();
            match node.op {
                Op::Input(_) => {
                    outs[0].data = x
                        .iter()
                        .map(|&v| crate::ops::simd_fp16::round1(v))
                        .collect()
                }
                _ => {
                    node.op.family().eval(&ins, &mut outs).unwrap();
                    outs.iter_mut().for_each(|b| round_to_fp16(&mut b.data));
                }
            }
            vals.push(outs);
        }
        g.outputs
            .iter()
            .map(|(_, v)| vals[v.node][v.port].data.clone())
            .collect()
    }

    /// Compile `outs` for the reference executor, run it on `x` and return (row-kernel steps,
    /// all steps, outputs, op-by-op outputs of the same program).
    pub(crate) fn run(
        outs: &[Tensor],
        x: &[f32],
        tag: &str,
    ) -> (usize, usize, Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let dir = std::env::temp_dir().join(format!("aneforge-norm-{tag}-{}", std::process::id()));
        let opts = CompileOptions {
            device: Device::Reference,
            precision: Precision::Fp16,
            build_dir: Some(dir.clone()),
            ..Default::default()
        };
        let named: Vec<(Option<String>, Tensor)> = outs.iter().map(|t| (None, t.clone())).collect();
        let mut net = compile(&named, &opts).unwrap();
        let rp = ref_program(&mut *net.loaded).expect("a reference program");
        let norms = rp.steps.iter().filter(|s| s.row.is_some()).count();
        let steps = rp.steps.len();
        let got = net.run(&[PortData::F32(x)]).unwrap();
        let want = op_by_op(&net.program.graph, x);
        let _ = std::fs::remove_dir_all(dir);
        (norms, steps, got, want)
    }

    pub(crate) fn assert_bits(got: &[Vec<f32>], want: &[Vec<f32>], what: &str) {
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            let gb: Vec<u32> = g.iter().map(|v| v.to_bits()).collect();
            let wb: Vec<u32> = w.iter().map(|v| v.to_bits()).collect();
            assert_eq!(gb, wb, "{what}: output {k}");
        }
    }

    /// Inputs with a wide spread of magnitudes (and a constant row).
    fn inputs(rows: usize, d: usize) -> Vec<f32> {
        (0..rows * d)
            .map(|i| match (i / d) % 5 {
                0 => 1.25,
                1 => ((i * 7919 % 2003) as f32 - 1000.0) * 60.0,
                _ => ((i * 104_729 % 977) as f32 - 488.0) / 97.0,
            })
            .collect()
    }

    fn constant(d: usize, seed: usize) -> Tensor {
        let v: Vec<f32> = (0..d)
            .map(|j| ((j * 31 + seed) % 17) as f32 / 8.0 - 1.0)
            .collect();
        crate::constant("gamma", crate::ops::io::HostArray::f32(&[d], &v)).unwrap()
    }

    /// layer_norm (with and without γ/β) and rms_norm (with γ) each run as one norm step with
    /// the bits of the same program evaluated op by op, on short blocks, widths that leave
    /// partial tiles and a size that splits over the pool.
    #[test]
    fn norms_run_as_one_step_with_the_ops_bits() {
        for (rows, d) in [(1, 5), (37, 40), (130, 384)] {
            let x = crate::input(&[rows, d]).unwrap();
            let (g, b) = (constant(d, 1), constant(d, 2));
            let cases = [
                ("ln", x.layer_norm(Some(&g), Some(&b), 1e-5).unwrap()),
                ("ln-bare", x.layer_norm(None, None, 1e-12).unwrap()),
                ("ln-gamma", x.layer_norm(Some(&g), None, 1e-5).unwrap()),
                ("rms", x.rms_norm(Some(&g), 1e-6).unwrap()),
            ];
            for (tag, y) in cases {
                let (norms, steps, got, want) = run(&[y], &inputs(rows, d), tag);
                assert_eq!((norms, steps), (1, 1), "{tag} rows {rows} d {d}");
                assert_bits(&got, &want, &format!("{tag} rows {rows} d {d}"));
            }
        }
    }

    /// A chain value that is also read outside the chain stays out of it: with the halved
    /// input also a graph output the norm starts after the halving (or is not fused at all),
    /// and the bits still equal the ops one by one.
    #[test]
    fn values_read_outside_stay_outside() {
        let x = crate::input(&[9, 24]).unwrap();
        let y = x.layer_norm(None, None, 1e-5).unwrap();
        let half = x.mul_scalar(0.5).unwrap();
        let (norms, steps, got, want) = run(&[y, half], &inputs(9, 24), "outside");
        assert_eq!((norms, steps), (1, 2), "the norm and the other halving");
        assert_bits(&got, &want, "outside");
        // The chain written out with its halving h also a graph output: the norm starts at h
        // (h's step, the norm), and with the first deviation d₁ an output it is not centred
        // (its two means and subtractions run as steps of their own before an RMS-form norm).
        let r = 1e-5f32.sqrt() / 2.0;
        let h = x.mul_scalar(0.5).unwrap();
        let d1 = h.sub(&h.mean(&[-1], true).unwrap()).unwrap();
        let v = d1.sub(&d1.mean(&[-1], true).unwrap()).unwrap();
        let s = v
            .abs()
            .unwrap()
            .amax(&[-1], true)
            .unwrap()
            .maximum_scalar(r)
            .unwrap();
        let u = v.div(&s).unwrap();
        let ms = u.square().unwrap().mean(&[-1], true).unwrap();
        let t = ms
            .add(&s.rdiv_scalar(r).unwrap().square().unwrap())
            .unwrap();
        let y = u.mul(&t.rsqrt(0.0).unwrap()).unwrap();
        let (norms, steps, got, want) = run(&[y.clone(), h], &inputs(9, 24), "h-out");
        assert_eq!((norms, steps), (1, 2), "h's step and the norm");
        assert_bits(&got, &want, "h an output");
        let (norms, steps, got, want) = run(&[y, d1], &inputs(9, 24), "d1-out");
        assert_eq!(
            (norms, steps),
            (1, 6),
            "4 centring steps and h's step, the RMS-form norm"
        );
        assert_bits(&got, &want, "d1 an output");
    }
}
