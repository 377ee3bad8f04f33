//! Weight compression: a compile-time pass over the lowered graph that replaces fp16 weight
//! constants by `constexpr_*` nodes, and the per-weight report.
//!
//! A weight is a const of rank >= 2 whose every use is the weight input of `conv` or `matmul`
//! (and that is not a program output); biases, norm parameters and other constants stay fp16.
//! Rank-2 matmul weights and conv weights may carry every encoding, batched (rank >= 3) matmul
//! weights int4 and int8 only. Per weight the first encoding the mode enables that qualifies
//! wins, in the order sparse (lossless; some zeros and at most 50 % non-zeros), int4 palette
//! (even inner extent; relative L2 error <= `atol`), blockwise int8 (error <= `atol`), int8 per
//! output channel (accepted unless its reconstruction overflows), fp16.

mod int8;
mod lut;
mod sparse;

use std::sync::Arc;

use half::f16;

use crate::error::{Error, Result};
use crate::graph::{Graph, Node, NodeId, Value};
use crate::ops::constexpr::Constexpr;
pub use crate::ops::constexpr::Encoding;
use crate::ops::elementwise::Binary;
use crate::ops::{io, Op, TensorType};
use crate::targets::{self, Family};

/// The `compress=` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compress {
    /// int8 per output channel for every weight.
    Int8,
    /// int4 palette where the error gate passes, else int8.
    Int4,
    /// sparse where at most half the elements are non-zero, else fp16 (stays lossless).
    Sparse,
    /// blockwise int8 where the error gate passes, else int8.
    Blockwise,
    /// Every encoding the target family streams natively, in the reference order.
    Auto,
}

impl Compress {
    /// Parse a mode name; errors list the modes.
    pub fn parse(s: &str) -> Result<Compress> {
        match s {
            "int8" => Ok(Compress::Int8),
            "int4" => Ok(Compress::Int4),
            "sparse" => Ok(Compress::Sparse),
            "blockwise" => Ok(Compress::Blockwise),
            "auto" => Ok(Compress::Auto),
            _ => Err(Error::value(
                "compile",
                format!(
                    "unknown compress mode '{s}' (expected int8, int4, sparse, blockwise or auto)"
                ),
            )),
        }
    }
}

/// Options of the compression pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompressOptions {
    pub mode: Compress,
    /// Relative L2 error budget of the gated encodings (int4, blockwise), in (0, 1].
    pub atol: f32,
    /// Block length along the inner axis for blockwise int8 (must divide that axis).
    pub block_size: usize,
    /// Target family for `Auto`; `None` detects the host's.
    pub family: Option<Family>,
}

/// One weight's line of the compression report.
#[derive(Clone, Debug, PartialEq)]
pub struct CompressionEntry {
    /// The weight's value name in model.mil.
    pub name: String,
    /// The op it feeds (`matmul` or `conv`).
    pub site: &'static str,
    pub shape: Vec<usize>,
    pub encoding: Encoding,
    /// Bytes as fp16.
    pub bytes_fp16: usize,
    /// Bytes of the encoded payloads.
    pub bytes_encoded: usize,
    /// ||W − dequant(W)||₂ / ||W||₂ (0 for sparse and fp16).
    pub rel_error: f64,
}

/// Where a weight is used: op, output-channel axis, inner (contraction) axis, and whether sparse/blockwise are allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Site {
    op: &'static str,
    out_axis: usize,
    in_axis: usize,
    all_encodings: bool,
}

impl Site {
    /// The site of input `port` of `op` for a weight of `rank`, if it is a weight input.
    fn of(op: &Op, port: usize, rank: usize) -> Option<Site> {
        match op {
            Op::Conv(_) if port == 1 => Some(Site {
                op: "conv",
                out_axis: 0,
                in_axis: 1,
                all_encodings: true,
            }),
            Op::MatMul(m) if port == 1 => {
                let (out_axis, in_axis) = if m.transpose_y {
                    (rank - 2, rank - 1)
                } else {
                    (rank - 1, rank - 2)
                };
                Some(Site {
                    op: "matmul",
                    out_axis,
                    in_axis,
                    all_encodings: rank == 2,
                })
            }
            _ => None,
        }
    }

    /// Whether this site may carry `enc`.
    fn allows(self, enc: Encoding) -> bool {
        self.all_encodings || matches!(enc, Encoding::Int4 | Encoding::Int8 | Encoding::Fp16)
    }
}

/// ||w − d||₂ / ||w||₂ in f64; infinite when `d` is not finite (so gates fail closed).
fn rel_l2(w: &[f16], d: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (a, &b) in w.iter().zip(d) {
        let a = a.to_f64();
        num += (a - b as f64).powi(2);
        den += a * a;
    }
    if !num.is_finite() {
        f64::INFINITY
    } else if num == 0.0 {
        0.0
    } else if den == 0.0 {
        f64::INFINITY
    } else {
        (num / den).sqrt()
    }
}

/// What the selection settled on for one weight.
struct Choice {
    node: Option<Constexpr>,
    encoding: Encoding,
    rel_error: f64,
}

/// A weight described for errors: `weight t3 [64, 32] (conv weight)`.
fn describe(name: &str, shape: &[usize], site: Site) -> String {
    format!("weight {name} {shape:?} ({} weight)", site.op)
}

/// Walk the candidates for one weight and return the first that qualifies.
fn choose(
    name: &str,
    c: &io::Const,
    site: Site,
    cands: &[Encoding],
    opts: &CompressOptions,
) -> Result<Choice> {
    let (shape, w) = (&c.shape[..], &c.values[..]);
    let explicit = opts.mode != Compress::Auto;
    for &enc in cands {
        if !site.allows(enc) {
            if explicit {
                return Err(Error::value(
                    "compile",
                    format!("compress='{enc}': {} cannot carry {enc} (batched matmul weights take int4 or int8)", describe(name, shape, site)),
                ));
            }
            continue;
        }
        let inner = shape[site.in_axis];
        let encoded = match enc {
            Encoding::Sparse => {
                let nnz = sparse::nnz(w);
                (nnz > 0 && 2 * nnz <= w.len()).then(|| sparse::encode(w))
            }
            Encoding::Int4 => (inner % 2 == 0).then(|| lut::palettize(w)),
            Encoding::Blockwise if inner % opts.block_size != 0 => {
                if explicit {
                    let msg = format!(
                        "block_size {} does not divide the inner axis ({inner}) of {}; pick a block_size that divides it",
                        opts.block_size,
                        describe(name, shape, site)
                    );
                    return Err(Error::value("compile", msg));
                }
                None
            }
            Encoding::Blockwise => Some(int8::blockwise(shape, w, site.in_axis, opts.block_size)),
            Encoding::Int8 => Some(int8::per_axis(shape, w, site.out_axis)),
            // GGUF blocks come only from the GGUF loader, never from compress.
            Encoding::Gguf | Encoding::Fp16 => None,
        };
        let Some(encoded) = encoded else { continue };
        let node = Constexpr::new(shape.to_vec(), encoded)?;
        let mut dense = vec![0f32; w.len()];
        node.expand(&mut dense);
        let err = rel_l2(w, &dense);
        let gated = matches!(enc, Encoding::Int4 | Encoding::Blockwise);
        if err.is_finite() && (!gated || err <= opts.atol as f64) {
            return Ok(Choice {
                node: Some(node),
                encoding: enc,
                rel_error: err,
            });
        }
    }
    Ok(Choice {
        node: None,
        encoding: Encoding::Fp16,
        rel_error: 0.0,
    })
}

/// The weight site of every const that qualifies as a weight (see the module docs).
fn weight_sites(g: &Graph) -> Vec<Option<Site>> {
    let mut sites: Vec<Option<Option<Site>>> = vec![None; g.nodes.len()]; // None = no use seen yet
    for node in &g.nodes {
        for (port, v) in node.inputs.iter().enumerate() {
            let Op::Const(c) = &g.nodes[v.node].op else {
                continue;
            };
            let site = (c.shape.len() >= 2)
                .then(|| Site::of(&node.op, port, c.shape.len()))
                .flatten();
            let s = &mut sites[v.node];
            *s = match *s {
                None => Some(site),
                Some(prev) => Some(prev.filter(|p| Some(*p) == site)),
            };
        }
    }
    for (_, v) in &g.outputs {
        sites[v.node] = Some(None);
    }
    sites.into_iter().map(Option::flatten).collect()
}

/// `atol` when it lies in (0, 1], else the one Value error for `compress_atol`.
pub fn check_atol(atol: f32) -> Result<f32> {
    if atol.is_finite() && atol > 0.0 && atol <= 1.0 {
        return Ok(atol);
    }
    Err(Error::value(
        "compile",
        format!("compress_atol must be in (0, 1], got {atol}"),
    ))
}

/// `block_size` as a usize when it is >= 1, else the one Value error for `block_size`.
pub fn check_block_size(block_size: i64) -> Result<usize> {
    usize::try_from(block_size)
        .ok()
        .filter(|&b| b >= 1)
        .ok_or_else(|| {
            Error::value(
                "compile",
                format!("block_size must be >= 1, got {block_size}"),
            )
        })
}

/// Check `atol` is in (0, 1] and `block_size` >= 1.
pub fn check_options(atol: f32, block_size: usize) -> Result<()> {
    check_atol(atol)?;
    check_block_size(i64::try_from(block_size).unwrap_or(i64::MAX))?;
    Ok(())
}

/// Check the options; the mode's encodings in selection order (`Auto`: those the family streams natively).
fn candidates(opts: &CompressOptions) -> Result<Vec<Encoding>> {
    check_options(opts.atol, opts.block_size)?;
    Ok(match opts.mode {
        Compress::Int8 => vec![Encoding::Int8],
        Compress::Int4 => vec![Encoding::Int4, Encoding::Int8],
        Compress::Sparse => vec![Encoding::Sparse],
        Compress::Blockwise => vec![Encoding::Blockwise, Encoding::Int8],
        Compress::Auto => {
            let native = targets::native_streams(match opts.family {
                Some(f) => f,
                None => targets::detect_host()?,
            });
            [
                Encoding::Sparse,
                Encoding::Int4,
                Encoding::Blockwise,
                Encoding::Int8,
            ]
            .into_iter()
            .filter(|e| native.contains(e))
            .collect()
        }
    })
}

/// Replace each weight const by its chosen constexpr node (blockwise via `add(x, 0)`); returns the graph and report.
pub fn compress(graph: Graph, opts: &CompressOptions) -> Result<(Graph, Vec<CompressionEntry>)> {
    let cands = candidates(opts)?;
    let sites = weight_sites(&graph);
    let mut nodes: Vec<Node> = Vec::with_capacity(graph.nodes.len());
    let mut map: Vec<NodeId> = Vec::with_capacity(graph.nodes.len());
    let mut pending = Vec::new(); // (new node id, site, shape, choice)
    let remap = |map: &[NodeId], v: &Value| Value {
        node: map[v.node],
        port: v.port,
    };
    for (i, node) in graph.nodes.iter().enumerate() {
        let inputs: Vec<Value> = node.inputs.iter().map(|v| remap(&map, v)).collect();
        let (Some(site), Op::Const(c)) = (sites[i], &node.op) else {
            map.push(nodes.len());
            nodes.push(Node {
                op: node.op.clone(),
                inputs,
                outputs: node.outputs.clone(),
            });
            continue;
        };
        let choice = choose(&format!("t{i}"), c, site, &cands, opts)?;
        let id = nodes.len();
        let op = choice
            .node
            .clone()
            .map_or_else(|| node.op.clone(), Op::Constexpr);
        nodes.push(Node {
            op,
            inputs: vec![],
            outputs: node.outputs.clone(),
        });
        if choice.encoding == Encoding::Blockwise {
            let zero = Op::Const(io::Const {
                shape: vec![],
                values: Arc::new(vec![f16::ZERO]),
            });
            nodes.push(Node {
                op: zero,
                inputs: vec![],
                outputs: vec![TensorType::fp16(vec![])],
            });
            let add = Node {
                op: Op::Binary(Binary::Add),
                inputs: vec![
                    Value { node: id, port: 0 },
                    Value {
                        node: id + 1,
                        port: 0,
                    },
                ],
                outputs: node.outputs.clone(),
            };
            nodes.push(add);
        }
        map.push(nodes.len() - 1);
        pending.push((id, site, c.shape.clone(), choice));
    }
    let g = Graph {
        inputs: graph.inputs.iter().map(|&i| map[i]).collect(),
        outputs: graph
            .outputs
            .iter()
            .map(|(n, v)| (n.clone(), remap(&map, v)))
            .collect(),
        nodes,
    };
    let names = crate::mil::print::value_names(&g)?;
    let report = pending
        .into_iter()
        .map(|(id, site, shape, ch)| {
            let bytes_fp16 = crate::shape::numel(&shape) * 2;
            let bytes_encoded = ch
                .node
                .as_ref()
                .map_or(bytes_fp16, Constexpr::payload_bytes);
            CompressionEntry {
                name: names[id][0].clone(),
                site: site.op,
                shape,
                encoding: ch.encoding,
                bytes_fp16,
                bytes_encoded,
                rel_error: ch.rel_error,
            }
        })
        .collect();
    Ok((g, report))
}

#[cfg(test)]
mod tests;
