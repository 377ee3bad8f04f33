//! The model families (`general.architecture`) the language-model loaders understand.

/// A decoder family named by `general.architecture`; its hyper-parameters live under
/// `<name>.` keys (`llama.block_count`, `qwen2.attention.head_count`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Architecture {
    Llama,
    Qwen2,
    Qwen3,
    Gemma,
    Gemma2,
    Gemma3,
    Gpt2,
}

impl Architecture {
    /// The metadata key naming the architecture.
    pub const KEY: &'static str = "general.architecture";

    /// Every known architecture.
    pub const ALL: [Architecture; 7] = [
        Architecture::Llama,
        Architecture::Qwen2,
        Architecture::Qwen3,
        Architecture::Gemma,
        Architecture::Gemma2,
        Architecture::Gemma3,
        Architecture::Gpt2,
    ];

    /// The name as GGUF writes it (`llama`, `qwen2`, ...), also the key prefix.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
            Architecture::Gemma => "gemma",
            Architecture::Gemma2 => "gemma2",
            Architecture::Gemma3 => "gemma3",
            Architecture::Gpt2 => "gpt2",
        }
    }

    /// The architecture GGUF calls `name`, or `None` if unknown.
    pub fn from_name(name: &str) -> Option<Architecture> {
        Architecture::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The architecture-scoped key `<name>.<suffix>` (e.g. `llama.block_count`).
    pub fn key(self, suffix: &str) -> String {
        format!("{}.{suffix}", self.name())
    }
}
