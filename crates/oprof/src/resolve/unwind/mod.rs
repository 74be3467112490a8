//! A user-space call-chain unwinder for 32-bit ARM (AArch32) and, in [`a64`], AArch64, for
//! `--call-graph dwarf`-style
//! samples: the user registers r0–r15 and CPSR at the sample, and a bounded copy of the user
//! stack from SP upward ([`Regs`], [`Stack`]). Code without frame pointers (Debian's armhf:
//! `-O2`, Thumb-2) is unwound with the tables the host has for each image ([`ImageTables`]:
//! the image itself and, added later, its separate debug file):
//!
//! 1. DWARF CFI (`.debug_frame`, `.eh_frame`; [`cfi`]), exact at every instruction, preferred
//!    whenever an FDE covers the address;
//! 2. else the ARM EHABI tables (`.ARM.exidx`/`.ARM.extab`; [`ehabi`], the EHABI spec §6,
//!    §9.3, §10). They describe a function's frame after its prologue and before its
//!    epilogue, which is exact at call sites, so for caller frames. For the interrupted frame
//!    (the first, whose PC may be anywhere) [`leaf`] must prove from the code that the PC is
//!    past the prologue and not in an epilogue, or the chain ends ([`End::UnprovenLeaf`]).
//!
//! Nothing is guessed: with no table for a PC the chain ends ([`End::NoUnwindInfo`]); LR is
//! taken as the return address only when the CFI says so (a register without a CFI rule keeps
//! its value: the CIE's initial rules make RA = r14 at a function's entry) or the EHABI
//! opcodes do (no pop of r15: `pc = lr`). Every return address found must lie in an executable
//! mapping ([`End::NoMapping`]) and follow a call instruction (BL/BLX, ARM or Thumb by its bit
//! 0; [`crate::resolve::calls`]'s decoder; [`End::NotACall`]); the caller's SP must not be below the
//! callee's, nor equal with the same PC ([`End::Loop`]); stack reads outside the snapshot end
//! the chain ([`End::StackOutside`]). All address arithmetic is checked.
//!
//! Addresses: registers and [`Frame`]s are runtime addresses of the sampled process (`u32` on
//! AArch32, `u64` in [`a64`]; [`Images`] takes either as `u64`); tables are looked up at addresses in each ELF's own virtual address space, which
//! [`Images::find`] gives. For a return address the table is looked up at `address - 1` (the
//! call instruction), so that a call ending a function (`noreturn`) finds its own function.

pub mod a64;
pub mod cfi;
pub mod ehabi;
pub mod expand;
pub mod expanding;
pub mod fpchain;
pub mod leaf;
pub mod maps;
pub mod tables;
#[cfg(test)]
mod test_target;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_a64;
#[cfg(test)]
mod tests_fpchain;

pub use tables::ImageTables;

use crate::resolve::isa::Isa;
use crate::resolve::FastState;
use ehabi::{Op, Stop};
use gimli::UnwindContext;
use std::collections::HashMap;
use std::rc::Rc;

/// The user registers at a sample: r0–r15 (r13 = SP, r14 = LR, r15 = PC) and CPSR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Regs {
    pub r: [u32; 16],
    pub cpsr: u32,
}

/// CPSR.T: Thumb state.
pub const CPSR_T: u32 = 1 << 5;

impl Regs {
    /// Whether the sampled code runs in Thumb state (CPSR.T, or bit 0 of the PC).
    pub fn thumb(&self) -> bool {
        self.cpsr & CPSR_T != 0 || self.r[15] & 1 != 0
    }
}

/// A copy of the user stack: `bytes` were at addresses `sp..sp + bytes.len()`.
#[derive(Debug, Clone, Copy)]
pub struct Stack<'a> {
    /// The address of `bytes[0]` (the sampled SP, or below it).
    pub sp: u32,
    pub bytes: &'a [u8],
}

impl Stack<'_> {
    /// The little-endian word at address `addr`, if all its 4 bytes are in the copy.
    pub fn read_u32(&self, addr: u32) -> Option<u32> {
        let off = usize::try_from(addr.checked_sub(self.sp)?).ok()?;
        let b = self.bytes.get(off..off.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Where a runtime address lies: its image's tables and the address in the ELF's own virtual
/// address space.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub tables: &'a ImageTables,
    pub elf_addr: u64,
    /// The mapping is executable.
    pub executable: bool,
    /// An id of `tables` that stays theirs for the [`Unwinder`]'s life (the stream's image id):
    /// the unwinder caches each address's rule under it. `None`: nothing cached.
    pub id: Option<u64>,
}

/// The sampled process's address space as the unwinder needs it.
pub trait Images {
    /// The image mapped at runtime address `addr`, or `None` (anonymous memory, no host file).
    fn find(&self, addr: u64) -> Option<Place<'_>>;
}

/// Which table gave a frame's caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// DWARF CFI (`.debug_frame` or `.eh_frame`).
    Cfi,
    /// ARM EHABI (`.ARM.exidx`).
    Ehabi,
}

/// Why a chain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The outermost frame: the CFI marks the return address undefined, or it is 0.
    Outermost,
    /// No CFI and no EHABI entry covers `pc` (runtime address).
    NoUnwindInfo { pc: u64 },
    /// `EXIDX_CANTUNWIND` or the refuse-to-unwind opcode: at the top of a program (`_start`,
    /// glibc's `__libc_start_call_main`) or in code the tables declare not unwindable.
    CantUnwind,
    /// The interrupted frame has only EHABI, and the code does not prove that its PC (runtime
    /// address) is between its prologue and epilogue.
    UnprovenLeaf { pc: u64 },
    /// A stack read outside the snapshot.
    StackOutside,
    /// A return address does not follow a call instruction (or its code cannot be read).
    NotACall,
    /// A PC or return address is in no executable mapping of an image.
    NoMapping,
    /// The frame limit was reached.
    Depth,
    /// The caller's SP is below the callee's, or equal with the same PC.
    Loop,
    /// A malformed table, or a rule on a register whose value is not known.
    BadTable,
    /// A CFI rule the unwinder does not evaluate (DWARF expressions), or an AArch64 return
    /// address signed by pointer authentication whose PAC bits are set (see [`a64`]).
    Unsupported,
}

/// One frame: the sampled PC first, then return addresses (runtime, bit 0 cleared).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub addr: u32,
    /// The code at `addr` is Thumb.
    pub thumb: bool,
    /// The table that found this frame's caller (`None` for the last frame).
    pub via: Option<Via>,
}

/// A call chain and why it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub frames: Vec<Frame>,
    pub end: End,
}

/// Register values while unwinding; `known` has bit n when r[n] is known.
#[derive(Debug, Clone, Copy)]
struct State {
    r: [u32; 16],
    known: u16,
}

/// What a frame's caller is found with at an address, as far as it depends on the address
/// alone (and, for the interrupted frame's EHABI proof, its instruction set): cached.
#[derive(Debug, Clone)]
enum FrameRule {
    Cfi(Rc<cfi::Row>),
    Ehabi(Rc<[Op]>),
    /// [`End::NoUnwindInfo`] and [`End::UnprovenLeaf`] (their PC is the runtime one).
    NoInfo,
    Unproven,
    Fails(End),
}

/// Rules an [`Unwinder`] keeps at most; when full it starts again (entries are a few hundred
/// bytes; the distinct addresses of a session are its sampled code's).
const RULES_MAX: usize = 1 << 16;

/// A [`FrameRule`]'s key: (image id, ELF address looked up, interrupted frame, Thumb).
type RuleKey = (u64, u64, bool, bool);

/// The unwinder, with its reusable CFI evaluation context and the rules found so far.
///
/// # Invariants
/// `rules` holds at most [`RULES_MAX`] entries, each the rule [`Unwinder::rule_for`] gives
/// for its key in the tables the key's image id names ([`Place::id`]).
pub struct Unwinder {
    ctx: Box<UnwindContext<usize>>,
    /// The most frames a chain gets (the sampled PC included).
    pub max_depth: usize,
    rules: HashMap<RuleKey, FrameRule, FastState>,
}

impl Unwinder {
    /// An unwinder giving at most `max_depth` frames per chain.
    pub fn new(max_depth: usize) -> Unwinder {
        Unwinder {
            ctx: Box::new(UnwindContext::new()),
            max_depth,
            rules: HashMap::default(),
        }
    }

    /// Unwinds the sample `regs` + `stack` in the address space `images`.
    pub fn unwind(&mut self, images: &impl Images, regs: &Regs, stack: &Stack<'_>) -> Chain {
        let pc = regs.r[15] & !1;
        let mut frames = Vec::with_capacity(self.max_depth.min(32));
        frames.push(Frame {
            addr: pc,
            thumb: regs.thumb(),
            via: None,
        });
        let mut state = State {
            r: regs.r,
            known: 0xFFFF,
        };
        state.r[15] = pc | u32::from(regs.thumb());
        let end = loop {
            if frames.len() >= self.max_depth {
                break End::Depth;
            }
            let leaf = frames.len() == 1;
            let (next, via) = match self.step(images, &state, leaf, stack) {
                Ok(s) => s,
                Err(end) => break end,
            };
            if let Some(last) = frames.last_mut() {
                last.via = Some(via);
            }
            let ra = next.r[15];
            if let Err(end) = check_caller(images, &state, &next) {
                break end;
            }
            frames.push(Frame {
                addr: ra & !1,
                thumb: ra & 1 != 0,
                via: None,
            });
            state = next;
        };
        Chain { frames, end }
    }

    /// The caller's registers of the frame `s` (`leaf`: the interrupted frame).
    fn step(
        &mut self,
        images: &impl Images,
        s: &State,
        leaf: bool,
        stack: &Stack<'_>,
    ) -> Result<(State, Via), End> {
        let pc = s.r[15] & !1;
        let place = images
            .find(u64::from(pc))
            .filter(|p| p.executable)
            .ok_or(End::NoMapping)?;
        // A return address is looked up in its call instruction.
        let at = if leaf {
            place.elf_addr
        } else {
            place.elf_addr.checked_sub(1).ok_or(End::NoMapping)?
        };
        let thumb = s.r[15] & 1 != 0;
        let rule = match place.id.map(|id| (id, at, leaf, thumb)) {
            Some(key) => self.cached(key, |u| u.rule_for(place.tables, thumb, leaf, at)),
            None => self.rule_for(place.tables, thumb, leaf, at),
        };
        match rule {
            FrameRule::Cfi(row) => apply_cfi(&row, s, leaf, stack).map(|n| (n, Via::Cfi)),
            FrameRule::Ehabi(ops) => apply_ehabi(&ops, s, leaf, stack).map(|n| (n, Via::Ehabi)),
            FrameRule::NoInfo => Err(End::NoUnwindInfo { pc: u64::from(pc) }),
            FrameRule::Unproven => Err(End::UnprovenLeaf { pc: u64::from(pc) }),
            FrameRule::Fails(end) => Err(end),
        }
    }

    /// The rule of `key` from the cache, or found with `find` and kept.
    fn cached(&mut self, key: RuleKey, find: impl FnOnce(&mut Self) -> FrameRule) -> FrameRule {
        if let Some(r) = self.rules.get(&key) {
            return r.clone();
        }
        let r = find(self);
        if self.rules.len() >= RULES_MAX {
            self.rules.clear();
        }
        self.rules.insert(key, r.clone());
        r
    }

    /// How the caller of a frame at ELF address `at` of `tables` is found: its CFI row, else
    /// its EHABI opcodes (for the interrupted frame, `leaf`, only once the code of the
    /// function, `thumb` or ARM, proves the PC past its prologue and before its epilogue).
    fn rule_for(&mut self, tables: &ImageTables, thumb: bool, leaf: bool, at: u64) -> FrameRule {
        if let Some(cfi) = tables.cfi_for(at) {
            return match cfi.row(&mut self.ctx, at) {
                Ok(Some(row)) => FrameRule::Cfi(Rc::new(row)),
                _ => FrameRule::Fails(End::BadTable),
            };
        }
        let Some((exidx, entry, range)) = tables.exidx_for(at) else {
            return FrameRule::NoInfo;
        };
        let ops = match exidx.opcodes(entry) {
            Ok(o) => ehabi::decode_all(&o),
            Err(stop) => return FrameRule::Fails(stop_end(stop)),
        };
        if leaf && prove_leaf(tables, thumb, &range, at, &ops).is_err() {
            return FrameRule::Unproven;
        }
        FrameRule::Ehabi(ops.into())
    }
}

/// [`leaf::prove`] on the function containing the interrupted PC `at` (ELF address): the part
/// of the EHABI entry's `range` inside the function symbol there. `ld` merges adjacent
/// identical index entries, so an entry's start may be an earlier function's: without a
/// function symbol around the PC the function's start is not known, and nothing is proved.
fn prove_leaf(
    tables: &ImageTables,
    thumb: bool,
    range: &std::ops::Range<u64>,
    at: u64,
    ops: &[Op],
) -> Result<(), leaf::Unproven> {
    let sym = tables.function_at(at).ok_or(leaf::Unproven)?;
    let func = range.start.max(sym.start)..range.end.min(sym.end);
    let isa = if thumb { Isa::Thumb } else { Isa::Arm };
    leaf::prove(tables, isa, &func, at, ops)
}

fn stop_end(s: Stop) -> End {
    match s {
        Stop::CantUnwind => End::CantUnwind,
        Stop::BadTable => End::BadTable,
        Stop::StackOutside => End::StackOutside,
    }
}

/// Runs EHABI opcodes on `s`: popped registers become known; `vsp = r[n]` needs r[n] known.
/// Above the interrupted frame (`leaf` false) the return address must come from the stack: a
/// call overwrote LR, so opcodes that pop neither r14 nor r15 there are a bad table.
fn apply_ehabi(ops: &[Op], s: &State, leaf: bool, stack: &Stack<'_>) -> Result<State, End> {
    let pops_ra = ops
        .iter()
        .any(|op| matches!(op, Op::Pop(m) if m & 0xC000 != 0));
    if !leaf && !pops_ra {
        return Err(End::BadTable);
    }
    let mut known = s.known;
    for op in ops {
        match *op {
            Op::SetVsp(n) if known & (1 << n) == 0 => return Err(End::BadTable),
            Op::Pop(mask) => known |= mask,
            _ => {}
        }
    }
    let mut r = s.r;
    ehabi::execute(ops, &mut r, stack).map_err(stop_end)?;
    if known & (1 << 14) == 0
        && !ops
            .iter()
            .any(|op| matches!(op, Op::Pop(m) if m & (1 << 15) != 0))
    {
        return Err(End::BadTable);
    }
    Ok(State { r, known })
}

/// Applies a CFI row to `s` (DWARF numbers 0–15 are r0–r15; the caller's SP is the CFA). Above
/// the interrupted frame (`leaf` false) a return address column without a rule is a bad table
/// (a call overwrote LR).
fn apply_cfi(row: &cfi::Row, s: &State, leaf: bool, stack: &Stack<'_>) -> Result<State, End> {
    if !leaf && row.rule(row.ra) == cfi::Rule::Same {
        return Err(End::BadTable);
    }
    let cfa = match row.cfa {
        cfi::Cfa::RegOffset(reg, off) => offset(reg_value(s, reg)?, off)?,
        cfi::Cfa::Expression => return Err(End::Unsupported),
    };
    let ra = usize::from(row.ra);
    if ra >= 16 {
        return Err(End::BadTable);
    }
    let mut next = State {
        r: s.r,
        known: s.known,
    };
    for n in (0..16u16).filter(|&n| n != 13) {
        let i = usize::from(n);
        let value = match row.rule(n) {
            cfi::Rule::Same => (s.known & (1 << n) != 0).then_some(s.r[i]),
            cfi::Rule::Offset(k) => Some(stack.read_u32(offset(cfa, k)?).ok_or(End::StackOutside)?),
            cfi::Rule::ValOffset(k) => Some(offset(cfa, k)?),
            cfi::Rule::Register(k) => reg_value(s, k).ok(),
            cfi::Rule::Undefined if i == ra && row.ra_undefined => return Err(End::Outermost),
            cfi::Rule::Undefined => None,
            cfi::Rule::Unsupported if i == ra => return Err(End::Unsupported),
            cfi::Rule::Unsupported => None,
        };
        match value {
            Some(v) => next.r[i] = v,
            None => next.known &= !(1 << n),
        }
    }
    if next.known & (1 << ra) == 0 {
        return Err(End::BadTable);
    }
    next.r[13] = cfa;
    next.known |= 1 << 13;
    next.r[15] = next.r[ra];
    Ok(next)
}

fn reg_value(s: &State, reg: u16) -> Result<u32, End> {
    if reg < 16 && s.known & (1 << reg) != 0 {
        Ok(s.r[usize::from(reg)])
    } else {
        Err(End::BadTable)
    }
}

/// `base + off` as a 32-bit address (outside: no stack word can be there).
fn offset(base: u32, off: i64) -> Result<u32, End> {
    i64::from(base)
        .checked_add(off)
        .and_then(|a| u32::try_from(a).ok())
        .ok_or(End::StackOutside)
}

/// Checks the caller `next` found from `cur`: its return address and SP.
fn check_caller(images: &impl Images, cur: &State, next: &State) -> Result<(), End> {
    let ra = next.r[15];
    if ra & !1 == 0 {
        return Err(End::Outermost);
    }
    let (sp, old_sp) = (next.r[13], cur.r[13]);
    if sp < old_sp || (sp == old_sp && ra == cur.r[15]) {
        return Err(End::Loop);
    }
    let place = images
        .find(u64::from(ra & !1))
        .filter(|p| p.executable)
        .ok_or(End::NoMapping)?;
    let isa = if ra & 1 != 0 { Isa::Thumb } else { Isa::Arm };
    let before = place
        .elf_addr
        .checked_sub(4)
        .and_then(|a| place.tables.code(a..place.elf_addr));
    match before.and_then(|b| crate::resolve::calls::ends_in_call(b, isa)) {
        Some(true) => Ok(()),
        _ => Err(End::NotACall),
    }
}
