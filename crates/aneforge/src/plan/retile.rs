//! Re-tiling: the `attention_tiles` compile option decomposes every attention the builders
//! marked ([`Attention`]: `sdpa`, `mha`, `cross_attention`) again with that many query tiles;
//! `None` leaves the graph exactly as built (each attention keeps its builder's heuristic count,
//! see [`crate::graph::build::attention::attention_tiles`]). Tiles only split the query rows:
//! each row's scores, mask, softmax and product are the same ops on the same values.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::route::NamedOutputs;
use crate::error::{Error, Result};
use crate::graph::attention_marker::Attention;
use crate::graph::tensor::NodeDef;
use crate::graph::Tensor;

type Key = *const NodeDef;

fn key(t: &Tensor) -> Key {
    Arc::as_ptr(&t.node)
}

/// One tensor per node under `outputs`, sources before users (iterative: graphs may be deep);
/// `children` lists the tensors a node depends on.
fn post_order(
    outputs: &[(Option<String>, Tensor)],
    children: impl Fn(&Tensor) -> Vec<Tensor>,
) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut seen: HashSet<Key> = HashSet::new();
    let mut stack: Vec<(Tensor, bool)> = outputs.iter().map(|(_, t)| (t.clone(), false)).collect();
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !seen.insert(key(&t)) {
            continue;
        }
        let deps = children(&t);
        stack.push((t, true));
        stack.extend(
            deps.into_iter()
                .filter(|c| !seen.contains(&key(c)))
                .map(|c| (c, false)),
        );
    }
    order
}

/// Every marked attention under `outputs`, sources first.
pub fn attentions(outputs: &[(Option<String>, Tensor)]) -> Vec<Attention> {
    post_order(outputs, |t| t.sources().to_vec())
        .iter()
        .filter_map(|t| t.attention().cloned())
        .collect()
}

/// `outputs` with every marked attention decomposed in `tiles` query tiles (`None`: unchanged).
/// A count above an attention's query rows is a value error naming the option, the count and
/// the rows.
pub fn retile(outputs: &[(Option<String>, Tensor)], tiles: Option<usize>) -> Result<NamedOutputs> {
    let Some(k) = tiles else {
        return Ok(outputs.to_vec());
    };
    // A marked node depends on its operands only: its old decomposition is replaced whole.
    let order = post_order(outputs, |t| match t.attention() {
        Some(a) => vec![a.q.clone(), a.k.clone(), a.v.clone()],
        None => t.sources().to_vec(),
    });
    let mut changed: HashMap<Key, Vec<Tensor>> = HashMap::new();
    let get = |changed: &HashMap<Key, Vec<Tensor>>, s: &Tensor| {
        changed
            .get(&key(s))
            .map_or_else(|| s.clone(), |v| v[s.port].clone())
    };
    for t in &order {
        let moved = |s: &Tensor| changed.contains_key(&key(s));
        let rebuilt = match t.attention() {
            Some(a) if k > a.rows() => {
                return Err(Error::value(
                    "compile",
                    format!(
                        "attention_tiles = {k} exceeds the {} query rows of an attention ({}); it must be in 1..={}",
                        a.rows(),
                        a.op,
                        a.rows()
                    ),
                ))
            }
            Some(a) if k != a.tiles || [&a.q, &a.k, &a.v].into_iter().any(moved) => {
                let (q, kk, v) = (get(&changed, &a.q), get(&changed, &a.k), get(&changed, &a.v));
                vec![crate::graph::build::attention::decompose(a, &q, &kk, &v, k)?]
            }
            Some(_) => continue,
            None if t.sources().iter().any(moved) => {
                let srcs = t.sources().iter().map(|s| get(&changed, s)).collect();
                Tensor::apply(t.op().clone(), srcs)?
            }
            None => continue,
        };
        changed.insert(key(t), rebuilt);
    }
    Ok(outputs
        .iter()
        .map(|(name, t)| (name.clone(), get(&changed, t)))
        .collect())
}
