//! Typed reads of JSON config fields (Hugging Face `config.json` and the like): each error is
//! a Format (or NotImplemented) error naming the file and the field.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

/// Parse a JSON file (a regular file only); I/O and syntax errors name the file.
pub fn json_file(path: &Path) -> Result<Value> {
    let text = crate::program::files::read_regular_text(path)?;
    serde_json::from_str(&text)
        .map_err(|e| Error::format(path, None, format!("not valid JSON: {e}")))
}

/// A required non-negative integer field of a JSON config, or a Format error naming it.
pub fn json_usize(v: &Value, key: &str, path: &Path) -> Result<usize> {
    v.get(key)
        .and_then(Value::as_u64)
        .map(|n| n as usize)
        .ok_or_else(|| {
            Error::format(
                path,
                None,
                format!("field '{key}' is missing or not a non-negative integer"),
            )
        })
}

/// A Format error for config field `key` of `path` that is present but not `expected`.
fn bad_field(path: &Path, key: &str, found: &Value, expected: &str) -> Error {
    Error::format(
        path,
        None,
        format!("field '{key}' is {found}, expected {expected}"),
    )
}

/// A required layer count `key` of a JSON config: an integer in 1..=the layer cap of
/// [`crate::limits`]; 0, negative or non-integer values are Format errors, more than the cap a
/// resource error, each naming the file and the field.
pub fn json_layers(v: &Value, key: &str, path: &Path) -> Result<usize> {
    let found = v.get(key).unwrap_or(&Value::Null);
    let n = found
        .as_i64()
        .map(i128::from)
        .or_else(|| found.as_u64().map(i128::from))
        .filter(|&n| n >= 1)
        .ok_or_else(|| bad_field(path, key, found, "an integer >= 1"))?;
    crate::limits::Limits::current()?.layers(&format!("{}: field '{key}'", path.display()), n)
}

/// An optional non-negative integer field (absent or null = `default`); any other value is a
/// Format error naming the file and the field, never a silent default.
pub fn json_opt_usize(v: &Value, key: &str, default: usize, path: &Path) -> Result<usize> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(found) => found
            .as_u64()
            .map(|n| n as usize)
            .ok_or_else(|| bad_field(path, key, found, "a non-negative integer")),
    }
}

/// An optional finite positive number field such as an epsilon (absent or null = `default`);
/// any other value is a Format error naming the file and the field.
pub fn json_opt_positive(v: &Value, key: &str, default: f64, path: &Path) -> Result<f64> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(found) => found
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| bad_field(path, key, found, "a finite number > 0")),
    }
}

/// An optional boolean field (absent or null = `false`); any other value is a Format error
/// naming the file and the field.
pub fn json_opt_bool(v: &Value, key: &str, path: &Path) -> Result<bool> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(found) => Err(bad_field(path, key, found, "true or false")),
    }
}

/// Check the string field `key` of a JSON config (absent = `supported`) is `supported`; another
/// value is NotImplemented naming the file, the field and the value.
pub fn require_field(v: &Value, key: &str, supported: &str, path: &Path) -> Result<()> {
    match v.get(key).and_then(Value::as_str) {
        Some(found) if found != supported => Err(Error::NotImplemented(format!(
            "{}: {key} '{found}' is not supported ('{supported}' is)",
            path.display()
        ))),
        _ => Ok(()),
    }
}
