//! A lowered program: the graph, its MIL text and weight blob, and the content-addressed
//! program directory (`model.mil`, `weights.bin`, `program.json`) written atomically.

pub mod files;

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::mil::blob::Blob;
use crate::mil::{parse, print};
use crate::targets::Opset;

/// Name, dtype and shape of one program port.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl PortSpec {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        crate::shape::numel(&self.shape)
    }
}

/// The `program.json` manifest.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    pub format: String,
    pub aneforge_version: String,
    pub opset: String,
    pub sha256: String,
    pub inputs: Vec<PortSpec>,
    pub outputs: Vec<PortSpec>,
}

/// Manifest `format` value.
pub const FORMAT: &str = "aneforge-program-1";
/// Hex digits of the SHA-256 used for directory names.
pub const KEY_LEN: usize = 32;

/// A graph lowered to MIL text and a weight blob.
#[derive(Clone, Debug)]
pub struct Program {
    pub graph: Graph,
    pub mil: String,
    pub weights: Blob,
    /// Hex SHA-256 of the MIL text bytes followed by the blob bytes.
    pub sha256: String,
    /// The function opset the text is printed for.
    pub opset: Opset,
}

impl Program {
    /// Print a graph for the newest opset (byte-identical output for the same graph).
    pub fn lower(graph: Graph) -> Result<Program> {
        Program::lower_for(graph, Opset::LATEST)
    }

    /// Print a graph for `opset` (errors name an op `opset` lacks; see [`print::print_for`]).
    pub fn lower_for(graph: Graph, opset: Opset) -> Result<Program> {
        if let Some(n) = graph
            .nodes
            .iter()
            .find(|n| matches!(n.op, crate::ops::Op::Host(_)))
        {
            return Err(Error::value(
                "compile",
                format!("{} is a host op and has no MIL spelling; compile() segments such graphs into a plan", n.op.family().name()),
            ));
        }
        let p = print::print_for(&graph, opset)?;
        let mut h = Sha256::new();
        h.update(p.mil.as_bytes());
        p.weights
            .stream::<()>(|b| {
                h.update(b);
                Ok(())
            })
            .expect("infallible sink");
        let sha256 = hex(&h.finalize());
        Ok(Program {
            graph,
            mil: p.mil,
            weights: p.weights,
            sha256,
            opset,
        })
    }

    /// Input ports in feeding order.
    pub fn inputs(&self) -> Vec<PortSpec> {
        let g = &self.graph;
        g.inputs
            .iter()
            .map(|&i| PortSpec {
                name: g.input_name(i).to_string(),
                dtype: g.nodes[i].outputs[0].dtype,
                shape: g.nodes[i].outputs[0].shape.clone(),
            })
            .collect()
    }

    /// Output ports in order.
    pub fn outputs(&self) -> Vec<PortSpec> {
        let g = &self.graph;
        g.outputs
            .iter()
            .map(|(n, v)| PortSpec {
                name: n.clone(),
                dtype: g.ty(*v).dtype,
                shape: g.ty(*v).shape.clone(),
            })
            .collect()
    }

    /// The manifest describing this program.
    pub fn manifest(&self) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            aneforge_version: env!("CARGO_PKG_VERSION").into(),
            opset: self.opset.name().into(),
            sha256: self.sha256.clone(),
            inputs: self.inputs(),
            outputs: self.outputs(),
        }
    }

    /// Write into `<root>/<key>/` (content-addressed, atomic: temp dir + rename; an existing
    /// complete directory is reused). Returns the directory.
    pub fn write_cached(&self, root: &Path) -> Result<PathBuf> {
        let dir = root.join(&self.sha256[..KEY_LEN]);
        if self.matches_dir(&dir) {
            return Ok(dir);
        }
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        files::sweep_stale_temps(root);
        let tmp = root.join(format!(
            ".tmp-{}-{}-{}",
            &self.sha256[..12],
            std::process::id(),
            unique()
        ));
        std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let result = self
            .write_files(&tmp)
            .and_then(|_| match std::fs::rename(&tmp, &dir) {
                Ok(()) => Ok(()),
                // Another process won the race: its directory holds the same bytes.
                Err(_) if self.matches_dir(&dir) => Ok(()),
                Err(e) => Err(Error::io(&dir, e)),
            });
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result.map(|_| dir)
    }

    /// Write into a user-chosen directory, each file atomically (temp file + rename).
    pub fn write_to(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        self.write_files(dir)?;
        Ok(dir.to_path_buf())
    }

    fn write_files(&self, dir: &Path) -> Result<()> {
        let manifest = serde_json::to_string_pretty(&self.manifest()).expect("manifest serialises");
        write_atomic(&dir.join("model.mil"), |f| f.write_all(self.mil.as_bytes()))?;
        write_atomic(&dir.join("weights.bin"), |f| {
            self.weights.stream(|b| f.write_all(b))
        })?;
        write_atomic(&dir.join("program.json"), |f| {
            f.write_all(manifest.as_bytes())
        })
    }

    fn matches_dir(&self, dir: &Path) -> bool {
        let same_mil =
            files::read_regular(&dir.join("model.mil")).is_ok_and(|b| b == self.mil.as_bytes());
        let same_len =
            std::fs::metadata(dir.join("weights.bin")).is_ok_and(|m| m.len() == self.weights.len());
        same_mil && same_len && dir.join("program.json").is_file()
    }

    /// Read and parse a program directory (ours, or the same dialect written elsewhere: any
    /// opset and weight files under `@model_path/`), checking the blobs and, when present, the
    /// manifest's hash of the files and its ports; the result is the graph re-lowered to our
    /// canonical text for the program's own opset.
    pub fn load_dir(dir: &Path) -> Result<Program> {
        let mil_path = dir.join("model.mil");
        let w_path = dir.join("weights.bin");
        let mil = files::read_regular_text(&mil_path)?;
        let weights = match files::read_regular(&w_path) {
            Ok(b) => Some(b),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let mut resolve = |path: &str| -> Result<parse::WeightFile<'_>> {
            let file = parse::weight_file(dir, &mil_path, path)?;
            match &weights {
                Some(b) if file == w_path => Ok((Cow::Borrowed(b.as_slice()), file)),
                _ => files::read_regular(&file).map(|b| (Cow::Owned(b), file.clone())),
            }
        };
        let parsed = parse::parse_program(&mil, &mil_path, &mut resolve)?;
        let mut h = Sha256::new();
        h.update(mil.as_bytes());
        h.update(weights.as_deref().unwrap_or_default());
        let file_sha = hex(&h.finalize());
        let prog = Program::lower_for(parsed.graph, parsed.opset)?;
        let m_path = dir.join("program.json");
        if m_path.exists() {
            let text = files::read_regular_text(&m_path)?;
            let m: Manifest = serde_json::from_str(&text)
                .map_err(|e| Error::format(&m_path, None, e.to_string()))?;
            if m.sha256 != file_sha {
                return Err(Error::format(
                    &m_path,
                    None,
                    format!(
                        "sha256 {} does not match model.mil + weights.bin ({file_sha})",
                        m.sha256
                    ),
                ));
            }
            if m.inputs != prog.inputs() || m.outputs != prog.outputs() {
                return Err(Error::format(
                    &m_path,
                    None,
                    "ports differ from the ones model.mil declares",
                ));
            }
        }
        Ok(prog)
    }
}

/// Lower-case hex of a digest.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Write a file through a temporary sibling and a rename, so readers never see a torn file.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}-{}", std::process::id(), unique()));
    let written = std::fs::File::create(&tmp).and_then(|f| {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
        fill(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_data()
    });
    if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

/// The cache root: `ANEFORGE_CACHE_DIR`, else `$XDG_CACHE_HOME/aneforge`, else `~/.cache/aneforge`.
pub fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("ANEFORGE_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("aneforge");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => PathBuf::from(h).join(".cache").join("aneforge"),
        None => std::env::temp_dir().join("aneforge-cache"),
    }
}
