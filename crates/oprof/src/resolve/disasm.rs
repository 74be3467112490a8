//! Disassembly of sampled code for `oprof annotate`, with capstone: A32 and T32 (Thumb-2) as
//! the image's ARM mapping symbols say ([`ElfImage::isa_at`]), A64, x86-64 and x86.
//!
//! Data inside code (ARM `$d`: literal pools, jump tables) shows as `.word`; bytes that capstone
//! cannot decode show as `.inst` (one instruction unit: 4 bytes A32/A64, 2 bytes T32, 1 byte
//! x86) and decoding resumes after them, so every byte of the range is in exactly one row.

use crate::resolve::elf::ElfImage;
use crate::resolve::isa::Isa;
use anyhow::{anyhow, Result};
use capstone::prelude::*;
use std::ops::Range;

/// One disassembled instruction (or data word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    pub addr: u64,
    pub bytes: Vec<u8>,
    /// `mnemonic operands`, as capstone prints them (`.word 0x…` / `.inst 0x…` otherwise).
    pub text: String,
    pub isa: Isa,
}

impl Insn {
    /// The address after the instruction.
    pub fn end(&self) -> u64 {
        self.addr.saturating_add(self.bytes.len() as u64)
    }
}

/// The capstone engine of `isa` (`None` for data).
fn engine(isa: Isa) -> Result<Option<Capstone>> {
    use capstone::arch::{arm, arm64, x86};
    let cs = match isa {
        Isa::Data => return Ok(None),
        Isa::Arm => Capstone::new().arm().mode(arm::ArchMode::Arm).build(),
        Isa::Thumb => Capstone::new().arm().mode(arm::ArchMode::Thumb).build(),
        Isa::Arm64 => Capstone::new().arm64().mode(arm64::ArchMode::Arm).build(),
        Isa::X86_64 => Capstone::new().x86().mode(x86::ArchMode::Mode64).build(),
        Isa::X86 => Capstone::new().x86().mode(x86::ArchMode::Mode32).build(),
    };
    cs.map(Some).map_err(|e| anyhow!("capstone: {e}"))
}

/// Bytes of one undecodable unit of `isa`.
fn unit(isa: Isa) -> usize {
    match isa {
        Isa::Arm | Isa::Arm64 | Isa::Data => 4,
        Isa::Thumb => 2,
        Isa::X86_64 | Isa::X86 => 1,
    }
}

/// `.word 0x…` / `.inst 0x…` of little-endian `bytes` (1, 2 or 4 of them).
fn raw(directive: &str, bytes: &[u8]) -> String {
    let v = bytes
        .iter()
        .rev()
        .fold(0u32, |v, &b| (v << 8) | u32::from(b));
    format!("{directive} {v:#0w$x}", w = 2 + 2 * bytes.len())
}

/// Disassembles `code`, loaded at `addr`, as `isa`, appending to `out`.
fn region(isa: Isa, code: &[u8], addr: u64, out: &mut Vec<Insn>) -> Result<()> {
    let cs = engine(isa)?;
    let mut off = 0;
    while off < code.len() {
        let at = addr.saturating_add(off as u64);
        if let Some(cs) = &cs {
            let insns = cs
                .disasm_all(&code[off..], at)
                .map_err(|e| anyhow!("capstone: {e}"))?;
            for i in insns.iter() {
                let text = match (i.mnemonic(), i.op_str()) {
                    (Some(m), Some(o)) if !o.is_empty() => format!("{m} {o}"),
                    (Some(m), _) => m.to_string(),
                    (None, _) => "?".to_string(),
                };
                out.push(Insn {
                    addr: i.address(),
                    bytes: i.bytes().to_vec(),
                    text,
                    isa,
                });
                off += i.len();
            }
            if off >= code.len() {
                break;
            }
        }
        let n = unit(isa).min(code.len() - off);
        let directive = if isa == Isa::Data { ".word" } else { ".inst" };
        let b = &code[off..off + n];
        out.push(Insn {
            addr: addr.saturating_add(off as u64),
            bytes: b.to_vec(),
            text: raw(directive, b),
            isa,
        });
        off += n;
    }
    Ok(())
}

/// Disassembles the code of `elf` at `range` (within one executable section; a range that
/// runs past the section's end is cut there), switching instruction sets where the image's
/// mapping symbols do. Errors: no code there, an unreadable file, a machine capstone is not
/// built for here.
pub fn disassemble(elf: &ElfImage, range: Range<u64>) -> Result<Vec<Insn>> {
    let bytes = elf.code_bytes(&range)?;
    let end = range.start.saturating_add(bytes.len() as u64);
    let mut cuts = elf.isa_changes(&(range.start..end));
    cuts.push(end);
    let mut out = Vec::new();
    let mut start = range.start;
    for cut in cuts {
        let isa = elf.isa_at(start).ok_or_else(|| {
            anyhow!(
                "{}: disassembly of {:?} code is not supported",
                elf.path.display(),
                elf.arch
            )
        })?;
        let (a, b) = ((start - range.start) as usize, (cut - range.start) as usize);
        region(isa, &bytes[a..b], start, &mut out)?;
        start = cut;
    }
    Ok(out)
}
