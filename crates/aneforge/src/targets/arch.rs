//! The 28 arch strings the ANE compiler accepts (`TargetArchitecture=`), their families, and
//! parsing a user's target (an arch string or a family name).

use super::Family;
use crate::error::{Error, Result};

/// Every arch string with its family; `None` marks the unmapped reference targets `u1`..`u3`.
pub const ARCHES: &[(&str, Option<Family>)] = &[
    ("h11", Some(Family::Older)),
    ("h12", Some(Family::Older)),
    ("m9", Some(Family::Older)),
    ("t0", Some(Family::Older)),
    ("h13", Some(Family::A13)),
    ("h13g", Some(Family::A13)),
    ("t1", Some(Family::A13)),
    ("h14", Some(Family::A14)),
    ("h14g", Some(Family::A14)),
    ("h14c", Some(Family::A14)),
    ("h15", Some(Family::A15)),
    ("h15g", Some(Family::A15)),
    ("h15c", Some(Family::A15)),
    ("m11", Some(Family::A15)),
    ("h16", Some(Family::A16)),
    ("h16g", Some(Family::A16)),
    ("h16c", Some(Family::A16)),
    ("h16s", Some(Family::A16)),
    ("h17", Some(Family::A16)),
    ("h17a", Some(Family::A16)),
    ("h17g", Some(Family::A16)),
    ("h17s", Some(Family::A16)),
    ("h17c", Some(Family::A16)),
    ("h17d", Some(Family::A16)),
    ("h18", Some(Family::A16)),
    ("u1", None),
    ("u2", None),
    ("u3", None),
];

/// A compile target: the family and, when given as one, the arch string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub arch: Option<&'static str>,
    pub family: Family,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.arch {
            Some(a) => write!(f, "{} ({a})", self.family),
            None => write!(f, "{}", self.family),
        }
    }
}

/// An arch string (`h13`, `h16s` ...), family name (`A13`..`A16`, `OLDER`) or M-series chip name
/// (`M1`, `M5 Pro`, see [`chip_arch`]), case-insensitive; unknown and unmapped names are errors
/// that list the accepted ones (never a host fallback).
pub fn parse_target(s: &str) -> Result<Target> {
    let a = s.trim().to_ascii_lowercase();
    if let Some(family) = Family::ALL
        .into_iter()
        .find(|f| f.name().eq_ignore_ascii_case(&a))
    {
        return Ok(Target { arch: None, family });
    }
    let a = chip_arch(&a).unwrap_or(a);
    match ARCHES.iter().find(|(name, _)| *name == a) {
        Some((arch, Some(family))) => Ok(Target {
            arch: Some(arch),
            family: *family,
        }),
        Some((arch, None)) => Err(Error::value(
            "target",
            format!(
                "'{arch}' is a reference arch with no ANE family; expected one of {}",
                known()
            ),
        )),
        None => Err(Error::value(
            "target",
            format!(
                "'{s}' is not a known ANE arch; expected one of {}, a family A13, A14, A15, A16 or an M-series chip M1 … M6 (optionally Pro, Max, Ultra)",
                known()
            ),
        )),
    }
}

/// The arch of an Apple M-series chip name (`M1`, `m4`, `M2 Pro`, case and spaces free):
/// M<n> is H<n + 12> (spec §3: M1 = h13 … M5 = h17), except the measured M5 Pro (`h17s`);
/// `None` for any other name (arch strings such as `m9` and `m11` are not chip names).
pub fn chip_arch(name: &str) -> Option<String> {
    let compact: String = name
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    let rest = compact.strip_prefix('m')?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let tier = &rest[digits.len()..];
    let n: u32 = digits.parse().ok()?;
    if !(1..=6).contains(&n) || !["", "pro", "max", "ultra"].contains(&tier) {
        return None;
    }
    Some(match (n, tier) {
        (5, "pro") => "h17s".to_string(),
        _ => format!("h{}", n + 12),
    })
}

/// The mapped arch strings, comma-separated.
fn known() -> String {
    ARCHES
        .iter()
        .filter(|(_, f)| f.is_some())
        .map(|(a, _)| *a)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_28_arch_strings() {
        assert_eq!(ARCHES.len(), 28);
        let count = |f: Option<Family>| ARCHES.iter().filter(|(_, g)| *g == f).count();
        assert_eq!(
            [
                Family::Older,
                Family::A13,
                Family::A14,
                Family::A15,
                Family::A16
            ]
            .map(|f| count(Some(f))),
            [4, 3, 3, 4, 11]
        );
        assert_eq!(count(None), 3);
        for (arch, family) in ARCHES {
            match family {
                Some(f) => assert_eq!(
                    parse_target(&arch.to_ascii_uppercase()).unwrap(),
                    Target {
                        arch: Some(arch),
                        family: *f
                    }
                ),
                None => assert!(
                    parse_target(arch)
                        .unwrap_err()
                        .to_string()
                        .contains("no ANE family"),
                    "{arch}"
                ),
            }
        }
    }

    #[test]
    fn family_names_and_unknown_strings() {
        assert_eq!(
            parse_target("a16").unwrap(),
            Target {
                arch: None,
                family: Family::A16
            }
        );
        assert_eq!(parse_target("OLDER").unwrap().family, Family::Older);
        assert_eq!(parse_target("h17s").unwrap().to_string(), "A16 (h17s)");
        for bad in ["h99", "", "m7", "m1 mini", "h13x"] {
            let e = parse_target(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("'{bad}' is not a known ANE arch"))
                    && e.contains("h16s")
                    && e.contains("M-series chip M1 … M6"),
                "{e}"
            );
        }
    }
}
