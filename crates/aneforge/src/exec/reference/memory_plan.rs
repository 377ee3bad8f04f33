//! The reference executor's memory plan: graph values whose lifetimes do not overlap share one
//! storage slot, so a loaded program allocates its buffers once, sized by the values live at the
//! same time instead of by every value of the graph.
//!
//! Pinned values (graph inputs, constants, graph outputs) keep a slot of their own: inputs and
//! constants persist across calls and outputs are read after the call. Every other value takes
//! a free slot of exactly its element count (so a slot's length never changes and nothing is
//! cleared or re-allocated per call), or a new one; its slot is free again after the last step
//! that reads it (a value never read is freed right after the step that writes it). A step's
//! outputs never share a slot with its inputs, since inputs are released only after the step.

use std::collections::BTreeMap;

/// One step of the schedule for planning: the values it reads and the values it writes.
pub struct PlanStep<'a> {
    pub ins: &'a [usize],
    pub outs: &'a [usize],
}

/// Slots for the values of one program: `slot_of[value]` indexes `slot_len` (element counts);
/// `last_use[value]` is the last step reading it (`None`: no step does).
#[derive(Debug, PartialEq, Eq)]
pub struct SlotPlan {
    pub slot_of: Vec<usize>,
    pub slot_len: Vec<usize>,
    pub last_use: Vec<Option<usize>>,
}

/// Assign a slot to each of the `numel.len()` values; `pinned[v]` values get their own slot.
/// `steps` are in execution order; each value is written by at most one step (or pinned).
pub fn plan_slots(numel: &[usize], pinned: &[bool], steps: &[PlanStep]) -> SlotPlan {
    let n = numel.len();
    let mut last_use: Vec<Option<usize>> = vec![None; n];
    for (s, step) in steps.iter().enumerate() {
        for &v in step.ins {
            last_use[v] = Some(s);
        }
    }
    let mut slot_of = vec![usize::MAX; n];
    let mut slot_len = Vec::new();
    let new_slot = |len: usize, slot_len: &mut Vec<usize>| {
        slot_len.push(len);
        slot_len.len() - 1
    };
    for v in (0..n).filter(|&v| pinned[v]) {
        slot_of[v] = new_slot(numel[v], &mut slot_len);
    }
    // Free slots by element count; the smallest index is reused first (deterministic).
    let mut free: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (s, step) in steps.iter().enumerate() {
        for &v in step.outs {
            if slot_of[v] == usize::MAX {
                slot_of[v] = match free.get_mut(&numel[v]).and_then(|f| f.pop()) {
                    Some(slot) => slot,
                    None => new_slot(numel[v], &mut slot_len),
                };
            }
        }
        let touched = step.ins.iter().chain(step.outs);
        for (i, &v) in touched.clone().enumerate() {
            let dies = last_use[v].is_none_or(|l| l <= s);
            let first = touched.clone().take(i).all(|&u| u != v);
            if !pinned[v] && dies && first && slot_of[v] != usize::MAX {
                let list = free.entry(numel[v]).or_default();
                list.push(slot_of[v]);
                list.sort_unstable_by(|a, b| b.cmp(a));
            }
        }
    }
    SlotPlan {
        slot_of,
        slot_len,
        last_use,
    }
}

/// What a program loaded on the reference executor allocates, in bytes (f32 storage: 4 bytes
/// per element; fp16 / uint8 / int32 port buffers at their own width).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// Constants (weights) evaluated at load.
    pub weight_bytes: u64,
    /// The planned slots of intermediate values.
    pub activation_bytes: u64,
    /// Graph inputs and outputs (their values plus, with `precision="fp16"`, the port buffers).
    pub io_bytes: u64,
    /// Everything above: the executor's planned peak.
    pub peak_bytes: u64,
    /// What one buffer per intermediate value (no plan) would take instead of `activation_bytes`.
    pub unplanned_activation_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step<'a>(ins: &'a [usize], outs: &'a [usize]) -> PlanStep<'a> {
        PlanStep { ins, outs }
    }

    /// x(0, pinned) → a(1) → b(2) → c(3) → out(4, pinned), all 8 elements: a and c share a
    /// slot once a is dead; b needs a second one (a is still read while b is written).
    #[test]
    fn chain_reuses_dead_slots() {
        let numel = [8; 5];
        let pinned = [true, false, false, false, true];
        let steps = [
            step(&[0], &[1]),
            step(&[1], &[2]),
            step(&[2], &[3]),
            step(&[3], &[4]),
        ];
        let p = plan_slots(&numel, &pinned, &steps);
        assert_eq!(p.slot_of, vec![0, 2, 3, 2, 1]);
        assert_eq!(p.slot_len, vec![8, 8, 8, 8]);
    }

    /// Slots are shared only between equal element counts; a value read twice lives until its
    /// last reader, and an unread output is freed right after its step.
    #[test]
    fn sizes_and_fan_out() {
        // 0: input [4]; 1 = f(0) [4]; 2 = g(0) [6] (never read); 3 = h(1, 1) [4]; 4 = k(1, 3) [4] pinned
        let numel = [4, 4, 6, 4, 4];
        let pinned = [true, false, false, false, true];
        let steps = [
            step(&[0], &[1]),
            step(&[0], &[2]),
            step(&[1, 1], &[3]),
            step(&[1, 3], &[4]),
        ];
        let p = plan_slots(&numel, &pinned, &steps);
        // 1 → slot 2, 2 → slot 3 ([6]), 3 → slot 4 (1 still live), 4 pinned slot 1.
        assert_eq!(p.slot_of, vec![0, 2, 3, 4, 1]);
        assert_eq!(p.slot_len, vec![4, 4, 4, 6, 4]);
    }

    /// A multi-output step's outputs get distinct slots, distinct from its inputs.
    #[test]
    fn multi_output_step_does_not_alias_its_inputs() {
        let numel = [3; 6];
        let pinned = [true, false, false, false, false, true];
        let steps = [
            step(&[0], &[1]),
            step(&[1], &[2, 3]),
            step(&[2], &[4]),
            step(&[4, 3], &[5]),
        ];
        let p = plan_slots(&numel, &pinned, &steps);
        let (s1, s2, s3, s4) = (p.slot_of[1], p.slot_of[2], p.slot_of[3], p.slot_of[4]);
        assert!(s2 != s1 && s3 != s1 && s2 != s3, "{:?}", p.slot_of);
        assert_eq!(s4, s1, "4 reuses 1's slot (1 died at step 1)");
        assert_ne!(s4, s3, "3 is still live when 4 is written");
        assert_eq!(p.slot_len.len(), 5);
    }

    /// x [1, 16] → relu → tanh → sigmoid → abs (output), compiled and run: a and c share a
    /// slot. By hand: 2 slots × 16 × 4 B = 128 B of activations (3 × 64 = 192 B unplanned);
    /// io = x and y as f32 (2 × 64 B) plus, in fp16, their fp16 port buffers (2 × 32 B).
    #[test]
    fn compiled_chain_reports_the_hand_computed_plan() {
        use crate::exec::{PortData, Precision};
        let x = crate::graph::build::io::input(&[1, 16]).unwrap();
        let y = x
            .relu()
            .unwrap()
            .tanh()
            .unwrap()
            .sigmoid()
            .unwrap()
            .abs()
            .unwrap();
        let xs: Vec<f32> = (0..16).map(|i| (i as f32 - 7.5) / 4.0).collect();
        for (precision, io) in [(Precision::Fp16, 192), (Precision::Fp32, 128)] {
            let (mut c, dir) = super::super::test_support::compile_reference_for_test(
                &y,
                precision,
                "memory-plan",
            );
            assert_eq!(c.program.graph.n_ops(), 4, "the chain compiles to 4 ops");
            let m = c.memory().unwrap();
            let want = MemoryReport {
                weight_bytes: 0,
                activation_bytes: 128,
                io_bytes: io,
                peak_bytes: 128 + io,
                unplanned_activation_bytes: 192,
            };
            assert_eq!(m, want, "{precision:?}");
            // Twice, so the second call runs on slots holding the first call's values.
            for _ in 0..2 {
                let got = c.run(&[PortData::F32(&xs)]).unwrap().remove(0);
                for (g, &v) in got.iter().zip(&xs) {
                    let w = 1.0 / (1.0 + (-(v.max(0.0) as f64).tanh()).exp());
                    assert!((*g as f64 - w).abs() < 2e-3, "{v}: {g} vs {w}");
                }
            }
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
