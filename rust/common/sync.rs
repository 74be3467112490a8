// SPDX-License-Identifier: GPL-2.0

//! The `buffer_sync` state machine: per-CPU samples in, legacy event words out.
//!
//! Legacy `drivers/oprofile/buffer_sync.c` semantics, with one deliberate change: a sample and the
//! context records it needs (CPU_SWITCH, KERNEL_ENTER/EXIT, CTX_SWITCH, COOKIE_SWITCH) are written
//! as one group, all or nothing. Legacy dropped single words when the event buffer was full, which
//! could leave half a CTX_SWITCH in the stream; here a group that does not fit is dropped whole,
//! counted as one lost sample, and its context is re-emitted before the next sample.
//!
//! Order inside a group (legacy `sync_buffer`): CPU_SWITCH (first sample of a pass), TRACE_BEGIN,
//! KERNEL_ENTER/EXIT, CTX_SWITCH + TGID, COOKIE_SWITCH (user samples), then `pc, event`.

use super::event::Record;

/// `CpuSample::flags`: the sample was taken in kernel mode.
pub const IS_KERNEL: u32 = 1 << 0;

/// One entry of a per-CPU sample buffer, written in interrupt context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuSample {
    /// Program counter at the interrupt.
    pub pc: usize,
    /// Counter index (0 in timer mode).
    pub event: u32,
    /// [`IS_KERNEL`] and future flags.
    pub flags: u32,
    /// Thread id (`task->pid`) of the interrupted task.
    pub pid: i32,
    /// Process id (`task->tgid`) of the interrupted task.
    pub tgid: i32,
}

impl CpuSample {
    /// Whether the sample was taken in kernel mode.
    pub fn is_kernel(&self) -> bool {
        self.flags & IS_KERNEL != 0
    }
}

/// Where a sample's PC points, as resolved by the caller in process context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Kernel text: the raw PC is emitted (legacy; userspace classifies vmlinux vs modules).
    Kernel,
    /// User code: `offset` into the image `cookie` (0 = anonymous, then `offset` is the PC).
    User { cookie: u64, offset: u64 },
    /// The task had no mm (`sample_lost_no_mm`).
    NoMm,
    /// No mapping contains the PC (`sample_lost_no_mapping`).
    NoMapping,
}

/// What became of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written to the event buffer.
    Delivered,
    /// Dropped: the task had no mm.
    LostNoMm,
    /// Dropped: no mapping for the PC.
    LostNoMapping,
    /// Dropped whole: the event buffer had no room (`event_lost_overflow`).
    LostOverflow,
}

/// Destination of event words (the event buffer).
pub trait EventSink {
    /// Appends all of `words`, or nothing and returns `false` if they do not all fit.
    fn write_group(&mut self, words: &[usize]) -> bool;
}

/// Words of the largest group: CPU_SWITCH 3 + TRACE_BEGIN 2 + KERNEL_* 2 + CTX 7 + COOKIE 3 + 2.
pub const MAX_GROUP_WORDS: usize = 19;

/// State of one sync pass over one CPU's buffer (legacy resets it at every pass).
#[derive(Debug, Clone)]
pub struct SyncPass {
    cpu: u32,
    cpu_switch_done: bool,
    in_kernel: Option<bool>,
    ctx: Option<(i32, i32, u64)>,
    cookie: Option<u64>,
}

impl SyncPass {
    /// Starts a pass for `cpu`: the first delivered sample is preceded by CPU_SWITCH and full
    /// context, as legacy `add_cpu_switch` + `op_cpu_buffer_reset` force.
    pub fn new(cpu: u32) -> Self {
        SyncPass { cpu, cpu_switch_done: false, in_kernel: None, ctx: None, cookie: None }
    }

    /// Emits `s` (resolved to `loc`, in a task whose executable has cookie `app_cookie`).
    pub fn add_sample(
        &mut self,
        s: &CpuSample,
        loc: Location,
        app_cookie: u64,
        sink: &mut impl EventSink,
    ) -> Outcome {
        let (pc, cookie) = match loc {
            Location::NoMm => return Outcome::LostNoMm,
            Location::NoMapping => return Outcome::LostNoMapping,
            Location::Kernel => (s.pc as u64, None),
            Location::User { cookie, offset } => (offset, Some(cookie)),
        };
        let mut words = [0usize; MAX_GROUP_WORDS];
        let mut n = 0;
        let mut push = |r: Record, n: &mut usize| {
            // MAX_GROUP_WORDS covers every combination below; `encode` returns None otherwise.
            if let Some(k) = words.get_mut(*n..).and_then(|w| r.encode(w)) {
                *n += k;
            }
        };
        if !self.cpu_switch_done {
            push(Record::CpuSwitch { cpu: u64::from(self.cpu) }, &mut n);
        }
        let kernel = s.is_kernel();
        if self.in_kernel != Some(kernel) {
            push(if kernel { Record::KernelEnter } else { Record::KernelExit }, &mut n);
        }
        let ctx = (s.pid, s.tgid, app_cookie);
        if self.ctx != Some(ctx) {
            push(
                Record::CtxSwitch { pid: s.pid as u64, tgid: s.tgid as u64, app_cookie },
                &mut n,
            );
        }
        // Legacy resets last_cookie on a CTX_SWITCH too: a new task always gets COOKIE_SWITCH.
        let new_cookie = match cookie {
            Some(c) if self.cookie != Some(c) || self.ctx != Some(ctx) => Some(c),
            _ => None,
        };
        if let Some(c) = new_cookie {
            push(Record::CookieSwitch { cookie: c }, &mut n);
        }
        push(Record::Sample { pc, event: u64::from(s.event) }, &mut n);
        if !sink.write_group(&words[..n]) {
            return Outcome::LostOverflow;
        }
        self.cpu_switch_done = true;
        self.in_kernel = Some(kernel);
        self.ctx = Some(ctx);
        if new_cookie.is_some() {
            self.cookie = new_cookie;
        }
        Outcome::Delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Decoder;

    struct VecSink {
        words: Vec<usize>,
        cap: usize,
    }
    impl EventSink for VecSink {
        fn write_group(&mut self, w: &[usize]) -> bool {
            if self.words.len() + w.len() > self.cap {
                return false;
            }
            self.words.extend_from_slice(w);
            true
        }
    }

    fn decode(words: &[usize]) -> Vec<Record> {
        let w: Vec<u64> = words.iter().map(|&x| x as u64).collect();
        Decoder::new(&w, core::mem::size_of::<usize>()).map(|r| r.unwrap().1).collect()
    }

    fn ks(pc: usize, pid: i32) -> CpuSample {
        CpuSample { pc, event: 0, flags: IS_KERNEL, pid, tgid: pid }
    }

    #[test]
    fn legacy_order_and_elision() {
        let mut sink = VecSink { words: vec![], cap: 1000 };
        let mut p = SyncPass::new(1);
        assert_eq!(p.add_sample(&ks(0xc000_1000, 7), Location::Kernel, 0, &mut sink), Outcome::Delivered);
        p.add_sample(&ks(0xc000_1004, 7), Location::Kernel, 0, &mut sink);
        let u = CpuSample { pc: 0x1_0040, event: 0, flags: 0, pid: 7, tgid: 7 };
        p.add_sample(&u, Location::User { cookie: 0, offset: 0x1_0040 }, 0, &mut sink);
        p.add_sample(&u, Location::User { cookie: 0, offset: 0x1_0044 }, 0, &mut sink);
        p.add_sample(&ks(0xc000_2000, 8), Location::Kernel, 0, &mut sink);
        assert_eq!(
            decode(&sink.words),
            vec![
                Record::CpuSwitch { cpu: 1 },
                Record::KernelEnter,
                Record::CtxSwitch { pid: 7, tgid: 7, app_cookie: 0 },
                Record::Sample { pc: 0xc000_1000, event: 0 },
                Record::Sample { pc: 0xc000_1004, event: 0 },
                Record::KernelExit,
                Record::CookieSwitch { cookie: 0 },
                Record::Sample { pc: 0x1_0040, event: 0 },
                Record::Sample { pc: 0x1_0044, event: 0 },
                Record::KernelEnter,
                Record::CtxSwitch { pid: 8, tgid: 8, app_cookie: 0 },
                Record::Sample { pc: 0xc000_2000, event: 0 },
            ]
        );
    }

    #[test]
    fn overflow_drops_whole_group_and_reemits_context() {
        // Room for the first group only (3 + 2 + 7 + 2 = 14 words) plus 3 spare words.
        let mut sink = VecSink { words: vec![], cap: 17 };
        let mut p = SyncPass::new(0);
        assert_eq!(p.add_sample(&ks(1, 1), Location::Kernel, 0, &mut sink), Outcome::Delivered);
        // A new task needs CTX_SWITCH (7) + sample (2) = 9 > 3: dropped whole.
        assert_eq!(p.add_sample(&ks(2, 2), Location::Kernel, 0, &mut sink), Outcome::LostOverflow);
        assert_eq!(sink.words.len(), 14);
        sink.cap = 100;
        assert_eq!(p.add_sample(&ks(3, 2), Location::Kernel, 0, &mut sink), Outcome::Delivered);
        let recs = decode(&sink.words);
        assert_eq!(recs[4], Record::CtxSwitch { pid: 2, tgid: 2, app_cookie: 0 });
        assert_eq!(recs[5], Record::Sample { pc: 3, event: 0 });
    }

    #[test]
    fn lost_samples_emit_nothing() {
        let mut sink = VecSink { words: vec![], cap: 100 };
        let mut p = SyncPass::new(0);
        let u = CpuSample { pc: 5, event: 0, flags: 0, pid: 3, tgid: 3 };
        assert_eq!(p.add_sample(&u, Location::NoMm, 0, &mut sink), Outcome::LostNoMm);
        assert_eq!(p.add_sample(&u, Location::NoMapping, 0, &mut sink), Outcome::LostNoMapping);
        assert!(sink.words.is_empty());
    }

    #[test]
    fn max_group_fits() {
        let mut sink = VecSink { words: vec![], cap: MAX_GROUP_WORDS };
        let mut p = SyncPass::new(0);
        let u = CpuSample { pc: 5, event: 0, flags: 0, pid: 3, tgid: 3 };
        assert_eq!(
            p.add_sample(&u, Location::User { cookie: 9, offset: 5 }, 0, &mut sink),
            Outcome::Delivered
        );
    }
}
