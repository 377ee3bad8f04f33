//! `aneforge chat MODEL`: an interactive loop over stdin using the model's chat template; each
//! answer streams to stdout and joins the conversation; each turn runs only the new tokens
//! when the rendered conversation extends what the resident KV holds.

use std::io::BufRead;
use std::path::Path;

use super::emit;
use super::generate::{load, speed, stream_piece, GenerateFlags};
use crate::compile::CompileOptions;
use crate::error::{Error, Result};
use crate::models::llm::{GenerateOptions, Message};

/// Read a line per user turn until EOF or an empty line; answer each with the whole history,
/// running only the tokens the resident KV does not hold yet.
pub(super) fn chat(
    model: &Path,
    system: Option<&str>,
    flags: &GenerateFlags,
    opts: &CompileOptions,
) -> Result<()> {
    let mut llm = load(model, flags, opts)?;
    let mut history: Vec<Message> = system
        .map(|s| Message {
            role: "system".into(),
            content: s.into(),
        })
        .into_iter()
        .collect();
    eprintln!("type a message (an empty line or EOF ends the chat)");
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| Error::io("<stdin>", e))?;
        if line.trim().is_empty() {
            break;
        }
        history.push(Message {
            role: "user".into(),
            content: line,
        });
        let opts = GenerateOptions {
            reuse_kv: true,
            ..flags.options()
        };
        let (session, answer) = llm.chat(&history, &opts, &mut stream_piece)?;
        emit("\n");
        eprintln!("[{}]", speed(&session));
        history.push(Message {
            role: "assistant".into(),
            content: answer,
        });
    }
    Ok(())
}
