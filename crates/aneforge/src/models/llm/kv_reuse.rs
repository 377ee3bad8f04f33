//! KV reuse across generations (chat turns): when a prompt extends the tokens whose keys and
//! values the decode caches already hold (a token-prefix check), only the new tokens run, in
//! one pass per layer chunk through an extend program (per bucket, like prefill) whose keys are
//! the resident caches plus the new rows; any other prompt is prefilled from position 0.

use crate::error::{Error, Result};
use crate::exec::{PortData, PortView};

use super::blocks::Mode;
use super::runtime::{dec_layers, missing, out_port, port, Llm};

impl Llm {
    /// Logits [vocab] after the prompt `ids` and how many of its tokens were run: the suffix
    /// beyond the resident tokens when `ids` strictly extends them, else all of `ids`
    /// (a fresh prefill). Errors as in [`Llm::prefill`].
    pub fn extend_or_prefill(&mut self, ids: &[u32]) -> Result<(Vec<f32>, usize)> {
        let held = self.resident.len();
        let extends = held > 0 && ids.len() > held && ids[..held] == self.resident[..];
        if !extends {
            return Ok((self.prefill(ids)?, ids.len()));
        }
        Ok((self.extend(&ids[held..])?, ids.len() - held))
    }

    /// The ids whose keys/values the decode caches hold (prompt and fed generated tokens).
    pub fn resident_tokens(&self) -> &[u32] {
        &self.resident
    }

    /// Run `suffix` (≥ 1 token) at the positions after the resident ones through the extend
    /// programs of its bucket: the decode caches go in, the caches with the new rows placed
    /// come back; returns the last new token's logits [vocab].
    fn extend(&mut self, suffix: &[u32]) -> Result<Vec<f32>> {
        let (n, first, m) = (suffix.len(), self.position, self.max_context);
        if n == 0 || first + n > m {
            return Err(Error::value(
                "llm",
                format!("{first} resident + {n} new tokens exceed max_context {m}"),
            ));
        }
        let s = self.bucket(n);
        if !self.extend.contains_key(&s) {
            let programs = self.compile_mode(Mode::Extend { seq: s, context: m }, None)?;
            self.extend.insert(s, programs);
            self.src.release_pages();
        }
        let x = self.embed_rows(suffix, first, s)?;
        let (cos, sin) = self.rope_rows(first, s);
        let mask = self.mask(first, s, m);
        let mut place = vec![0f32; m * s];
        (0..n).for_each(|r| place[(first + r) * s + r] = 1.0);
        let keep: Vec<f32> = (0..m)
            .map(|p| f32::from(u8::from(!(first..first + n).contains(&p))))
            .collect();
        let last: Vec<f32> = (0..s).map(|i| f32::from(u8::from(i == n - 1))).collect();
        let feeds = [
            ("cos", &cos[..]),
            ("sin", &sin[..]),
            ("mask", &mask[..]),
            ("place", &place[..]),
            ("keep", &keep[..]),
            ("last", &last[..]),
        ];
        let programs = (self.extend.get_mut(&s)).ok_or_else(|| Error::value("llm", "bucket"))?;
        for (ext, dec) in programs.iter_mut().zip(self.decode.iter_mut()) {
            for (l, kv) in dec_layers(dec)
                .into_iter()
                .flat_map(|l| [(l, "k"), (l, "v")])
            {
                let name = format!("{kv}{l}");
                let i = port(dec, &name).ok_or_else(|| missing(kv, l))?;
                let j = port(ext, &name).ok_or_else(|| missing(kv, l))?;
                let PortView::F16(cache) = dec.loaded.input_view(i)? else {
                    return Err(missing(kv, l));
                };
                ext.loaded.set_input(j, PortData::F16(cache))?;
            }
        }
        let logits = Self::run_chunks(programs, x, &feeds)?;
        for (ext, dec) in programs.iter_mut().zip(self.decode.iter_mut()) {
            for (l, kv) in dec_layers(dec)
                .into_iter()
                .flat_map(|l| [(l, "k"), (l, "v")])
            {
                let o = out_port(ext, &format!("{kv}{l}_next")).ok_or_else(|| missing(kv, l))?;
                let i = port(dec, &format!("{kv}{l}")).ok_or_else(|| missing(kv, l))?;
                let PortView::F16(cache) = ext.loaded.output_view(o)? else {
                    return Err(missing(kv, l));
                };
                dec.loaded.set_input(i, PortData::F16(cache))?;
            }
        }
        self.position += n;
        self.resident.extend_from_slice(suffix);
        Ok(logits)
    }
}
