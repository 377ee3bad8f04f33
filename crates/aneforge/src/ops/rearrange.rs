//! More data movement: reverse, tile, flatten2d, stack, crop and the depth/space shuffles
//! (space_to_depth, depth_to_space, pixel_shuffle, pixel_unshuffle; outputs keep the dtype), and
//! `gather` with static indices composed from `slice_by_size` + `concat`.

use super::io::expect_inputs;
use super::layout::{check_axes, for_each_block, ints};
use super::table::mil_kinds;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilInputs, MilOp};
use crate::shape::{self, Shape, MAX_RANK};

mil_kinds! {
    Rearrange =>
    /// The MIL op of each [`Rearrange`] variant but `Shuffle` (named by its [`Shuffle`] kind).
    pub enum RearrangeOp {
        Reverse = "reverse",
        Tile = "tile",
        Flatten2d = "flatten2d",
        Stack = "stack",
        Crop = "crop",
    }
    delegate Shuffle.kind
}

/// Rearranging ops. Axes are stored normalised (non-negative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rearrange {
    /// MIL `reverse(x, axes)`: flip the listed axes (sorted, unique).
    Reverse { axes: Vec<usize> },
    /// MIL `tile(x, reps)`: repeat the whole tensor `reps[i]` times along axis i (one rep per axis).
    Tile { reps: Vec<usize> },
    /// MIL `flatten2d(x, axis)`: `[prod(shape[..axis]), prod(shape[axis..])]`, axis in 0..=rank.
    Flatten2d { axis: usize },
    /// MIL `stack(values, axis)`: equal-shaped inputs joined along a new axis (0..=rank).
    Stack { axis: usize },
    /// MIL `crop(x, crop_height = [top, bottom], crop_width = [left, right])` on the last two axes, rank 3+.
    Crop {
        top: usize,
        bottom: usize,
        left: usize,
        right: usize,
    },
    /// Rank-4 `[N, C, H, W]` channel ↔ space moves by factor `r` (see [`Shuffle`]).
    Shuffle { kind: Shuffle, r: usize },
}

mil_kinds! {
    /// Which channel ↔ space move. In the space-side tensor `[N, C, H·r, W·r]`, element
    /// `(n, c, h·r + i, w·r + j)` pairs with depth-side channel `(i·r + j)·C + c` (TensorFlow DCR
    /// order: `space_to_depth` / `depth_to_space`) or `c·r² + i·r + j` (PyTorch order: `pixel_*`).
    pub enum Shuffle {
        /// MIL `space_to_depth(x, block_size)`: `[N, C, H·r, W·r]` → `[N, C·r², H, W]`, DCR.
        SpaceToDepth = "space_to_depth",
        /// MIL `depth_to_space(x, block_size)`: `[N, C·r², H, W]` → `[N, C, H·r, W·r]`, DCR.
        DepthToSpace = "depth_to_space",
        /// MIL `pixel_shuffle(x, upscale_factor)` (int32): like depth_to_space in PyTorch order.
        PixelShuffle = "pixel_shuffle",
        /// MIL `pixel_unshuffle(x, downscale_factor)` (uint32): like space_to_depth in PyTorch order.
        PixelUnshuffle = "pixel_unshuffle",
    }
}

impl Shuffle {
    /// Output is the space side (channels shrink by r²).
    fn to_space(self) -> bool {
        matches!(self, Shuffle::DepthToSpace | Shuffle::PixelShuffle)
    }
    /// TensorFlow DCR channel order (else PyTorch).
    fn dcr(self) -> bool {
        matches!(self, Shuffle::SpaceToDepth | Shuffle::DepthToSpace)
    }
}

/// Move every element between the space-side and depth-side layouts of `kind` (rank 4, factor `r`).
fn shuffle(kind: Shuffle, r: usize, x: &Buf, y: &mut Buf) {
    let (space, depth) = if kind.to_space() {
        (&y.shape, &x.shape)
    } else {
        (&x.shape, &y.shape)
    };
    let ([n, cs, hs, ws], [_, cd, hd, wd]) = (
        <[usize; 4]>::try_from(space.as_slice()).unwrap_or_default(),
        <[usize; 4]>::try_from(depth.as_slice()).unwrap_or_default(),
    );
    let mut pairs = Vec::with_capacity(x.data.len());
    for b in 0..n {
        for c in 0..cs {
            for hh in 0..hs {
                for ww in 0..ws {
                    let (i, j) = (hh % r, ww % r);
                    let k = if kind.dcr() {
                        (i * r + j) * cs + c
                    } else {
                        c * r * r + i * r + j
                    };
                    pairs.push((
                        ((b * cs + c) * hs + hh) * ws + ww,
                        ((b * cd + k) * hd + hh / r) * wd + ww / r,
                    ));
                }
            }
        }
    }
    for (sp, dp) in pairs {
        if kind.to_space() {
            y.data[sp] = x.data[dp];
        } else {
            y.data[dp] = x.data[sp];
        }
    }
}

impl Family for Rearrange {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.mil_name();
        let one = || expect_inputs(op, inputs, 1).map(|_| inputs[0].shape.clone());
        let err = |msg: String| Err(Error::shape(op, msg));
        let out: Shape = match self {
            Rearrange::Reverse { axes } => {
                let s = one()?;
                check_axes(op, axes, s.len(), &s)?;
                s
            }
            Rearrange::Tile { reps } => {
                let s = one()?;
                if reps.len() != s.len() || reps.contains(&0) {
                    return err(format!(
                        "reps {reps:?} must give one factor >= 1 per axis of {s:?}"
                    ));
                }
                s.iter()
                    .zip(reps)
                    .map(|(&d, &r)| d.saturating_mul(r))
                    .collect()
            }
            Rearrange::Flatten2d { axis } => {
                let s = one()?;
                if *axis > s.len() {
                    return err(format!(
                        "axis {axis} is out of range 0..={} for {s:?}",
                        s.len()
                    ));
                }
                vec![shape::numel(&s[..*axis]), shape::numel(&s[*axis..])]
            }
            Rearrange::Stack { axis } => {
                let first = inputs
                    .first()
                    .ok_or_else(|| Error::shape(op, "needs at least one input"))?;
                let s0 = &first.shape;
                if let Some((k, t)) = inputs
                    .iter()
                    .enumerate()
                    .find(|(_, t)| t.shape != *s0 || t.dtype != first.dtype)
                {
                    return err(format!(
                        "input {k} is {} {:?} but input 0 is {} {s0:?}; stacked inputs must match",
                        t.dtype, t.shape, first.dtype
                    ));
                }
                if *axis > s0.len() || s0.len() == MAX_RANK {
                    return err(format!("axis {axis} must be in 0..={} and the result rank at most {MAX_RANK} (inputs {s0:?})", s0.len()));
                }
                let mut out = s0.clone();
                out.insert(*axis, inputs.len());
                out
            }
            Rearrange::Crop {
                top,
                bottom,
                left,
                right,
            } => {
                let mut s = one()?;
                let r = s.len();
                if r < 3 || top + bottom >= s[r - 2] || left + right >= s[r - 1] {
                    return err(format!("crop [{top}, {bottom}] x [{left}, {right}] needs rank >= 3 and must leave at least one row and column of {s:?}"));
                }
                s[r - 2] -= top + bottom;
                s[r - 1] -= left + right;
                s
            }
            Rearrange::Shuffle { kind, r } => {
                let s = one()?;
                let rr = r * r;
                let ok = s.len() == 4
                    && *r >= 1
                    && if kind.to_space() {
                        s[1] % rr == 0
                    } else {
                        s[2] % r == 0 && s[3] % r == 0
                    };
                if !ok {
                    let need = if kind.to_space() {
                        "channels divisible by factor²"
                    } else {
                        "H and W divisible by the factor"
                    };
                    return err(format!(
                        "needs a rank-4 [N, C, H, W] input with {need}; got {s:?} with factor {r}"
                    ));
                }
                if kind.to_space() {
                    vec![s[0], s[1] / rr, s[2] * r, s[3] * r]
                } else {
                    vec![s[0], s[1] * rr, s[2] / r, s[3] / r]
                }
            }
        };
        shape::check(op, &out)?;
        Ok(vec![TensorType {
            dtype: inputs[0].dtype,
            shape: out,
        }])
    }
    fn mil(&self) -> MilOp {
        let x = MilOp::new(self.mil_name(), &["x"]);
        match self {
            Rearrange::Reverse { axes } => x.param("axes", ints(axes)),
            Rearrange::Tile { reps } => x.param("reps", ints(reps)),
            Rearrange::Flatten2d { axis } => x.param("axis", Literal::Int32(*axis as i32)),
            Rearrange::Crop {
                top,
                bottom,
                left,
                right,
            } => x
                .param("crop_height", ints(&[*top, *bottom]))
                .param("crop_width", ints(&[*left, *right])),
            Rearrange::Shuffle { kind, r } => match kind {
                Shuffle::SpaceToDepth | Shuffle::DepthToSpace => {
                    x.param("block_size", Literal::Int32(*r as i32))
                }
                Shuffle::PixelShuffle => x.param("upscale_factor", Literal::Int32(*r as i32)),
                Shuffle::PixelUnshuffle => x.param("downscale_factor", Literal::Uint32(*r as u32)),
            },
            Rearrange::Stack { axis } => MilOp {
                op: RearrangeOp::Stack.mil_name(),
                params: vec![("axis", Literal::Int32(*axis as i32))],
                inputs: MilInputs::Tuple("values"),
                blobs: Vec::new(),
            },
        }
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y) = (ins[0], &mut out[0]);
        match self {
            Rearrange::Flatten2d { .. } => y.data.copy_from_slice(&x.data),
            Rearrange::Reverse { axes } => {
                y.data.copy_from_slice(&x.data);
                for &a in axes {
                    let (d, inner) = (x.shape[a], shape::numel(&x.shape[a + 1..]));
                    for block in y.data.chunks_exact_mut(d * inner) {
                        for i in 0..d / 2 {
                            let (lo, hi) = block.split_at_mut((d - 1 - i) * inner);
                            lo[i * inner..(i + 1) * inner].swap_with_slice(&mut hi[..inner]);
                        }
                    }
                }
            }
            Rearrange::Tile { reps } => {
                // Grow one axis at a time, from the last: each [outer, extent·inner] row is repeated in place.
                let mut cur = x.data.clone();
                let mut s = x.shape.clone();
                for a in (0..s.len()).rev() {
                    let row = shape::numel(&s[a..]);
                    cur = cur
                        .chunks_exact(row)
                        .flat_map(|r| r.iter().copied().cycle().take(row * reps[a]))
                        .collect();
                    s[a] *= reps[a];
                }
                y.data.copy_from_slice(&cur);
            }
            Rearrange::Crop { top, left, .. } => {
                let r = x.shape.len();
                let (h, w, oh, ow) = (
                    x.shape[r - 2],
                    x.shape[r - 1],
                    y.shape[r - 2],
                    y.shape[r - 1],
                );
                for (plane, out) in x
                    .data
                    .chunks_exact(h * w)
                    .zip(y.data.chunks_exact_mut(oh * ow))
                {
                    for (row, o) in out.chunks_exact_mut(ow).enumerate() {
                        let start = (top + row) * w + left;
                        o.copy_from_slice(&plane[start..start + ow]);
                    }
                }
            }
            Rearrange::Shuffle { kind, r } => shuffle(*kind, *r, x, y),
            Rearrange::Stack { axis } => {
                let mut part = x.shape.clone();
                part.insert(*axis, 1);
                let parts = vec![part.as_slice(); ins.len()];
                let whole = y.shape.clone();
                for_each_block(*axis, &whole, &parts, |k, p, w| {
                    y.data[w].copy_from_slice(&ins[k].data[p])
                });
            }
        }
        Ok(())
    }
}

/// Parse rearranging ops.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    if let Some(kind) = Shuffle::from_mil_name(op) {
        let name = match kind {
            Shuffle::PixelShuffle => "upscale_factor",
            Shuffle::PixelUnshuffle => "downscale_factor",
            _ => "block_size",
        };
        let parsed = super::layout::index_param(args, name).map(|r| Rearrange::Shuffle { kind, r });
        return Some(parsed.map(Op::Rearrange));
    }
    let axis = |args: &mut MilArgs| super::layout::index_param(args, "axis");
    let parsed = match RearrangeOp::from_mil_name(op)? {
        RearrangeOp::Reverse => args.sizes("axes").map(|axes| Rearrange::Reverse { axes }),
        RearrangeOp::Tile => args.sizes("reps").map(|reps| Rearrange::Tile { reps }),
        RearrangeOp::Flatten2d => axis(args).map(|axis| Rearrange::Flatten2d { axis }),
        RearrangeOp::Stack => axis(args).map(|axis| Rearrange::Stack { axis }),
        RearrangeOp::Crop => (|| {
            let (h, w) = (args.sizes("crop_height")?, args.sizes("crop_width")?);
            match (h.as_slice(), w.as_slice()) {
                (&[top, bottom], &[left, right]) => Ok(Rearrange::Crop {
                    top,
                    bottom,
                    left,
                    right,
                }),
                _ => Err(args.error(format!(
                    "crop_height {h:?} and crop_width {w:?} must each have two values"
                ))),
            }
        })(),
    };
    Some(parsed.map(Op::Rearrange))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::build::rearrange::*;
    use crate::ops::layout::tests::{buf, mil_args, ravel, round_trip, run, unravel};
    use crate::{input, DType};

    #[test]
    fn kernels_match_index_formulas() {
        let x = buf(&[2, 7, 1, 5], 3);
        for axes in [vec![0], vec![1], vec![1, 3], vec![0, 1, 2, 3]] {
            let y = run(
                &Op::Rearrange(Rearrange::Reverse { axes: axes.clone() }),
                &[&x],
            )
            .remove(0);
            for (o, &v) in y.data.iter().enumerate() {
                let mut idx = unravel(o, &y.shape);
                axes.iter().for_each(|&a| idx[a] = x.shape[a] - 1 - idx[a]);
                assert_eq!(
                    v,
                    x.data[ravel(&idx, &x.shape)],
                    "reverse {axes:?} element {o}"
                );
            }
        }
        for reps in [vec![1, 1, 1, 1], vec![3, 1, 2, 2], vec![1, 2, 3, 1]] {
            let y = run(
                &Op::Rearrange(Rearrange::Tile { reps: reps.clone() }),
                &[&x],
            )
            .remove(0);
            for (o, &v) in y.data.iter().enumerate() {
                let idx: Vec<usize> = unravel(o, &y.shape)
                    .iter()
                    .zip(&x.shape)
                    .map(|(i, d)| i % d)
                    .collect();
                assert_eq!(
                    v,
                    x.data[ravel(&idx, &x.shape)],
                    "tile {reps:?} element {o}"
                );
            }
        }
        let y = run(&Op::Rearrange(Rearrange::Flatten2d { axis: 2 }), &[&x]).remove(0);
        assert_eq!((y.shape.as_slice(), &y.data), ([14, 5].as_slice(), &x.data));
        let parts = [buf(&[2, 7, 3], 4), buf(&[2, 7, 3], 5), buf(&[2, 7, 3], 6)];
        for axis in 0..=3 {
            let refs: Vec<&Buf> = parts.iter().collect();
            let y = run(&Op::Rearrange(Rearrange::Stack { axis }), &refs).remove(0);
            for (o, &v) in y.data.iter().enumerate() {
                let mut idx = unravel(o, &y.shape);
                let k = idx.remove(axis);
                assert_eq!(
                    v,
                    parts[k].data[ravel(&idx, &parts[k].shape)],
                    "stack axis {axis} element {o}"
                );
            }
        }
    }

    /// Shuffles against the index formulas of their definitions; each pair inverts the other.
    #[test]
    fn shuffles_and_crop_match_index_formulas() {
        let x = buf(&[2, 12, 3, 5], 8);
        for (kind, dcr) in [
            (Shuffle::DepthToSpace, true),
            (Shuffle::PixelShuffle, false),
        ] {
            let y = run(&Op::Rearrange(Rearrange::Shuffle { kind, r: 2 }), &[&x]).remove(0);
            assert_eq!(y.shape, [2, 3, 6, 10]);
            for (o, &v) in y.data.iter().enumerate() {
                let [b, c, hh, ww] = <[usize; 4]>::try_from(unravel(o, &y.shape)).unwrap();
                let (i, j) = (hh % 2, ww % 2);
                let k = if dcr {
                    (i * 2 + j) * 3 + c
                } else {
                    c * 4 + i * 2 + j
                };
                assert_eq!(
                    v,
                    x.data[ravel(&[b, k, hh / 2, ww / 2], &x.shape)],
                    "{kind:?} element {o}"
                );
            }
            let inverse = if dcr {
                Shuffle::SpaceToDepth
            } else {
                Shuffle::PixelUnshuffle
            };
            let back = run(
                &Op::Rearrange(Rearrange::Shuffle {
                    kind: inverse,
                    r: 2,
                }),
                &[&y],
            )
            .remove(0);
            assert_eq!(back, x, "{inverse:?} inverts {kind:?}");
        }
        let x = buf(&[2, 7, 9], 9);
        let y = run(
            &Op::Rearrange(Rearrange::Crop {
                top: 1,
                bottom: 2,
                left: 3,
                right: 0,
            }),
            &[&x],
        )
        .remove(0);
        assert_eq!(y.shape, [2, 4, 6]);
        for (o, &v) in y.data.iter().enumerate() {
            let [a, h, w] = <[usize; 3]>::try_from(unravel(o, &y.shape)).unwrap();
            assert_eq!(v, x.data[ravel(&[a, h + 1, w + 3], &x.shape)]);
        }
    }

    #[test]
    fn builders_and_errors() {
        let x = input(&[2, 3, 4]).unwrap();
        assert_eq!(
            x.reverse(&[-1, 0]).unwrap().op(),
            &Op::Rearrange(Rearrange::Reverse { axes: vec![0, 2] })
        );
        assert_eq!(x.tile(&[2, 1, 3]).unwrap().shape(), [4, 3, 12]);
        assert_eq!(x.flatten2d(1).unwrap().shape(), [2, 12]);
        assert_eq!(x.flatten2d(0).unwrap().shape(), [1, 24]);
        assert_eq!(x.flatten2d(-1).unwrap().shape(), [6, 4]);
        assert_eq!(x.flatten2d(3).unwrap().shape(), [24, 1]);
        assert_eq!(
            stack(&[x.clone(), x.clone()], -1).unwrap().shape(),
            [2, 3, 4, 2]
        );
        assert_eq!(x.crop(0, 0, 0, 0).unwrap().shape(), [2, 3, 4]);
        assert_eq!(x.crop(1, 0, 1, 2).unwrap().shape(), [2, 2, 1]);
        let img = input(&[1, 8, 2, 6]).unwrap();
        assert_eq!(img.depth_to_space(2).unwrap().shape(), [1, 2, 4, 12]);
        assert_eq!(img.pixel_shuffle(1).unwrap().shape(), [1, 8, 2, 6]);
        assert_eq!(img.space_to_depth(2).unwrap().shape(), [1, 32, 1, 3]);
        assert_eq!(img.pixel_unshuffle(2).unwrap().shape(), [1, 32, 1, 3]);
        let b = x
            .compare_scalar(crate::ops::elementwise::Compare::Less, 0.0)
            .unwrap();
        assert_eq!(b.reverse(&[1]).unwrap().dtype(), DType::Bool);
        let errs = [
            x.reverse(&[3]),
            x.reverse(&[0, -3]),
            x.reverse(&[]),
            x.tile(&[2, 2]),
            x.tile(&[1, 0, 1]),
            x.tile(&[1, 1, 20000]),
            x.flatten2d(4),
            x.flatten2d(-4),
            stack(&[], 0),
            stack(&[x.clone(), input(&[2, 3, 5]).unwrap()], 0),
            stack(&[x.clone(), b.clone()], 0),
            stack(std::slice::from_ref(&x), 4),
            stack(&[input(&[1, 1, 1, 1, 2]).unwrap()], 0),
            x.crop(2, 1, 0, 0),
            x.crop(0, 0, 2, 2),
            input(&[4, 4]).unwrap().crop(0, 0, 0, 0),
            input(&[1, 8, 2, 2]).unwrap().depth_to_space(3),
            input(&[1, 8, 2, 2]).unwrap().pixel_shuffle(0),
            input(&[1, 2, 4, 6]).unwrap().space_to_depth(4),
            input(&[1, 2, 4, 5]).unwrap().pixel_unshuffle(2),
            input(&[8, 2, 2]).unwrap().pixel_shuffle(2),
        ];
        for (i, e) in errs.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
    }

    /// gather prints one slice per run of consecutive indices and a concat; bad indices are errors.
    #[test]
    fn gather_composes_slices() {
        let x = input(&[2, 7, 3]).unwrap();
        let g = x.gather(&[0, 1, 2, 6, -1, 3], 1).unwrap();
        assert_eq!(
            (g.shape(), g.op().family().name(), g.node.srcs.len()),
            (&[2usize, 6, 3][..], "concat", 4)
        );
        let one = x.gather(&[4, 5], -2).unwrap();
        assert_eq!(
            (one.shape(), one.op().family().name()),
            (&[2usize, 2, 3][..], "slice_by_size")
        );
        for bad in [
            x.gather(&[7], 1),
            x.gather(&[-8], 1),
            x.gather(&[], 0),
            x.gather(&[0], 3),
        ] {
            assert!(bad.is_err());
        }
    }

    #[test]
    fn mil_round_trip() {
        let shuffles = [
            Shuffle::SpaceToDepth,
            Shuffle::DepthToSpace,
            Shuffle::PixelShuffle,
            Shuffle::PixelUnshuffle,
        ]
        .map(|kind| Rearrange::Shuffle { kind, r: 3 });
        let others = [
            Rearrange::Reverse { axes: vec![0, 2] },
            Rearrange::Tile { reps: vec![1, 2] },
            Rearrange::Flatten2d { axis: 0 },
            Rearrange::Stack { axis: 2 },
            Rearrange::Crop {
                top: 1,
                bottom: 2,
                left: 3,
                right: 4,
            },
        ];
        for r in others.into_iter().chain(shuffles) {
            round_trip(&Op::Rearrange(r), from_mil);
        }
        assert!(from_mil(
            "tile",
            &mut mil_args(vec![("reps", Literal::Ints(vec![-1]))])
        )
        .unwrap()
        .is_err());
        assert!(from_mil(
            "flatten2d",
            &mut mil_args(vec![("axis", Literal::Int32(-1))])
        )
        .unwrap()
        .is_err());
        assert!(from_mil("concat", &mut mil_args(vec![])).is_none());
        let crop = vec![
            ("crop_height", Literal::Ints(vec![1])),
            ("crop_width", Literal::Ints(vec![0, 0])),
        ];
        assert!(from_mil("crop", &mut mil_args(crop)).unwrap().is_err());
    }
}
