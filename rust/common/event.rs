// SPDX-License-Identifier: GPL-2.0

//! The legacy event-buffer word format (`/dev/oprofile/buffer`).
//!
//! Follows legacy `include/linux/oprofile.h`, `drivers/oprofile/event_buffer.h` and the
//! oprofile 0.9.x daemon (`daemon/opd_trans.c`). The stream is an array of native words
//! (`unsigned long`: 4 bytes little-endian on ARM32, 8 on 64-bit; userspace learns the size from
//! `pointer_size`). A record is either a sample `[pc_or_offset, event]`, or an escape:
//! [`ESCAPE_CODE`] followed by a code and the code's arguments:
//!
//! | code | record | words |
//! |---|---|---|
//! | 1 | CTX_SWITCH | `~0, 1, pid, app_cookie, ~0, 7, tgid` |
//! | 2 | CPU_SWITCH | `~0, 2, cpu` |
//! | 3 | COOKIE_SWITCH | `~0, 3, cookie` |
//! | 4 | KERNEL_ENTER_SWITCH | `~0, 4` |
//! | 5 | KERNEL_EXIT_SWITCH | `~0, 5` |
//! | 6 | MODULE_LOADED | `~0, 6` |
//! | 8 | TRACE_BEGIN | `~0, 8` |
//! | 32 | USER_MAPS (ours) | `~0, 32, tgid, n`, then `n` times `start, end, offset, image_id` |
//! | 33 | USER_STACK (ours) | `~0, 33, n`, the user registers ([`user_regs`]), then `n` stack words from `sp` |
//!
//! USER_MAPS and USER_STACK exist only when `user_stack_size` is set (the legacy daemon never
//! sets it; it aborts on codes of 15 and more). USER_STACK follows the sample (and precedes the
//! backtrace entries) it belongs to: the user registers of the sampled task (for a kernel-mode
//! sample, those it entered the kernel with) and a copy of its user stack from its stack pointer,
//! `n` words. The registers are the architecture's by the word width: with 4-byte words ARM's
//! `r0, .., r15, cpsr` (17), with 8-byte words AArch64's `x0, .., x30, sp, pc, pstate` (34;
//! perf's `PERF_REG_ARM64_*` order plus the PSTATE).
//! USER_MAPS, before the first USER_STACK of a task in each sync pass of a CPU (after its
//! CPU_SWITCH), lists the task's executable file mappings: virtual `start..end`, the file
//! `offset` of `start` in bytes, and the image id (`images`) of the file. Both are valid until
//! the next CPU_SWITCH.
//!
//! The decoder is generic over the word width: it takes words as `u64` and the width in bytes.

/// Escape word of the target word width: `~0UL`.
pub const fn escape_code(word_bytes: usize) -> u64 {
    if word_bytes >= 8 {
        u64::MAX
    } else {
        (1u64 << (word_bytes * 8)) - 1
    }
}

/// `ESCAPE_CODE` of the native word (`~0UL`).
pub const ESCAPE_CODE: usize = !0;
/// Cookie of anonymous memory (legacy `NO_COOKIE`).
pub const NO_COOKIE: u64 = 0;
/// Cookie that means "no image" (legacy `INVALID_COOKIE`, `~0UL`): never emitted in a sample.
pub const INVALID_COOKIE: usize = !0;

/// Escape codes, legacy numbering (`event_buffer.h`).
pub mod code {
    pub const CTX_SWITCH: usize = 1;
    pub const CPU_SWITCH: usize = 2;
    pub const COOKIE_SWITCH: usize = 3;
    pub const KERNEL_ENTER_SWITCH: usize = 4;
    pub const KERNEL_EXIT_SWITCH: usize = 5;
    pub const MODULE_LOADED: usize = 6;
    pub const CTX_TGID: usize = 7;
    pub const TRACE_BEGIN: usize = 8;
    pub const USER_MAPS: usize = 32;
    pub const USER_STACK: usize = 33;
}

/// The largest `user_stack_size` the module accepts, bytes: the most stack a USER_STACK
/// record carries (perf's `--call-graph dwarf` default is 8192).
pub const USER_STACK_SIZE_MAX: u64 = 16384;

/// Mappings a USER_MAPS record lists at most.
pub const USER_MAPS_MAX: usize = 256;

/// Memory the user-stack snapshot buffers of one CPU may take, bytes (each buffer counted at
/// its allocation's size: the power of two at or above its record's bytes, as `kmalloc`
/// rounds).
pub const STACK_POOL_BYTES: usize = 4 << 20;
/// Snapshot buffers per CPU at least, and at most: see [`stack_pool_buffers`].
pub const STACK_POOL_MIN: u32 = 256;
pub const STACK_POOL_MAX: u32 = 2048;

/// Snapshot buffers per CPU for records of `record_bytes` (header and stack) and a CPU ring of
/// `ring_capacity` entries: as many as [`STACK_POOL_BYTES`] holds, within [`STACK_POOL_MIN`]
/// ..= [`STACK_POOL_MAX`] (the smallest stack, 4 bytes, would give 16384; the largest,
/// [`USER_STACK_SIZE_MAX`], 128, too few to outlast a sync interval at 1,000 samples/s), and no
/// more than the ring holds samples (each waiting snapshot is one sample's). With
/// `user_stack_size` 2048 (`oprof record -g`) 1024 buffers, about a second of samples at
/// 1,000/s; at the largest size 256 (8 MiB).
pub fn stack_pool_buffers(record_bytes: usize, ring_capacity: u32) -> u32 {
    let each = record_bytes
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX);
    let fits = u32::try_from(STACK_POOL_BYTES / each).unwrap_or(u32::MAX);
    fits.clamp(STACK_POOL_MIN, STACK_POOL_MAX)
        .min(ring_capacity)
}

/// Registers of a USER_STACK record in a stream of `word_bytes`-byte words: 17 for 4-byte words
/// (ARM: r0..r15, cpsr, `pt_regs.uregs[0..17]`), 34 for 8-byte words (AArch64: x0..x30, sp, pc,
/// pstate, `struct user_pt_regs`).
pub const fn user_regs(word_bytes: usize) -> usize {
    if word_bytes >= 8 {
        34
    } else {
        17
    }
}

/// Index of the stack pointer among the registers of [`user_regs`]: r13 (ARM), sp (AArch64).
pub const fn user_regs_sp(word_bytes: usize) -> usize {
    if word_bytes >= 8 {
        31
    } else {
        13
    }
}

/// Words of a USER_STACK record before its stack words, for `word_bytes`-byte words.
pub const fn user_stack_header_words(word_bytes: usize) -> usize {
    3 + user_regs(word_bytes)
}

/// Registers of a USER_STACK record in the native word ([`user_regs`]; the module's).
pub const USER_REGS: usize = user_regs(core::mem::size_of::<usize>());
/// Index of the stack pointer in the native registers ([`user_regs_sp`]).
pub const USER_REGS_SP: usize = user_regs_sp(core::mem::size_of::<usize>());
/// Words of a native USER_STACK record before its stack words.
pub const USER_STACK_HEADER: usize = user_stack_header_words(core::mem::size_of::<usize>());
/// Words of a USER_MAPS record before its mappings, and per mapping.
pub const USER_MAPS_HEADER: usize = 4;
pub const USER_MAPS_ENTRY: usize = 4;

/// The first words of a USER_STACK record of `n` stack words (the registers follow).
pub const fn user_stack_header(n: usize) -> [usize; 3] {
    [ESCAPE_CODE, code::USER_STACK, n]
}

/// The first words of a USER_MAPS record of task `tgid` with `n` mappings.
pub const fn user_maps_header(tgid: usize, n: usize) -> [usize; USER_MAPS_HEADER] {
    [ESCAPE_CODE, code::USER_MAPS, tgid, n]
}

/// Longest record in words (CTX_SWITCH with its TGID part).
pub const MAX_RECORD_WORDS: usize = 7;

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// A sample: PC (kernel) or image offset / PC (user), and the counter index.
    Sample { pc: u64, event: u64 },
    /// Switch of task: `pid`, `tgid`, and the cookie of the task's executable (0: unknown).
    CtxSwitch {
        pid: u64,
        tgid: u64,
        app_cookie: u64,
    },
    /// The following records were taken on `cpu`.
    CpuSwitch { cpu: u64 },
    /// The following user samples are offsets into the image `cookie` (0: anonymous, raw PC).
    CookieSwitch { cookie: u64 },
    /// The following samples were taken in kernel mode.
    KernelEnter,
    /// The following samples were taken in user mode.
    KernelExit,
    /// A module was loaded: re-read the module list.
    ModuleLoaded,
    /// The next sample is followed by its backtrace (samples with event 0).
    TraceBegin,
    /// The executable mappings of task `tgid`: `n` entries of [`USER_MAPS_ENTRY`] words follow
    /// the header (the record's words: [`Record::words`]).
    UserMaps { tgid: u64, n: u64 },
    /// The user registers (`regs` words, [`user_regs`] of the stream's width) and `n` user
    /// stack words of the last sample.
    UserStack { n: u64, regs: u64 },
}

impl Record {
    /// Number of words the record takes in the stream (saturating for absurd lengths, which
    /// a stream then cannot hold).
    pub const fn words(&self) -> usize {
        match self {
            Record::UserMaps { n, .. } => (*n as usize)
                .saturating_mul(USER_MAPS_ENTRY)
                .saturating_add(USER_MAPS_HEADER),
            Record::UserStack { n, regs } => (*n as usize)
                .saturating_add(*regs as usize)
                .saturating_add(3),
            Record::Sample { .. } => 2,
            Record::CtxSwitch { .. } => 7,
            Record::CpuSwitch { .. } | Record::CookieSwitch { .. } => 3,
            Record::KernelEnter
            | Record::KernelExit
            | Record::ModuleLoaded
            | Record::TraceBegin => 2,
        }
    }

    /// Encodes the record as native words into `out[..self.words()]`, returning the count.
    ///
    /// Values are truncated to the native word (they come from native words in the kernel).
    /// Returns `None`, writing nothing, if `out` is shorter than [`Record::words`], and for
    /// USER_MAPS and USER_STACK, whose payload the writer appends to [`user_maps_header`] /
    /// [`user_stack_header`] itself.
    pub fn encode(&self, out: &mut [usize]) -> Option<usize> {
        if matches!(self, Record::UserMaps { .. } | Record::UserStack { .. }) {
            return None;
        }
        let n = self.words();
        let out = out.get_mut(..n)?;
        let e = ESCAPE_CODE;
        match *self {
            Record::Sample { pc, event } => out.copy_from_slice(&[pc as usize, event as usize]),
            Record::CtxSwitch {
                pid,
                tgid,
                app_cookie,
            } => out.copy_from_slice(&[
                e,
                code::CTX_SWITCH,
                pid as usize,
                app_cookie as usize,
                e,
                code::CTX_TGID,
                tgid as usize,
            ]),
            Record::CpuSwitch { cpu } => out.copy_from_slice(&[e, code::CPU_SWITCH, cpu as usize]),
            Record::CookieSwitch { cookie } => {
                out.copy_from_slice(&[e, code::COOKIE_SWITCH, cookie as usize])
            }
            Record::KernelEnter => out.copy_from_slice(&[e, code::KERNEL_ENTER_SWITCH]),
            Record::KernelExit => out.copy_from_slice(&[e, code::KERNEL_EXIT_SWITCH]),
            Record::ModuleLoaded => out.copy_from_slice(&[e, code::MODULE_LOADED]),
            Record::TraceBegin => out.copy_from_slice(&[e, code::TRACE_BEGIN]),
            Record::UserMaps { .. } | Record::UserStack { .. } => return None,
        }
        Some(n)
    }
}

/// Why the decoder stopped. `word` is the index of the offending record's first word
/// (multiply by the word size for a byte offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The stream ends inside a record that needs `need` words.
    Truncated { word: usize, need: usize },
    /// An escape code that the legacy daemon would `abort()` on, or an unknown one.
    UnknownCode { word: usize, code: u64 },
    /// A CTX_SWITCH whose second half is not `~0, 7`.
    BadCtxSwitch { word: usize },
}

/// Iterator over the records of a word stream; yields `(word_index, record)`.
///
/// After an error it yields that error once and then stops.
pub struct Decoder<'a> {
    words: &'a [u64],
    pos: usize,
    escape: u64,
    /// Registers of a USER_STACK record ([`user_regs`] of the width).
    regs: u64,
    failed: bool,
}

impl<'a> Decoder<'a> {
    /// Decodes `words`, each holding one stream word of `word_bytes` (4 or 8) bytes.
    pub fn new(words: &'a [u64], word_bytes: usize) -> Self {
        Decoder {
            words,
            pos: 0,
            escape: escape_code(word_bytes),
            regs: user_regs(word_bytes) as u64,
            failed: false,
        }
    }

    fn words_at(&self, at: usize, need: usize) -> Result<&'a [u64], DecodeError> {
        self.words
            .get(at..at.saturating_add(need))
            .ok_or(DecodeError::Truncated { word: at, need })
    }

    fn next_record(&mut self) -> Result<(usize, Record), DecodeError> {
        let at = self.pos;
        let first = self.words_at(at, 2)?;
        if first[0] != self.escape {
            self.pos = at + 2;
            return Ok((
                at,
                Record::Sample {
                    pc: first[0],
                    event: first[1],
                },
            ));
        }
        let c = first[1];
        let rec = match c as usize {
            code::CTX_SWITCH => {
                let w = self.words_at(at, 7)?;
                if w[4] != self.escape || w[5] != code::CTX_TGID as u64 {
                    return Err(DecodeError::BadCtxSwitch { word: at });
                }
                Record::CtxSwitch {
                    pid: w[2],
                    app_cookie: w[3],
                    tgid: w[6],
                }
            }
            code::CPU_SWITCH => Record::CpuSwitch {
                cpu: self.words_at(at, 3)?[2],
            },
            code::COOKIE_SWITCH => Record::CookieSwitch {
                cookie: self.words_at(at, 3)?[2],
            },
            code::KERNEL_ENTER_SWITCH => Record::KernelEnter,
            code::KERNEL_EXIT_SWITCH => Record::KernelExit,
            code::MODULE_LOADED => Record::ModuleLoaded,
            code::TRACE_BEGIN => Record::TraceBegin,
            code::USER_MAPS => {
                let w = self.words_at(at, USER_MAPS_HEADER)?;
                Record::UserMaps {
                    tgid: w[2],
                    n: w[3],
                }
            }
            code::USER_STACK => Record::UserStack {
                n: self.words_at(at, 3)?[2],
                regs: self.regs,
            },
            _ => return Err(DecodeError::UnknownCode { word: at, code: c }),
        };
        // A variable-length record must be whole.
        self.words_at(at, rec.words())?;
        self.pos = at + rec.words();
        Ok((at, rec))
    }
}

impl Iterator for Decoder<'_> {
    type Item = Result<(usize, Record), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.words.len() {
            return None;
        }
        let r = self.next_record();
        self.failed = r.is_err();
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_pool_sizes() {
        // 2048 stack bytes + the AArch64 header (37 words): 2344 bytes in a 4 KiB allocation.
        let arm64 = |stack: usize| stack + 8 * user_stack_header_words(8);
        assert_eq!(stack_pool_buffers(arm64(2048), 8192), 1024);
        assert_eq!(stack_pool_buffers(arm64(16384), 8192), STACK_POOL_MIN);
        assert_eq!(stack_pool_buffers(arm64(8), 8192), STACK_POOL_MAX);
        // ARM: 2048 + 20 words = 2128 bytes, also 4 KiB.
        assert_eq!(
            stack_pool_buffers(2048 + 4 * user_stack_header_words(4), 8192),
            1024
        );
        // Never more than the ring's samples; absurd sizes do not overflow.
        assert_eq!(stack_pool_buffers(arm64(2048), 16), 16);
        assert_eq!(stack_pool_buffers(usize::MAX, 8192), STACK_POOL_MIN);
        assert_eq!(stack_pool_buffers(0, 8192), STACK_POOL_MAX);
    }

    fn all_records() -> [Record; 9] {
        [
            Record::CpuSwitch { cpu: 1 },
            Record::KernelEnter,
            Record::CtxSwitch {
                pid: 42,
                tgid: 40,
                app_cookie: 0,
            },
            Record::Sample {
                pc: 0xc010_0000,
                event: 0,
            },
            Record::KernelExit,
            Record::CookieSwitch { cookie: 0 },
            Record::Sample {
                pc: 0x1_0000,
                event: 3,
            },
            Record::ModuleLoaded,
            Record::TraceBegin,
        ]
    }

    #[test]
    fn round_trip_native() {
        let mut buf = [0usize; 64];
        let mut n = 0;
        for r in all_records() {
            n += r.encode(&mut buf[n..]).unwrap();
        }
        let words: Vec<u64> = buf[..n].iter().map(|&w| w as u64).collect();
        let got: Vec<Record> = Decoder::new(&words, core::mem::size_of::<usize>())
            .map(|r| r.unwrap().1)
            .collect();
        assert_eq!(got, all_records());
    }

    #[test]
    fn legacy_word_layout() {
        let mut buf = [0usize; 7];
        assert_eq!(
            Record::CtxSwitch {
                pid: 5,
                tgid: 6,
                app_cookie: 9
            }
            .encode(&mut buf),
            Some(7)
        );
        assert_eq!(buf, [!0, 1, 5, 9, !0, 7, 6]);
        let mut small = [0usize; 2];
        assert_eq!(Record::CpuSwitch { cpu: 0 }.encode(&mut small), None);
    }

    #[test]
    fn decodes_32bit_stream() {
        let e = 0xffff_ffffu64;
        let words = [e, 2, 0, e, 4, 0xc000_8000, 0];
        let got: Vec<_> = Decoder::new(&words, 4).map(|r| r.unwrap()).collect();
        assert_eq!(got[0], (0, Record::CpuSwitch { cpu: 0 }));
        assert_eq!(got[1], (3, Record::KernelEnter));
        assert_eq!(
            got[2],
            (
                5,
                Record::Sample {
                    pc: 0xc000_8000,
                    event: 0
                }
            )
        );
    }

    #[test]
    fn user_stack_and_maps_records() {
        let e = 0xffff_ffffu64;
        let mut w = vec![e, 32, 7, 1, 0x1_0000, 0x1_1000, 0, 3];
        w.extend([e, 33, 2]);
        w.extend((0..17).map(|r| 100 + r));
        w.extend([e, 0x1_0004]);
        w.extend([0x1_0010, 0]);
        let got: Vec<_> = Decoder::new(&w, 4).map(|r| r.unwrap()).collect();
        assert_eq!(got[0], (0, Record::UserMaps { tgid: 7, n: 1 }));
        assert_eq!(
            got[1],
            (8, Record::UserStack { n: 2, regs: 17 }),
            "an escape word inside the stack is data"
        );
        assert_eq!(
            got[2],
            (
                30,
                Record::Sample {
                    pc: 0x1_0010,
                    event: 0
                }
            )
        );
        assert_eq!((got[0].1.words(), got[1].1.words()), (8, 22));
        let mut out = [0usize; 32];
        assert_eq!(
            Record::UserStack { n: 0, regs: 17 }.encode(&mut out),
            None,
            "payload written by the caller"
        );
        assert_eq!(user_stack_header(5), [!0, 33, 5]);
        assert_eq!(user_maps_header(9, 2), [!0, 32, 9, 2]);
        // Truncated payloads and absurd lengths.
        let mut d = Decoder::new(&w[..25], 4);
        d.next();
        assert_eq!(
            d.next(),
            Some(Err(DecodeError::Truncated { word: 8, need: 22 }))
        );
        let huge = [e, 33, 0xffff_ffff];
        assert!(matches!(
            Decoder::new(&huge, 4).next(),
            Some(Err(DecodeError::Truncated { .. }))
        ));
    }

    #[test]
    fn errors_name_the_offset() {
        let e = 0xffff_ffffu64;
        let w = [e, 2, 0, e, 9];
        let mut d = Decoder::new(&w, 4);
        assert!(d.next().unwrap().is_ok());
        assert_eq!(
            d.next(),
            Some(Err(DecodeError::UnknownCode { word: 3, code: 9 }))
        );
        assert_eq!(d.next(), None);
        let w = [e, 1, 5, 0, e];
        let mut d = Decoder::new(&w, 4);
        assert_eq!(
            d.next(),
            Some(Err(DecodeError::Truncated { word: 0, need: 7 }))
        );
        let w = [0x1234];
        let mut d = Decoder::new(&w, 4);
        assert_eq!(
            d.next(),
            Some(Err(DecodeError::Truncated { word: 0, need: 2 }))
        );
        let w = [e, 1, 5, 0, e, 8, 6];
        let mut d = Decoder::new(&w, 4);
        assert_eq!(d.next(), Some(Err(DecodeError::BadCtxSwitch { word: 0 })));
        // A lone CTX_TGID (7) is what makes the legacy daemon abort.
        let w = [e, 7, 1];
        let mut d = Decoder::new(&w, 4);
        assert!(matches!(
            d.next(),
            Some(Err(DecodeError::UnknownCode { code: 7, .. }))
        ));
    }
}
