//! Reading a captured `/dev/oprofile/buffer` stream and walking it with the decoder state
//! (current CPU, kernel/user mode, task, image cookie), as the legacy daemon's `opd_trans.c`.

use anyhow::{bail, Context, Result};
use oprofile_common::event::{DecodeError, Decoder, Record};
use std::path::Path;

/// A captured stream: native words, widened to `u64`.
pub struct Stream {
    pub words: Vec<u64>,
    pub word_bytes: usize,
}

impl Stream {
    /// Reads `path` as little-endian words of `word_bytes` (4 or 8) bytes.
    pub fn read(path: &Path, word_bytes: usize) -> Result<Stream> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Stream::from_bytes(&bytes, word_bytes).with_context(|| format!("in {}", path.display()))
    }

    pub fn from_bytes(bytes: &[u8], word_bytes: usize) -> Result<Stream> {
        if word_bytes != 4 && word_bytes != 8 {
            bail!("word size must be 4 or 8 bytes, not {word_bytes}");
        }
        if bytes.len() % word_bytes != 0 {
            bail!(
                "truncated stream: {} bytes is not a whole number of {}-byte words \
                 (last word starts at byte offset {})",
                bytes.len(),
                word_bytes,
                bytes.len() - bytes.len() % word_bytes
            );
        }
        let words = bytes
            .chunks_exact(word_bytes)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..word_bytes].copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect();
        Ok(Stream { words, word_bytes })
    }

    /// Describes a decode error with its byte offset.
    pub fn describe(&self, e: DecodeError) -> String {
        let off = |w: usize| w * self.word_bytes;
        match e {
            DecodeError::Truncated { word, need } => format!(
                "truncated record at byte offset {}: needs {} words, stream ends after {}",
                off(word),
                need,
                self.words.len() - word
            ),
            DecodeError::UnknownCode { word, code } => {
                format!("unknown escape code {code} at byte offset {}", off(word))
            }
            DecodeError::BadCtxSwitch { word } => {
                format!("malformed CTX_SWITCH (no CTX_TGID part) at byte offset {}", off(word))
            }
        }
    }
}

/// SampleCtx in force when a sample is decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleCtx {
    pub cpu: Option<u64>,
    /// `None` until the first KERNEL_ENTER/EXIT (legacy daemon: such samples are lost).
    pub in_kernel: Option<bool>,
    pub pid: Option<u64>,
    pub tgid: Option<u64>,
    pub cookie: Option<u64>,
}

/// One sample with its context.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub pc: u64,
    pub event: u64,
    pub ctx: SampleCtx,
}

/// Walks the stream, calling `f` for every record with the context after it.
pub fn walk(stream: &Stream, mut f: impl FnMut(usize, &Record, &SampleCtx)) -> Result<()> {
    let mut ctx = SampleCtx::default();
    for item in Decoder::new(&stream.words, stream.word_bytes) {
        let (at, rec) = item.map_err(|e| anyhow::anyhow!(stream.describe(e)))?;
        match rec {
            Record::CpuSwitch { cpu } => {
                ctx.cpu = Some(cpu);
                ctx.cookie = None;
            }
            Record::KernelEnter => ctx.in_kernel = Some(true),
            Record::KernelExit => ctx.in_kernel = Some(false),
            Record::CtxSwitch { pid, tgid, .. } => {
                ctx.pid = Some(pid);
                ctx.tgid = Some(tgid);
                ctx.cookie = None;
            }
            Record::CookieSwitch { cookie } => ctx.cookie = Some(cookie),
            Record::Sample { .. } | Record::ModuleLoaded | Record::TraceBegin => {}
        }
        f(at * stream.word_bytes, &rec, &ctx);
    }
    Ok(())
}

/// All samples of the stream with their context.
pub fn samples(stream: &Stream) -> Result<Vec<Sample>> {
    let mut out = Vec::new();
    walk(stream, |_, rec, ctx| {
        if let Record::Sample { pc, event } = *rec {
            out.push(Sample { pc, event, ctx: *ctx });
        }
    })?;
    Ok(out)
}
