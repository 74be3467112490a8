//! The instruction sets of the code oprof resolves and disassembles: shared by [`super::elf`]
//! (which set an address holds), [`super::calls`] (whether code ends in a call) and
//! [`super::disasm`].

/// The instruction set of code at an address ([`ElfImage::isa_at`](super::elf::ElfImage::isa_at)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Isa {
    /// A32 (ARM state).
    Arm,
    /// T32 (Thumb-2).
    Thumb,
    /// Data inside code (ARM `$d`: literal pools, jump tables).
    Data,
    Arm64,
    X86_64,
    X86,
}
