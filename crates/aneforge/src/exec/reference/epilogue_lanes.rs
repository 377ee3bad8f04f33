//! A conv epilogue's stages on 8 lanes at a time (AVX2 + F16C): the folded ops of one plane part
//! as a short list of [`Lane`] steps applied to each vector while it is in registers, instead of
//! one pass over memory (and one rounding pass) per op. Each step computes the scalar stage's
//! formula with the same IEEE operations (no contraction), so every bit is the scalar pass's.

use super::fp16_table::Fp16Table;

/// Most steps one part runs (a bias, the conv's rounding and up to 7 ops each with a rounding).
pub(super) const MAX_STEPS: usize = 16;

/// One step of the pass on a vector of outputs, with the constants of one plane (channel).
#[derive(Clone, Copy, Debug)]
pub(super) enum Lane<'a> {
    /// v + c: a bias or a per-channel add.
    AddConst(f32),
    /// v + other[i], element i of this slice matching the part's element i (a same-shape add,
    /// or a linear head's per-column add); at least as long as the part.
    AddFrom(&'a [f32]),
    /// (v − mean) · scale + beta, as `batch_norm`.
    BatchNorm { mean: f32, scale: f32, beta: f32 },
    /// Round to the nearest fp16 and widen back.
    Round,
    /// relu (`Unary::Relu`): NaN and ±0 give +0.
    Relu,
    /// `v.clamp(0.0, 6.0)`: NaN and −0 stay.
    Relu6,
    /// The gate v · round(clamp(alpha·v + beta, 0, 1)), rounded (hardswish, both outputs fp16).
    HardswishRounded { alpha: f32, beta: f32 },
    /// A costly unary op through its fp16 table, rounded (`Fp16Table::eval`: entries for fp16
    /// values, the op's kernel and a rounding for others).
    Table(&'a Fp16Table),
}

/// Whether [`run`] can take parts on this CPU (AVX2 and F16C).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Apply `steps` in order to every element of `part`, in place. Panics if an [`Lane::AddFrom`]
/// operand is shorter than `part`.
///
/// # Safety
/// [`available`] is true.
pub(super) unsafe fn run(steps: &[Lane], part: &mut [f32]) {
    match part.len() {
        // SAFETY: the caller's contract.
        8.. => unsafe {
            let mut copy = [Lane::Round; MAX_STEPS];
            let copy = &mut copy[..steps.len()];
            copy.copy_from_slice(steps);
            run_planes(part.len(), part, copy, |_, _| {})
        },
        n => {
            for s in steps {
                if let Lane::AddFrom(o) = s {
                    assert!(
                        o.len() >= n,
                        "epilogue lanes: operand shorter than the output"
                    );
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU runs the lanes (the caller's contract); operands checked above.
            unsafe {
                x86::short(steps, part)
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("epilogue lanes: not available off x86_64");
        }
    }
}

/// Apply to each whole plane q of `part` (planes of `len` ≥ 8 elements, `part` a multiple of
/// `len` long) in order the steps that `plane(q, steps)` writes into `steps` (at most
/// [`MAX_STEPS`]), in place; the steps of every plane are of the kinds of plane 0's. Panics if
/// they are not, or an [`Lane::AddFrom`] operand is shorter than its plane.
///
/// # Safety
/// [`available`] is true.
pub(super) unsafe fn run_planes<'a>(
    len: usize,
    part: &mut [f32],
    steps: &mut [Lane<'a>],
    plane: impl FnMut(usize, &mut [Lane<'a>]),
) {
    assert!(
        len >= 8 && part.len().is_multiple_of(len) && steps.len() <= MAX_STEPS,
        "epilogue lanes: planes of at least 8, at most MAX_STEPS steps"
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU runs the lanes (the caller's contract); `len` checked above.
    unsafe {
        x86::run_planes(len, part, steps, plane)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (part, steps, plane);
        unreachable!("epilogue lanes: not available off x86_64");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Lane, MAX_STEPS};
    use crate::exec::reference::fp16_table::Fp16Table;
    use crate::ops::simd_fp16::lookup8;

    /// Vectors kept in registers through all steps (independent chains hide the latencies).
    const BLOCK: usize = 8;

    /// What a [`Lane`] step does, without its constants.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Kind {
        AddConst,
        AddFrom,
        BatchNorm,
        Round,
        Relu,
        Relu6,
        Hardswish,
        Table,
    }

    use Kind::*;

    /// The step lists compiled as straight-line code (the conv epilogues of ResNet and
    /// MobileNetV3, and the gate alone of the scalar stages); any other list runs through a
    /// `match` per step.
    const KNOWN: [&[Kind]; 8] = [
        &[Round, BatchNorm, Round, AddFrom, Round, Relu],
        &[Round, BatchNorm, Round, Relu],
        &[Round, BatchNorm, Round],
        &[AddConst, Round, Hardswish],
        &[AddConst, Round, Relu],
        &[AddConst, Round],
        &[AddConst, Round, AddFrom, Round],
        &[Hardswish],
    ];

    const _: () = {
        let mut k = 0;
        while k < KNOWN.len() {
            assert!(KNOWN[k].len() <= 6, "`blocks` unrolls 6 steps");
            k += 1;
        }
    };

    /// One step with its constants: (c, 0, 0) of an add, (mean, scale, beta) of a batch_norm,
    /// (alpha, beta, 0) of a hardswish; an AddFrom operand's first element; a table.
    #[derive(Clone, Copy)]
    struct Wide<'a> {
        kind: Kind,
        c: [f32; 3],
        from: *const f32,
        table: Option<&'a Fp16Table>,
    }

    impl<'a> Wide<'a> {
        /// Step `s`, its AddFrom operand read from `from` instead of its slice.
        fn new(s: Lane<'a>, from: *const f32) -> Self {
            let (kind, c, table) = match s {
                Lane::AddConst(c) => (AddConst, [c, 0.0, 0.0], None),
                Lane::AddFrom(_) => (AddFrom, [0.0; 3], None),
                Lane::BatchNorm { mean, scale, beta } => (BatchNorm, [mean, scale, beta], None),
                Lane::Round => (Round, [0.0; 3], None),
                Lane::Relu => (Relu, [0.0; 3], None),
                Lane::Relu6 => (Relu6, [0.0; 3], None),
                Lane::HardswishRounded { alpha, beta } => (Hardswish, [alpha, beta, 0.0], None),
                Lane::Table(t) => (Table, [0.0; 3], Some(t)),
            };
            Wide {
                kind,
                c,
                from,
                table,
            }
        }
    }

    /// See [`super::run_planes`].
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C; `len` ≥ 8; at most [`MAX_STEPS`] steps.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn run_planes<'a>(
        len: usize,
        part: &mut [f32],
        steps: &mut [Lane<'a>],
        mut plane: impl FnMut(usize, &mut [Lane<'a>]),
    ) {
        plane(0, steps);
        let kinds = steps.iter().map(|&s| Wide::new(s, std::ptr::null()).kind);
        let known = KNOWN
            .iter()
            .position(|k| k.iter().copied().eq(kinds.clone()));
        // SAFETY: the caller's contract.
        unsafe {
            match known {
                Some(0) => planes::<0>(len, part, steps, plane),
                Some(1) => planes::<1>(len, part, steps, plane),
                Some(2) => planes::<2>(len, part, steps, plane),
                Some(3) => planes::<3>(len, part, steps, plane),
                Some(4) => planes::<4>(len, part, steps, plane),
                Some(5) => planes::<5>(len, part, steps, plane),
                Some(6) => planes::<6>(len, part, steps, plane),
                Some(7) => planes::<7>(len, part, steps, plane),
                _ => planes::<{ usize::MAX }>(len, part, steps, plane),
            }
        }
    }

    /// [`run_planes`] with the steps of `KNOWN[K]` (any steps when there is none).
    ///
    /// # Safety
    /// As [`run_planes`].
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn planes<'a, const K: usize>(
        len: usize,
        part: &mut [f32],
        steps: &mut [Lane<'a>],
        mut plane: impl FnMut(usize, &mut [Lane<'a>]),
    ) {
        let mut w = [Wide::new(Lane::Round, std::ptr::null()); MAX_STEPS];
        let w = &mut w[..steps.len()];
        for (q, p) in part.chunks_exact_mut(len).enumerate() {
            plane(q, steps);
            for (w, &s) in w.iter_mut().zip(&*steps) {
                let from = match s {
                    Lane::AddFrom(o) => {
                        assert!(
                            o.len() >= len,
                            "epilogue lanes: operand shorter than the output"
                        );
                        o.as_ptr()
                    }
                    _ => std::ptr::null(),
                };
                *w = Wide::new(s, from);
            }
            if let Some(kinds) = KNOWN.get(K) {
                let same = kinds.iter().eq(w.iter().map(|w| &w.kind));
                assert!(same, "epilogue lanes: planes of different steps");
            }
            // SAFETY: `len` ≥ 8 (the caller's contract), the steps' kinds and operand lengths
            // checked above.
            unsafe { blocks::<K>(w, p) };
        }
    }

    /// [`super::run`] on fewer than 8 elements, through zero-padded copies of the part and of
    /// its AddFrom operands (AMD's masked stores are slow).
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C; every AddFrom operand is as long as `part`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn short(steps: &[Lane], part: &mut [f32]) {
        let n = part.len();
        let mut operands = [[0.0f32; 8]; MAX_STEPS];
        let mut w = [Wide::new(Lane::Round, std::ptr::null()); MAX_STEPS];
        for ((w, o), &s) in w.iter_mut().zip(&mut operands).zip(steps) {
            if let Lane::AddFrom(from) = s {
                o[..n].copy_from_slice(&from[..n]);
            }
            *w = Wide::new(s, o.as_ptr());
        }
        let mut padded = [0.0f32; 8];
        padded[..n].copy_from_slice(part);
        // SAFETY: `padded` and every padded operand hold 8 f32.
        unsafe { blocks::<{ usize::MAX }>(&w[..steps.len()], &mut padded) };
        part.copy_from_slice(&padded[..n]);
    }

    /// The steps `w` on `part` (at least 8 elements) in blocks of [`BLOCK`] vectors: `KNOWN[K]`
    /// when there is one (the kinds of `w`, fixed at compile time), else each step's kind.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C; `part` has at least 8 elements; the kinds of `w` are `KNOWN[K]`
    /// when there is one; every AddFrom step's `from` can be read at `part.len()` f32.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn blocks<const K: usize>(w: &[Wide], part: &mut [f32]) {
        let n = part.len();
        // Vectors at 0, 8, … and, after a tail, one more over the last 8 elements, computed from
        // their inputs read now: the elements it shares with the last whole vector get the same
        // values again.
        let count = n.div_ceil(8);
        // SAFETY: n ≥ 8, so elements n − 8..n lie in `part`.
        let last = unsafe { _mm256_loadu_ps(part.as_ptr().add(n - 8)) };
        let mut first = 0;
        // SAFETY: the caller's contract; blocks of vectors first.. below `count`.
        unsafe {
            while first < count {
                match count - first > BLOCK / 2 {
                    true => block::<K, BLOCK>(w, part, first, last),
                    false => block::<K, { BLOCK / 2 }>(w, part, first, last),
                }
                first += BLOCK;
            }
        }
    }

    /// The steps on the `B` vectors of `part` from vector `first` (see [`blocks`]; `last` holds
    /// the inputs of the last 8 elements); a block past the last vector repeats it (same
    /// inputs, same values stored).
    ///
    /// # Safety
    /// As [`blocks`], `first` below the number of vectors; called from a function compiled for
    /// AVX2 and F16C (always inlined there).
    #[inline(always)]
    unsafe fn block<const K: usize, const B: usize>(
        w: &[Wide],
        part: &mut [f32],
        first: usize,
        last: __m256,
    ) {
        let n = part.len();
        let (whole, p) = (n / 8, part.as_mut_ptr());
        let count = n.div_ceil(8);
        let start = |v: usize| if v < whole { 8 * v } else { n - 8 };
        let at: [usize; B] = std::array::from_fn(|j| start((first + j).min(count - 1)));
        // SAFETY: every vector lies in `part` and in every AddFrom operand (the contract); all
        // loads of a block come before its stores; unaligned loads and stores.
        unsafe {
            let mut v = at.map(|o| match o + 8 > 8 * whole {
                true => last,
                false => _mm256_loadu_ps(p.add(o)),
            });
            match KNOWN.get(K) {
                // Steps of fixed kinds, unrolled (so the matches fold).
                Some(kinds) => {
                    macro_rules! unrolled {
                        ($($j:literal)*) => {$(
                            if let Some(&k) = kinds.get($j) {
                                step(k, &w[$j], &mut v, &at);
                            }
                        )*};
                    }
                    unrolled!(0 1 2 3 4 5);
                }
                None => w.iter().for_each(|s| step(s.kind, s, &mut v, &at)),
            }
            for (x, &o) in v.iter().zip(&at) {
                _mm256_storeu_ps(p.add(o), *x);
            }
        }
    }

    /// Round each lane to the nearest fp16 (ties to even) and widen it back.
    ///
    /// # Safety
    /// Called from a function compiled for F16C (always inlined there).
    #[inline(always)]
    unsafe fn round(v: __m256) -> __m256 {
        // SAFETY: the caller's contract.
        unsafe { _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v)) }
    }

    /// Step `s` (of kind `k`) on the vectors `v` of the part's elements at `at[j]`..+8.
    ///
    /// # Safety
    /// An AddFrom operand can be read at elements at[j]..at[j] + 8; called from a function
    /// compiled for AVX2 and F16C (always inlined there).
    #[inline(always)]
    unsafe fn step<const B: usize>(k: Kind, s: &Wide, v: &mut [__m256; B], at: &[usize; B]) {
        // SAFETY: the caller's contract.
        unsafe {
            let zero = _mm256_setzero_ps();
            let [c0, c1, c2] = s.c.map(|c| _mm256_set1_ps(c));
            for (x, &o) in v.iter_mut().zip(at) {
                *x = match k {
                    AddConst => _mm256_add_ps(*x, c0),
                    AddFrom => _mm256_add_ps(*x, _mm256_loadu_ps(s.from.add(o))),
                    BatchNorm => _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(*x, c0), c1), c2),
                    Round => round(*x),
                    // MAXPS returns its second operand (+0) on ties (±0) and NaN, as
                    // `Unary::Relu`.
                    Relu => _mm256_max_ps(*x, zero),
                    Relu6 => {
                        let low = _mm256_blendv_ps(*x, zero, _mm256_cmp_ps::<_CMP_LT_OQ>(*x, zero));
                        let six = _mm256_set1_ps(6.0);
                        _mm256_blendv_ps(low, six, _mm256_cmp_ps::<_CMP_GT_OQ>(low, six))
                    }
                    Hardswish => {
                        let t = _mm256_add_ps(_mm256_mul_ps(c0, *x), c1);
                        // MAXPS/MINPS return their second operand on NaN: max(0, t),
                        // min(1, ·) keep it.
                        let one = _mm256_set1_ps(1.0);
                        let u = round(_mm256_min_ps(one, _mm256_max_ps(zero, t)));
                        round(_mm256_mul_ps(*x, u))
                    }
                    Table => match s.table {
                        Some(t) => lookup8(t.values(), *x, &|x| t.off_grid(x)),
                        None => *x,
                    },
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

    use crate::ops::simd_fp16::round1;
    use crate::ops::unary::Unary;

    /// Every fp16 value (NaN, ±inf, ±0, subnormals), then f32 values between them, past fp16's
    /// range and at rounding ties: the inputs each step is checked on.
    fn inputs() -> Vec<f32> {
        let mut x: Vec<f32> = (0..=u16::MAX)
            .map(|h| half::f16::from_bits(h).to_f32())
            .collect();
        let between = (0..20_000u32)
            .map(|i| f32::from_bits(0x3380_0000u32.wrapping_add(i.wrapping_mul(0x0002_a001))));
        x.extend(between.flat_map(|v| [v, -v]));
        x.extend([
            65504.0,
            65519.0,
            65520.0,
            1e9,
            -1e9,
            1.0 + 1.0 / 2048.0,
            6.0,
            -6.0,
        ]);
        x.extend([
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::from_bits(0x7fc0_1234),
        ]);
        x
    }

    /// `run(steps, x)` against `scalar` per element, bit for bit, over every part length up to
    /// 40 (blocks of 32, whole vectors and masked tails) and the whole input.
    fn check(steps: &[Lane<'_>], x: &[f32], scalar: impl Fn(usize, f32) -> f32) {
        assert!(available(), "this test needs AVX2 and F16C");
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for n in (0..=40).chain([x.len()]) {
            let mut got = x[..n].to_vec();
            // SAFETY: checked available.
            unsafe { run(steps, &mut got) };
            let want: Vec<f32> = x[..n]
                .iter()
                .enumerate()
                .map(|(i, &v)| scalar(i, v))
                .collect();
            let first = (0..n).find(|&i| got[i].to_bits() != want[i].to_bits());
            assert_eq!(
                first, None,
                "{steps:?}, {n} elements: first differing input"
            );
            assert_eq!(bits(&got), bits(&want));
        }
    }

    /// Each scalar op the steps stand for, applied as the scalar pass does.
    fn unary(u: Unary, v: f32) -> f32 {
        let mut y = [0.0];
        u.map(&[v], &mut y);
        y[0]
    }

    #[test]
    fn each_step_keeps_the_scalar_bits() {
        let x = inputs();
        let other: Vec<f32> = x.iter().rev().copied().collect();
        let alpha = half::f16::from_f32(1.0 / 6.0).to_f32();
        // Constants through black_box in `scalar`: folding v + −0 into v would keep a
        // signalling NaN that the add (scalar or vector, at run time) quiets.
        let steps = [
            Lane::Round,
            Lane::Relu,
            Lane::Relu6,
            Lane::AddConst(-0.0),
            Lane::AddConst(0.0),
            Lane::AddConst(3.25),
            Lane::AddFrom(&other),
            Lane::BatchNorm {
                mean: 0.3,
                scale: 1.7,
                beta: -0.25,
            },
            Lane::HardswishRounded { alpha, beta: 0.5 },
        ];
        for s in steps {
            check(&[s], &x, |i, v| scalar(&s, i, v));
        }
        // Every fp16 value reads the table, values off the grid take the kernel: against the
        // op's own kernel, rounded.
        for u in [Unary::Gelu, Unary::Sigmoid] {
            let t = Fp16Table::new(u).expect("a costly op");
            check(&[Lane::Table(&t)], &x, |_, v| round1(unary(u, v)));
        }
    }

    /// Step `s` on element i (value v) of a part, as the scalar pass computes it.
    fn scalar(s: &Lane<'_>, i: usize, v: f32) -> f32 {
        match *s {
            Lane::AddConst(c) => v + black_box(c),
            Lane::AddFrom(o) => v + o[i],
            Lane::BatchNorm { mean, scale, beta } => (v - black_box(mean)) * scale + beta,
            Lane::Round => round1(v),
            Lane::Relu => unary(Unary::Relu, v),
            Lane::Relu6 => unary(Unary::Relu6, v),
            Lane::HardswishRounded { alpha, beta } => {
                round1(v * round1(unary(Unary::SigmoidHard { alpha, beta }, v)))
            }
            Lane::Table(t) => {
                let mut y = [0.0];
                t.eval(&[v], &mut y);
                y[0]
            }
        }
    }

    /// The step lists of ResNet's and MobileNetV3's conv epilogues (run as straight-line code)
    /// and one of each other kind (run step by step), on every part length up to 40 and the
    /// whole input, against the scalar steps in order.
    #[test]
    fn step_lists_keep_the_scalar_bits() {
        let x = inputs();
        let other: Vec<f32> = x.iter().map(|v| v * -0.75).collect();
        let bn = Lane::BatchNorm {
            mean: 0.5,
            scale: 2.0,
            beta: 1.0,
        };
        let (add, from) = (Lane::AddConst(-0.375), Lane::AddFrom(&other));
        let alpha = half::f16::from_f32(1.0 / 6.0).to_f32();
        let hs = Lane::HardswishRounded { alpha, beta: 0.5 };
        let t = Fp16Table::new(Unary::Gelu).expect("a costly op");
        use Lane::{Relu, Relu6, Round, Table};
        let lists: [&[Lane]; 9] = [
            &[Round, bn, Round, from, Round, Relu],
            &[Round, bn, Round, Relu],
            &[Round, bn, Round],
            &[add, Round, hs],
            &[add, Round, Relu],
            &[add, Round],
            &[add, Round, from, Round],
            &[hs],
            &[add, Relu6, bn, Table(&t), from, hs, Round],
        ];
        for steps in lists {
            check(steps, &x, |i, v| {
                steps.iter().fold(v, |v, s| scalar(s, i, v))
            });
        }
    }

    /// Planes of 8 to 300 elements, each with its own constants and operand offset, through
    /// [`run_planes`] against the scalar steps per plane.
    #[test]
    fn planes_take_their_own_steps() {
        assert!(available(), "this test needs AVX2 and F16C");
        let x = inputs();
        let other: Vec<f32> = x.iter().rev().copied().collect();
        let alpha = half::f16::from_f32(1.0 / 6.0).to_f32();
        // The two lists on plane q of `len` elements (its own constants and operand offset).
        let plane = |q: usize, len: usize| {
            let c = q as f32 * 0.25 - 1.0;
            let bn = Lane::BatchNorm {
                mean: c,
                scale: 1.5 - c,
                beta: c * 0.5,
            };
            let hs = Lane::HardswishRounded {
                alpha,
                beta: 0.5 + c,
            };
            let from = Lane::AddFrom(&other[q * len..]);
            [
                [Lane::Round, bn, Lane::Round, Lane::Relu],
                [Lane::AddConst(c), Lane::Round, hs, from],
            ]
        };
        for len in [8, 9, 15, 16, 49, 196, 300] {
            for list in 0..2 {
                let n = len * (x.len() / len).min(23);
                let mut got = x[..n].to_vec();
                let mut steps = plane(0, len)[list];
                let fill = |q: usize, s: &mut [_]| s.copy_from_slice(&plane(q, len)[list]);
                // SAFETY: checked available.
                unsafe { run_planes(len, &mut got, &mut steps, fill) };
                let want = x[..n].iter().enumerate().map(|(i, &v)| {
                    let steps = plane(i / len, len)[list];
                    steps.iter().fold(v, |v, s| scalar(s, i % len, v))
                });
                let first = want.zip(&got).position(|(w, g)| w.to_bits() != g.to_bits());
                assert_eq!(first, None, "planes of {len}, list {list}");
            }
        }
    }

    #[test]
    fn steps_run_in_order() {
        let x = inputs();
        let other: Vec<f32> = x.iter().map(|v| v * -0.5).collect();
        let bn = Lane::BatchNorm {
            mean: 0.5,
            scale: 2.0,
            beta: 1.0,
        };
        let steps = [
            Lane::AddConst(0.125),
            Lane::Round,
            bn,
            Lane::Round,
            Lane::AddFrom(&other),
            Lane::Round,
            Lane::Relu,
        ];
        check(&steps, &x, |i, v| {
            let v = round1((round1(v + 0.125) - 0.5) * 2.0 + 1.0);
            unary(Unary::Relu, round1(v + other[i]))
        });
    }
}
