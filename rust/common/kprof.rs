// SPDX-License-Identifier: GPL-2.0

//! kprof: the kernel PC histogram of Plan 9's kprof(3) (`/sys/src/9/port/devkprof.c`), shared
//! by the module (`kprof.rs`) and the host tool (`oprof kprof`).
//!
//! `kpdata` is an array of 4-byte **big-endian** counts:
//!
//! | word | count |
//! |---|---|
//! | 0 ([`TOTAL`]) | clock ticks while profiling (all CPUs) |
//! | 1 ([`KERNEL`]) | ticks that interrupted the kernel (not user mode) |
//! | 2 + i | ticks whose PC lay in kernel-text slot i, i.e. in `[base + i*g, base + (i+1)*g)` |
//!
//! `base` is the lowest kernel text address (`_stext`) and `g` the slot granularity in bytes:
//! one instruction position by default (4 on ARM, 2 on Thumb-2 kernels, 1 on x86), never
//! rounded up silently (Plan 9 commit 28465682cf: 8-byte rounding misattributes x86 PCs).
//! Counts wrap at 2^32 (at 1000 Hz on two CPUs, word 0 after 24 days), as Plan 9's `ulong`s.
//! `kpctl` takes the commands of [`Ctl`].

/// Index of the total-ticks word.
pub const TOTAL: usize = 0;
/// Index of the kernel-ticks word.
pub const KERNEL: usize = 1;
/// Words before the first slot.
pub const HEADER_WORDS: usize = 2;
/// Bytes per count.
pub const WORD_BYTES: usize = 4;
/// Largest accepted granularity, bytes.
pub const MAX_GRANULARITY: u32 = 1 << 16;

/// A `kpctl` command (Plan 9 kprof(3)); one trailing newline is allowed, nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctl {
    /// `start`: begin (or keep) accumulating.
    Start,
    /// `stop`: stop accumulating; counts are kept.
    Stop,
    /// `startclr`: zero every count, then start.
    StartClr,
}

impl Ctl {
    /// Parses a write to `kpctl`. Errors: `None` for anything but the three commands (the
    /// module answers `EINVAL`).
    pub fn parse(input: &[u8]) -> Option<Ctl> {
        let word = input.strip_suffix(b"\n").unwrap_or(input);
        match word {
            b"start" => Some(Ctl::Start),
            b"stop" => Some(Ctl::Stop),
            b"startclr" => Some(Ctl::StartClr),
            _ => None,
        }
    }
}

/// Why a [`Layout`] cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// `end <= base`.
    EmptyText,
    /// Granularity not a power of two, below the instruction size or above [`MAX_GRANULARITY`].
    Granularity,
    /// The array would not fit the address space.
    TooLarge,
}

/// Checks a slot size: a power of two, at least `insn` bytes (one instruction), at most
/// [`MAX_GRANULARITY`]. Errors: [`LayoutError::Granularity`].
pub fn check_granularity(granularity: u32, insn: u32) -> Result<(), LayoutError> {
    if !granularity.is_power_of_two() || granularity < insn || granularity > MAX_GRANULARITY {
        return Err(LayoutError::Granularity);
    }
    Ok(())
}

/// Where kernel-text slots lie: text `[base, end)`, `1 << shift` bytes per slot.
///
/// # Invariants
///
/// `base < end`; `slots() + HEADER_WORDS` words fit in `usize` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    base: usize,
    end: usize,
    shift: u32,
}

impl Layout {
    /// Slots of `granularity` bytes (a power of two, at least `insn` bytes, at most
    /// [`MAX_GRANULARITY`]) over the text `[base, end)`.
    pub fn new(
        base: usize,
        end: usize,
        granularity: u32,
        insn: u32,
    ) -> Result<Layout, LayoutError> {
        if end <= base {
            return Err(LayoutError::EmptyText);
        }
        check_granularity(granularity, insn)?;
        let layout = Layout {
            base,
            end,
            shift: granularity.trailing_zeros(),
        };
        layout
            .slots()
            .checked_add(HEADER_WORDS)
            .and_then(|w| w.checked_mul(WORD_BYTES))
            .ok_or(LayoutError::TooLarge)?;
        Ok(layout)
    }

    /// Lowest text address covered.
    pub fn base(&self) -> usize {
        self.base
    }

    /// First address past the text.
    pub fn end(&self) -> usize {
        self.end
    }

    /// Bytes per slot.
    pub fn granularity(&self) -> u32 {
        1 << self.shift
    }

    /// Number of slots: `ceil((end - base) / granularity)`.
    pub fn slots(&self) -> usize {
        let len = self.end - self.base;
        (len >> self.shift) + usize::from(len & ((1 << self.shift) - 1) != 0)
    }

    /// Words of `kpdata`: the header and the slots.
    pub fn words(&self) -> usize {
        self.slots() + HEADER_WORDS
    }

    /// Size of `kpdata` in bytes (also the memory the counts take).
    pub fn bytes(&self) -> usize {
        self.words() * WORD_BYTES
    }

    /// The word index counting kernel PC `pc`, or `None` outside the text.
    pub fn word_of(&self, pc: usize) -> Option<usize> {
        if pc < self.base || pc >= self.end {
            return None;
        }
        Some(((pc - self.base) >> self.shift) + HEADER_WORDS)
    }

    /// Lowest address counted by slot `slot`.
    pub fn slot_addr(&self, slot: usize) -> usize {
        self.base.wrapping_add(slot << self.shift)
    }
}

/// Copies bytes `pos..` of the big-endian image of `words` (`len` words, word `i` read through
/// `word(i)`) into `out`; returns the bytes copied (0 at or past the end). `pos` need not be
/// word aligned.
pub fn read_be(len: usize, word: impl Fn(usize) -> u32, pos: usize, out: &mut [u8]) -> usize {
    let total = len.saturating_mul(WORD_BYTES);
    if pos >= total {
        return 0;
    }
    let n = out.len().min(total - pos);
    let mut done = 0;
    while done < n {
        let at = pos + done;
        let bytes = word(at / WORD_BYTES).to_be_bytes();
        let from = at % WORD_BYTES;
        let take = (WORD_BYTES - from).min(n - done);
        out[done..done + take].copy_from_slice(&bytes[from..from + take]);
        done += take;
    }
    n
}

/// A decoded `kpdata` image (host side).
#[derive(Clone, Copy, Debug)]
pub struct Kpdata<'a> {
    bytes: &'a [u8],
}

/// Why `kpdata` bytes do not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KpdataError {
    /// Shorter than the two header words.
    Short(usize),
    /// Not a whole number of 4-byte words.
    Ragged(usize),
}

impl<'a> Kpdata<'a> {
    /// Checks the shape of a `kpdata` copy: at least the header, whole words.
    pub fn new(bytes: &'a [u8]) -> Result<Kpdata<'a>, KpdataError> {
        if bytes.len() < HEADER_WORDS * WORD_BYTES {
            return Err(KpdataError::Short(bytes.len()));
        }
        if bytes.len() % WORD_BYTES != 0 {
            return Err(KpdataError::Ragged(bytes.len()));
        }
        Ok(Kpdata { bytes })
    }

    fn word(&self, i: usize) -> u32 {
        let b = &self.bytes[i * WORD_BYTES..(i + 1) * WORD_BYTES];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Word 0: total ticks.
    pub fn total(&self) -> u32 {
        self.word(TOTAL)
    }

    /// Word 1: ticks in kernel mode.
    pub fn kernel(&self) -> u32 {
        self.word(KERNEL)
    }

    /// Number of text slots.
    pub fn slots(&self) -> usize {
        self.bytes.len() / WORD_BYTES - HEADER_WORDS
    }

    /// Count of slot `i` (`i < slots()`).
    pub fn slot(&self, i: usize) -> u32 {
        self.word(i + HEADER_WORDS)
    }

    /// `(slot, count)` of every non-zero slot, in address order.
    pub fn nonzero(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        (0..self.slots())
            .map(move |i| (i, self.slot(i)))
            .filter(|&(_, c)| c != 0)
    }
}

/// The granularity (bytes, a power of two up to [`MAX_GRANULARITY`]) with which text of
/// `text_len` bytes gives `slots` slots, if any: how the host matches `kpdata` to a vmlinux.
pub fn infer_granularity(text_len: usize, slots: usize) -> Option<u32> {
    (0..=MAX_GRANULARITY.trailing_zeros())
        .map(|s| 1u32 << s)
        .find(|&g| Layout::new(0, text_len, g, 1).is_ok_and(|l| l.slots() == slots))
}

/// Addresses from the System.map of the kernel build the module was built against
/// (`scripts/kprof-text.sh`): the text bounds and two exported anchors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemMap {
    /// `_stext`.
    pub stext: usize,
    /// `_etext`.
    pub etext: usize,
    /// `_printk` (text anchor).
    pub printk: usize,
    /// `init_task` (data anchor).
    pub init_task: usize,
}

/// The running kernel's text `[_stext, _etext)` from `map` and the anchors' run-time addresses
/// `printk` (without the Thumb bit) and `init_task`: the running kernel must be the map's
/// build, so both anchors must have moved by the same load offset (non-zero only with a
/// randomized base), which then relocates the bounds. Errors: the two offsets `(text, data)`
/// when they differ (another build).
pub fn relocate(
    map: &SystemMap,
    printk: usize,
    init_task: usize,
) -> Result<(usize, usize), (usize, usize)> {
    let text_off = printk.wrapping_sub(map.printk);
    let data_off = init_task.wrapping_sub(map.init_task);
    if text_off != data_off {
        return Err((text_off, data_off));
    }
    Ok((
        map.stext.wrapping_add(text_off),
        map.etext.wrapping_add(text_off),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn relocate_checks_the_anchors() {
        let map = super::SystemMap {
            stext: 0xc000_8000,
            etext: 0xc040_0000,
            printk: 0xc010_0000,
            init_task: 0xc080_0000,
        };
        assert_eq!(
            super::relocate(&map, 0xc010_0000, 0xc080_0000),
            Ok((0xc000_8000, 0xc040_0000))
        );
        assert_eq!(
            super::relocate(&map, 0xc110_0000, 0xc180_0000),
            Ok((0xc100_8000, 0xc140_0000))
        );
        assert_eq!(super::relocate(&map, 0xc010_0004, 0xc080_0000), Err((4, 0)));
        // A kernel loaded below the map's addresses: the offset wraps, the bounds follow.
        assert_eq!(
            super::relocate(&map, 0xc00f_0000, 0xc07f_0000),
            Ok((0xbfff_8000, 0xc03f_0000))
        );
    }

    use super::*;

    #[test]
    fn ctl_words() {
        assert_eq!(Ctl::parse(b"start"), Some(Ctl::Start));
        assert_eq!(Ctl::parse(b"start\n"), Some(Ctl::Start));
        assert_eq!(Ctl::parse(b"stop\n"), Some(Ctl::Stop));
        assert_eq!(Ctl::parse(b"startclr\n"), Some(Ctl::StartClr));
        for bad in [
            &b""[..],
            b"\n",
            b"start\n\n",
            b"Start",
            b"star",
            b"startclr2",
            b" start",
            b"stop x",
        ] {
            assert_eq!(Ctl::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn layout_slots_and_words() {
        let l = Layout::new(0xc010_0000, 0xc010_0010, 4, 4).unwrap();
        assert_eq!((l.slots(), l.words(), l.bytes()), (4, 6, 24));
        assert_eq!(l.word_of(0xc00f_fffc), None);
        assert_eq!(l.word_of(0xc010_0000), Some(2));
        assert_eq!(l.word_of(0xc010_0003), Some(2));
        assert_eq!(l.word_of(0xc010_0004), Some(3));
        assert_eq!(l.word_of(0xc010_000f), Some(5));
        assert_eq!(l.word_of(0xc010_0010), None);
        assert_eq!(l.slot_addr(3), 0xc010_000c);
        // A partial last slot still gets a slot.
        let l = Layout::new(0x1000, 0x1011, 8, 1).unwrap();
        assert_eq!(l.slots(), 3);
        assert_eq!(l.word_of(0x1010), Some(4));
    }

    #[test]
    fn layout_rejects() {
        assert_eq!(Layout::new(10, 10, 4, 4), Err(LayoutError::EmptyText));
        assert_eq!(Layout::new(10, 9, 4, 4), Err(LayoutError::EmptyText));
        assert_eq!(Layout::new(0, 64, 2, 4), Err(LayoutError::Granularity));
        assert_eq!(Layout::new(0, 64, 12, 4), Err(LayoutError::Granularity));
        assert_eq!(Layout::new(0, 64, 0, 1), Err(LayoutError::Granularity));
        assert_eq!(
            Layout::new(0, 64, MAX_GRANULARITY * 2, 1),
            Err(LayoutError::Granularity)
        );
        assert_eq!(Layout::new(0, usize::MAX, 1, 1), Err(LayoutError::TooLarge));
    }

    #[test]
    fn big_endian_reads_at_any_offset() {
        let words = [0x0102_0304u32, 0xa0b0_c0d0, 7];
        let mut all = [0u8; 12];
        assert_eq!(read_be(3, |i| words[i], 0, &mut all), 12);
        assert_eq!(all, [1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0, 0, 0, 0, 7]);
        for pos in 0..=13 {
            for len in 0..=13 {
                let mut out = [0xffu8; 13];
                let n = read_be(3, |i| words[i], pos, &mut out[..len]);
                let want = all.get(pos..).map_or(0, |r| r.len().min(len));
                assert_eq!(n, want, "pos {pos} len {len}");
                assert_eq!(&out[..n], &all.get(pos..).unwrap_or(&[])[..n]);
            }
        }
    }

    #[test]
    fn kpdata_decodes_header_and_slots() {
        let mut bytes = vec![];
        for w in [10u32, 6, 0, 4, 0, 2] {
            bytes.extend_from_slice(&w.to_be_bytes());
        }
        let k = Kpdata::new(&bytes).unwrap();
        assert_eq!((k.total(), k.kernel(), k.slots()), (10, 6, 4));
        assert_eq!(k.nonzero().collect::<Vec<_>>(), [(1, 4), (3, 2)]);
        assert_eq!(Kpdata::new(&bytes[..7]).unwrap_err(), KpdataError::Short(7));
        assert_eq!(
            Kpdata::new(&bytes[..10]).unwrap_err(),
            KpdataError::Ragged(10)
        );
    }

    #[test]
    fn granularity_checks() {
        assert_eq!(check_granularity(4, 4), Ok(()));
        assert_eq!(check_granularity(16, 2), Ok(()));
        assert_eq!(check_granularity(2, 4), Err(LayoutError::Granularity));
        assert_eq!(check_granularity(12, 1), Err(LayoutError::Granularity));
        assert_eq!(
            check_granularity(MAX_GRANULARITY * 2, 1),
            Err(LayoutError::Granularity)
        );
    }

    #[test]
    fn granularity_inference() {
        assert_eq!(infer_granularity(0x40_0000, 0x10_0000), Some(4));
        assert_eq!(infer_granularity(0x40_0000, 0x40_0000), Some(1));
        assert_eq!(infer_granularity(0x40_0001, 0x10_0001), Some(4));
        assert_eq!(infer_granularity(0x40_0000, 0x10_0001), None);
    }
}
