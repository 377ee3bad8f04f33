//! Intermediate buffers live only between their producing step and their last use: a value's
//! f32 buffer goes back to a pool (by length) after its last reader ran and is handed, zeroed,
//! to the next step that needs one of that length. Graph inputs, constants and outputs keep
//! their own buffers. Values are unchanged (every step still gets a zero-filled output
//! buffer of the right length); peak memory becomes the largest live set, not every value.

use std::collections::HashMap;

use crate::ops::Buf;

/// Which buffers each step frees, and the freed buffers by length.
#[derive(Debug, Default)]
pub struct Arena {
    /// `free_before[k]`: buffers whose last use is step k − 1 (or dead outputs of step k − 1).
    free_before: Vec<Vec<usize>>,
    /// Buffers this arena manages (allocated on demand).
    managed: Vec<bool>,
    pool: HashMap<usize, Vec<Vec<f32>>>,
}

impl Arena {
    /// Plan over `steps` (input and output buffer indices per step, in run order) for
    /// `n_bufs` buffers; buffers in `keep` (graph outputs) are never managed.
    pub fn new(steps: &[(&[usize], &[usize])], keep: &[usize], n_bufs: usize) -> Arena {
        let mut managed = vec![false; n_bufs];
        let mut last = vec![0usize; n_bufs];
        for (k, (ins, outs)) in steps.iter().enumerate() {
            for &o in outs.iter() {
                managed[o] = true;
                last[o] = k;
            }
            for &i in ins.iter() {
                last[i] = last[i].max(k);
            }
        }
        for &o in keep {
            managed[o] = false;
        }
        let mut free_before = vec![Vec::new(); steps.len() + 1];
        for (b, &m) in managed.iter().enumerate() {
            if m {
                free_before[last[b] + 1].push(b);
            }
        }
        Arena {
            free_before,
            managed,
            pool: HashMap::new(),
        }
    }

    /// Whether buffer `b` is allocated on demand (its initial data may be left empty).
    pub fn manages(&self, b: usize) -> bool {
        self.managed[b]
    }

    /// Before step `k`: return the buffers last used by step k − 1 to the pool, then give each
    /// managed output of step `k` a zeroed buffer of its length.
    pub fn before_step(&mut self, k: usize, outs: &[usize], bufs: &mut [Buf]) {
        self.free(k, bufs);
        for &o in outs {
            if !self.managed[o] {
                continue;
            }
            let n = crate::shape::numel(&bufs[o].shape);
            if bufs[o].data.len() == n {
                continue;
            }
            bufs[o].data = match self.pool.get_mut(&n).and_then(Vec::pop) {
                Some(mut v) => {
                    v.fill(0.0);
                    v
                }
                None => vec![0.0; n],
            };
        }
    }

    /// Return the buffers listed before step `k` (k = number of steps: the last ones).
    pub fn free(&mut self, k: usize, bufs: &mut [Buf]) {
        for &b in self.free_before.get(k).map_or(&[][..], Vec::as_slice) {
            let v = std::mem::take(&mut bufs[b].data);
            if !v.is_empty() {
                self.pool.entry(v.len()).or_default().push(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_buffer_is_reused_zeroed_and_outputs_are_kept() {
        // Step 0: buf 1 = f(buf 0); step 1: buf 2 = g(buf 1); step 2: buf 3 = h(buf 2).
        let steps: Vec<(&[usize], &[usize])> = vec![(&[0], &[1]), (&[1], &[2]), (&[2], &[3])];
        let mut arena = Arena::new(&steps, &[3], 4);
        assert!(!arena.manages(0) && arena.manages(1) && arena.manages(2) && !arena.manages(3));
        let mut bufs: Vec<Buf> = (0..4).map(|_| Buf::zeros(&[4])).collect();
        bufs[1].data.clear();
        bufs[2].data.clear();
        arena.before_step(0, &[1], &mut bufs);
        bufs[1].data.fill(7.0);
        arena.before_step(1, &[2], &mut bufs);
        bufs[2].data.fill(9.0);
        arena.before_step(2, &[3], &mut bufs);
        // Buffer 1 went back to the pool before step 2 and buffer 2 before the end.
        assert!(bufs[1].data.is_empty());
        arena.free(3, &mut bufs);
        assert!(bufs[2].data.is_empty());
        assert_eq!(arena.pool[&4].len(), 2);
        let mut again: Vec<Buf> = (0..4).map(|_| Buf::zeros(&[4])).collect();
        again[1].data.clear();
        arena.before_step(0, &[1], &mut again);
        assert_eq!(again[1].data, [0.0; 4]);
        assert_eq!(arena.pool[&4].len(), 1);
    }
}
