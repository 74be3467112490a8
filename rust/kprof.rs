// SPDX-License-Identifier: GPL-2.0

//! kprof: Plan 9's kernel profiler (kprof(3), `/sys/src/9/port/devkprof.c`) as oprofilefs
//! files `kprof/kpctl` and `kprof/kpdata`.
//!
//! While started, kprof's own per-CPU hrtimers ([`CpuTimers`]: on every online CPU, following
//! CPU hotplug) tick at `kprof_hz` (module parameter, default 1000 Hz per CPU) in
//! hard-interrupt context and count the interrupted PC:
//! word 0 every tick, word 1 when the kernel (not user space) was interrupted, and the PC's
//! kernel-text slot when it lies in `[_stext, _etext)` (layout and byte order in
//! `common::kprof`). kprof is independent of oprofilefs sampling: it runs with or without
//! `enable`, in timer and hardware modes alike, and a timer-mode session and kprof each keep
//! their own timers.
//!
//! Slots are `kprof_granularity` bytes (module parameter; default 0: one instruction position,
//! 4 bytes on ARM, 2 on Thumb-2 kernels, 1 on x86; a larger power of two coarsens). The count
//! array, `8 + 4 * ceil((_etext - _stext) / granularity)` bytes (as large as the kernel text at
//! 4-byte granularity: 4 MiB for the 4 MiB text of our QEMU kernel; Plan 9 accepted 8x its old
//! size for exact slots), is allocated with `vmalloc` on the first open of either file ("first
//! attach", as Plan 9) and freed when the module unloads.
//!
//! Errors: opening either file gives `ENODEV` when the module has no kernel text bounds (built
//! without the tree's `System.map`, or loaded into another build; see `kprof_shim.c`), `ENOMEM`
//! when the array cannot be allocated, `EPERM` for writing without CAP_SYS_ADMIN
//! (`oprofilefs`); writing `kpctl` anything but `start`, `stop` or `startclr` (one
//! trailing newline allowed) gives `EINVAL` (a zero-length write does nothing). `kpdata` reads
//! at or beyond its end give 0 bytes (EOF), at any offset.
//!
//! Kernel addresses: `kpctl`'s `text` line shows `_stext`/`_etext` only to an opener that may
//! see kernel addresses (`bridge::may_see_kernel_addresses`); others read `text 0x0 0x0`, as
//! `/sys/module/*/sections` gives them zeros. `kpdata` (0400) has counts, no addresses.

use crate::bridge;
use crate::common::kprof::{self as layout, Ctl, Layout};
use crate::model::timer::{CpuTimers, Tick};
use crate::oprofilefs::{read_bytes, Access, OpFile, Open};
use crate::profile_point::{define_profile_point, profile_point_time};
use kernel::fs::file::Offset;
use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{new_mutex, Arc, Mutex};
use kernel::uaccess::UserSliceWriter;

define_profile_point!(KPROF_TICK, "kprof_tick");

/// Bytes of one instruction position of the kernel's instruction set.
const INSN_BYTES: u32 = if cfg!(CONFIG_X86) {
    1
} else if cfg!(CONFIG_THUMB2_KERNEL) || cfg!(CONFIG_RISCV_ISA_C) {
    2
} else {
    4
};

/// The counts: `kpdata` word `i` is `counts[i]`.
///
/// # Invariants
///
/// `counts.len() == layout.words()`.
pub(crate) struct KprofData {
    layout: Layout,
    counts: VVec<Atomic<u32>>,
}

impl KprofData {
    /// All-zero counts. Errors: `ENOMEM`.
    fn new(layout: Layout) -> Result<Self> {
        // INVARIANT: `counts.len() == layout.words()`.
        Ok(KprofData {
            layout,
            counts: bridge::zeroed_atomics(layout.words())?,
        })
    }

    fn bump(&self, word: usize) {
        if let Some(c) = self.counts.get(word) {
            c.add(1u32, Relaxed);
        }
    }

    fn clear(&self) {
        for c in self.counts.iter() {
            c.store(0, Relaxed);
        }
    }
}

impl Tick for KprofData {
    /// One clock tick (Plan 9 `kproftimer`): counts the interrupted context.
    fn tick(&self) {
        profile_point_time!(KPROF_TICK);
        self.bump(layout::TOTAL);
        if let Some((pc, true)) = bridge::regs::with_irq_regs(|regs| regs.map(|r| r.pc())) {
            self.bump(layout::KERNEL);
            if let Some(w) = self.layout.word_of(pc) {
                self.bump(w);
            }
        }
    }
}

/// `kpctl` state: the counts (after the first attach) and the clock.
struct State {
    data: Option<Arc<KprofData>>,
    timers: CpuTimers<KprofData>,
}

/// kprof of one module instance.
#[pin_data]
pub(crate) struct Kprof {
    /// Slot size, bytes (a power of two, at least [`INSN_BYTES`]).
    granularity: u32,
    hz: u32,
    #[pin]
    state: Mutex<State>,
}

impl Kprof {
    /// Stopped, unattached kprof ticking at `hz` per CPU with `granularity`-byte slots (0: one
    /// instruction). Errors: `EINVAL` for `hz` outside 1..=100000 or a granularity that is not
    /// a power of two between the instruction size and 65536 bytes (logged).
    pub(crate) fn new(hz: u32, granularity: u32) -> Result<impl PinInit<Self, Error>> {
        let timers = CpuTimers::new(hz, "kprof_hz", c"oprofile/kprof:online")?;
        let granularity = if granularity == 0 {
            INSN_BYTES
        } else {
            granularity
        };
        if layout::check_granularity(granularity, INSN_BYTES).is_err() {
            pr_err!(
                "kprof_granularity={} is not a power of two in {}..={}\n",
                granularity,
                INSN_BYTES,
                layout::MAX_GRANULARITY
            );
            return Err(EINVAL);
        }
        Ok(try_pin_init!(Kprof {
            granularity,
            hz,
            state <- new_mutex!(State { data: None, timers }, "oprofile::kprof"),
        }? Error))
    }

    /// First attach: allocates the counts if needed. Errors: `ENODEV`, `ENOMEM` (module docs).
    fn attach(&self) -> Result<Arc<KprofData>> {
        let mut st = self.state.lock();
        if let Some(d) = &st.data {
            return Ok(d.clone());
        }
        let (start, end) = bridge::kernel_text()?;
        let l = Layout::new(start, end, self.granularity, INSN_BYTES).map_err(|_| ENODEV)?;
        let d = Arc::new(KprofData::new(l)?, GFP_KERNEL)?;
        // No addresses in the log (dmesg may be world-readable); `kpctl` shows them to those
        // who may see them.
        pr_info!(
            "kprof: {} slots of {} bytes over the kernel text ({} KiB)\n",
            l.slots(),
            l.granularity(),
            l.bytes() / 1024
        );
        st.data = Some(d.clone());
        Ok(d)
    }

    /// Applies a `kpctl` command. Errors: `EINVAL` for an unknown command; `ENOMEM` if the
    /// clock cannot start.
    fn control(&self, input: &[u8]) -> Result {
        let ctl = Ctl::parse(input).ok_or(EINVAL)?;
        let mut st = self.state.lock();
        let data = st.data.clone().ok_or(ENODEV)?;
        match ctl {
            Ctl::Stop => st.timers.stop(),
            Ctl::Start if st.timers.is_running() => {}
            Ctl::Start => st.timers.start(&data)?,
            Ctl::StartClr => {
                st.timers.stop();
                data.clear();
                st.timers.start(&data)?;
            }
        }
        Ok(())
    }

    /// The `kpctl` text: `state started|stopped`, `hz N`, `granularity BYTES`, then once
    /// attached `text 0xSTART 0xEND` (`_stext`, `_etext`; `0x0 0x0` unless `show_addresses`),
    /// `slots N`, `bytes N` (the size of `kpdata`).
    fn status(&self, show_addresses: bool) -> Result<CString> {
        let st = self.state.lock();
        let state = if st.timers.is_running() {
            "started"
        } else {
            "stopped"
        };
        match &st.data {
            Some(d) => {
                let l = &d.layout;
                let (base, end) = if show_addresses {
                    (l.base(), l.end())
                } else {
                    (0, 0)
                };
                CString::try_from_fmt(fmt!(
                    "state {}\nhz {}\ngranularity {}\ntext {:#x} {:#x}\nslots {}\nbytes {}\n",
                    state,
                    self.hz,
                    self.granularity,
                    base,
                    end,
                    l.slots(),
                    l.bytes()
                ))
            }
            None => CString::try_from_fmt(fmt!(
                "state {}\nhz {}\ngranularity {}\n",
                state,
                self.hz,
                self.granularity
            )),
        }
    }
}

/// `kprof/kpctl` (0644): read the status (with the text addresses if the opener may see
/// them), write `start`, `stop` or `startclr` (CAP_SYS_ADMIN; anything else is `EINVAL`). Open
/// does the first attach (module docs) and remembers whether this opener may see the kernel
/// text addresses.
pub(crate) struct KpCtl;

#[vtable]
impl<C: AsRef<Kprof> + Sync + 'static> OpFile<C> for KpCtl {
    const MODE: u16 = 0o644;
    type Id = ();

    fn open(ctx: &C, (): (), _access: Access) -> Result<Open> {
        // The counts stay attached in `Kprof` until the module unloads.
        ctx.as_ref().attach()?;
        Ok(Open(usize::from(bridge::may_see_kernel_addresses())))
    }

    fn read(
        ctx: &C,
        (): (),
        open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(ctx.as_ref().status(open.0 != 0)?.to_bytes(), out, pos)
    }

    fn write(ctx: &C, (): (), input: &[u8]) -> Result {
        ctx.as_ref().control(input)
    }
}

/// `kprof/kpdata` (0400: kernel text layout is for root): the big-endian counts from `*pos`, a
/// word at a time as they are at that instant (counting goes on while a reader copies). At or
/// beyond the end, any offset: 0 (EOF). Open does the first attach (module docs).
pub(crate) struct KpData;

#[vtable]
impl<C: AsRef<Kprof> + Sync + 'static> OpFile<C> for KpData {
    const MODE: u16 = 0o400;
    type Id = ();

    fn open(ctx: &C, (): (), _access: Access) -> Result<Open> {
        ctx.as_ref().attach()?;
        Ok(Open::default())
    }

    fn read(
        ctx: &C,
        (): (),
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        // Attached at open; the counts stay until the module unloads.
        let d = ctx.as_ref().attach()?;
        if *pos < 0 {
            return Err(EINVAL);
        }
        // Beyond the address space (offsets >= 4 GiB on 32-bit) is beyond the end.
        let Ok(mut at) = usize::try_from(*pos) else {
            return Ok(0);
        };
        let count = out.len();
        let mut chunk = [0u8; 256];
        let mut done = 0usize;
        while done < count {
            let want = chunk.len().min(count - done);
            let Some(part) = chunk.get_mut(..want) else {
                break;
            };
            let n = layout::read_be(
                d.counts.len(),
                |i| d.counts.get(i).map_or(0, |c| c.load(Relaxed)),
                at,
                part,
            );
            if n == 0 {
                break;
            }
            if let Err(e) = out.write_slice(part.get(..n).unwrap_or(&[])) {
                if done == 0 {
                    return Err(e);
                }
                break;
            }
            done += n;
            at += n;
        }
        *pos = at as Offset;
        Ok(done)
    }
}
