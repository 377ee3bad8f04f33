//! Conformance: the corpus of one small program per MIL op kind, the device selfcheck that runs
//! it against the reference executor, and the op census built from both.

pub mod census;
pub mod corpus;
pub mod selfcheck;
