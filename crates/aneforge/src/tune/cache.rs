//! The tune cache: `autotune.json` in the cache root, keyed by a structural graph hash (ops,
//! attributes, shapes, dtypes, edges, port names; never weight values), written atomically.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::ops::Op;

/// File name of the tune cache in the cache root.
pub const TUNE_FILE: &str = "autotune.json";

/// One measured variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub variant: String,
    pub lossy: bool,
    pub estimate_us: f64,
    /// Median µs per call; `None` when not measured (over budget or failed to compile).
    pub measured_us: Option<f64>,
    /// Relative error against the baseline; `None` = not measured or non-finite.
    pub error: Option<f64>,
    pub accepted: bool,
    pub note: String,
}

/// A tuning result: the chosen variant and the whole table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    pub chosen: String,
    pub executor: String,
    pub atol: f64,
    pub table: Vec<Row>,
}

/// Hex sha256 of the graph's structure: per node the op with its attributes (constants only by
/// dtype and shape), input edges and output types; then the output ports.
pub fn structural_hash(g: &Graph) -> String {
    let mut h = Sha256::new();
    for n in &g.nodes {
        let op = match &n.op {
            Op::Const(_) | Op::Constexpr(_) => n.op.family().name().to_string(),
            other => format!("{other:?}"),
        };
        h.update(format!("{op}|{:?}|{:?}\n", n.inputs, n.outputs).as_bytes());
    }
    h.update(format!("{:?}", g.outputs).as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn path() -> PathBuf {
    crate::program::cache_root().join(TUNE_FILE)
}

/// Every cached result by key (`<hash>/<executor>/<atol>`); a missing file is empty, a corrupt
/// one is an error naming it (callers warn, ignore it and rewrite it).
pub fn load_all() -> Result<BTreeMap<String, Tuned>> {
    let p = path();
    if !p.exists() {
        return Ok(BTreeMap::new());
    }
    let text = crate::program::files::read_regular_text(&p)?;
    let all: BTreeMap<String, Tuned> = serde_json::from_str(&text)
        .map_err(|e| Error::format(&p, None, format!("not a tune cache: {e}")))?;
    Ok(all)
}

/// Store `t` under `key`, keeping the other entries of a readable cache (a corrupt one is replaced).
pub fn store(key: &str, t: &Tuned, mut all: BTreeMap<String, Tuned>) -> Result<()> {
    all.insert(key.to_string(), t.clone());
    let p = path();
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let text =
        serde_json::to_string_pretty(&all).map_err(|e| Error::value("tune", e.to_string()))?;
    crate::program::write_atomic(&p, |w| std::io::Write::write_all(w, text.as_bytes()))
}
