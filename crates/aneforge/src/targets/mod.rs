//! ANE targets: the compiler's 28 arch strings and 5 families ([`arch`]), op floors ([`floors`]),
//! numeric limits ([`limits`]), the static [`preflight`] gate, natively streamed weight encodings,
//! and host detection.

pub mod arch;
pub mod floors;
pub mod limits;
pub mod opset_table;
pub mod preflight;

use std::sync::Once;

use crate::error::Result;
use crate::ops::constexpr::Encoding;
pub use arch::{chip_arch, parse_target, Target};
pub use floors::{op_floor, op_status, Status};
pub use limits::{limit, Limit};
pub use opset_table::Opset;
pub use preflight::{preflight, require_mil, OpEntry, Oversize, Preflight};

/// An ANE generation with the same compiler behaviour (ordered oldest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Pre-M1 chips (`h11`, `h12`, `m9`, `t0`): below the MIL floor, nothing compiles.
    Older,
    /// M1 (`h13`).
    A13,
    /// M2 (`h14`).
    A14,
    /// M3 (`h15`).
    A15,
    /// M4 and M5 (`h16`, `h17`).
    A16,
}

impl Family {
    /// Every family, oldest first.
    pub const ALL: [Family; 5] = [
        Family::Older,
        Family::A13,
        Family::A14,
        Family::A15,
        Family::A16,
    ];

    /// The family's name (`OLDER`, `A13` ... `A16`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Older => "OLDER",
            Family::A13 => "A13",
            Family::A14 => "A14",
            Family::A15 => "A15",
            Family::A16 => "A16",
        }
    }

    /// The family of an `Apple M<n>` CPU brand string (M1 → A13, M2 → A14, M3 → A15, M4/M5 → A16).
    pub fn from_brand(brand: &str) -> Option<Family> {
        let rest = brand.trim().strip_prefix("Apple M")?;
        let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        match n.parse::<u32>().ok()? {
            1 => Some(Family::A13),
            2 => Some(Family::A14),
            3 => Some(Family::A15),
            4 | 5 => Some(Family::A16),
            _ => None,
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Encodings a family streams compressed from DRAM (the others it folds back to fp16 at compile time; OLDER: none).
pub fn native_streams(family: Family) -> &'static [Encoding] {
    match family {
        Family::Older => &[],
        Family::A13 => &[Encoding::Int4, Encoding::Sparse],
        Family::A14 => &[Encoding::Int4, Encoding::Int8, Encoding::Sparse],
        Family::A15 | Family::A16 => &[
            Encoding::Int4,
            Encoding::Int8,
            Encoding::Sparse,
            Encoding::Blockwise,
        ],
    }
}

/// The family from an `ANEFORGE_TARGET` value (an arch or family name), else a CPU brand string, else A13 plus a notice.
pub fn detect(target: Option<&str>, brand: Option<&str>) -> Result<(Family, Option<String>)> {
    if let Some(t) = target.filter(|t| !t.trim().is_empty()) {
        return parse_target(t).map(|t| (t.family, None));
    }
    match brand.and_then(Family::from_brand) {
        Some(f) => Ok((f, None)),
        None => {
            let seen = brand.map_or("no Apple CPU".to_string(), |b| {
                format!("CPU '{}'", b.trim())
            });
            Ok((Family::A13, Some(format!("aneforge: assuming target family A13 ({seen}; set ANEFORGE_TARGET to an arch such as h16 to choose)"))))
        }
    }
}

/// The CPU brand string (`sysctl machdep.cpu.brand_string`) on macOS, else `None`.
fn host_brand() -> Option<String> {
    if !cfg!(target_os = "macos") {
        return None;
    }
    std::process::Command::new("sysctl")
        .args(["-n", "machdep.cpu.brand_string"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `ANEFORGE_TARGET` when set and non-empty.
fn env_target() -> Option<String> {
    std::env::var("ANEFORGE_TARGET")
        .ok()
        .filter(|t| !t.trim().is_empty())
}

/// The target to gate a compile on: `target`, else `ANEFORGE_TARGET`, else an Apple Silicon
/// host's family; `None` (no gating) on other hosts. Unknown names are errors.
pub fn compile_target(target: Option<&str>) -> Result<Option<Target>> {
    match target.map(str::to_string).or_else(env_target) {
        Some(t) => parse_target(&t).map(Some),
        None => Ok(host_brand()
            .as_deref()
            .and_then(Family::from_brand)
            .map(|family| Target { arch: None, family })),
    }
}

/// The host's family via [`detect`] (`sysctl` brand on macOS); the A13 notice prints once unless `ANEFORGE_QUIET`.
pub fn detect_host() -> Result<Family> {
    static NOTICE: Once = Once::new();
    let (family, notice) = detect(env_target().as_deref(), host_brand().as_deref())?;
    if let Some(n) = notice.filter(|_| std::env::var_os("ANEFORGE_QUIET").is_none()) {
        NOTICE.call_once(|| eprintln!("{n}"));
    }
    Ok(family)
}

#[cfg(test)]
mod host_tests {
    use super::*;

    #[test]
    fn brand_strings_and_fallback() {
        assert_eq!(Family::from_brand("Apple M1 Max"), Some(Family::A13));
        assert_eq!(Family::from_brand("Apple M2"), Some(Family::A14));
        assert_eq!(Family::from_brand("Apple M3 Pro\n"), Some(Family::A15));
        assert_eq!(Family::from_brand("Apple M5 Pro"), Some(Family::A16));
        assert_eq!(Family::from_brand("Apple M10"), None);
        assert_eq!(Family::from_brand("Intel(R) Core(TM) i9"), None);
        assert_eq!(
            detect(Some("h15"), Some("Apple M1")).unwrap(),
            (Family::A15, None)
        );
        assert_eq!(
            detect(Some(" "), Some("Apple M4 Max")).unwrap(),
            (Family::A16, None)
        );
        let (f, notice) = detect(None, None).unwrap();
        assert_eq!(f, Family::A13);
        assert!(notice.unwrap().contains("assuming target family A13"));
        assert!(detect(Some("zz"), None).is_err());
        assert_eq!(detect(Some("h12"), None).unwrap().0, Family::Older);
        assert_eq!(
            compile_target(Some("h14c")).unwrap(),
            Some(Target {
                arch: Some("h14c"),
                family: Family::A14
            })
        );
        assert!(compile_target(Some("u2")).is_err());
    }

    #[test]
    fn streaming_table() {
        assert!(!native_streams(Family::A13).contains(&Encoding::Int8));
        assert!(
            native_streams(Family::A14).contains(&Encoding::Int8)
                && !native_streams(Family::A14).contains(&Encoding::Blockwise)
        );
        assert_eq!(native_streams(Family::A15).len(), 4);
        assert!(native_streams(Family::A16).contains(&Encoding::Blockwise));
        assert!(native_streams(Family::Older).is_empty());
    }
}

#[cfg(test)]
mod tests;
