//! The compile-option flags every compiling command shares: each flag given goes through
//! [`CompileOptions::set`], so the CLI validates and defaults exactly as the Rust and Python APIs.

use std::path::PathBuf;

use crate::error::Result;
use crate::options::{CompileOptions, OptionValue};

/// Compile options as flags; a flag left out keeps the [`CompileOptions::default`] value.
#[derive(clap::Args, Debug, Default)]
pub(super) struct OptionFlags {
    /// Executor: auto, ane or reference (alias cpu).
    #[arg(long)]
    device: Option<String>,
    /// Reference executor numerics: fp16 (the device contract) or fp32.
    #[arg(long)]
    precision: Option<String>,
    /// Relative L2 error budget per weight for int4 and blockwise, in (0, 1].
    #[arg(long, visible_alias = "atol")]
    compress_atol: Option<String>,
    /// Blockwise block length along each weight's inner axis (must divide it).
    #[arg(long)]
    block_size: Option<String>,
    /// Arch string or family to gate on (e.g. h14, A15); default ANEFORGE_TARGET or the host.
    #[arg(long)]
    target: Option<String>,
    /// MIL opset: ios16, ios17 or ios18; default the newest the host loads.
    #[arg(long)]
    opset: Option<String>,
}

impl OptionFlags {
    /// The options with every given flag applied, plus `compress` (a mode) and `build_dir` when
    /// the command has them; errors are the shared option errors naming the flag's option.
    pub(super) fn options(
        &self,
        compress: Option<&str>,
        build_dir: Option<PathBuf>,
    ) -> Result<CompileOptions> {
        let text = |v: &Option<String>| v.as_deref().map(OptionValue::from);
        let pairs = [
            ("device", text(&self.device)),
            ("precision", text(&self.precision)),
            ("compress", compress.map(OptionValue::from)),
            ("compress_atol", text(&self.compress_atol)),
            ("block_size", text(&self.block_size)),
            ("target", text(&self.target)),
            ("opset", text(&self.opset)),
            ("build_dir", build_dir.map(OptionValue::from)),
        ];
        CompileOptions::from_pairs(pairs.into_iter().filter_map(|(k, v)| Some((k, v?))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::Compress;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        flags: OptionFlags,
    }

    fn parse(args: &[&str]) -> Result<CompileOptions> {
        let probe = Probe::try_parse_from(std::iter::once("probe").chain(args.iter().copied()))
            .expect("flags parse");
        probe.flags.options(None, None)
    }

    #[test]
    fn absent_flags_keep_the_defaults_and_given_ones_are_set() {
        assert_eq!(parse(&[]).unwrap(), CompileOptions::default());
        let o = parse(&[
            "--atol",
            "0.25",
            "--block-size",
            "16",
            "--precision",
            "fp32",
        ])
        .unwrap();
        assert_eq!((o.compress_atol, o.block_size), (0.25, 16));
        assert_eq!(o.precision, crate::Precision::Fp32);
        let probe = Probe::try_parse_from(["probe"]).unwrap();
        let o = probe
            .flags
            .options(Some("int8"), Some("out".into()))
            .unwrap();
        assert_eq!(o.compress, Some(Compress::Int8));
        assert_eq!(o.build_dir, Some(PathBuf::from("out")));
    }

    #[test]
    fn bad_values_give_the_shared_option_errors() {
        let mut reference = CompileOptions::default();
        for (flag, key, value) in [
            ("--compress-atol", "compress_atol", "0"),
            ("--block-size", "block_size", "0"),
            ("--device", "device", "gpu"),
            ("--opset", "opset", "ios9"),
        ] {
            let cli = parse(&[flag, value]).unwrap_err().to_string();
            let api = reference.set(key, value).unwrap_err().to_string();
            assert_eq!(cli, api, "{flag}");
        }
    }
}
