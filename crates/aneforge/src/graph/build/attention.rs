//! Attention composites built from existing primitives (no new op): decomposed, query-tiled
//! scaled dot-product attention (`sdpa`), self-attention (`mha`) and `cross_attention`. The
//! output node of each decomposition carries an [`Attention`] marker, so the compile pipeline
//! can decompose it again with the `attention_tiles` option's count ([`crate::plan::retile`]).

use half::f16;

use super::io::constant;
use crate::error::{Error, Result};
use crate::graph::attention_marker::{Attention, Mask};
use crate::graph::build::layout::concat;
use crate::graph::Tensor;
use crate::ops::io::{HostArray, HostData};

/// Additive mask value above the diagonal for causal attention.
pub const CAUSAL_MASK: f32 = -1e4;

/// Heuristic number of query tiles for `s` query rows: max(1, (s + 256) / 512), at most `s`.
pub fn attention_tiles(s: usize) -> usize {
    ((s + 256) / 512).clamp(1, s.max(1))
}

/// Attention `a` decomposed again over (rebuilt) operands `q`, `k`, `v` in `tiles` query tiles
/// (1 ≤ tiles ≤ Sq).
pub fn decompose(
    a: &Attention,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    tiles: usize,
) -> Result<Tensor> {
    attend(a.op, q, k, v, a.scale, &a.mask, tiles)
}

/// softmax(q kᵀ · scale (+ mask)) v on [1, H, Sq, D] × [1, H, Skv, D] × [1, H, Skv, Dv], the query
/// axis split into `tiles` near-even chunks whose results are concatenated; the output node
/// carries the [`Attention`] marker.
fn attend(
    op: &'static str,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
    mask: &Mask,
    tiles: usize,
) -> Result<Tensor> {
    let (h, sq, d, skv) = (q.shape()[1], q.shape()[2], q.shape()[3], k.shape()[2]);
    let kt = k.transpose(&[0, 1, 3, 2])?;
    let (base, extra) = (sq / tiles, sq % tiles);
    let mut start = 0;
    let mut outs = Vec::with_capacity(tiles);
    for t in 0..tiles {
        let len = base + usize::from(t < extra);
        let qt = if tiles == 1 {
            q.clone()
        } else {
            q.slice_by_size(&[0, 0, start, 0], &[1, h, len, d])?
        };
        let mut s = qt.matmul(&kt)?.mul_scalar(scale)?;
        let rows: Option<Vec<f16>> = match mask {
            Mask::None => None,
            Mask::Causal => Some(
                (0..len * skv)
                    .map(|i| {
                        f16::from_f32(if i % skv > start + i / skv {
                            CAUSAL_MASK
                        } else {
                            0.0
                        })
                    })
                    .collect(),
            ),
            Mask::Rows(m) => Some(m[start * skv..(start + len) * skv].to_vec()),
        };
        if let Some(r) = rows {
            s = s.add(&constant(
                "sdpa",
                HostArray {
                    shape: &[1, 1, len, skv],
                    data: HostData::F16(&r),
                },
            )?)?;
        }
        outs.push(s.softmax(-1)?.matmul(v)?);
        start += len;
    }
    let out = if tiles == 1 {
        outs.swap_remove(0)
    } else {
        concat(&outs, 2)?
    };
    let marker = Attention {
        op,
        q: q.clone(),
        k: k.clone(),
        v: v.clone(),
        scale,
        mask: mask.clone(),
        tiles,
    };
    Ok(Tensor::apply_marked(
        out.op().clone(),
        out.sources().to_vec(),
        Some(Box::new(marker)),
    )?
    .remove(0))
}

/// Decomposed, query-tiled scaled dot-product attention on q [1, H, Sq, D], k [1, H, Skv, D],
/// v [1, H, Skv, Dv] (k and v share Skv): `scale` defaults to 1/√D; `is_causal` (Sq = Skv) adds a
/// baked −1e4 upper-triangular mask per tile; `attn_mask` must be a single plane [1, 1, Sq, Skv].
pub fn sdpa(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: Option<f32>,
    is_causal: bool,
    attn_mask: Option<HostArray>,
) -> Result<Tensor> {
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let ok = qs.len() == 4
        && ks.len() == 4
        && vs.len() == 4
        && qs[0] == 1
        && ks[0] == 1
        && vs[0] == 1
        && qs[1] == ks[1]
        && ks[1] == vs[1]
        && qs[3] == ks[3]
        && ks[2] == vs[2];
    if !ok {
        return Err(Error::shape("sdpa", format!("needs q [1, H, Sq, D], k [1, H, Skv, D], v [1, H, Skv, Dv]; got {qs:?}, {ks:?}, {vs:?}")));
    }
    let (sq, skv) = (qs[2], ks[2]);
    let mask = match (is_causal, attn_mask) {
        (true, Some(_)) => {
            return Err(Error::value(
                "sdpa",
                "pass either is_causal or attn_mask, not both",
            ))
        }
        (true, None) if sq != skv => {
            return Err(Error::shape(
                "sdpa",
                format!("is_causal needs Sq == Skv, got {sq} and {skv}"),
            ))
        }
        (true, None) => Mask::Causal,
        (false, Some(m)) if m.shape != [1, 1, sq, skv] => {
            return Err(Error::shape(
                "sdpa",
                format!(
                    "attn_mask must be one plane [1, 1, {sq}, {skv}], got {:?}",
                    m.shape
                ),
            ));
        }
        (false, Some(m)) => Mask::Rows(m.to_fp16("sdpa")?),
        (false, None) => Mask::None,
    };
    let scale = scale.unwrap_or(1.0 / (qs[3] as f32).sqrt());
    attend("sdpa", q, k, v, scale, &mask, attention_tiles(sq))
}

/// The projection weights (PyTorch linear convention, [out, in]) and optional biases of one attention block.
#[derive(Clone, Copy, Debug)]
pub struct AttentionWeights<'a> {
    pub wq: HostArray<'a>,
    pub wk: HostArray<'a>,
    pub wv: HostArray<'a>,
    pub wo: HostArray<'a>,
    pub bq: Option<HostArray<'a>>,
    pub bk: Option<HostArray<'a>>,
    pub bv: Option<HostArray<'a>>,
    pub bo: Option<HostArray<'a>>,
}

/// [S, H·dh] → [1, H, S, dh].
fn split_heads(op: &str, t: &Tensor, heads: usize) -> Result<Tensor> {
    let (s, d) = (t.shape()[0], t.shape()[1]);
    if heads == 0 || d % heads != 0 {
        return Err(Error::shape(
            op,
            format!("projected width {d} is not divisible by n_heads = {heads}"),
        ));
    }
    t.reshape(&[1, s as i64, heads as i64, (d / heads) as i64])?
        .transpose(&[0, 2, 1, 3])
}

/// Multi-head attention of queries from `x` [S, D] over keys/values from `context` [T, Dc];
/// `tiles` query tiles; returns [S, out] after the output projection.
fn attention_block(
    op: &'static str,
    x: &Tensor,
    context: &Tensor,
    w: AttentionWeights,
    heads: usize,
    tiles: usize,
) -> Result<Tensor> {
    if x.rank() != 2 || context.rank() != 2 {
        return Err(Error::shape(
            op,
            format!(
                "needs x [S, D] and context [T, Dc], got {:?} and {:?}",
                x.shape(),
                context.shape()
            ),
        ));
    }
    let q = split_heads(op, &x.linear(w.wq, w.bq)?, heads)?;
    let k = split_heads(op, &context.linear(w.wk, w.bk)?, heads)?;
    let v = split_heads(op, &context.linear(w.wv, w.bv)?, heads)?;
    let o = attend(
        op,
        &q,
        &k,
        &v,
        1.0 / (q.shape()[3] as f32).sqrt(),
        &Mask::None,
        tiles,
    )?;
    let s = x.shape()[0] as i64;
    o.transpose(&[0, 2, 1, 3])?
        .reshape(&[s, -1])?
        .linear(w.wo, w.bo)
}

impl Tensor {
    /// Self-attention on `self` [S, D] with `n_heads` heads, query-tiled by [`attention_tiles`].
    pub fn mha(&self, w: AttentionWeights, n_heads: usize) -> Result<Tensor> {
        let tiles = self.shape().first().map_or(1, |&s| attention_tiles(s));
        attention_block("mha", self, self, w, n_heads, tiles)
    }
    /// Attention of `self` [S, D] over `context` [T, Dc]; query-tiled only when S ≥ 768 and T ≥ 512.
    pub fn cross_attention(
        &self,
        context: &Tensor,
        w: AttentionWeights,
        n_heads: usize,
    ) -> Result<Tensor> {
        let (s, t) = (
            self.shape().first().copied().unwrap_or(0),
            context.shape().first().copied().unwrap_or(0),
        );
        let tiles = if s >= 768 && t >= 512 {
            attention_tiles(s)
        } else {
            1
        };
        attention_block("cross_attention", self, context, w, n_heads, tiles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input;
    use crate::ops::gemm::tests::rand_vec;

    #[test]
    fn tiles_follow_the_heuristic() {
        assert_eq!(
            [1, 255, 256, 767, 768, 1500, 2048].map(attention_tiles),
            [1, 1, 1, 1, 2, 3, 4]
        );
    }

    /// Count the softmax nodes (one per tile) reachable from `t`.
    fn softmaxes(t: &Tensor) -> usize {
        let g = crate::Graph::from_outputs(&[(None, t.clone())]).unwrap();
        g.nodes
            .iter()
            .filter(|n| n.op.family().name() == "softmax")
            .count()
    }

    #[test]
    fn shapes_tiling_and_errors() {
        let (q, k, v) = (
            input(&[1, 2, 800, 8]).unwrap(),
            input(&[1, 2, 800, 8]).unwrap(),
            input(&[1, 2, 800, 5]).unwrap(),
        );
        let y = sdpa(&q, &k, &v, None, true, None).unwrap();
        assert_eq!((y.shape(), softmaxes(&y)), (&[1usize, 2, 800, 5][..], 2));
        let m = vec![0.0f32; 7 * 800];
        let q7 = input(&[1, 2, 7, 8]).unwrap();
        assert_eq!(
            softmaxes(
                &sdpa(
                    &q7,
                    &k,
                    &v,
                    Some(0.5),
                    false,
                    Some(HostArray::f32(&[1, 1, 7, 800], &m))
                )
                .unwrap()
            ),
            1
        );
        let bad = [
            sdpa(&q7, &k, &v, None, true, None),
            sdpa(
                &q7,
                &k,
                &v,
                None,
                true,
                Some(HostArray::f32(&[1, 1, 7, 800], &m)),
            ),
            sdpa(
                &q7,
                &k,
                &v,
                None,
                false,
                Some(HostArray::f32(&[1, 2, 7, 400], &m)),
            ),
            sdpa(&q7, &k, &input(&[1, 2, 799, 5]).unwrap(), None, false, None),
            sdpa(&input(&[2, 7, 8]).unwrap(), &k, &v, None, false, None),
        ];
        for (i, e) in bad.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
        let w = rand_vec(12 * 12, 3);
        let h = |s: &'static [usize]| HostArray::f32(s, &w[..s.iter().product()]);
        let aw = AttentionWeights {
            wq: h(&[12, 12]),
            wk: h(&[12, 12]),
            wv: h(&[12, 12]),
            wo: h(&[12, 12]),
            bq: Some(h(&[12])),
            bk: None,
            bv: None,
            bo: Some(h(&[12])),
        };
        let x = input(&[770, 12]).unwrap();
        assert_eq!(
            (
                x.mha(aw, 3).unwrap().shape(),
                softmaxes(&x.mha(aw, 3).unwrap())
            ),
            (&[770usize, 12][..], 2)
        );
        let ctx = input(&[9, 12]).unwrap();
        let c = x.cross_attention(&ctx, aw, 4).unwrap();
        assert_eq!((c.shape(), softmaxes(&c)), (&[770usize, 12][..], 1));
        assert!(x.mha(aw, 5).is_err());
        assert!(input(&[1, 4, 12]).unwrap().mha(aw, 3).is_err());
    }
}
