//! MIL opset of a program → Core ML specification version and opset name, and how each
//! opset serialises constexpr ops.

use crate::error::{Error, Result};
use crate::program::Program;

/// The Core ML side of one MIL opset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreMlOpset {
    /// The opset as the MIL text names it (`ios18`).
    pub mil: &'static str,
    /// `Model.specificationVersion`.
    pub spec_version: i32,
    /// The function's opset string and block_specializations key (`CoreML8`).
    pub name: &'static str,
}

/// Every opset aneforge can print, with its Core ML spec version and opset name.
pub const OPSETS: &[CoreMlOpset] = &[
    CoreMlOpset {
        mil: "ios16",
        spec_version: 7,
        name: "CoreML6",
    },
    CoreMlOpset {
        mil: "ios17",
        spec_version: 8,
        name: "CoreML7",
    },
    CoreMlOpset {
        mil: "ios18",
        spec_version: 9,
        name: "CoreML8",
    },
];

/// Constexpr ops whose deployed definition at iOS18 is still the iOS16 one.
const IOS16_CONSTEXPR: &[&str] = &["constexpr_affine_dequantize", "constexpr_cast"];

/// How a constexpr op's parameters and tensors are serialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstexprForm {
    /// iOS16 definitions: every argument is an op attribute.
    Attributes,
    /// iOS18 definitions: every argument is an inline input binding.
    Inline,
}

impl CoreMlOpset {
    /// The entry for a MIL opset name; an error lists the known ones.
    pub fn parse(mil: &str) -> Result<CoreMlOpset> {
        OPSETS
            .iter()
            .copied()
            .find(|o| o.mil == mil)
            .ok_or_else(|| {
                let known: Vec<&str> = OPSETS.iter().map(|o| o.mil).collect();
                Error::NotImplemented(format!(
                    "export: opset '{mil}' has no Core ML mapping (known: {})",
                    known.join(", ")
                ))
            })
    }

    /// The opset a lowered program's `func main<...>` header names.
    pub fn of_program(p: &Program) -> Result<CoreMlOpset> {
        let opset = p
            .mil
            .split_once("func main<")
            .and_then(|(_, rest)| rest.split_once('>'))
            .map(|(o, _)| o.trim());
        match opset {
            Some(o) => CoreMlOpset::parse(o),
            None => Err(Error::value(
                "export",
                "the program's MIL text has no `func main<opset>` header",
            )),
        }
    }

    /// `None` for ordinary ops (parameters become named `const` ops), else the constexpr form.
    pub fn constexpr_form(&self, op: &str) -> Option<ConstexprForm> {
        if !op.starts_with("constexpr_") {
            None
        } else if self.spec_version < 9 || IOS16_CONSTEXPR.contains(&op) {
            Some(ConstexprForm::Attributes)
        } else {
            Some(ConstexprForm::Inline)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opset_table_and_constexpr_forms() {
        assert_eq!(CoreMlOpset::parse("ios18").unwrap().name, "CoreML8");
        assert_eq!(CoreMlOpset::parse("ios16").unwrap().spec_version, 7);
        let err = CoreMlOpset::parse("ios15").unwrap_err().to_string();
        assert!(
            err.contains("ios15") && err.contains("ios16, ios17, ios18"),
            "{err}"
        );
        let ios18 = CoreMlOpset::parse("ios18").unwrap();
        assert_eq!(ios18.constexpr_form("relu"), None);
        assert_eq!(
            ios18.constexpr_form("constexpr_lut_to_dense"),
            Some(ConstexprForm::Inline)
        );
        assert_eq!(
            ios18.constexpr_form("constexpr_affine_dequantize"),
            Some(ConstexprForm::Attributes)
        );
        assert_eq!(
            CoreMlOpset::parse("ios17")
                .unwrap()
                .constexpr_form("constexpr_lut_to_dense"),
            Some(ConstexprForm::Attributes)
        );
    }
}
