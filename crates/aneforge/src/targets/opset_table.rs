//! MIL function opsets (`ios16`, `ios17`, `ios18`): which one a program is printed for, the
//! `program(1.x)` header that goes with it, and which ops exist in each (from coremltools 9.0's
//! op registry, reference `mil-ops-ios18.txt`, availability columns iOS16/iOS17/iOS18).
//!
//! Facts and gaps:
//! - `program(1.3)` with `main<ios18>` and `program(1.3)` with `main<ios17>` are both recorded
//!   (ane-dispatch §8 "MIL version", §9.1). No reference records the header version that goes
//!   with `ios16`; we print `program(1.0)`, the oldest version the parser accepts, and say so in
//!   [`Opset::program_version`].
//! - macOS 14 rejects `ios18` programs (issue 2). The reference documents give no table from
//!   macOS versions to opsets; [`Opset::for_macos`] uses Apple's OS release alignment (iOS 16 =
//!   macOS 13, iOS 17 = macOS 14, iOS 18 = macOS 15), an assumption not checked on hardware here.

use crate::error::{Error, Result};

/// A MIL function opset, ordered oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Opset {
    /// `ios16` (CoreML6).
    Ios16,
    /// `ios17` (CoreML7).
    Ios17,
    /// `ios18` (CoreML8).
    Ios18,
}

/// MIL ops that do not exist in every opset: (op, first opset that has it). From the
/// availability columns of `mil-ops-ios18.txt`; every other registry op exists from iOS16 on.
const FIRST_AVAILABLE: &[(&str, Opset)] = &[
    ("dequantize", Opset::Ios17),
    ("quantize", Opset::Ios17),
    ("resize", Opset::Ios17),
    ("constexpr_blockwise_shift_scale", Opset::Ios18),
    ("constexpr_lut_to_sparse", Opset::Ios18),
    ("constexpr_sparse_blockwise_shift_scale", Opset::Ios18),
    ("read_state", Opset::Ios18),
    ("write_state", Opset::Ios18),
    ("scaled_dot_product_attention", Opset::Ios18),
    ("slice_update", Opset::Ios18),
];

/// Constexpr ops whose iOS18 definition changed the signature we print (iOS16/17 take packed
/// uint8 indices or masks plus a `shape` attribute; `mil-ops-ios18.txt` "history" column).
const REDEFINED_AT_IOS18: &[&str] = &[
    "constexpr_lut_to_dense",
    "constexpr_sparse_to_dense",
    "constexpr_cast",
];

impl Opset {
    /// Every opset, oldest first.
    pub const ALL: [Opset; 3] = [Opset::Ios16, Opset::Ios17, Opset::Ios18];
    /// The newest opset (the default where the host's macOS version is unknown).
    pub const LATEST: Opset = Opset::Ios18;

    /// The MIL spelling: `ios16`, `ios17` or `ios18`.
    pub const fn name(self) -> &'static str {
        match self {
            Opset::Ios16 => "ios16",
            Opset::Ios17 => "ios17",
            Opset::Ios18 => "ios18",
        }
    }

    /// Parse `ios16` / `ios17` / `ios18` (case-insensitive); other names are a `Value` error listing them.
    pub fn parse(s: &str) -> Result<Opset> {
        Opset::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::value(
                    "opset",
                    format!("unknown opset '{s}' (expected ios16, ios17 or ios18)"),
                )
            })
    }

    /// The `program(1.x)` version printed with this opset: 1.3 for ios17 and ios18 (recorded);
    /// 1.0 for ios16 (no reference records it: an assumption, see the module doc).
    pub fn program_version(self) -> &'static str {
        match self {
            Opset::Ios16 => "1.0",
            Opset::Ios17 | Opset::Ios18 => "1.3",
        }
    }

    /// The newest opset a macOS major version loads (≤ 13 → ios16, 14 → ios17, ≥ 15 → ios18).
    pub fn for_macos(major: u32) -> Opset {
        match major {
            0..=13 => Opset::Ios16,
            14 => Opset::Ios17,
            _ => Opset::Ios18,
        }
    }

    /// `opset` when given, else the host's (macOS `sw_vers -productVersion`), else [`Opset::LATEST`].
    pub fn resolve(opset: Option<&str>) -> Result<Opset> {
        match opset {
            Some(s) => Opset::parse(s),
            None => Ok(host_macos_major().map_or(Opset::LATEST, Opset::for_macos)),
        }
    }

    /// The first opset that has MIL op `op` (ios16 for every op not listed as newer).
    pub fn first_with(op: &str) -> Opset {
        FIRST_AVAILABLE
            .iter()
            .find(|(name, _)| *name == op)
            .map_or(Opset::Ios16, |(_, o)| *o)
    }

    /// Whether `op` exists in this opset with the signature the printer writes (the iOS18
    /// constexpr signatures only at ios18).
    pub fn prints(self, op: &str) -> bool {
        self >= Opset::first_with(op) && (self == Opset::Ios18 || !REDEFINED_AT_IOS18.contains(&op))
    }

    /// An error unless this opset has `op` with our signature; names the op, the opset and the first one that has it.
    pub fn require(self, op: &str) -> Result<()> {
        if self.prints(op) {
            return Ok(());
        }
        let first = if REDEFINED_AT_IOS18.contains(&op) {
            Opset::Ios18
        } else {
            Opset::first_with(op)
        };
        Err(Error::value(op, format!("not available in opset {self} with this signature (first available: {first}); choose opset='{first}' or newer")))
    }
}

impl std::fmt::Display for Opset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The major version of the host's macOS (`sw_vers -productVersion`), `None` elsewhere.
fn host_macos_major() -> Option<u32> {
    if !cfg!(target_os = "macos") {
        return None;
    }
    let out = std::process::Command::new("sw_vers")
        .arg("-productVersion")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .split('.')
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_versions_and_macos_mapping() {
        assert_eq!(Opset::ALL.map(Opset::name), ["ios16", "ios17", "ios18"]);
        assert_eq!(Opset::parse(" IOS17").unwrap(), Opset::Ios17);
        let e = Opset::parse("ios15").unwrap_err().to_string();
        assert!(
            e.contains("unknown opset 'ios15'") && e.contains("ios16, ios17 or ios18"),
            "{e}"
        );
        assert_eq!(
            Opset::ALL.map(Opset::program_version),
            ["1.0", "1.3", "1.3"]
        );
        assert_eq!(
            [12, 13, 14, 15, 26].map(Opset::for_macos),
            [
                Opset::Ios16,
                Opset::Ios16,
                Opset::Ios17,
                Opset::Ios18,
                Opset::Ios18
            ]
        );
        if !cfg!(target_os = "macos") {
            assert_eq!(Opset::resolve(None).unwrap(), Opset::Ios18);
        }
        assert_eq!(Opset::resolve(Some("ios16")).unwrap(), Opset::Ios16);
    }

    #[test]
    fn availability_follows_the_registry_columns() {
        assert!(
            Opset::Ios16.prints("conv")
                && Opset::Ios16.prints("pixel_unshuffle")
                && Opset::Ios16.prints("constexpr_affine_dequantize")
        );
        assert!(!Opset::Ios16.prints("resize") && Opset::Ios17.prints("resize"));
        assert!(
            !Opset::Ios17.prints("scaled_dot_product_attention")
                && Opset::Ios18.prints("scaled_dot_product_attention")
        );
        assert!(
            !Opset::Ios17.prints("constexpr_lut_to_dense")
                && Opset::Ios18.prints("constexpr_lut_to_dense")
        );
        let e = Opset::Ios16
            .require("constexpr_blockwise_shift_scale")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("constexpr_blockwise_shift_scale")
                && e.contains("opset ios16")
                && e.contains("first available: ios18"),
            "{e}"
        );
        let e = Opset::Ios17
            .require("constexpr_sparse_to_dense")
            .unwrap_err()
            .to_string();
        assert!(e.contains("first available: ios18"), "{e}");
        assert!(Opset::Ios16
            .require("quantize")
            .unwrap_err()
            .to_string()
            .contains("first available: ios17"));
    }
}
