//! ANE target families (named by the compiler's arch strings) and what the compiler uses of
//! them so far: which compressed weight encodings a family streams natively, and host detection.

use std::sync::Once;

use crate::compress::Encoding;
use crate::error::{Error, Result};

/// An ANE generation with the same compiler behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// M1 (`h13`).
    A13,
    /// M2 (`h14`).
    A14,
    /// M3 (`h15`).
    A15,
    /// M4 and M5 (`h16`, `h17`).
    A16,
}

/// Arch strings the compiler accepts, by family.
const ARCHES: &[(Family, &[&str])] = &[
    (Family::A13, &["h13", "h13g", "t1"]),
    (Family::A14, &["h14", "h14g", "h14c"]),
    (Family::A15, &["h15", "h15g", "h15c", "m11"]),
    (Family::A16, &["h16", "h16g", "h16c", "h16s", "h17", "h17a", "h17g", "h17s", "h17c", "h17d", "h18"]),
];

/// Arch strings of chips below the MIL floor.
const OLDER: &[&str] = &["h11", "h12", "m9", "t0"];

impl Family {
    /// The family's name (`A13` ... `A16`).
    pub fn name(self) -> &'static str {
        match self {
            Family::A13 => "A13",
            Family::A14 => "A14",
            Family::A15 => "A15",
            Family::A16 => "A16",
        }
    }

    /// The family of an arch string (`h13`, `h16s`, `m11` ...; case-insensitive); errors name it.
    pub fn from_arch(arch: &str) -> Result<Family> {
        let a = arch.trim().to_ascii_lowercase();
        if let Some((f, _)) = ARCHES.iter().find(|(_, names)| names.contains(&a.as_str())) {
            return Ok(*f);
        }
        let known: Vec<&str> = ARCHES.iter().flat_map(|(_, n)| n.iter().copied()).collect();
        let why = if OLDER.contains(&a.as_str()) { "is below the MIL floor (H13 and newer only)" } else { "is not a known ANE arch" };
        Err(Error::value("target", format!("'{arch}' {why}; expected one of {}", known.join(", "))))
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

/// Encodings a family streams compressed from DRAM (the others it folds back to fp16 at compile time).
pub fn native_streams(family: Family) -> &'static [Encoding] {
    match family {
        Family::A13 => &[Encoding::Int4, Encoding::Sparse],
        Family::A14 => &[Encoding::Int4, Encoding::Int8, Encoding::Sparse],
        Family::A15 | Family::A16 => &[Encoding::Int4, Encoding::Int8, Encoding::Sparse, Encoding::Blockwise],
    }
}

/// The family from an `ANEFORGE_TARGET` value, else a CPU brand string, else A13 plus a notice.
pub fn detect(target: Option<&str>, brand: Option<&str>) -> Result<(Family, Option<String>)> {
    if let Some(t) = target.filter(|t| !t.trim().is_empty()) {
        return Family::from_arch(t).map(|f| (f, None));
    }
    match brand.and_then(Family::from_brand) {
        Some(f) => Ok((f, None)),
        None => {
            let seen = brand.map_or("no Apple CPU".to_string(), |b| format!("CPU '{}'", b.trim()));
            Ok((Family::A13, Some(format!("aneforge: assuming target family A13 ({seen}; set ANEFORGE_TARGET to an arch such as h16 to choose)"))))
        }
    }
}

/// The host's family via [`detect`] (`sysctl` brand on macOS); the A13 notice prints once unless `ANEFORGE_QUIET`.
pub fn host_family() -> Result<Family> {
    static NOTICE: Once = Once::new();
    let target = std::env::var("ANEFORGE_TARGET").ok();
    let brand = if cfg!(target_os = "macos") {
        std::process::Command::new("sysctl").args(["-n", "machdep.cpu.brand_string"]).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        None
    };
    let (family, notice) = detect(target.as_deref(), brand.as_deref())?;
    if let Some(n) = notice.filter(|_| std::env::var_os("ANEFORGE_QUIET").is_none()) {
        NOTICE.call_once(|| eprintln!("{n}"));
    }
    Ok(family)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_strings_map_to_families() {
        for (arch, f) in [
            ("h13", Family::A13),
            ("t1", Family::A13),
            ("H14G", Family::A14),
            ("m11", Family::A15),
            ("h16s", Family::A16),
            ("h17s", Family::A16),
            ("h18", Family::A16),
        ] {
            assert_eq!(Family::from_arch(arch).unwrap(), f, "{arch}");
        }
        assert_eq!(ARCHES.iter().map(|(_, n)| n.len()).sum::<usize>(), 21);
        let e = Family::from_arch("h99").unwrap_err().to_string();
        assert!(e.contains("'h99' is not a known ANE arch") && e.contains("h16s"), "{e}");
        assert!(Family::from_arch("h12").unwrap_err().to_string().contains("below the MIL floor"));
        assert!(Family::from_arch("u1").is_err());
    }

    #[test]
    fn brand_strings_and_fallback() {
        assert_eq!(Family::from_brand("Apple M1 Max"), Some(Family::A13));
        assert_eq!(Family::from_brand("Apple M2"), Some(Family::A14));
        assert_eq!(Family::from_brand("Apple M3 Pro\n"), Some(Family::A15));
        assert_eq!(Family::from_brand("Apple M5 Pro"), Some(Family::A16));
        assert_eq!(Family::from_brand("Apple M10"), None);
        assert_eq!(Family::from_brand("Intel(R) Core(TM) i9"), None);
        assert_eq!(detect(Some("h15"), Some("Apple M1")).unwrap(), (Family::A15, None));
        assert_eq!(detect(Some(" "), Some("Apple M4 Max")).unwrap(), (Family::A16, None));
        let (f, notice) = detect(None, None).unwrap();
        assert_eq!(f, Family::A13);
        assert!(notice.unwrap().contains("assuming target family A13"));
        assert!(detect(Some("zz"), None).is_err());
    }

    #[test]
    fn streaming_table() {
        assert!(!native_streams(Family::A13).contains(&Encoding::Int8));
        assert!(native_streams(Family::A14).contains(&Encoding::Int8) && !native_streams(Family::A14).contains(&Encoding::Blockwise));
        assert_eq!(native_streams(Family::A15).len(), 4);
        assert!(native_streams(Family::A16).contains(&Encoding::Blockwise));
    }
}
