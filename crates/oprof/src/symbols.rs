//! Function symbols of an ELF image (vmlinux), for attributing PCs, read with the `object` crate.

use anyhow::{Context, Result};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::path::Path;

#[derive(Debug, Clone)]
pub struct Symbol {
    pub addr: u64,
    /// 0 when the ELF gives no size (assembler routines): the symbol then extends to the next.
    pub size: u64,
    pub name: String,
}

/// Text symbols sorted by address.
pub struct SymbolTable {
    syms: Vec<Symbol>,
    /// End of the highest text section: PCs at or past it belong to no symbol here.
    text_end: u64,
}

impl SymbolTable {
    pub fn from_elf(path: &Path) -> Result<SymbolTable> {
        let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let file = object::File::parse(&*data)
            .with_context(|| format!("{}: not an ELF file object can parse", path.display()))?;
        let is_arm = file.architecture() == object::Architecture::Arm;
        let mut syms: Vec<Symbol> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
            .filter_map(|s| {
                let name = s.name().ok()?;
                // ARM mapping symbols ($a, $t, $d) mark code/data regions, not functions.
                if name.is_empty() || name.starts_with('$') {
                    return None;
                }
                // Thumb function symbols have bit 0 set.
                let addr = if is_arm { s.address() & !1 } else { s.address() };
                Some(Symbol { addr, size: s.size(), name: name.to_string() })
            })
            .collect();
        syms.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        syms.dedup_by_key(|s| s.addr);
        let text_end = file
            .sections()
            .filter(|s| s.kind() == object::SectionKind::Text)
            .map(|s| s.address() + s.size())
            .max()
            .unwrap_or(0);
        Ok(SymbolTable { syms, text_end })
    }

    #[cfg(test)]
    pub fn from_symbols(mut syms: Vec<Symbol>, text_end: u64) -> SymbolTable {
        syms.sort_by_key(|s| s.addr);
        SymbolTable { syms, text_end }
    }

    /// The symbol containing `pc`, if any.
    pub fn lookup(&self, pc: u64) -> Option<&Symbol> {
        if pc >= self.text_end {
            return None;
        }
        let i = self.syms.partition_point(|s| s.addr <= pc).checked_sub(1)?;
        let s = &self.syms[i];
        if s.size != 0 && pc >= s.addr + s.size {
            return None;
        }
        Some(s)
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_respects_sizes_and_gaps() {
        let t = SymbolTable::from_symbols(
            vec![
                Symbol { addr: 0x1000, size: 0x10, name: "a".into() },
                Symbol { addr: 0x1020, size: 0, name: "asm".into() },
                Symbol { addr: 0x1040, size: 0x8, name: "b".into() },
            ],
            0x1048,
        );
        assert_eq!(t.lookup(0x1000).unwrap().name, "a");
        assert_eq!(t.lookup(0x100f).unwrap().name, "a");
        assert!(t.lookup(0x1010).is_none());
        assert_eq!(t.lookup(0x103c).unwrap().name, "asm");
        assert_eq!(t.lookup(0x1044).unwrap().name, "b");
        assert!(t.lookup(0x1048).is_none());
        assert!(t.lookup(0xfff).is_none());
    }
}
