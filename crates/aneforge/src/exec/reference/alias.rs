//! Aliased ports held once. `alias(output, input)` (a resident KV cache) copies the output into
//! the input after every execute; when the output's value can be computed straight into the
//! input's value buffer (every read of the input comes before the step producing the output, or
//! is that step's own elementwise read of it, see `in_place`, or a fused elementwise run's read
//! at or before the op that stores the output, see `train_fuse`), the two share that buffer
//! and, in fp16 mode, neither port buffer is used while the program
//! runs: the value buffer (fp16-exact f32) holds the input between executes, `set_input` writes
//! it, and the port buffers are filled only for a view. One copy of the cache instead of four
//! (input and output ports, input and output value buffers); the numbers are the same bits.

use half::f16;

use super::{in_place, PortBuf, RefProgram};
use crate::exec::PortData;

/// Which inputs share their value buffer with an aliased output.
#[derive(Debug, Default)]
pub(super) struct Shared {
    inputs: Vec<usize>,
}

impl Shared {
    /// Whether input `i` shares its buffer with an aliased output.
    pub(super) fn has(&self, i: usize) -> bool {
        self.inputs.contains(&i)
    }
}

impl RefProgram {
    /// Make output `o` be computed into input `i`'s value buffer when that is safe (see the
    /// module doc); otherwise leave the pair to the copy after each execute. fp16 mode keeps
    /// the output port lazy and the input fed from the buffer.
    pub(super) fn share_alias(&mut self, o: usize, i: usize) {
        let (so, si) = (self.output_bufs[o], self.input_bufs[i]);
        let fp16_ports = matches!(
            (self.out_ports.get(o), self.in_ports.get(i)),
            (Some(PortBuf::F16(_)), Some(PortBuf::F16(_))) | (None, None)
        );
        let once = |bufs: &[usize], s: usize| bufs.iter().filter(|&&b| b == s).count();
        // A view taken before the alias holds a port buffer that sharing would drop.
        if so == si
            || !fp16_ports
            || self.shared.has(i)
            || self.handoff.viewed_input(i)
            || self.handoff.viewed_output(o)
            || once(&self.output_bufs, so) != 1
            || once(&self.input_bufs, so) != 0
            || once(&self.input_bufs, si) != 1
            || once(&self.output_bufs, si) != 0
        {
            return;
        }
        let writes = |s: &super::Step, slot: usize| {
            s.outs.contains(&slot) || s.fused.as_ref().is_some_and(|f| f.writes(slot))
        };
        let reads = |s: &super::Step, slot: usize| {
            s.ins.contains(&slot) || s.fused.as_ref().is_some_and(|f| f.reads(slot))
        };
        let writers: Vec<usize> = (0..self.steps.len())
            .filter(|&k| writes(&self.steps[k], so) || writes(&self.steps[k], si))
            .collect();
        let [w] = writers[..] else { return };
        let writer = &self.steps[w];
        // The writer may read the input only as an operand it can update in place (a fused
        // run: only in or before the op that stores the output, see `Fused::can_share`).
        let reads_in_place = match &writer.fused {
            Some(f) => f.can_share(so, si),
            None => {
                !writer.ins.contains(&si)
                    || in_place::operand(writer, si, &self.bufs[si].shape).is_some()
            }
        };
        if !writes(writer, so)
            || !reads_in_place
            || (self.steps[..w].iter()).any(|s| reads(s, so))
            || (writer.fused.is_none() && writer.ins.contains(&so))
            || (self.steps[w + 1..].iter()).any(|s| reads(s, si))
        {
            return;
        }
        for s in &mut self.steps {
            for slot in s.ins.iter_mut().chain(s.outs.iter_mut()) {
                if *slot == so {
                    *slot = si;
                }
            }
            if let Some(f) = s.fused.as_mut() {
                f.rename(so, si);
            }
        }
        self.output_bufs[o] = si;
        self.bufs[so] = crate::ops::Buf::zeros(&[0]);
        self.shared.inputs.push(i);
        if !self.in_ports.is_empty() {
            self.lazy_output(o);
            self.sync_value_from_port(i);
            // Unused until a view asks (`sync_input_port` allocates it again).
            self.in_ports[i] = PortBuf::F16(Vec::new());
        }
    }

    /// fp16 mode: load input `i`'s port into its value buffer and mark it fed (the buffer is
    /// the input's value from now on).
    fn sync_value_from_port(&mut self, i: usize) {
        self.in_ports[i].load_into(&mut self.bufs[self.input_bufs[i]].data);
        self.handoff.feed(i);
    }

    /// `set_input` on a shared fp16 input: the fp16-rounded values go straight into the value
    /// buffer (no port buffer is touched). `false` when `i` is not one (the caller writes the
    /// port as usual).
    pub(super) fn set_shared_input(&mut self, i: usize, data: &PortData) -> bool {
        if self.in_ports.is_empty() || !self.shared.has(i) || self.handoff.viewed_input(i) {
            return false;
        }
        let dst = &mut self.bufs[self.input_bufs[i]].data;
        let round = |v: f32| f16::from_f32(v).to_f32();
        match data {
            PortData::F32(x) => dst.iter_mut().zip(*x).for_each(|(d, &v)| *d = round(v)),
            PortData::F64(x) => (dst.iter_mut().zip(*x)).for_each(|(d, &v)| *d = round(v as f32)),
            PortData::F16(x) => dst.iter_mut().zip(*x).for_each(|(d, v)| *d = v.to_f32()),
            _ => return false,
        }
        self.handoff.feed(i);
        true
    }

    /// After an execute, shared input `i` holds its next value in its value buffer: the next
    /// execute runs from it, unless a view of the input is live, in which case the port buffer
    /// takes the value (the view sees it) and the next execute loads it back (with any write
    /// made through the view).
    pub(super) fn after_shared_execute(&mut self, i: usize) {
        if self.handoff.viewed_input(i) {
            self.in_ports[i].store_from(&self.bufs[self.input_bufs[i]].data);
        } else {
            self.handoff.feed(i);
        }
    }

    /// Before a view of input `i`: when its value buffer holds the input (fed: a shared alias,
    /// a carried f32 alias or a plan hand-off), store it into the port buffer, which the view
    /// then reads and writes.
    pub(super) fn sync_input_port(&mut self, i: usize) {
        let n = self.inputs.get(i).map_or(0, |p| p.numel());
        if let Some(p) = self.in_ports.get_mut(i) {
            p.ensure_len(n);
            if self.handoff.fed(i) {
                p.store_from(&self.bufs[self.input_bufs[i]].data);
            }
        }
    }
}

impl PortBuf {
    /// Give a port buffer dropped by [`RefProgram::share_alias`] its `n` elements again.
    pub(super) fn ensure_len(&mut self, n: usize) {
        if let PortBuf::F16(v) = self {
            v.resize(n, f16::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{Loaded, PortView, Precision};
    use crate::graph::Graph;
    use crate::program::Program;
    use crate::{input_port, DType};

    /// k_next = k · 0.5 + d, the halving as a matmul with 0.5·I (exact; a lone add so no
    /// elementwise run is fused): the step writing k_next does not read k, so the pair can share.
    fn program() -> Program {
        let k = input_port(&[1, 8], DType::Fp16, Some("k")).unwrap();
        let d = input_port(&[1, 8], DType::Fp16, Some("d")).unwrap();
        let half: Vec<f32> = (0..64)
            .map(|i| if i % 9 == 0 { 0.5 } else { 0.0 })
            .collect();
        let half = crate::constant("half", crate::HostArray::f32(&[8, 8], &half)).unwrap();
        let next = k.matmul(&half).unwrap().add(&d).unwrap();
        Program::lower(Graph::from_outputs(&[(Some("k_next".into()), next)]).unwrap()).unwrap()
    }

    /// `v` rounded to fp16 (`fp16`) or f32, as each op's result is.
    fn r(v: f64, fp16: bool) -> f64 {
        if fp16 {
            f16::from_f64(v).to_f64()
        } else {
            f64::from(v as f32)
        }
    }

    /// One step of the recurrence in f64, each op's result rounded (see [`r`]).
    fn oracle(k: &[f64], d: &[f64], fp16: bool) -> Vec<f64> {
        let r = |v: f64| r(v, fp16);
        k.iter().zip(d).map(|(&k, &d)| r(r(0.5 * k) + d)).collect()
    }

    /// A fused elementwise run writing k_next = k·0.5 + d (and, with `late_read`, a second
    /// output (k·0.5 + d)·k that reads k after k_next is stored): the pair shares k's buffer
    /// exactly when no op of the run reads k after the store, and either way each execute
    /// gives the recurrence's rounded values.
    #[test]
    fn a_fused_run_shares_its_alias_only_when_no_read_follows_the_store() {
        for late_read in [false, true] {
            let k = input_port(&[1, 8], DType::Fp16, Some("k")).unwrap();
            let d = input_port(&[1, 8], DType::Fp16, Some("d")).unwrap();
            let next = k.mul_scalar(0.5).unwrap().add(&d).unwrap();
            let mut outs = vec![(Some("k_next".to_string()), next.clone())];
            if late_read {
                outs.push((Some("other".to_string()), next.mul(&k).unwrap()));
            }
            let prog = Program::lower(Graph::from_outputs(&outs).unwrap()).unwrap();
            let mut p = RefProgram::new(&prog, Precision::Fp16).unwrap();
            assert!(p.steps.iter().any(|s| s.fused.is_some()), "no fused run");
            let ki = p.inputs.iter().position(|s| s.name == "k").unwrap();
            let k0: Vec<f32> = (0..8).map(|i| 3.3 - i as f32 * 0.71).collect();
            let d: Vec<f32> = (0..8).map(|i| i as f32 * 0.37 - 1.1).collect();
            p.set_input(ki, PortData::F32(&k0)).unwrap();
            p.set_input(1 - ki, PortData::F32(&d)).unwrap();
            p.alias("k_next", "k").unwrap();
            assert_eq!(p.shared.has(ki), !late_read);
            let d64: Vec<f64> = d.iter().map(|&v| r(f64::from(v), true)).collect();
            let mut want: Vec<f64> = k0.iter().map(|&v| r(f64::from(v), true)).collect();
            let o = p.outputs.iter().position(|s| s.name == "k_next").unwrap();
            let mut got = vec![0f32; 8];
            for _ in 0..3 {
                p.execute().unwrap();
                want = oracle(&want, &d64, true);
                p.read_output(o, &mut got).unwrap();
                assert_eq!(got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), want);
            }
        }
    }

    fn port_f16(view: PortView<'_>) -> Vec<f64> {
        match view {
            PortView::F16(v) => v.iter().map(|h| h.to_f64()).collect(),
            _ => panic!("fp16 port expected"),
        }
    }

    #[test]
    fn shared_alias_keeps_the_recurrence_of_the_copying_one() {
        for precision in [Precision::Fp16, Precision::Fp32] {
            let fp16 = precision == Precision::Fp16;
            let mut p = RefProgram::new(&program(), precision).unwrap();
            let ki = p.inputs.iter().position(|s| s.name == "k").unwrap();
            let di = 1 - ki;
            let d: Vec<f32> = (0..8).map(|i| i as f32 * 0.37 - 1.1).collect();
            let d64: Vec<f64> = d.iter().map(|&v| r(f64::from(v), fp16)).collect();
            let k0: Vec<f32> = (0..8).map(|i| 3.3 - i as f32 * 0.71).collect();
            p.set_input(ki, PortData::F32(&k0)).unwrap();
            p.alias("k_next", "k").unwrap();
            assert!(p.shared.has(ki), "{precision:?}: the pair did not share");
            p.set_input(di, PortData::F32(&d)).unwrap();
            let mut want: Vec<f64> = k0.iter().map(|&v| r(f64::from(v), fp16)).collect();
            let mut got = vec![0f32; 8];
            for _ in 0..4 {
                p.execute().unwrap();
                want = oracle(&want, &d64, fp16);
                p.read_output(0, &mut got).unwrap();
                let got64: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
                assert_eq!(got64, want, "{precision:?}");
            }
            if !fp16 {
                continue;
            }
            assert_eq!(port_f16(p.input_view(ki).unwrap()), want);
            assert_eq!(port_f16(p.output_view(0).unwrap()), want);
            if let PortView::F16(v) = p.input_view(ki).unwrap() {
                v.fill(f16::ONE);
            }
            p.execute().unwrap();
            p.read_output(0, &mut got).unwrap();
            let ones = oracle(&[1.0; 8], &d64, true);
            assert_eq!(got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), ones);
            p.set_input(ki, PortData::F32(&[0.0; 8])).unwrap();
            p.execute().unwrap();
            p.read_output(0, &mut got).unwrap();
            let zeros = oracle(&[0.0; 8], &d64, true);
            assert_eq!(got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), zeros);
        }
    }

    /// The fp16 port buffer of input `i` as f64 (what a view held across calls shows).
    fn port_values(p: &RefProgram, i: usize) -> Vec<f64> {
        match &p.in_ports[i] {
            PortBuf::F16(v) => v.iter().map(|h| h.to_f64()).collect(),
            _ => panic!("fp16 port expected"),
        }
    }

    /// A view taken after the alias stays live across executes, as Python's `input_view` is
    /// held: the port buffer shows every new value and a write through it feeds the next call.
    /// A view taken before the alias keeps the pair on the copying path (its buffer is kept).
    #[test]
    fn views_held_across_executes_stay_current() {
        for view_first in [false, true] {
            let mut p = RefProgram::new(&program(), Precision::Fp16).unwrap();
            let ki = p.inputs.iter().position(|s| s.name == "k").unwrap();
            let d: Vec<f32> = (0..8).map(|i| i as f32 * 0.25 - 0.5).collect();
            let d64: Vec<f64> = d.iter().map(|&v| f64::from(v)).collect();
            p.set_input(1 - ki, PortData::F32(&d)).unwrap();
            if view_first {
                p.input_view(ki).unwrap();
            }
            p.alias("k_next", "k").unwrap();
            assert_eq!(p.shared.has(ki), !view_first);
            p.input_view(ki).unwrap();
            let mut want = vec![0.0; 8];
            for _ in 0..3 {
                p.execute().unwrap();
                want = oracle(&want, &d64, true);
                assert_eq!(port_values(&p, ki), want, "view_first {view_first}");
            }
            if let PortBuf::F16(v) = &mut p.in_ports[ki] {
                v.fill(f16::from_f32(2.0));
            }
            p.execute().unwrap();
            assert_eq!(port_values(&p, ki), oracle(&[2.0; 8], &d64, true));
        }
    }
}
