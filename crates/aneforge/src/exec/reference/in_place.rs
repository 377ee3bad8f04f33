//! In-place elementwise steps. A `select` or binary step whose output element k reads one
//! operand only at element k (that operand has the output's shape, so it is not broadcast) can
//! write its output into that operand's buffer: each element is read before it is written, and
//! no other element reads it. [`RefProgram::share_alias`](super::RefProgram) uses this for an
//! aliased input updated elementwise in the step that writes its output (the decode step's K/V
//! `select`), so the cache is held once. The memory plan never gives a step's output the slot of
//! one of its inputs, so an in-place step is exactly one whose output slot is among its inputs.

use super::Step;
use crate::error::{Error, Result};
use crate::ops::kernel::{broadcast_strides, for_each_broadcast};
use crate::ops::{Buf, Op};

/// The operand position of `step` whose buffer (slot `slot`, of shape `shape`) its output may
/// be computed into: a plain one-output `select` (either branch) or binary step reading `slot`
/// once, at a position of the output's shape; `None` for any other step or operand.
pub(super) fn operand(step: &Step, slot: usize, shape: &[usize]) -> Option<usize> {
    let plain = step.fused.is_none()
        && step.table.is_none()
        && step.packed.is_none()
        && step.shared.is_none()
        && step.epilogue.is_none()
        && step.row.is_none();
    let positions = match step.op {
        Op::Select(_) => 1..3,
        Op::Binary(_) => 0..2,
        _ => return None,
    };
    let mut at = step.ins.iter().enumerate().filter(|&(_, &s)| s == slot);
    let (p, _) = at.next()?;
    let whole = step.out_shapes.len() == 1 && step.out_shapes[0] == shape;
    (plain && whole && at.next().is_none() && positions.contains(&p)).then_some(p)
}

/// The operand position of `step` that holds its own output slot (set up by `share_alias`).
pub(super) fn aliased_operand(step: &Step) -> Option<usize> {
    let o = *step.outs.first()?;
    step.ins.iter().position(|&i| i == o)
}

/// Run `step` with its output computed into operand `p`'s buffer (see [`operand`]); the values
/// equal the step's out-of-place result bit for bit.
pub(super) fn run(step: &Step, p: usize, bufs: &mut [Buf]) -> Result<()> {
    let o = step.outs[0];
    let shape = &step.out_shapes[0];
    let mut y = std::mem::take(&mut bufs[o].data);
    let strides = |k: usize| broadcast_strides(&bufs[step.ins[k]].shape, shape);
    match step.op {
        Op::Select(_) => {
            // Only the elements taken from the other branch change; the kept ones are the
            // operand's own values, already fp16 in fp16 mode (an fp16 port or a rounded step).
            let (c, q) = (step.ins[0], step.ins[3 - p]);
            let (cd, qd) = (&bufs[c].data, &bufs[q].data);
            let round = step.round[0];
            let take_other = |cond: f32| (cond != 0.0) == (p == 2);
            for_each_broadcast(shape, [&strides(0), &strides(3 - p)], |k, [i, j]| {
                if take_other(cd[i]) {
                    y[k] = if round { fp16(qd[j]) } else { qd[j] };
                }
            });
        }
        Op::Binary(b) => {
            let q = step.ins[1 - p];
            let qd = &bufs[q].data;
            let f = |mine: f32, other: f32| match p {
                0 => b.apply(mine, other),
                _ => b.apply(other, mine),
            };
            if qd.len() == y.len() {
                y.iter_mut().zip(qd).for_each(|(v, &w)| *v = f(*v, w));
            } else {
                for_each_broadcast(shape, [&strides(1 - p)], |k, [j]| y[k] = f(y[k], qd[j]));
            }
            if step.round[0] {
                super::round_to_fp16(&mut y);
            }
        }
        _ => {
            bufs[o].data = y;
            return Err(Error::Runtime {
                op: step.label.op.clone(),
                msg: "only select and binary steps run in place".into(),
            });
        }
    }
    bufs[o].data = y;
    Ok(())
}

/// `v` rounded to the nearest fp16 (ties to even), as an f32.
fn fp16(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::super::RefProgram;
    use crate::exec::{Loaded, PortData, Precision};
    use crate::graph::{Graph, Tensor};
    use crate::ops::elementwise::Compare;
    use crate::program::Program;
    use crate::{input_port, DType};

    fn port(shape: &[usize], name: &str) -> Tensor {
        input_port(shape, DType::Fp16, Some(name)).unwrap()
    }

    fn lower(outs: Vec<(&str, Tensor)>) -> Program {
        let outs: Vec<_> = outs.into_iter().map(|(n, t)| (Some(n.into()), t)).collect();
        Program::lower(Graph::from_outputs(&outs).unwrap()).unwrap()
    }

    /// `v` rounded as an op's result is: to fp16 (`fp16`) or to f32.
    fn r(v: f64, fp16: bool) -> f64 {
        if fp16 {
            f16::from_f64(v).to_f64()
        } else {
            f64::from(v as f32)
        }
    }

    /// The decode write on a 2-head cache of 8 positions, dh 4: k_next [2,4,8] takes 1.5·d at
    /// the one-hot position (select's `b` branch is the cache), v_next [2,8,4] keeps the cache
    /// off the position (its `a` branch) and takes −0.75·e there; kv = k_next @ v_next reads
    /// both new caches afterwards, as attention does.
    fn decode_write() -> Program {
        let (k, v) = (port(&[2, 4, 8], "k"), port(&[2, 8, 4], "v"));
        let (d, e, pos) = (
            port(&[2, 4, 1], "d"),
            port(&[2, 1, 4], "e"),
            port(&[8, 1], "pos"),
        );
        let at = pos.compare_scalar(Compare::Greater, 0.5).unwrap();
        let off = pos.compare_scalar(Compare::Less, 0.5).unwrap();
        let at_k = at.reshape(&[1, 8]).unwrap();
        let k_next = crate::select(&at_k, &d.mul_scalar(1.5).unwrap(), &k).unwrap();
        let v_next = crate::select(&off, &v, &e.mul_scalar(-0.75).unwrap()).unwrap();
        let kv = k_next.matmul(&v_next).unwrap();
        lower(vec![("k_next", k_next), ("v_next", v_next), ("kv", kv)])
    }

    fn index(p: &RefProgram, name: &str) -> usize {
        p.inputs.iter().position(|s| s.name == name).unwrap()
    }

    fn read(p: &RefProgram, o: usize) -> Vec<f32> {
        let mut out = vec![0f32; p.outputs[o].numel()];
        p.read_output(o, &mut out).unwrap();
        out
    }

    /// Both caches of the decode write share their buffers with their outputs (the output slot
    /// is released, the select steps run in place) and, over four steps at scattered positions,
    /// give the caches of a NumPy-style f64 oracle and every output of the same program run out
    /// of place (no alias; the outputs fed back as inputs), bit for bit, in both precisions.
    #[test]
    fn aliased_select_runs_in_place_with_the_out_of_place_bits() {
        for precision in [Precision::Fp16, Precision::Fp32] {
            let fp16 = precision == Precision::Fp16;
            let mut p = RefProgram::new(&decode_write(), precision).unwrap();
            let mut q = RefProgram::new(&decode_write(), precision).unwrap();
            let (ki, vi) = (index(&p, "k"), index(&p, "v"));
            let mut k: Vec<f32> = (0..64).map(|i| (i % 7) as f32 * 0.25 - 0.75).collect();
            let mut v: Vec<f32> = (0..64).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
            for prog in [&mut p, &mut q] {
                prog.set_input(ki, PortData::F32(&k)).unwrap();
                prog.set_input(vi, PortData::F32(&v)).unwrap();
            }
            let released = [p.output_bufs[0], p.output_bufs[1]];
            p.alias("k_next", "k").unwrap();
            p.alias("v_next", "v").unwrap();
            assert!(p.shared.has(ki) && p.shared.has(vi), "{precision:?}");
            assert_eq!(p.output_bufs[..2], [p.input_bufs[ki], p.input_bufs[vi]]);
            assert!(released.iter().all(|&s| p.bufs[s].data.is_empty()));
            let in_place = p.steps.iter().filter(|s| aliased(s)).count();
            assert_eq!(in_place, 2, "{precision:?}: both selects in place");
            for (step, t) in [0usize, 3, 7, 5].into_iter().enumerate() {
                let pos: Vec<f32> = (0..8).map(|i| f32::from(u8::from(i == t))).collect();
                let d: Vec<f32> = (0..8).map(|i| (i + step) as f32 * 0.5 - 1.5).collect();
                let e: Vec<f32> = (0..8).map(|i| 1.25 - (i * step) as f32 * 0.25).collect();
                for prog in [&mut p, &mut q] {
                    for (name, x) in [("pos", &pos), ("d", &d), ("e", &e)] {
                        prog.set_input(index(prog, name), PortData::F32(x)).unwrap();
                    }
                    prog.execute().unwrap();
                }
                for h in 0..2 {
                    for c in 0..4 {
                        k[h * 32 + c * 8 + t] = r(1.5 * f64::from(d[h * 4 + c]), fp16) as f32;
                        v[h * 32 + t * 4 + c] = r(-0.75 * f64::from(e[h * 4 + c]), fp16) as f32;
                    }
                }
                let mut kv = vec![0f32; 32];
                for (i, o) in kv.iter_mut().enumerate() {
                    let (h, a, b) = (i / 16, i / 4 % 4, i % 4);
                    let dot: f64 = (0..8)
                        .map(|j| {
                            f64::from(k[h * 32 + a * 8 + j]) * f64::from(v[h * 32 + j * 4 + b])
                        })
                        .sum();
                    *o = r(dot, fp16) as f32;
                }
                for (o, want) in [&k, &v, &kv].into_iter().enumerate() {
                    let (got, out_of_place) = (read(&p, o), read(&q, o));
                    assert_eq!(got, *want, "{precision:?} step {step} output {o}");
                    assert_eq!(got, out_of_place, "{precision:?} step {step} output {o}");
                }
                q.set_input(ki, PortData::F32(&read(&q, 0))).unwrap();
                q.set_input(vi, PortData::F32(&read(&q, 1))).unwrap();
            }
        }
    }

    /// Whether `s` runs in place (its output slot is one of its inputs).
    fn aliased(s: &super::Step) -> bool {
        super::aliased_operand(s).is_some()
    }

    /// A writer that is not elementwise (a matmul rotating the positions: every output element
    /// reads other input elements) keeps the copying alias, and the recurrence stays the
    /// oracle's; so does a select whose cache operand is read again after it (mix = k + k_next).
    #[test]
    fn non_elementwise_writers_keep_the_copy() {
        let k = port(&[1, 8], "k");
        let rot: Vec<f32> = (0..64)
            .map(|i| f32::from(u8::from(i / 8 == (i + 1) % 8)))
            .collect();
        let rot = crate::constant("rot", crate::HostArray::f32(&[8, 8], &rot)).unwrap();
        let rotated = lower(vec![("k_next", k.matmul(&rot).unwrap())]);
        let mut p = RefProgram::new(&rotated, Precision::Fp16).unwrap();
        let mut want: Vec<f32> = (0..8).map(|i| i as f32 * 0.125 - 0.5).collect();
        p.set_input(0, PortData::F32(&want)).unwrap();
        p.alias("k_next", "k").unwrap();
        assert!(!p.shared.has(0));
        assert!(!p.steps.iter().any(aliased));
        for _ in 0..3 {
            p.execute().unwrap();
            want = (0..8).map(|j| want[(j + 1) % 8]).collect();
            assert_eq!(read(&p, 0), want);
        }
        let (k, d, pos) = (port(&[2, 8], "k"), port(&[2, 1], "d"), port(&[1, 8], "pos"));
        let at = pos.compare_scalar(Compare::Greater, 0.5).unwrap();
        let next = crate::select(&at, &d, &k).unwrap();
        let mix = k.add(&next).unwrap();
        let reread = lower(vec![("k_next", next), ("mix", mix)]);
        let mut p = RefProgram::new(&reread, Precision::Fp16).unwrap();
        let (ki, di, pi) = (index(&p, "k"), index(&p, "d"), index(&p, "pos"));
        let (old_read, writer) = (
            p.steps
                .iter()
                .rposition(|s| s.ins.contains(&p.input_bufs[ki])),
            p.steps
                .iter()
                .position(|s| s.outs.contains(&p.output_bufs[0])),
        );
        assert!(old_read > writer, "the old cache is read after the select");
        p.alias("k_next", "k").unwrap();
        assert!(!p.shared.has(ki) && !p.steps.iter().any(aliased));
        let mut want: Vec<f32> = (0..16).map(|i| i as f32 - 4.0).collect();
        p.set_input(ki, PortData::F32(&want)).unwrap();
        for (step, t) in [2usize, 6, 0].into_iter().enumerate() {
            let d = [step as f32 + 0.5, -(step as f32)];
            let at: Vec<f32> = (0..8).map(|i| f32::from(u8::from(i == t))).collect();
            p.set_input(di, PortData::F32(&d)).unwrap();
            p.set_input(pi, PortData::F32(&at)).unwrap();
            p.execute().unwrap();
            let old = want.clone();
            (0..2).for_each(|h| want[h * 8 + t] = d[h]);
            let mix: Vec<f32> = old.iter().zip(&want).map(|(a, b)| a + b).collect();
            let mo = p.outputs.iter().position(|s| s.name == "mix").unwrap();
            assert_eq!((read(&p, 1 - mo), read(&p, mo)), (want.clone(), mix));
        }
    }

    /// Binary writers run in place with the updated operand on either side, the other operand
    /// of the same shape (k_next = k + d) or broadcast (j_next = b − j), each step the oracle's
    /// per-op rounded arithmetic.
    #[test]
    fn aliased_binary_runs_in_place() {
        let (k, d, j, b) = (
            port(&[4, 8], "k"),
            port(&[4, 8], "d"),
            port(&[4, 8], "j"),
            port(&[1, 8], "b"),
        );
        let prog = lower(vec![
            ("k_next", k.add(&d).unwrap()),
            ("j_next", b.sub(&j).unwrap()),
        ]);
        for precision in [Precision::Fp16, Precision::Fp32] {
            let fp16 = precision == Precision::Fp16;
            let mut p = RefProgram::new(&prog, precision).unwrap();
            let (dv, bv): (Vec<f32>, Vec<f32>) = (
                (0..32).map(|i| 0.1 + i as f32 * 0.013).collect(),
                (0..8).map(|i| 3.3 - i as f32 * 0.41).collect(),
            );
            let mut kv: Vec<f64> = (0..32).map(|i| i as f64 * 0.07).collect();
            let mut jv: Vec<f64> = (0..32).map(|i| 1.0 - i as f64 * 0.05).collect();
            for (name, x) in [("d", &dv), ("b", &bv)] {
                p.set_input(index(&p, name), PortData::F32(x)).unwrap();
            }
            for (name, x) in [("k", &mut kv), ("j", &mut jv)] {
                let f: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                p.set_input(index(&p, name), PortData::F32(&f)).unwrap();
                x.iter_mut()
                    .for_each(|v| *v = r(f64::from(*v as f32), fp16));
            }
            p.alias("k_next", "k").unwrap();
            p.alias("j_next", "j").unwrap();
            assert!(p.shared.has(index(&p, "k")) && p.shared.has(index(&p, "j")));
            assert_eq!(p.steps.iter().filter(|s| aliased(s)).count(), 2);
            let rd = |v: f32| r(f64::from(v), fp16);
            for _ in 0..3 {
                p.execute().unwrap();
                kv = (kv.iter().zip(&dv))
                    .map(|(&k, &d)| r(k + rd(d), fp16))
                    .collect();
                jv = (jv.iter().enumerate())
                    .map(|(i, &j)| r(rd(bv[i % 8]) - j, fp16))
                    .collect();
                let ko = p.outputs.iter().position(|s| s.name == "k_next").unwrap();
                let f64s = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<_>>();
                assert_eq!(f64s(read(&p, ko)), kv, "{precision:?}");
                assert_eq!(f64s(read(&p, 1 - ko)), jv, "{precision:?}");
            }
        }
    }
}
