//! Tokens of MIL text, each with its line, column and byte offset, and the token-level reads
//! the parser builds on. Every error names the file, the line and the column.

use std::path::Path;

use crate::error::{Error, Result};

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Num(String),
    Str(String),
    Punct(char),
    Arrow,
}

/// Where a token starts: 1-based line, 1-based column (bytes from the line start), byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pos {
    pub line: usize,
    pub col: usize,
    pub offset: usize,
}

/// The token stream of one file.
pub(super) struct Lexer<'a> {
    toks: Vec<(Tok, Pos)>,
    pos: usize,
    /// Position just past the last character (for "unexpected end of file").
    end: Pos,
    pub file: &'a Path,
}

/// A format error in `file` at `at`: `line L, column C: msg` (plus the byte offset).
pub(super) fn error_at(file: &Path, at: Pos, msg: impl Into<String>) -> Error {
    Error::format(
        file,
        Some(at.offset as u64),
        format!("line {}, column {}: {}", at.line, at.col, msg.into()),
    )
}

/// Split `src` into tokens; `//` comments and whitespace (any mix of spaces and newlines) are skipped.
pub(super) fn lex<'a>(src: &str, file: &'a Path) -> Result<Lexer<'a>> {
    let mut toks = Vec::new();
    let b = src.as_bytes();
    let (mut i, mut line, mut line_start) = (0, 1, 0);
    while i < b.len() {
        let c = b[i];
        let at = Pos {
            line,
            col: i - line_start + 1,
            offset: i,
        };
        let start = i;
        if c == b'\n' {
            line += 1;
            i += 1;
            line_start = i;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'-' && b.get(i + 1) == Some(&b'>') {
            toks.push((Tok::Arrow, at));
            i += 2;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push((Tok::Ident(src[start..i].to_string()), at));
        } else if c.is_ascii_digit()
            || (matches!(c, b'-' | b'+')
                && b.get(i + 1)
                    .is_some_and(|d| d.is_ascii_digit() || *d == b'i' || *d == b'.'))
            || c == b'.'
        {
            i += 1;
            while i < b.len() {
                let d = b[i];
                let exp_sign =
                    (d == b'+' || d == b'-') && matches!(b[i - 1], b'p' | b'P' | b'e' | b'E');
                if d.is_ascii_alphanumeric() || d == b'.' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            toks.push((Tok::Num(src[start..i].to_string()), at));
        } else if c == b'"' {
            let mut s = String::new();
            i += 1;
            loop {
                match b.get(i) {
                    None | Some(b'\n') => return Err(error_at(file, at, "unterminated string")),
                    Some(b'"') => break,
                    Some(b'\\') if b.get(i + 1).is_some_and(|e| *e == b'"' || *e == b'\\') => {
                        s.push(b[i + 1] as char);
                        i += 2;
                    }
                    Some(_) => {
                        let ch = src[i..].chars().next().expect("inside the text");
                        s.push(ch);
                        i += ch.len_utf8();
                    }
                }
            }
            toks.push((Tok::Str(s), at));
            i += 1;
        } else if b"()[]{}<>,=;".contains(&c) {
            toks.push((Tok::Punct(c as char), at));
            i += 1;
        } else {
            let ch = src[i..].chars().next().expect("inside the text");
            return Err(error_at(file, at, format!("unexpected character {ch:?}")));
        }
    }
    let end = Pos {
        line,
        col: b.len() - line_start + 1,
        offset: b.len(),
    };
    Ok(Lexer {
        toks,
        pos: 0,
        end,
        file,
    })
}

impl Lexer<'_> {
    /// Position of the next token (or of the end of the text).
    pub fn at(&self) -> Pos {
        self.toks.get(self.pos).map_or(self.end, |t| t.1)
    }
    /// A format error at the next token.
    pub fn err(&self, msg: impl Into<String>) -> Error {
        error_at(self.file, self.at(), msg)
    }
    pub fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    /// The token after the next one.
    pub fn peek2(&self) -> Option<&Tok> {
        self.toks.get(self.pos + 1).map(|t| &t.0)
    }
    pub fn next(&mut self) -> Result<Tok> {
        let t = self
            .toks
            .get(self.pos)
            .map(|t| t.0.clone())
            .ok_or_else(|| self.err("unexpected end of file"))?;
        self.pos += 1;
        Ok(t)
    }
    /// Consume punctuation `c` or fail naming what was found.
    pub fn punct(&mut self, c: char) -> Result<()> {
        let at = self.at();
        match self.next()? {
            Tok::Punct(p) if p == c => Ok(()),
            t => Err(error_at(
                self.file,
                at,
                format!("expected '{c}', found {}", show(&t)),
            )),
        }
    }
    pub fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }
    pub fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(i)) if i == s)
    }
    pub fn ident(&mut self) -> Result<String> {
        let at = self.at();
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            t => Err(error_at(
                self.file,
                at,
                format!("expected a name, found {}", show(&t)),
            )),
        }
    }
    pub fn keyword(&mut self, k: &str) -> Result<()> {
        let at = self.at();
        let s = self.ident()?;
        if s != k {
            return Err(error_at(
                self.file,
                at,
                format!("expected '{k}', found '{s}'"),
            ));
        }
        Ok(())
    }
    pub fn int(&mut self) -> Result<i64> {
        let at = self.at();
        match self.next()? {
            Tok::Num(s) => s
                .parse()
                .map_err(|_| error_at(self.file, at, format!("'{s}' is not an integer"))),
            t => Err(error_at(
                self.file,
                at,
                format!("expected an integer, found {}", show(&t)),
            )),
        }
    }
    /// Skip a balanced bracketed group starting at the current `open` token.
    pub fn skip_group(&mut self, open: char, close: char) -> Result<()> {
        self.punct(open)?;
        let mut depth = 1;
        while depth > 0 {
            match self.next()? {
                Tok::Punct(c) if c == open => depth += 1,
                Tok::Punct(c) if c == close => depth -= 1,
                _ => {}
            }
        }
        Ok(())
    }
    /// Items of a comma-separated list up to (and consuming) `close`, read by `item`.
    pub fn list<T>(
        &mut self,
        close: char,
        mut item: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut items = Vec::new();
        while !self.is_punct(close) {
            items.push(item(self)?);
            if !self.is_punct(close) {
                self.punct(',')?;
            }
        }
        self.punct(close)?;
        Ok(items)
    }
    /// `tensor<dtype, [d, ...]>` (rank 0 allowed: `tensor<string, []>`) or a scalar dtype name.
    pub fn ty(&mut self) -> Result<(String, Vec<usize>)> {
        let t = self.ident()?;
        if t != "tensor" {
            return Ok((t, vec![]));
        }
        self.punct('<')?;
        let dt = self.ident()?;
        self.punct(',')?;
        self.punct('[')?;
        let dims = self.list(']', |lx| {
            let at = lx.at();
            let d = lx.int()?;
            usize::try_from(d).map_err(|_| error_at(lx.file, at, format!("negative extent {d}")))
        })?;
        self.punct('>')?;
        Ok((dt, dims))
    }
}

/// A token as quoted in errors.
fn show(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("'{s}'"),
        Tok::Num(s) => format!("number {s}"),
        Tok::Str(s) => format!("string \"{s}\""),
        Tok::Punct(c) => format!("'{c}'"),
        Tok::Arrow => "'->'".into(),
    }
}
