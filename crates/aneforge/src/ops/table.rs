//! [`mil_kinds!`]: the one place an enum family spells its MIL op names. From one list of
//! `Variant = "mil_name"` rows it generates a fieldless name enum with `mil_name()`,
//! `from_mil_name()` (the lookup `from_mil` parses with) and `MIL_NAMES` (the registry list).

/// Declares MIL names once. Two forms:
///
/// - `mil_kinds! { /// doc  pub enum Kind { /// doc  A = "a", ... } }` declares the fieldless
///   enum `Kind` itself (for families whose op is a plain kind, e.g. `Binary`).
/// - `mil_kinds! { Op => /// doc  pub enum OpName { A = "a", ... } [delegate V.field] }` declares
///   the fieldless `OpName` with one variant per named variant of the payload enum `Op`, plus
///   `Op::mil_name()`; a `delegate V.field` variant takes its name from `field.mil_name()`.
///
/// Both generate, on the fieldless enum: `ALL`, `MIL_NAMES` (same order), `mil_name()` and
/// `from_mil_name(&str) -> Option<Self>` (`None` for a name not in the list).
macro_rules! mil_kinds {
    ($(#[$meta:meta])* $vis:vis enum $kind:ident {
        $($(#[doc = $doc:literal])* $variant:ident = $name:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $kind {
            $($(#[doc = $doc])* $variant,)+
        }

        impl $kind {
            /// Every kind, in table order.
            pub const ALL: &'static [$kind] = &[$($kind::$variant),+];
            /// The MIL op names, in table order.
            pub const MIL_NAMES: &'static [&'static str] = &[$($name),+];

            /// The MIL op name.
            pub fn mil_name(self) -> &'static str {
                match self {
                    $($kind::$variant => $name,)+
                }
            }

            /// The kind whose MIL op name is `name`; `None` if no row has it.
            pub fn from_mil_name(name: &str) -> Option<$kind> {
                match name {
                    $($name => Some($kind::$variant),)+
                    _ => None,
                }
            }
        }
    };
    ($op:ident => $(#[$meta:meta])* $vis:vis enum $kind:ident {
        $($(#[doc = $doc:literal])* $variant:ident = $name:literal),+ $(,)?
    } $(delegate $dvariant:ident . $dfield:ident)?) => {
        $crate::ops::table::mil_kinds! {
            $(#[$meta])* $vis enum $kind { $($(#[doc = $doc])* $variant = $name),+ }
        }

        impl $op {
            /// The MIL op name.
            pub fn mil_name(&self) -> &'static str {
                match self {
                    $($op::$variant { .. } => $kind::$variant.mil_name(),)+
                    $($op::$dvariant { $dfield, .. } => $dfield.mil_name(),)?
                }
            }
        }
    };
}

pub(crate) use mil_kinds;
