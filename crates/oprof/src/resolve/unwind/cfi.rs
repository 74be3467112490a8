//! DWARF call frame information (`.debug_frame`, `.eh_frame`) read with gimli: the row of the
//! CFI table at an address, as plain rules over DWARF register numbers.
//!
//! Follows DWARF 5 §6.4 (call frame information) and, for `.eh_frame`, the LSB's "Exception
//! Frames". The FDEs are indexed once per section (sorted address ranges), so a lookup is a
//! binary search plus the evaluation of one FDE's instructions.
//!
//! gimli reports a register without a rule as `Undefined`, like one set `DW_CFA_undefined`. We
//! follow gcc's convention (libgcc's `REG_UNSAVED`) that a register without a rule keeps its
//! value (`SameValue`): this is what makes the return address of a function that has not saved
//! it the value of its return address register (r14 on ARM). An explicit `DW_CFA_undefined` of
//! the return address column anywhere in the CIE or FDE (glibc's `_start` style) marks the
//! outermost frame: [`Row::ra_undefined`].
//!
//! AArch64 (DWARF for the Arm 64-bit Architecture, "Call frame information"): sections of an
//! AArch64 image are read with gimli's AArch64 vendor extension ([`Cfi::aarch64`]), so
//! `DW_CFA_AARCH64_negate_ra_state` (0x2d; `paciasp`/`autiasp`) toggles the RA_SIGN_STATE
//! pseudo-register (34): [`Row::ra_signed`] says the saved return address carries a pointer
//! authentication code.

use gimli::{
    BaseAddresses, CallFrameInstruction, CfaRule, CieOrFde, DebugFrame, EhFrame, EndianSlice,
    Register, RegisterRule, RunTimeEndian, UnwindContext, UnwindSection,
};
use std::ops::Range;
use std::rc::Rc;

/// How to compute the CFA (canonical frame address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cfa {
    /// Register (DWARF number) plus offset in bytes.
    RegOffset(u16, i64),
    /// A DWARF expression (not evaluated).
    Expression,
}

/// How to recover a register of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Explicitly undefined (`DW_CFA_undefined`).
    Undefined,
    /// Unchanged, or no rule (see the module docs).
    Same,
    /// Saved at CFA + n (bytes).
    Offset(i64),
    /// Its value is CFA + n.
    ValOffset(i64),
    /// In another register (DWARF number).
    Register(u16),
    /// A DWARF expression, architectural rule or constant: not evaluated.
    Unsupported,
}

/// The row of a CFI table for one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub cfa: Cfa,
    /// The rules of registers that have one (DWARF numbers); others are [`Rule::Same`].
    pub rules: Vec<(u16, Rule)>,
    /// The return address column (the CIE's; 14 on ARM).
    pub ra: u16,
    /// The return address column is explicitly undefined: the outermost frame.
    pub ra_undefined: bool,
    /// The address range the row covers.
    pub range: Range<u64>,
    /// AArch64: the return address was signed (RA_SIGN_STATE 1); always false elsewhere.
    pub ra_signed: bool,
}

impl Row {
    /// The rule of register `reg` (DWARF number).
    pub fn rule(&self, reg: u16) -> Rule {
        self.rules
            .iter()
            .find(|r| r.0 == reg)
            .map_or(Rule::Same, |r| r.1)
    }
}

/// Which CFI section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    DebugFrame,
    /// `.eh_frame`, loaded at the given address (its pointers are PC-relative).
    EhFrame {
        addr: u64,
    },
}

/// One CFI section of an image, with its FDE index.
#[derive(Debug, Clone)]
pub struct Cfi {
    kind: Kind,
    data: Rc<[u8]>,
    endian: RunTimeEndian,
    address_size: u8,
    /// `.text`'s address (for `DW_EH_PE_textrel` pointers).
    text: u64,
    /// gimli's vendor extensions for the CFA instructions ([`Cfi::aarch64`]).
    vendor: gimli::Vendor,
    /// (start, end, FDE offset), sorted by start.
    index: Vec<(u64, u64, usize)>,
}

type Slice<'a> = EndianSlice<'a, RunTimeEndian>;

/// An error of the table itself (malformed CFI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadCfi(pub String);

impl Cfi {
    /// Reads the section `data` of `kind` (an image with `address_size`-byte addresses and
    /// `.text` at `text`) and indexes its FDEs; FDEs that do not parse are left out.
    pub fn new(
        kind: Kind,
        data: Rc<[u8]>,
        endian: RunTimeEndian,
        address_size: u8,
        text: u64,
    ) -> Cfi {
        let mut cfi = Cfi {
            kind,
            data,
            endian,
            address_size,
            text,
            vendor: gimli::Vendor::Default,
            index: Vec::new(),
        };
        let mut index = match kind {
            Kind::DebugFrame => fde_index(&cfi.debug_frame(), &cfi.bases()),
            Kind::EhFrame { .. } => fde_index(&cfi.eh_frame(), &cfi.bases()),
        };
        index.sort_unstable();
        cfi.index = index;
        cfi
    }

    /// The section of an AArch64 image: `DW_CFA_AARCH64_negate_ra_state` is understood.
    pub fn aarch64(mut self) -> Cfi {
        self.vendor = gimli::Vendor::AArch64;
        self
    }

    fn bases(&self) -> BaseAddresses {
        let b = BaseAddresses::default().set_text(self.text);
        match self.kind {
            Kind::EhFrame { addr } => b.set_eh_frame(addr),
            Kind::DebugFrame => b,
        }
    }

    fn debug_frame(&self) -> DebugFrame<Slice<'_>> {
        let mut s = DebugFrame::new(&self.data, self.endian);
        s.set_address_size(self.address_size);
        s.set_vendor(self.vendor);
        s
    }

    fn eh_frame(&self) -> EhFrame<Slice<'_>> {
        let mut s = EhFrame::new(&self.data, self.endian);
        s.set_address_size(self.address_size);
        s.set_vendor(self.vendor);
        s
    }

    /// How many FDEs the section has.
    pub fn fdes(&self) -> usize {
        self.index.len()
    }

    /// Whether an FDE covers `addr`.
    pub fn covers(&self, addr: u64) -> bool {
        self.fde_at(addr).is_some()
    }

    /// The address range of the FDE covering `addr` (its function, or the part of it the FDE
    /// describes).
    pub fn fde_range(&self, addr: u64) -> Option<Range<u64>> {
        let i = self.index.partition_point(|e| e.0 <= addr).checked_sub(1)?;
        self.index[..=i]
            .iter()
            .rev()
            .take(4)
            .find(|e| addr < e.1)
            .map(|e| e.0..e.1)
    }

    fn fde_at(&self, addr: u64) -> Option<usize> {
        let i = self.index.partition_point(|e| e.0 <= addr).checked_sub(1)?;
        // FDEs may nest or overlap in broken files: check the few before too.
        self.index[..=i]
            .iter()
            .rev()
            .take(4)
            .find(|e| addr < e.1)
            .map(|e| e.2)
    }

    /// The row for `addr`: `Ok(None)` when no FDE covers it, `Err` when the FDE is malformed.
    pub fn row(&self, ctx: &mut UnwindContext<usize>, addr: u64) -> Result<Option<Row>, BadCfi> {
        let Some(offset) = self.fde_at(addr) else {
            return Ok(None);
        };
        let bases = self.bases();
        let r = match self.kind {
            Kind::DebugFrame => row_in(&self.debug_frame(), &bases, ctx, offset.into(), addr),
            Kind::EhFrame { .. } => row_in(&self.eh_frame(), &bases, ctx, offset.into(), addr),
        };
        r.map(Some).map_err(|e| BadCfi(e.to_string()))
    }
}

/// The FDEs of `section`: (start, end, offset).
fn fde_index<'a, S>(section: &S, bases: &BaseAddresses) -> Vec<(u64, u64, usize)>
where
    S: UnwindSection<Slice<'a>>,
    S::Offset: gimli::UnwindOffset<usize>,
{
    let mut out = Vec::new();
    let mut entries = section.entries(bases);
    while let Ok(Some(e)) = entries.next() {
        let CieOrFde::Fde(partial) = e else { continue };
        let Ok(fde) = partial.parse(S::cie_from_offset) else {
            continue;
        };
        let start = fde.initial_address();
        if let Some(end) = start.checked_add(fde.len()) {
            out.push((start, end, fde.offset()));
        }
    }
    out
}

fn row_in<'a, S>(
    section: &S,
    bases: &BaseAddresses,
    ctx: &mut UnwindContext<usize>,
    offset: S::Offset,
    addr: u64,
) -> gimli::Result<Row>
where
    S: UnwindSection<Slice<'a>>,
    S::Offset: gimli::UnwindOffset<usize>,
{
    let fde = section.fde_from_offset(bases, offset, S::cie_from_offset)?;
    let ra = fde.cie().return_address_register();
    let ra_undefined = undefines(fde.cie().instructions(section, bases), ra)
        || undefines(fde.instructions(section, bases), ra);
    let row = fde.unwind_info_for_address(section, bases, ctx, addr)?;
    let cfa = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => Cfa::RegOffset(register.0, offset),
        CfaRule::Expression(_) => Cfa::Expression,
    };
    let rules = row
        .registers()
        .map(|(reg, rule)| (reg.0, rule_of(rule)))
        .collect();
    let ra_signed = section.vendor() == gimli::Vendor::AArch64
        && matches!(row.register(gimli::AArch64::RA_SIGN_STATE), RegisterRule::Constant(v) if v & 1 != 0);
    Ok(Row {
        cfa,
        rules,
        ra: ra.0,
        ra_undefined,
        range: row.start_address()..row.end_address(),
        ra_signed,
    })
}

fn rule_of(rule: &RegisterRule<usize>) -> Rule {
    match *rule {
        RegisterRule::Undefined => Rule::Undefined,
        RegisterRule::SameValue => Rule::Same,
        RegisterRule::Offset(n) => Rule::Offset(n),
        RegisterRule::ValOffset(n) => Rule::ValOffset(n),
        RegisterRule::Register(r) => Rule::Register(r.0),
        _ => Rule::Unsupported,
    }
}

/// Whether the instructions contain `DW_CFA_undefined` of `reg`.
fn undefines<R: gimli::Reader<Offset = usize>>(
    mut it: gimli::CallFrameInstructionIter<'_, R>,
    reg: Register,
) -> bool {
    while let Ok(Some(i)) = it.next() {
        if matches!(i, CallFrameInstruction::Undefined { register } if register == reg) {
            return true;
        }
    }
    false
}
