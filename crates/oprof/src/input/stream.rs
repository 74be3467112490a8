//! Reading a captured `/dev/oprofile/buffer` stream and walking it with the decoder state
//! (current CPU, kernel/user mode, task, image cookie), as the legacy daemon's `opd_trans.c`,
//! and grouping it into [`Sample`]s with their call chains ([`decode`]).

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
        check_size(bytes.len() as u64, word_bytes)?;
        let words = le_words(bytes, word_bytes).collect();
        Ok(Stream { words, word_bytes })
    }

    /// Describes a decode error with its byte offset.
    pub fn describe(&self, e: DecodeError) -> String {
        describe(e, self.word_bytes, self.words.len())
    }
}

/// The little-endian words of `word_bytes` (4 or 8) bytes in `bytes` (whole words), widened.
pub fn le_words(bytes: &[u8], word_bytes: usize) -> impl Iterator<Item = u64> + '_ {
    bytes.chunks_exact(word_bytes).map(|w| match *w {
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        // Not a word size (see `check_size`).
        _ => 0,
    })
}

/// Checks the word size (4 or 8) and that a stream of `len` bytes is a whole number of words.
pub fn check_size(len: u64, word_bytes: usize) -> Result<()> {
    if word_bytes != 4 && word_bytes != 8 {
        bail!("word size must be 4 or 8 bytes, not {word_bytes}");
    }
    let rest = len % word_bytes as u64;
    if rest != 0 {
        bail!(
            "truncated stream: {} bytes is not a whole number of {}-byte words \
             (last word starts at byte offset {})",
            len,
            word_bytes,
            len - rest
        );
    }
    Ok(())
}

/// Moves a decode error's word index by `by`.
pub(crate) fn shift(e: DecodeError, by: usize) -> DecodeError {
    match e {
        DecodeError::Truncated { word, need } => DecodeError::Truncated {
            word: word + by,
            need,
        },
        DecodeError::UnknownCode { word, code } => DecodeError::UnknownCode {
            word: word + by,
            code,
        },
        DecodeError::BadCtxSwitch { word } => DecodeError::BadCtxSwitch { word: word + by },
    }
}

/// Where the context of a sync pass ends, if `words` starts one: a CPU_SWITCH record followed,
/// before any sample, by a mode record (KERNEL_ENTER/EXIT) and CTX_SWITCH, in any order. The
/// module starts every pass over a CPU's buffer so (`rust/common/sync.rs`, legacy
/// `add_cpu_switch` + `op_cpu_buffer_reset`): what follows decodes without what came before.
/// Returns the index of the word after the record that completes the context; `None` when
/// `words` does not start with CPU_SWITCH, a sample comes first, or the words end before.
pub fn context_prefix(words: &[u64], word_bytes: usize) -> Option<usize> {
    let (mut mode, mut task) = (false, false);
    for (n, item) in Decoder::new(words, word_bytes).enumerate() {
        let (at, rec) = item.ok()?;
        match rec {
            Record::CpuSwitch { .. } => {}
            _ if n == 0 => return None,
            Record::Sample { .. } => return None,
            Record::KernelEnter | Record::KernelExit => mode = true,
            Record::CtxSwitch { .. } => task = true,
            _ => {}
        }
        if mode && task {
            return Some(at + rec.words());
        }
    }
    None
}

/// Describes a decode error with its byte offset, in a stream of `words` words.
pub fn describe(e: DecodeError, word_bytes: usize, words: usize) -> String {
    let off = |w: usize| w.saturating_mul(word_bytes);
    match e {
        DecodeError::Truncated { word, need } => format!(
            "truncated record at byte offset {}: needs {} words, stream ends after {}",
            off(word),
            need,
            words.saturating_sub(word)
        ),
        DecodeError::UnknownCode { word, code } => {
            format!("unknown escape code {code} at byte offset {}", off(word))
        }
        DecodeError::BadCtxSwitch { word } => {
            format!(
                "malformed CTX_SWITCH (no CTX_TGID part) at byte offset {}",
                off(word)
            )
        }
    }
}

/// Decoder state in force when a record is decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleCtx {
    pub cpu: Option<u64>,
    /// `None` until the first KERNEL_ENTER/EXIT (legacy daemon: such samples are lost).
    pub in_kernel: Option<bool>,
    pub pid: Option<u64>,
    pub tgid: Option<u64>,
    /// Image id of the task's executable from the last CTX_SWITCH (`Some(0)`: kernel thread;
    /// `None`: no CTX_SWITCH yet).
    pub app_cookie: Option<u64>,
    /// Image id of the following user samples (`Some(0)`: anonymous memory, raw PC; `None`: no
    /// COOKIE_SWITCH since the last CPU or task switch).
    pub cookie: Option<u64>,
}

/// One call-chain entry of a traced sample: a return address (kernel: raw PC; user: offset in
/// the image `cookie`, like a user sample), with the mode and image in force when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub pc: u64,
    pub in_kernel: Option<bool>,
    pub cookie: Option<u64>,
}

/// One sample with its context and, when it followed a TRACE_BEGIN, its callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Kernel: PC. User: file offset in image `ctx.cookie` (raw PC when the cookie is 0).
    pub pc: u64,
    /// Counter index (the record's event word).
    pub event: u64,
    pub ctx: SampleCtx,
    /// A TRACE_BEGIN preceded the sample (it may still have no frames).
    pub traced: bool,
    /// Callers, innermost first.
    pub frames: Vec<Frame>,
}

/// A decoded stream: the samples (call-chain frames are inside them, not samples of their own).
#[derive(Debug, Default)]
pub struct Decoded {
    pub samples: Vec<Sample>,
    /// MODULE_LOADED records seen.
    pub module_loaded: u64,
}

impl SampleCtx {
    /// Applies `rec` to the state (legacy `opd_trans.c`): CPU_SWITCH and CTX_SWITCH forget the
    /// image, KERNEL_ENTER/EXIT set the mode, COOKIE_SWITCH the image.
    pub fn apply(&mut self, rec: &Record) {
        match *rec {
            Record::CpuSwitch { cpu } => {
                self.cpu = Some(cpu);
                self.cookie = None;
            }
            Record::KernelEnter => self.in_kernel = Some(true),
            Record::KernelExit => self.in_kernel = Some(false),
            Record::CtxSwitch {
                pid,
                tgid,
                app_cookie,
            } => {
                self.pid = Some(pid);
                self.tgid = Some(tgid);
                self.app_cookie = Some(app_cookie);
                self.cookie = None;
            }
            Record::CookieSwitch { cookie } => self.cookie = Some(cookie),
            Record::Sample { .. } | Record::ModuleLoaded | Record::TraceBegin => {}
            Record::UserMaps { .. } | Record::UserStack { .. } => {}
        }
    }
}

/// How Sample records group into call chains (see [`decode`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ChainState {
    /// TRACE_BEGIN seen, its sample not yet.
    pub trace_next: bool,
    /// The last sample was traced and no record ended its chain: event-0 samples are its frames.
    pub open: bool,
}

/// What a Sample record is, by [`ChainState::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A sample; `traced`: a TRACE_BEGIN preceded it.
    Sample { traced: bool },
    /// A call-chain frame of the last sample.
    Frame,
}

impl ChainState {
    /// A Sample record with counter `event` is a frame of the open chain (and changes nothing).
    #[inline]
    pub fn is_frame(&self, event: u64) -> bool {
        self.open && event == 0 && !self.trace_next
    }

    /// Applies `rec`; for a Sample record, says whether it is a sample or a frame.
    pub fn apply(&mut self, rec: &Record) -> Option<Role> {
        match *rec {
            Record::TraceBegin => {
                self.trace_next = true;
                self.open = false;
                None
            }
            Record::CpuSwitch { .. } | Record::CtxSwitch { .. } => {
                self.open = false;
                None
            }
            Record::Sample { event, .. } => {
                if self.is_frame(event) {
                    return Some(Role::Frame);
                }
                let traced = std::mem::take(&mut self.trace_next);
                self.open = traced;
                Some(Role::Sample { traced })
            }
            Record::ModuleLoaded
            | Record::KernelEnter
            | Record::KernelExit
            | Record::CookieSwitch { .. } => None,
            // Unwound into frames before (`unwind::expand`), or left out.
            Record::UserMaps { .. } | Record::UserStack { .. } => None,
        }
    }
}

/// Walks the stream, calling `f` for every record with its byte offset and the context after it.
pub fn walk(stream: &Stream, mut f: impl FnMut(usize, &Record, &SampleCtx)) -> Result<()> {
    let mut ctx = SampleCtx::default();
    for item in Decoder::new(&stream.words, stream.word_bytes) {
        let (at, rec) = item.map_err(|e| anyhow::anyhow!(stream.describe(e)))?;
        ctx.apply(&rec);
        f(at.saturating_mul(stream.word_bytes), &rec, &ctx);
    }
    Ok(())
}

/// Decodes the stream into samples.
///
/// Call chains: after TRACE_BEGIN the next Sample record is a (traced) sample; the Sample records
/// after it whose event word is 0 are its frames, until the next TRACE_BEGIN, CPU_SWITCH,
/// CTX_SWITCH or the end of the stream. A Sample with a non-zero event word also ends the chain
/// and is an ordinary sample. Mode and cookie switches between frames apply to the frames after
/// them (and to later samples, as always). Without TRACE_BEGIN every Sample is a sample.
pub fn decode(stream: &Stream) -> Result<Decoded> {
    let mut out = Decoded::default();
    let mut chain = ChainState::default();
    walk(stream, |_, rec, ctx| {
        if *rec == Record::ModuleLoaded {
            out.module_loaded += 1;
        }
        let role = chain.apply(rec);
        let Record::Sample { pc, event } = *rec else {
            return;
        };
        match role {
            Some(Role::Frame) => {
                if let Some(s) = out.samples.last_mut() {
                    s.frames.push(Frame {
                        pc,
                        in_kernel: ctx.in_kernel,
                        cookie: ctx.cookie,
                    });
                }
            }
            Some(Role::Sample { traced }) => {
                out.samples.push(Sample {
                    pc,
                    event,
                    ctx: *ctx,
                    traced,
                    frames: Vec::new(),
                });
            }
            None => {}
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::stream;

    fn s(pc: u64, event: u64) -> Record {
        Record::Sample { pc, event }
    }

    #[test]
    fn traces_group_frames_and_end_at_switches() {
        let st = stream(&[
            Record::CpuSwitch { cpu: 0 },
            Record::CtxSwitch {
                pid: 7,
                tgid: 7,
                app_cookie: 3,
            },
            Record::KernelEnter,
            Record::TraceBegin,
            s(0xc000_1000, 1), // traced sample (counter 1)
            s(0xc000_2004, 0), // kernel caller
            Record::KernelExit,
            Record::CookieSwitch { cookie: 3 },
            s(0x4_0010, 0), // user caller: offset in image 3
            Record::TraceBegin,
            s(0x4_0020, 0), // traced sample with event 0, no frames
            Record::TraceBegin,
            s(0x4_0030, 0),
            s(0x4_0040, 0),               // frame
            Record::CpuSwitch { cpu: 1 }, // ends the chain
            Record::KernelEnter,
            s(0xc000_3000, 0), // ordinary sample
            Record::TraceBegin,
            s(0xc000_4000, 0),
            s(0xc000_5000, 0), // frame
            Record::CtxSwitch {
                pid: 8,
                tgid: 8,
                app_cookie: 0,
            }, // ends the chain
            s(0xc000_6000, 0), // ordinary
            Record::TraceBegin,
            s(0xc000_7000, 0),
            s(0xc000_8000, 2), // non-zero event: a new ordinary sample, ends the chain
            s(0xc000_9000, 0), // ordinary
            Record::ModuleLoaded,
            Record::TraceBegin,
            s(0xc000_a000, 0),
            s(0xc000_b000, 0), // frame, at end of stream
        ]);
        let d = decode(&st).unwrap();
        let pcs: Vec<u64> = d.samples.iter().map(|s| s.pc).collect();
        assert_eq!(
            pcs,
            [
                0xc000_1000,
                0x4_0020,
                0x4_0030,
                0xc000_3000,
                0xc000_4000,
                0xc000_6000,
                0xc000_7000,
                0xc000_8000,
                0xc000_9000,
                0xc000_a000
            ]
        );
        assert_eq!(d.module_loaded, 1);
        let first = &d.samples[0];
        assert!(first.traced && first.event == 1 && first.ctx.in_kernel == Some(true));
        assert_eq!(first.ctx.app_cookie, Some(3));
        assert_eq!(
            first.frames,
            [
                Frame {
                    pc: 0xc000_2004,
                    in_kernel: Some(true),
                    cookie: None
                },
                Frame {
                    pc: 0x4_0010,
                    in_kernel: Some(false),
                    cookie: Some(3)
                },
            ]
        );
        assert!(d.samples[1].traced && d.samples[1].frames.is_empty());
        assert_eq!(d.samples[1].ctx.cookie, Some(3));
        assert_eq!(d.samples[2].frames.len(), 1);
        assert!(!d.samples[3].traced && d.samples[3].frames.is_empty());
        assert_eq!(
            d.samples[4].frames,
            [Frame {
                pc: 0xc000_5000,
                in_kernel: Some(true),
                cookie: None
            }]
        );
        assert!(d.samples[5].frames.is_empty() && d.samples[5].ctx.app_cookie == Some(0));
        assert!(d.samples[6].traced && d.samples[6].frames.is_empty());
        assert!(!d.samples[7].traced && d.samples[7].event == 2);
        assert!(!d.samples[8].traced);
        assert_eq!(d.samples[9].frames.len(), 1);
        assert_eq!(d.samples.iter().filter(|s| s.traced).count(), 6);
    }

    #[test]
    fn untraced_stream_is_all_samples() {
        let st = stream(&[Record::KernelEnter, s(1, 0), s(2, 0), s(3, 0)]);
        let d = decode(&st).unwrap();
        assert_eq!(d.samples.len(), 3);
        assert!(d.samples.iter().all(|s| !s.traced && s.frames.is_empty()));
    }
}
