//! `CompileOptions`: the one compile-options type every front end fills (Rust API, Python
//! bindings, CLI). Its defaults live in `Default` only; each option is parsed and checked here,
//! once, with one error text, whether it comes from a struct literal ([`CompileOptions::validate`])
//! or from a string key ([`CompileOptions::set`]).

use std::path::PathBuf;

use crate::compress::{self, Compress};
use crate::error::{Error, Result};
use crate::exec::Precision;
use crate::targets::{self, Opset};

/// Where to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// The ANE when its executor's check passes, else the reference executor (with a one-time notice).
    #[default]
    Auto,
    /// The ANE or an error naming the step that failed.
    Ane,
    /// The CPU reference executor.
    Reference,
}

impl Device {
    /// Parse `auto`, `ane`, `reference` (alias `cpu`); other names are a Value error listing them.
    pub fn parse(s: &str) -> Result<Device> {
        match s {
            "auto" => Ok(Device::Auto),
            "ane" => Ok(Device::Ane),
            "reference" | "cpu" => Ok(Device::Reference),
            _ => Err(Error::value(
                "compile",
                format!("unknown device '{s}' (expected auto, ane, reference or cpu)"),
            )),
        }
    }

    /// The canonical spelling: `auto`, `ane` or `reference`.
    pub fn name(self) -> &'static str {
        match self {
            Device::Auto => "auto",
            Device::Ane => "ane",
            Device::Reference => "reference",
        }
    }
}

/// Options of [`crate::compile`], [`crate::export`], [`crate::load_dir_with`], the model loaders
/// and the numerics plans. Build it with `..Default::default()` or [`CompileOptions::set`].
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    /// The executor (`device`).
    pub device: Device,
    /// fp16 contract or fp32 (reference executor only) (`precision`).
    pub precision: Precision,
    /// Write the program here instead of the content-addressed cache (`build_dir`).
    pub build_dir: Option<PathBuf>,
    /// Compress the weights (see [`crate::compress`]); `None` keeps them fp16 (`compress`, alias `int8=true`).
    pub compress: Option<Compress>,
    /// Relative L2 error budget per weight for the gated encodings (int4, blockwise), in (0, 1] (`compress_atol`).
    pub compress_atol: f32,
    /// Blockwise int8 block length along a weight's inner axis, >= 1; it must divide that axis (`block_size`).
    pub block_size: usize,
    /// Arch string or family name to gate on (see [`targets::compile_target`]): `None` = `ANEFORGE_TARGET`,
    /// else the host's family on an Apple Silicon Mac, else no gating (`target`).
    pub target: Option<String>,
    /// MIL function opset (`ios16`, `ios17`, `ios18`): `None` = the newest the host's macOS loads
    /// (macOS 14 rejects ios18), else ios18. Ops the opset lacks are decomposed or rejected (`opset`).
    pub opset: Option<String>,
    /// Rewrite sum-like reductions as matmuls with ones (see [`crate::passes::reduce_to_matmul`]) (`sum_via_matmul`).
    pub sum_via_matmul: bool,
    /// Where host ops with a fused decomposition run (see [`crate::plan::route`]) (`route`).
    pub route: Route,
    /// Query tiles of every attention built by `sdpa` / `mha` / `cross_attention` (see
    /// [`crate::plan::retile`]): `None` = each builder's heuristic, else 1 ≤ k ≤ its query rows (`attention_tiles`).
    pub attention_tiles: Option<usize>,
}

/// The `route` option: `Auto` decomposes a routable host op (minmax_norm, flatten, sdpa, take
/// with constant indices) when that removes a cut, `Fused` always, `Host` never.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Fused when that removes a cut (the default).
    Auto,
    /// Always the fused decomposition.
    Fused,
    /// Always the host op.
    Host,
}

impl Route {
    /// `"auto" | "fused" | "host"`; anything else is a value error listing them.
    pub fn parse(s: &str) -> Result<Route> {
        match s {
            "auto" => Ok(Route::Auto),
            "fused" => Ok(Route::Fused),
            "host" => Ok(Route::Host),
            _ => Err(Error::value(
                "compile",
                format!("route must be \"auto\", \"fused\" or \"host\", got {s:?}"),
            )),
        }
    }
    /// The option spelling.
    pub fn name(self) -> &'static str {
        match self {
            Route::Auto => "auto",
            Route::Fused => "fused",
            Route::Host => "host",
        }
    }
}

impl Default for CompileOptions {
    /// The only place the defaults are spelled: auto device, fp16, the cache, no compression
    /// (budget 0.05 and block 32 once enabled), target from the environment, host opset, no sum
    /// rewrite, auto routes, heuristic attention tiles.
    fn default() -> Self {
        CompileOptions {
            device: Device::Auto,
            precision: Precision::Fp16,
            build_dir: None,
            compress: None,
            compress_atol: 0.05,
            block_size: 32,
            target: None,
            opset: None,
            sum_via_matmul: false,
            route: Route::Auto,
            attention_tiles: None,
        }
    }
}

/// A value handed to [`CompileOptions::set`] by a front end: typed (Python) or text (CLI flags).
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    /// No value (Python `None`): the option's default.
    Default,
    /// A boolean (`true`/`false`, `1`/`0` as text).
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A real number.
    Float(f64),
    /// Text; numbers and booleans given as text are parsed.
    Str(String),
    /// A filesystem path (`build_dir`).
    Path(PathBuf),
}

impl From<&str> for OptionValue {
    fn from(s: &str) -> Self {
        OptionValue::Str(s.to_string())
    }
}
/// `From<T>` for the variants that hold a `T` as is.
macro_rules! option_value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for OptionValue {
            fn from(v: $t) -> Self {
                OptionValue::$variant(v)
            }
        }
    )*};
}
option_value_from!(String => Str, bool => Bool, i64 => Int, f64 => Float, PathBuf => Path);
impl<T: Into<OptionValue>> From<Option<T>> for OptionValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(OptionValue::Default, Into::into)
    }
}

impl OptionValue {
    /// `kind value` for error messages (`int 3`, `str 'x'`).
    fn describe(&self) -> String {
        match self {
            OptionValue::Default => "None".into(),
            OptionValue::Bool(b) => format!("bool {b}"),
            OptionValue::Int(v) => format!("int {v}"),
            OptionValue::Float(v) => format!("float {v}"),
            OptionValue::Str(s) => format!("str '{s}'"),
            OptionValue::Path(p) => format!("path '{}'", p.display()),
        }
    }

    fn wrong_type(&self, key: &str, expected: &str) -> Error {
        Error::dtype(
            "compile",
            format!("option {key} must be {expected}, got {}", self.describe()),
        )
    }

    fn text(&self, key: &str) -> Result<&str> {
        match self {
            OptionValue::Str(s) => Ok(s),
            _ => Err(self.wrong_type(key, "a string")),
        }
    }

    fn boolean(&self, key: &str) -> Result<bool> {
        match self {
            OptionValue::Bool(b) => Ok(*b),
            OptionValue::Str(s) if matches!(s.as_str(), "true" | "1") => Ok(true),
            OptionValue::Str(s) if matches!(s.as_str(), "false" | "0") => Ok(false),
            _ => Err(self.wrong_type(key, "a bool")),
        }
    }

    fn integer(&self, key: &str) -> Result<i64> {
        match self {
            OptionValue::Int(v) => Ok(*v),
            OptionValue::Str(s) => s.trim().parse().map_err(|_| self.wrong_type(key, "an int")),
            _ => Err(self.wrong_type(key, "an int")),
        }
    }

    fn real(&self, key: &str) -> Result<f64> {
        match self {
            OptionValue::Float(v) => Ok(*v),
            OptionValue::Int(v) => Ok(*v as f64),
            OptionValue::Str(s) => s
                .trim()
                .parse()
                .map_err(|_| self.wrong_type(key, "a number")),
            _ => Err(self.wrong_type(key, "a number")),
        }
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        match self {
            OptionValue::Path(p) => Ok(p.clone()),
            OptionValue::Str(s) => Ok(PathBuf::from(s)),
            _ => Err(self.wrong_type(key, "a path")),
        }
    }
}

/// The `int8=true` alias against the `compress` mode already chosen.
fn int8_alias(compress: Option<Compress>) -> Result<Compress> {
    match compress {
        None | Some(Compress::Int8) => Ok(Compress::Int8),
        Some(m) => Err(Error::value(
            "compile",
            format!(
                "int8=True means compress='int8', which conflicts with compress='{}'",
                compress_name(m)
            ),
        )),
    }
}

/// The `compress=` spelling of a mode.
fn compress_name(m: Compress) -> &'static str {
    match m {
        Compress::Int8 => "int8",
        Compress::Int4 => "int4",
        Compress::Sparse => "sparse",
        Compress::Blockwise => "blockwise",
        Compress::Auto => "auto",
    }
}

impl CompileOptions {
    /// The option fields, in declaration order (what [`CompileOptions::get`] reads).
    pub const FIELDS: [&'static str; 11] = [
        "device",
        "precision",
        "build_dir",
        "compress",
        "compress_atol",
        "block_size",
        "target",
        "opset",
        "sum_via_matmul",
        "route",
        "attention_tiles",
    ];

    /// Every key [`CompileOptions::set`] accepts: the fields plus `int8` (alias of
    /// `compress='int8'`) and `opt` (not implemented: only 0 is accepted).
    pub const KEYS: [&'static str; 13] = {
        let mut keys = [""; 13];
        let mut i = 0;
        while i < Self::FIELDS.len() {
            keys[i] = Self::FIELDS[i];
            i += 1;
        }
        keys[11] = "int8";
        keys[12] = "opt";
        keys
    };

    /// Set option `key` from a front end's value: checked here with the option's one error text;
    /// `OptionValue::Default` restores the default. Unknown keys are a Value error naming the key
    /// and listing [`CompileOptions::KEYS`]; a value of the wrong kind is a DType error;
    /// `int8=true` conflicts with another `compress` already set (pass `int8` last, or use [`CompileOptions::apply`]).
    pub fn set(&mut self, key: &str, value: impl Into<OptionValue>) -> Result<()> {
        let value = value.into();
        if value == OptionValue::Default {
            return self.reset(key);
        }
        let v = &value;
        match key {
            "device" => self.device = Device::parse(v.text(key)?)?,
            "precision" => self.precision = Precision::parse(v.text(key)?)?,
            "build_dir" => self.build_dir = Some(v.path(key)?),
            "compress" => self.compress = Some(Compress::parse(v.text(key)?)?),
            "compress_atol" => self.compress_atol = compress::check_atol(v.real(key)? as f32)?,
            "block_size" => self.block_size = compress::check_block_size(v.integer(key)?)?,
            "target" => {
                let t = v.text(key)?;
                targets::parse_target(t)?;
                self.target = Some(t.to_string());
            }
            "opset" => {
                let o = v.text(key)?;
                Opset::parse(o)?;
                self.opset = Some(o.to_string());
            }
            "sum_via_matmul" => self.sum_via_matmul = v.boolean(key)?,
            "route" => self.route = Route::parse(v.text(key)?)?,
            "attention_tiles" => {
                self.attention_tiles = match v {
                    OptionValue::Str(s) if s == "auto" => None,
                    _ => Some(check_attention_tiles(v.integer(key)?)?),
                }
            }
            "int8" => {
                if v.boolean(key)? {
                    self.compress = Some(int8_alias(self.compress)?);
                }
            }
            "opt" => {
                if v.integer(key).ok() != Some(0) {
                    return Err(Error::NotImplemented(
                        "compile: the opt= option is not implemented yet".into(),
                    ));
                }
            }
            _ => return Err(unknown_key(key)),
        }
        Ok(())
    }

    /// `key` back to its default (`int8` and `opt` have no state).
    fn reset(&mut self, key: &str) -> Result<()> {
        let d = CompileOptions::default();
        match key {
            "device" => self.device = d.device,
            "precision" => self.precision = d.precision,
            "build_dir" => self.build_dir = d.build_dir,
            "compress" => self.compress = d.compress,
            "compress_atol" => self.compress_atol = d.compress_atol,
            "block_size" => self.block_size = d.block_size,
            "target" => self.target = d.target,
            "opset" => self.opset = d.opset,
            "sum_via_matmul" => self.sum_via_matmul = d.sum_via_matmul,
            "route" => self.route = d.route,
            "attention_tiles" => self.attention_tiles = d.attention_tiles,
            "int8" | "opt" => {}
            _ => return Err(unknown_key(key)),
        }
        Ok(())
    }

    /// [`CompileOptions::set`] for each pair, with `int8` applied after the others so its
    /// conflict with `compress` does not depend on the order the pairs come in.
    pub fn apply<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a str, OptionValue)>,
    ) -> Result<()> {
        let (alias, rest): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| *k == "int8");
        for (key, value) in rest.into_iter().chain(alias) {
            self.set(key, value)?;
        }
        Ok(())
    }

    /// The defaults with `pairs` applied (see [`CompileOptions::apply`]).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, OptionValue)>) -> Result<Self> {
        let mut opts = CompileOptions::default();
        opts.apply(pairs)?;
        Ok(opts)
    }

    /// Field `key` (one of [`CompileOptions::FIELDS`]) as a front-end value: names as text,
    /// `None` fields as `OptionValue::Default`; unknown keys are the Value error of `set`.
    pub fn get(&self, key: &str) -> Result<OptionValue> {
        Ok(match key {
            "device" => self.device.name().into(),
            "precision" => match self.precision {
                Precision::Fp16 => "fp16",
                Precision::Fp32 => "fp32",
            }
            .into(),
            "build_dir" => self.build_dir.clone().into(),
            "compress" => self.compress.map(compress_name).into(),
            // The shortest decimal that reads back as this f32 (0.05, not 0.05000000074505806).
            "compress_atol" => OptionValue::Float(
                self.compress_atol
                    .to_string()
                    .parse()
                    .unwrap_or(f64::from(self.compress_atol)),
            ),
            "block_size" => i64::try_from(self.block_size).unwrap_or(i64::MAX).into(),
            "target" => self.target.clone().into(),
            "opset" => self.opset.clone().into(),
            "sum_via_matmul" => self.sum_via_matmul.into(),
            "route" => self.route.name().into(),
            "attention_tiles" => self
                .attention_tiles
                .map(|k| i64::try_from(k).unwrap_or(i64::MAX))
                .into(),
            _ => return Err(unknown_key(key)),
        })
    }

    /// Check the fields a struct literal may have set out of range (`compress_atol`,
    /// `block_size`, `target`, `opset`, `attention_tiles`), with the same errors as [`CompileOptions::set`].
    pub fn validate(&self) -> Result<()> {
        compress::check_options(self.compress_atol, self.block_size)?;
        if let Some(k) = self.attention_tiles {
            check_attention_tiles(i64::try_from(k).unwrap_or(i64::MAX))?;
        }
        if let Some(t) = &self.target {
            targets::parse_target(t)?;
        }
        if let Some(o) = &self.opset {
            Opset::parse(o)?;
        }
        Ok(())
    }

    /// A NotImplemented error naming the first field other than `supported` that differs from
    /// its default: for `op`s (the numerics plans) that honour only some options.
    pub fn only(&self, op: &str, supported: &[&str]) -> Result<()> {
        let defaults = CompileOptions::default();
        for key in CompileOptions::FIELDS {
            if !supported.contains(&key) && self.get(key)? != defaults.get(key)? {
                return Err(Error::NotImplemented(format!(
                    "{op}: the {key} option is not implemented here (it takes {})",
                    supported.join(", ")
                )));
            }
        }
        Ok(())
    }
}

/// `k` as an `attention_tiles` count (≥ 1; the upper bound, the query rows, is checked where the
/// attention is decomposed), else a value error naming the option and `k`.
pub fn check_attention_tiles(k: i64) -> Result<usize> {
    usize::try_from(k).ok().filter(|&k| k >= 1).ok_or_else(|| {
        Error::value(
            "compile",
            format!("attention_tiles must be >= 1 (or \"auto\"), got {k}"),
        )
    })
}

/// The Value error for an unknown option name, listing the accepted ones.
fn unknown_key(key: &str) -> Error {
    Error::value(
        "compile",
        format!(
            "unknown option '{key}' (expected one of {})",
            CompileOptions::KEYS.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(key: &str, v: impl Into<OptionValue>) -> String {
        CompileOptions::default()
            .set(key, v)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let d = CompileOptions::default();
        assert_eq!(d.device, Device::Auto);
        assert_eq!(d.precision, Precision::Fp16);
        assert_eq!((d.compress_atol, d.block_size), (0.05, 32));
        assert_eq!(
            (d.compress, d.build_dir, d.target, d.opset),
            (None, None, None, None)
        );
        assert!(!d.sum_via_matmul);
        assert_eq!(d.route, Route::Auto);
        assert_eq!(d.attention_tiles, None);
    }

    #[test]
    fn text_values_set_every_field() {
        let mut o = CompileOptions::default();
        for (k, v) in [
            ("device", "cpu"),
            ("precision", "fp32"),
            ("build_dir", "/tmp/x"),
            ("compress", "int4"),
            ("compress_atol", "0.25"),
            ("block_size", "16"),
            ("target", "h14"),
            ("opset", "ios17"),
            ("sum_via_matmul", "true"),
            ("route", "host"),
            ("attention_tiles", "3"),
        ] {
            o.set(k, v).unwrap();
        }
        let want = CompileOptions {
            device: Device::Reference,
            precision: Precision::Fp32,
            build_dir: Some("/tmp/x".into()),
            compress: Some(Compress::Int4),
            compress_atol: 0.25,
            block_size: 16,
            target: Some("h14".into()),
            opset: Some("ios17".into()),
            sum_via_matmul: true,
            route: Route::Host,
            attention_tiles: Some(3),
        };
        assert_eq!(o, want);
        for k in CompileOptions::FIELDS {
            o.set(k, OptionValue::Default).unwrap();
        }
        assert_eq!(o, CompileOptions::default());
    }

    #[test]
    fn each_bad_value_has_its_one_error() {
        assert_eq!(
            err("route", "gpu"),
            "compile: route must be \"auto\", \"fused\" or \"host\", got \"gpu\""
        );
        assert_eq!(
            err("device", "gpu"),
            "compile: unknown device 'gpu' (expected auto, ane, reference or cpu)"
        );
        assert_eq!(
            err("compress", "int9"),
            "compile: unknown compress mode 'int9' (expected int8, int4, sparse, blockwise or auto)"
        );
        assert_eq!(
            err("compress_atol", 0.0),
            "compile: compress_atol must be in (0, 1], got 0"
        );
        assert_eq!(
            err("compress_atol", 1.5),
            "compile: compress_atol must be in (0, 1], got 1.5"
        );
        assert_eq!(
            err("block_size", 0),
            "compile: block_size must be >= 1, got 0"
        );
        assert_eq!(
            err("block_size", -3),
            "compile: block_size must be >= 1, got -3"
        );
        assert_eq!(
            err("block_size", 2.5),
            "compile: option block_size must be an int, got float 2.5"
        );
        assert!(err("opset", "ios15").contains("unknown opset 'ios15'"));
        for bad in [0, -2] {
            assert_eq!(
                err("attention_tiles", bad),
                format!("compile: attention_tiles must be >= 1 (or \"auto\"), got {bad}")
            );
        }
        assert_eq!(
            err("attention_tiles", "many"),
            "compile: option attention_tiles must be an int, got str 'many'"
        );
        assert!(err("target", "q7").contains("'q7' is not a known ANE arch"));
        assert!(err("precision", "fp8").contains("unknown precision 'fp8'"));
        let unknown = err("devise", "ane");
        assert!(
            unknown.starts_with(
                "compile: unknown option 'devise' (expected one of device, precision,"
            ),
            "{unknown}"
        );
        assert!(unknown.ends_with("int8, opt)"), "{unknown}");
        for opt in [OptionValue::Int(2), "O2".into()] {
            assert!(matches!(
                CompileOptions::default().set("opt", opt),
                Err(Error::NotImplemented(_))
            ));
        }
        CompileOptions::default().set("opt", 0).unwrap();
    }

    #[test]
    fn struct_literals_fail_validate_with_the_setter_texts() {
        let bad = CompileOptions {
            block_size: 0,
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            err("block_size", 0)
        );
        let bad = CompileOptions {
            compress_atol: 0.0,
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            err("compress_atol", 0.0)
        );
        let bad = CompileOptions {
            attention_tiles: Some(0),
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            err("attention_tiles", 0)
        );
    }

    #[test]
    fn int8_alias_conflicts_in_either_order() {
        let pairs = |first: (&'static str, &'static str), second: (&'static str, OptionValue)| {
            vec![(first.0, OptionValue::from(first.1)), second]
        };
        let want = "compile: int8=True means compress='int8', which conflicts with compress='int4'";
        let a = CompileOptions::from_pairs(pairs(("compress", "int4"), ("int8", true.into())));
        assert_eq!(a.unwrap_err().to_string(), want);
        let b = CompileOptions::from_pairs(vec![
            ("int8", OptionValue::Bool(true)),
            ("compress", "int4".into()),
        ]);
        assert_eq!(b.unwrap_err().to_string(), want);
        let ok = CompileOptions::from_pairs(pairs(("compress", "int8"), ("int8", true.into())));
        assert_eq!(ok.unwrap().compress, Some(Compress::Int8));
        let alias = CompileOptions::from_pairs(vec![("int8", OptionValue::Bool(true))]);
        assert_eq!(alias.unwrap().compress, Some(Compress::Int8));
    }

    #[test]
    fn only_names_the_first_unsupported_option() {
        let mut o = CompileOptions::default();
        o.set("device", "reference").unwrap();
        o.only("fft.plan", &["device"]).unwrap();
        o.set("precision", "fp32").unwrap();
        assert_eq!(
            o.only("fft.plan", &["device"]).unwrap_err().to_string(),
            "fft.plan: the precision option is not implemented here (it takes device)"
        );
    }
}
