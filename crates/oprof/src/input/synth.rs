//! `oprof synth` (hidden, for benchmarks and tests): a stream of any number of samples made of
//! a real captured stream's samples, with their PCs, images, tasks, CPUs and call chains.
//!
//! The samples of the source stream are taken in order, round and round, and encoded again
//! with the records their context needs (CPU_SWITCH, CTX_SWITCH, KERNEL_ENTER/EXIT,
//! COOKIE_SWITCH, TRACE_BEGIN), like the module's sync pass (`rust/common/sync.rs`) does: a
//! switch only where the state differs. The first round decodes to the same samples as the
//! source; later rounds skip the few samples whose context cannot be written again (taken
//! before the first CPU_SWITCH, mode switch or task switch of the source).

use crate::input::stream::{self, SampleCtx, Stream};
use anyhow::{bail, Context, Result};
use oprofile_common::event::Record;
use std::io::Write;
use std::path::Path;

/// Which call chains the synthetic samples carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chains {
    /// As in the source stream.
    AsRecorded,
    /// None: every sample untraced.
    None,
    /// Only the source's traced samples with at least this many frames (whole chains).
    MinFrames(usize),
}

/// What [`write`] produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub samples: u64,
    pub frames: u64,
    pub words: u64,
}

/// Re-encodes samples with the switches their context needs.
struct Encoder<W: Write> {
    out: W,
    word_bytes: usize,
    ctx: SampleCtx,
    /// The last sample was traced: an untraced event-0 sample would be taken as its frame.
    chain_open: bool,
    written: Written,
}

impl<W: Write> Encoder<W> {
    fn emit(&mut self, r: Record) -> Result<()> {
        let mut w = [0usize; 7];
        let n = r.encode(&mut w).context("encoding a record")?;
        for &x in &w[..n] {
            self.out
                .write_all(&(x as u64).to_le_bytes()[..self.word_bytes])?;
        }
        self.written.words += n as u64;
        self.ctx.apply(&r);
        Ok(())
    }

    fn mode(&mut self, in_kernel: Option<bool>) -> Result<bool> {
        match (in_kernel, self.ctx.in_kernel) {
            (a, b) if a == b => Ok(true),
            (None, _) => Ok(false),
            (Some(k), _) => {
                self.emit(if k {
                    Record::KernelEnter
                } else {
                    Record::KernelExit
                })?;
                Ok(true)
            }
        }
    }

    fn task(&mut self, c: &SampleCtx) -> Result<()> {
        if let (Some(pid), Some(tgid), Some(app_cookie)) = (c.pid, c.tgid, c.app_cookie) {
            self.emit(Record::CtxSwitch {
                pid,
                tgid,
                app_cookie,
            })?;
        }
        Ok(())
    }

    /// Writes sample `s` (without frames if `frames` is false), starting a sync pass (CPU_SWITCH
    /// and full context) if `pass` or its CPU differs; `false` if its context cannot be written
    /// again.
    fn sample(&mut self, s: &stream::Sample, pass: bool, frames: bool) -> Result<bool> {
        let c = &s.ctx;
        let reachable = |have: Option<u64>, want: Option<u64>| want.is_some() || have.is_none();
        if !reachable(self.ctx.cpu, c.cpu)
            || !reachable(self.ctx.pid, c.pid)
            || (c.in_kernel.is_none() && self.ctx.in_kernel.is_some())
        {
            return Ok(false);
        }
        let user = c.in_kernel == Some(false);
        // As the module's sync pass: CPU_SWITCH, then the full context (mode and task).
        let cpu_switch = c.cpu != self.ctx.cpu || (pass && c.cpu.is_some());
        if cpu_switch {
            self.emit(Record::CpuSwitch {
                cpu: c.cpu.unwrap_or(0),
            })?;
        }
        let same_task =
            (c.pid, c.tgid, c.app_cookie) == (self.ctx.pid, self.ctx.tgid, self.ctx.app_cookie);
        // A task switch also ends an open chain and forgets the image.
        let traced = s.traced && frames;
        if cpu_switch
            || !same_task
            || (self.chain_open && !traced && s.event == 0)
            || (user && c.cookie.is_none() && self.ctx.cookie.is_some())
        {
            self.task(c)?;
        }
        if cpu_switch {
            self.ctx.in_kernel = None;
        }
        self.mode(c.in_kernel)?;
        if user && c.cookie != self.ctx.cookie {
            if let Some(cookie) = c.cookie {
                self.emit(Record::CookieSwitch { cookie })?;
            }
        }
        if traced {
            self.emit(Record::TraceBegin)?;
        }
        self.emit(Record::Sample {
            pc: s.pc,
            event: s.event,
        })?;
        self.written.samples += 1;
        self.chain_open = traced;
        if !traced {
            return Ok(true);
        }
        for f in &s.frames {
            // A frame whose mode or image cannot be set without ending the chain ends it here.
            if f.in_kernel.is_none() && self.ctx.in_kernel.is_some() {
                break;
            }
            self.mode(f.in_kernel)?;
            if f.in_kernel == Some(false) && f.cookie != self.ctx.cookie {
                match f.cookie {
                    Some(cookie) => self.emit(Record::CookieSwitch { cookie })?,
                    None => break,
                }
            }
            self.emit(Record::Sample { pc: f.pc, event: 0 })?;
            self.written.frames += 1;
        }
        Ok(true)
    }
}

/// Writes `samples` samples made of `src`'s (see the module doc) to `out`. A sync pass starts
/// where one started in the source (a CPU_SWITCH since the sample before the picked one).
pub fn write(src: &Stream, samples: u64, chains: Chains, out: impl Write) -> Result<Written> {
    let decoded = stream::decode(src)?;
    // Per source sample: a CPU_SWITCH came before it (since the previous sample).
    let mut pass_start = Vec::with_capacity(decoded.samples.len());
    let (mut chain, mut switched) = (stream::ChainState::default(), false);
    stream::walk(src, |_, rec, _| {
        switched |= matches!(rec, Record::CpuSwitch { .. });
        if let Some(stream::Role::Sample { .. }) = chain.apply(rec) {
            pass_start.push(std::mem::take(&mut switched));
        }
    })?;
    let mut pick: Vec<(&stream::Sample, bool)> = Vec::new();
    let mut pass = false;
    for (s, &p) in decoded.samples.iter().zip(&pass_start) {
        pass |= p;
        let take = match chains {
            Chains::MinFrames(n) => s.traced && s.frames.len() >= n,
            _ => true,
        };
        if take {
            pick.push((s, std::mem::take(&mut pass)));
        }
    }
    if pick.is_empty() {
        bail!("the source stream has no samples to replicate (with {chains:?})");
    }
    let mut e = Encoder {
        out,
        word_bytes: src.word_bytes,
        ctx: SampleCtx::default(),
        chain_open: false,
        written: Written::default(),
    };
    let frames = chains != Chains::None;
    let mut round_wrote = false;
    'rounds: loop {
        for &(s, pass) in &pick {
            if e.written.samples >= samples {
                break 'rounds;
            }
            round_wrote |= e.sample(s, pass, frames)?;
        }
        if !std::mem::take(&mut round_wrote) {
            bail!("no sample of the source stream can be written again");
        }
    }
    e.out.flush()?;
    Ok(e.written)
}

/// `oprof synth`: writes `out` from the stream file `src`.
pub fn run(
    src: &Path,
    out: &Path,
    samples: u64,
    chains: Chains,
    word_bytes: usize,
) -> Result<Written> {
    crate::input::validate::check(
        src,
        &crate::input::validate::Limits::bare(word_bytes, None),
        false,
    )?;
    let st = Stream::read(src, word_bytes)?;
    let f = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    write(
        &st,
        samples,
        chains,
        std::io::BufWriter::with_capacity(1 << 20, f),
    )
    .with_context(|| format!("writing {}", out.display()))
}

/// Parses `--chains`: `recorded`, `none` or `min:N`.
pub fn parse_chains(s: &str) -> Result<Chains> {
    Ok(match s {
        "recorded" => Chains::AsRecorded,
        "none" => Chains::None,
        _ => match s.strip_prefix("min:").map(str::parse) {
            Some(Ok(n)) => Chains::MinFrames(n),
            _ => bail!("--chains {s:?}: expected recorded, none or min:N"),
        },
    })
}
