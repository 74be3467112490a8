//! The stage between reading a stream and counting it: every USER_STACK record (the user
//! registers and stack copy the module took with a sample, `rust/user_stack.rs`) is unwound
//! with its task's USER_MAPS record ([`super::Unwinder`]) and replaced by the user callers it
//! proves, written as ordinary call-chain frames (`offset, 0` words after COOKIE_SWITCH) at
//! the end of the sample's chain; USER_MAPS records go. The views downstream see a legacy
//! stream with longer chains.
//!
//! The unwound frames are appended only where the stream's chain reaches user space: after a
//! user-mode sample, or after the user frame a kernel-mode sample's chain ends its kernel part
//! with (the PC the task entered the kernel from, which is the snapshot's PC). A chain the
//! module cut short (a lost frame) gets none: no caller is put under a frame that did not call
//! it. Each chain's end is counted by reason ([`Expansion::ends`]).
//!
//! In an 8-byte-word (arm64) stream, the chains of samples without a snapshot come from the
//! module's frame-record walk: they are proven edge by edge here ([`super::fpchain`]) and cut at
//! the first unproven edge ([`Expansion::fp`]), as `Inputs::load` does for streams without
//! snapshots.

use super::a64::{Regs64, Stack64};
use super::fpchain::{FpStats, Prover};
use super::{Chain, End, ImageTables, Images, Place, Regs, Stack, Unwinder};
use crate::input::stream::{ChainState, Role, SampleCtx};
use crate::resolve::elf::offset_to_vaddr;
use crate::resolve::FastState;
use oprofile_common::event::{
    code, escape_code, user_regs, user_stack_header_words, Decoder, Record, USER_MAPS_ENTRY,
    USER_MAPS_HEADER,
};
use oprofile_common::sync::BACKTRACE_DEPTH_MAX;
use std::collections::{BTreeMap, HashMap};

/// One executable mapping of a USER_MAPS record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MapEntry {
    start: u64,
    end: u64,
    /// File offset of `start`, bytes.
    offset: u64,
    /// Image id (`images`).
    image: u64,
}

/// A task's mappings with the tables of their images: the unwinder's view of its address space.
struct TaskImages<'a> {
    maps: &'a [MapEntry],
    tables: &'a HashMap<u64, Option<ImageTables>, FastState>,
}

impl TaskImages<'_> {
    fn entry(&self, addr: u64) -> Option<&MapEntry> {
        self.maps.iter().find(|m| m.start <= addr && addr < m.end)
    }

    /// The (image, file offset) of each runtime address in `frames`, up to the first in no
    /// mapping.
    fn offsets(&self, frames: impl ExactSizeIterator<Item = u64>) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(frames.len());
        out.extend(frames.map_while(|a| {
            let m = self.entry(a)?;
            Some((m.image, m.offset.checked_add(a - m.start)?))
        }));
        out
    }
}

impl Images for TaskImages<'_> {
    fn find(&self, addr: u64) -> Option<Place<'_>> {
        let m = self.entry(addr)?;
        let tables = self.tables.get(&m.image)?.as_ref()?;
        let off = m.offset.checked_add(addr.checked_sub(m.start)?)?;
        let elf_addr = offset_to_vaddr(&tables.loads, off)?;
        Some(Place {
            tables,
            elf_addr,
            executable: true,
            id: Some(m.image),
        })
    }
}

/// What [`expand`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expansion {
    /// USER_STACK records seen.
    pub snapshots: u64,
    /// User frames added to chains.
    pub frames: u64,
    /// Why each unwound chain ended, by [`End`] name (`Depth` included); AArch32 (compat) tasks
    /// of a 64-bit stream, not unwound, as `compat task`.
    pub ends: BTreeMap<String, u64>,
    /// Snapshots whose frames were not added: no USER_MAPS for the task (or a stream of a word
    /// size other than 4 and 8),
    pub no_maps: u64,
    /// the chain did not reach user space in the stream (the module cut it: a return address in
    /// no mapping, `bt_lost_no_mapping`, or `backtrace_aborted`),
    pub cut: u64,
    /// or its kernel part took the whole depth.
    pub depth_taken: u64,
    /// Unwound chains shortened to the session's depth (kernel and user frames together, as
    /// `backtrace_depth` counts them).
    pub truncated: u64,
    /// The recorded depth was known (else chains the depth ended count as cut short).
    pub depth_known: bool,
    /// Frame-record chains (8-byte streams, samples without a snapshot) proven and cut.
    pub fp: FpStats,
}

impl Expansion {
    /// One line for the report's notes.
    pub fn note(&self) -> String {
        let ends: Vec<String> = self.ends.iter().map(|(k, v)| format!("{v} {k}")).collect();
        format!(
            "user stack snapshots: {} unwound into {} frames; chains ended: {}; unused: {} without mappings, \
             {} chains cut short, {} kernel parts at the depth; {} chains cut at the depth{}",
            self.snapshots,
            self.frames,
            ends.join(", "),
            self.no_maps,
            self.cut,
            self.depth_taken,
            self.truncated,
            if self.depth_known { "" } else { " (recorded depth unknown: give --backtrace-depth)" }
        )
    }
}

/// Whether `words` may hold USER_STACK records (a cheap scan: an escape word followed by the
/// code); streams without them need no [`expand`].
pub fn has_snapshots(words: &[u64], word_bytes: usize) -> bool {
    let esc = escape_code(word_bytes);
    words
        .windows(2)
        .any(|w| w[0] == esc && w[1] == code::USER_STACK as u64)
}

/// The stream state while expanding: feed it records in stream order ([`Expander::record`]),
/// take the words that became final ([`Expander::take_final`]), and the rest at the end
/// ([`Expander::finish`]).
///
/// # Invariants
/// `out` holds the output words from absolute index `base` on; every index in `chain_user` is
/// at least `base` (they are the open chain's records, which are never taken before the chain
/// is closed), and they increase.
pub struct Expander<'a> {
    out: Vec<u64>,
    /// Output words already taken: the absolute index of `out[0]`.
    base: usize,
    ctx: SampleCtx,
    chain: ChainState,
    maps: HashMap<u64, Vec<MapEntry>>,
    tables: HashMap<u64, Option<ImageTables>, FastState>,
    load: &'a mut dyn FnMut(u64) -> Option<ImageTables>,
    unwinder: Unwinder,
    /// The open chain: whether the sample was in kernel mode, whether a user frame has been
    /// seen, and the unwound user callers waiting to be appended.
    sample_kernel: bool,
    user_reached: bool,
    /// Frames of the open chain so far, and the most a chain has (`depth`).
    chain_frames: usize,
    depth: usize,
    pending: Option<Vec<(u64, u64)>>,
    word_bytes: usize,
    stats: Expansion,
    /// 8-byte streams: proves the frame-record chains.
    prover: Option<Prover>,
    /// The open chain's user part: each entry's (image, offset) (`None`: in no image) and the
    /// absolute output index of its record.
    chain_user: Vec<(Option<(u64, u64)>, usize)>,
    /// Reused by the unwinders: a snapshot's stack as bytes.
    stack_bytes: Vec<u8>,
}

/// Unwinds the snapshots of the stream `words` (`word_bytes` per word) held whole in memory;
/// `load(image_id)` gives an image's unwind tables (`None`: no host file). A chain gets at most
/// `depth` frames, kernel and user together (legacy `backtrace_depth`; `None`: unknown, then
/// the module's largest, 128). Errors: a decode error, described with its byte offset.
/// [`Expanding`] does the same over a reader in bounded memory.
pub fn expand(
    words: &[u64],
    word_bytes: usize,
    depth: Option<usize>,
    load: &mut dyn FnMut(u64) -> Option<ImageTables>,
) -> Result<(Vec<u64>, Expansion), String> {
    let mut x = Expander::new(word_bytes, depth, load);
    for item in Decoder::new(words, word_bytes) {
        let (at, rec) =
            item.map_err(|e| crate::input::stream::describe(e, word_bytes, words.len()))?;
        let rec_words = words.get(at..at.saturating_add(rec.words())).unwrap_or(&[]);
        x.record(&rec, rec_words);
    }
    Ok(x.finish())
}

impl<'a> Expander<'a> {
    /// An expander of a stream of `word_bytes`-byte words; `depth` and `load` as in [`expand`].
    pub fn new(
        word_bytes: usize,
        depth: Option<usize>,
        load: &'a mut dyn FnMut(u64) -> Option<ImageTables>,
    ) -> Self {
        let known = depth.is_some();
        let depth = depth.unwrap_or(BACKTRACE_DEPTH_MAX as usize).max(1);
        Expander {
            out: Vec::new(),
            base: 0,
            ctx: SampleCtx::default(),
            chain: ChainState::default(),
            maps: HashMap::new(),
            tables: HashMap::default(),
            load,
            // The unwinder's first frame is the snapshot's PC, which the chain already has.
            unwinder: Unwinder::new(depth.saturating_add(1)),
            sample_kernel: false,
            user_reached: false,
            chain_frames: 0,
            depth,
            pending: None,
            word_bytes,
            stats: Expansion {
                depth_known: known,
                ..Default::default()
            },
            prover: (word_bytes == 8).then(Prover::new),
            chain_user: Vec::new(),
            stack_bytes: Vec::new(),
        }
    }

    /// Moves the output words that no later record can change (those before the open chain's
    /// first frame-record entry, which [`Self::prove_fp_chain`] may still remove) to `into`.
    pub fn take_final(&mut self, into: &mut Vec<u64>) {
        let end = self
            .chain_user
            .first()
            .map_or(self.out.len(), |&(_, at)| at - self.base);
        into.extend(self.out.drain(..end));
        self.base += end;
    }

    /// Closes the last chain: the output words not taken yet, and what was done.
    pub fn finish(mut self) -> (Vec<u64>, Expansion) {
        self.flush();
        if let Some(p) = self.prover.take() {
            self.stats.fp = p.stats;
        }
        (self.out, self.stats)
    }
}

impl Expander<'_> {
    /// Takes the next record `rec` of the stream, `words` its words.
    pub fn record(&mut self, rec: &Record, words: &[u64]) {
        match *rec {
            Record::UserMaps { tgid, .. } => return self.user_maps(tgid, words),
            Record::UserStack { .. } => return self.user_stack(words),
            _ => {}
        }
        let ends_chain = match *rec {
            Record::TraceBegin | Record::CpuSwitch { .. } | Record::CtxSwitch { .. } => true,
            Record::Sample { event, .. } => !self.chain.is_frame(event),
            _ => false,
        };
        if ends_chain {
            self.flush();
        }
        if let Record::CpuSwitch { .. } = rec {
            self.maps.clear();
        }
        let at = self.base + self.out.len();
        self.out.extend_from_slice(words);
        self.ctx.apply(rec);
        let role = self.chain.apply(rec);
        match role {
            Some(Role::Sample { .. }) => {
                self.sample_kernel = self.ctx.in_kernel == Some(true);
                self.user_reached = !self.sample_kernel;
                self.chain_frames = 0;
                self.chain_user.clear();
            }
            Some(Role::Frame) => {
                self.user_reached = self.ctx.in_kernel == Some(false);
                self.chain_frames += 1;
            }
            None => {}
        }
        if let (Some(_), Some(_), Record::Sample { pc, .. }) = (role, &self.prover, rec) {
            let user = self.ctx.in_kernel == Some(false);
            if user || !self.chain_user.is_empty() {
                let place = self
                    .ctx
                    .cookie
                    .filter(|&c| user && c != 0)
                    .map(|c| (c, *pc));
                self.chain_user.push((place, at));
            }
        }
    }

    fn user_maps(&mut self, tgid: u64, words: &[u64]) {
        let entries = words.get(USER_MAPS_HEADER..).unwrap_or(&[]);
        let maps: Vec<MapEntry> = entries
            .chunks_exact(USER_MAPS_ENTRY)
            .map(|e| MapEntry {
                start: e[0],
                end: e[1],
                offset: e[2],
                image: e[3],
            })
            .collect();
        for m in &maps {
            if !self.tables.contains_key(&m.image) {
                let t = (self.load)(m.image);
                self.tables.insert(m.image, t);
            }
        }
        self.maps.insert(tgid, maps);
    }

    /// Unwinds a snapshot of the open chain's sample; its callers wait in `pending`.
    fn user_stack(&mut self, words: &[u64]) {
        self.stats.snapshots += 1;
        let header = user_stack_header_words(self.word_bytes);
        let (Some(regs), Some(stack)) = (words.get(3..header), words.get(header..)) else {
            return;
        };
        let Some(maps) = self.ctx.tgid.and_then(|t| self.maps.get(&t)) else {
            self.stats.no_maps += 1;
            return;
        };
        let images = TaskImages {
            maps,
            tables: &self.tables,
        };
        let (end, callers) = match self.word_bytes {
            4 => unwind_a32(
                &mut self.unwinder,
                &images,
                regs,
                stack,
                &mut self.stack_bytes,
            ),
            8 => match Regs64::from_words(regs) {
                Some(r) if r.aarch32() => ("compat task", Vec::new()),
                Some(r) => unwind_a64(
                    &mut self.unwinder,
                    &images,
                    &r,
                    stack,
                    &mut self.stack_bytes,
                ),
                None => return,
            },
            _ => {
                self.stats.no_maps += 1;
                return;
            }
        };
        *self.stats.ends.entry(end.to_string()).or_default() += 1;
        self.pending = Some(callers);
    }

    /// Appends the pending frames at the end of the open chain, if it reached user space, up to
    /// the session's depth.
    fn flush(&mut self) {
        if self.pending.is_none() {
            self.prove_fp_chain();
        }
        self.chain_user.clear();
        let Some(mut frames) = self.pending.take() else {
            return;
        };
        if !self.user_reached || !self.chain.open {
            if self.chain_frames >= self.depth {
                self.stats.depth_taken += 1;
            } else {
                self.stats.cut += 1;
            }
            return;
        }
        let room = self.depth.saturating_sub(self.chain_frames);
        if frames.len() > room {
            frames.truncate(room);
            self.stats.truncated += 1;
        }
        let esc = escape_code(self.word_bytes);
        let (mode, cookie) = (self.ctx.in_kernel, self.ctx.cookie);
        if mode != Some(false) {
            self.emit(&Record::KernelExit, &[esc, code::KERNEL_EXIT_SWITCH as u64]);
        }
        for (image, offset) in frames {
            if self.ctx.cookie != Some(image) {
                self.emit(
                    &Record::CookieSwitch { cookie: image },
                    &[esc, code::COOKIE_SWITCH as u64, image],
                );
            }
            self.out.extend([offset, 0]);
            self.stats.frames += 1;
        }
        // What later records rely on (the module elides unchanged modes and images).
        if mode == Some(true) {
            self.emit(
                &Record::KernelEnter,
                &[esc, code::KERNEL_ENTER_SWITCH as u64],
            );
        }
        if let Some(c) = cookie.filter(|&c| self.ctx.cookie != Some(c)) {
            self.emit(
                &Record::CookieSwitch { cookie: c },
                &[esc, code::COOKIE_SWITCH as u64, c],
            );
        }
    }

    /// Cuts the open chain, from the module's frame-record walk, at its first unproven edge:
    /// the records of the frames left out go (they are at the end of `out`; the switches
    /// between them stay, as later records rely on them).
    fn prove_fp_chain(&mut self) {
        let Some(prover) = self.prover.as_mut() else {
            return;
        };
        if self.chain_user.len() < 2 {
            return;
        }
        let user: Vec<Option<(u64, u64)>> = self.chain_user.iter().map(|e| e.0).collect();
        let keep = prover.keep(&user, 1, &mut *self.load);
        for &(_, at) in self.chain_user[keep..].iter().rev() {
            let at = at - self.base;
            self.out.drain(at..at + 2);
        }
    }

    fn emit(&mut self, rec: &Record, words: &[u64]) {
        self.out.extend_from_slice(words);
        self.ctx.apply(rec);
    }
}

/// Unwinds an AArch32 snapshot (`regs`: r0–r15, CPSR; `stack`: 4-byte words from SP): why the
/// chain ended and the callers' (image, file offset). The first frame is the snapshot's PC
/// (the sample itself, or the user frame the kernel's chain ends with); its callers follow.
/// `bytes`: a buffer for the stack's bytes, reused from snapshot to snapshot.
fn unwind_a32(
    u: &mut Unwinder,
    images: &TaskImages<'_>,
    regs: &[u64],
    stack: &[u64],
    bytes: &mut Vec<u8>,
) -> (&'static str, Vec<(u64, u64)>) {
    let mut r = [0u32; 16];
    for (d, s) in r.iter_mut().zip(regs) {
        *d = *s as u32;
    }
    let regs = Regs {
        r,
        cpsr: regs.get(user_regs(4) - 1).map_or(0, |&c| c as u32),
    };
    bytes.clear();
    bytes.extend(stack.iter().flat_map(|&w| (w as u32).to_le_bytes()));
    let chain: Chain = u.unwind(
        images,
        &regs,
        &Stack {
            sp: regs.r[13],
            bytes,
        },
    );
    (
        end_name(chain.end),
        images.offsets(chain.frames.iter().skip(1).map(|f| u64::from(f.addr))),
    )
}

/// Unwinds an AArch64 snapshot (`stack`: 8-byte words from SP), as [`unwind_a32`].
fn unwind_a64(
    u: &mut Unwinder,
    images: &TaskImages<'_>,
    regs: &Regs64,
    stack: &[u64],
    bytes: &mut Vec<u8>,
) -> (&'static str, Vec<(u64, u64)>) {
    bytes.clear();
    bytes.extend(stack.iter().flat_map(|&w| w.to_le_bytes()));
    let chain = u.unwind_a64(images, regs, &Stack64 { sp: regs.sp, bytes });
    (
        end_name(chain.end),
        images.offsets(chain.frames.iter().skip(1).copied()),
    )
}

/// The name of an [`End`] without its address.
fn end_name(e: End) -> &'static str {
    match e {
        End::Outermost => "outermost",
        End::NoUnwindInfo { .. } => "no unwind info",
        End::CantUnwind => "cantunwind",
        End::UnprovenLeaf { .. } => "unproven leaf",
        End::StackOutside => "stack outside the snapshot",
        End::NotACall => "not after a call",
        End::NoMapping => "no mapping",
        End::Depth => "depth",
        End::Loop => "loop",
        End::BadTable => "bad table",
        End::Unsupported => "unsupported CFI",
    }
}
