//! The .mlpackage directory: `Manifest.json` naming the model and weights items, the model
//! protobuf and the weight file, assembled in a temporary sibling directory and renamed into
//! place so a reader never sees a partial package.

use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message;
use sha2::{Digest, Sha256};

use super::encode::encode;
use crate::error::{Error, Result};
use crate::program::Program;

/// Package-relative directory of the Core ML items.
pub const DATA_DIR: &str = "Data/com.apple.CoreML";
/// Item path (relative to `Data/`) of the model protobuf.
pub const MODEL_ITEM: &str = "com.apple.CoreML/model.mlmodel";
/// Item path (relative to `Data/`) of the weights directory.
pub const WEIGHTS_ITEM: &str = "com.apple.CoreML/weights";

/// A deterministic upper-case UUID (version 4 layout) derived from the program hash and `salt`.
fn item_id(sha256: &str, salt: &str) -> String {
    let mut b: [u8; 16] = Sha256::digest(format!("{sha256}/{salt}"))[..16]
        .try_into()
        .expect("16 bytes");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02X}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The `Manifest.json` text for a package whose items are identified from `sha256`.
pub fn manifest(sha256: &str) -> String {
    let (model, weights) = (item_id(sha256, "model"), item_id(sha256, "weights"));
    let item = |description: &str, name: &str, path: &str| serde_json::json!({"author": "com.apple.CoreML", "description": description, "name": name, "path": path});
    let m = serde_json::json!({
        "fileFormatVersion": "1.0.0",
        "itemInfoEntries": {
            model.clone(): item("CoreML Model Specification", "model.mlmodel", MODEL_ITEM),
            weights: item("CoreML Model Weights", "weights", WEIGHTS_ITEM),
        },
        "rootModelIdentifier": model,
    });
    serde_json::to_string_pretty(&m).expect("manifest serialises")
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Write `program` as the package `out` (must end in `.mlpackage` and not exist yet; missing
/// parent directories are created). Returns `out`. Errors: Value for a bad name, Io naming the
/// path for an existing target or an unwritable parent, NotImplemented for unexportable ports.
pub fn write_mlpackage(program: &Program, out: &Path) -> Result<PathBuf> {
    if out.extension().is_none_or(|e| e != "mlpackage") {
        return Err(Error::value(
            "export",
            format!(
                "'{}': an .mlpackage path must end in .mlpackage",
                out.display()
            ),
        ));
    }
    if out.symlink_metadata().is_ok() {
        let e = std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "already exists; remove it or choose another path",
        );
        return Err(Error::io(out, e));
    }
    let encoded = encode(program)?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{name}.tmp-{}-{}", std::process::id(), unique()));
    let result = fill(
        &tmp,
        &encoded.model.encode_to_vec(),
        &encoded.weights,
        &manifest(&program.sha256),
    )
    .and_then(|()| match out.symlink_metadata() {
        Ok(_) => Err(Error::io(
            out,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "appeared while exporting; not replaced",
            ),
        )),
        Err(_) => std::fs::rename(&tmp, out).map_err(|e| Error::io(out, e)),
    });
    if tmp.exists() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result.map(|()| out.to_path_buf())
}

/// Write the package files under `root` (which must not exist).
fn fill(root: &Path, model: &[u8], weights: &crate::mil::blob::Blob, manifest: &str) -> Result<()> {
    let data = root.join(DATA_DIR);
    let wdir = data.join("weights");
    std::fs::create_dir(root).map_err(|e| Error::io(root, e))?;
    std::fs::create_dir_all(&wdir).map_err(|e| Error::io(&wdir, e))?;
    let write = |path: PathBuf,
                 fill: &dyn Fn(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>|
     -> Result<()> {
        let done = std::fs::File::create(&path).and_then(|f| {
            let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
            fill(&mut w)?;
            w.into_inner().map_err(|e| e.into_error())?.sync_data()
        });
        done.map_err(|e| Error::io(&path, e))
    };
    write(data.join("model.mlmodel"), &|w| w.write_all(model))?;
    write(wdir.join("weight.bin"), &|w| {
        weights.stream(|b| w.write_all(b))
    })?;
    write(root.join("Manifest.json"), &|w| {
        w.write_all(manifest.as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_ids_are_uuid_shaped_and_distinct() {
        let (a, b) = (item_id("abc", "model"), item_id("abc", "weights"));
        assert_ne!(a, b);
        assert_eq!(a, item_id("abc", "model"));
        let groups: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_eq!(&a[14..15], "4");
        assert!(a
            .chars()
            .all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_lowercase()));
    }

    #[test]
    fn manifest_names_both_items_and_the_root() {
        let m: serde_json::Value = serde_json::from_str(&manifest("abc")).unwrap();
        let root = m["rootModelIdentifier"].as_str().unwrap();
        assert_eq!(m["itemInfoEntries"][root]["path"], MODEL_ITEM);
        assert_eq!(m["itemInfoEntries"].as_object().unwrap().len(), 2);
        assert_eq!(m["fileFormatVersion"], "1.0.0");
    }
}
