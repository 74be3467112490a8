//! ELF images on the host, read with `object`: symbols (via [`SymbolTable`]), file offset →
//! virtual address through the program headers, and source lines through `addr2line`.
//!
//! Executables, shared objects and vmlinux use their own virtual addresses. A kernel module
//! (`ET_REL` `.ko`) is *placed*: each section gets the runtime address the target reported
//! (`/sys/module/NAME/sections/`), symbols become `section address + st_value`, and the DWARF is
//! relocated against those addresses, so every lookup takes a runtime kernel address.

use crate::input::session::Ids;
use crate::resolve::calls::ArmMarks;
use crate::resolve::debugfile::{Method, Search};
use crate::resolve::isa::Isa;
use crate::resolve::symbols::{Binding, Symbol, SymbolTable};
use anyhow::{anyhow, bail, Context, Result};
use gimli::{EndianRcSlice, RelocateReader, RunTimeEndian};
use object::{
    Object, ObjectSection, ObjectSegment, ObjectSymbol, RelocationKind, RelocationTarget,
    SectionFlags, SectionIndex, SymbolKind, SymbolSection,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// A `PT_LOAD` program header: file bytes `offset..offset+filesz` are mapped at `vaddr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub offset: u64,
    pub filesz: u64,
    pub vaddr: u64,
}

/// Converts a file offset to a virtual address with the `PT_LOAD` containing it
/// (`vaddr = p_vaddr + off - p_offset`).
pub fn offset_to_vaddr(loads: &[Load], off: u64) -> Option<u64> {
    loads
        .iter()
        .find(|l| off >= l.offset && off - l.offset < l.filesz)
        .and_then(|l| l.vaddr.checked_add(off - l.offset))
}

/// An executable section with file bytes: `size` bytes at file offset `file_offset`, loaded
/// at `addr` (its runtime address for a placed module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeSection {
    pub addr: u64,
    pub size: u64,
    pub file_offset: u64,
}

/// Which symbols name an image's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Symbols {
    /// Function symbols (`STT_FUNC`, `STT_GNU_IFUNC`).
    Functions,
    /// Functions and untyped labels in executable sections (`STT_NOTYPE`: assembler entry points
    /// such as `local_restart` inside `vector_swi`), as the kernel's kallsyms lists them.
    WithLabels,
}

/// Source position of an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceLine {
    /// Path as recorded in the DWARF (compilation directory joined when relative).
    pub file: String,
    /// 1-based line; `None` when the line table gives only the file.
    pub line: Option<u32>,
}

/// DWARF reader: reference-counted section copies, relocated for `ET_REL` files.
type Reader = RelocateReader<EndianRcSlice<RunTimeEndian>, Relocs>;

/// Relocations of one debug section: section offset → (symbol value S, explicit addend or
/// `None` when the addend is the value already stored in the section, as ARM `REL`).
#[derive(Debug, Clone, Default)]
struct Relocs(Rc<HashMap<usize, (u64, Option<i64>)>>);

impl Relocs {
    fn apply(&self, offset: usize, value: u64) -> u64 {
        match self.0.get(&offset) {
            Some(&(s, None)) => s.wrapping_add(value),
            Some(&(s, Some(a))) => s.wrapping_add(a as u64),
            None => value,
        }
    }
}

impl gimli::Relocate for Relocs {
    fn relocate_address(&self, offset: usize, value: u64) -> gimli::Result<u64> {
        Ok(self.apply(offset, value))
    }

    fn relocate_offset(&self, offset: usize, value: usize) -> gimli::Result<usize> {
        usize::try_from(self.apply(offset, value as u64))
            .map_err(|_| gimli::Error::OffsetOutOfBounds)
    }
}

/// An ELF file loaded for lookups.
pub struct ElfImage {
    pub path: PathBuf,
    /// `PT_LOAD` headers (empty for `ET_REL`).
    pub loads: Vec<Load>,
    /// Function symbols (`.symtab`, else `.dynsym`) and executable ranges.
    pub symbols: SymbolTable,
    /// Line tables, when asked for and the file has `.debug_info`.
    lines: Option<addr2line::Context<Reader>>,
    /// Why there are no line tables, when asked for.
    pub lines_error: Option<String>,
    /// The machine (decides [`ElfImage::isa_at`]).
    pub arch: object::Architecture,
    /// Executable sections with file bytes, for disassembly ([`ElfImage::code_bytes`]).
    pub code: Vec<CodeSection>,
    /// ARM and AArch64: where the instruction set changes (every executable section's marks of
    /// [`crate::resolve::calls::arm_marks`]), sorted by address.
    isa_marks: Vec<(u64, Isa)>,
    /// Where the symbols and line tables came from; `None` without any.
    pub debug: Option<DebugSource>,
    /// Debug files looked at and refused (build-id or CRC mismatch, corrupt), one note each.
    pub debug_notes: Vec<String>,
    /// Its build-id and debuglink.
    pub ids: Ids,
}

impl std::fmt::Debug for ElfImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfImage")
            .field("path", &self.path)
            .field("symbols", &self.symbols.len())
            .field("lines", &self.lines.is_some())
            .finish()
    }
}

fn elf_flags(s: &object::Section<'_, '_>) -> u64 {
    match s.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags,
        _ => 0,
    }
}

/// Where to look for the separate debug file of an image being loaded ([`crate::resolve::debugfile`]).
#[derive(Debug, Clone, Copy)]
pub struct DebugLookup<'a> {
    pub search: &'a Search,
    /// The image's path on the target (for debuglink's `DEBUGDIR/TDIR/NAME`).
    pub target: Option<&'a str>,
    /// Its ids as recorded on the target (`session.json` `debug_ids`), if known.
    pub recorded: Option<&'a Ids>,
}

/// Where an image's names came from: the file and how it was found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DebugSource {
    /// The separate debug file, or the image itself (`image`, `dynsym`, `minidebuginfo`), or
    /// the kallsyms file.
    pub file: PathBuf,
    pub method: Method,
}

/// The sections of a parsed file at their (runtime) addresses.
struct Layout {
    /// Base address of each section: its `sh_addr`, or for a placed `ET_REL` its runtime
    /// address (non-allocated sections, e.g. debug sections, are at 0).
    base: HashMap<SectionIndex, u64>,
    /// Executable sections and their address ranges.
    exec: HashMap<SectionIndex, Range<u64>>,
    /// Executable sections with file bytes.
    code: Vec<CodeSection>,
}

impl Layout {
    fn of(file: &object::File<'_>, placement: Option<&BTreeMap<String, u64>>) -> Layout {
        let mut lay = Layout {
            base: HashMap::new(),
            exec: HashMap::new(),
            code: Vec::new(),
        };
        for s in file.sections() {
            let flags = elf_flags(&s);
            let alloc = flags & u64::from(object::elf::SHF_ALLOC) != 0;
            let b = match placement {
                Some(p) if alloc => match s.name().ok().and_then(|n| p.get(n)) {
                    Some(&a) => a,
                    None => continue,
                },
                Some(_) => 0,
                None => s.address(),
            };
            lay.base.insert(s.index(), b);
            if alloc && flags & u64::from(object::elf::SHF_EXECINSTR) != 0 {
                lay.exec.insert(s.index(), b..b.saturating_add(s.size()));
                if let Some((file_offset, size)) = s.file_range() {
                    lay.code.push(CodeSection {
                        addr: b,
                        size,
                        file_offset,
                    });
                }
            }
        }
        lay
    }

    fn exec_set(&self) -> HashSet<SectionIndex> {
        self.exec.keys().copied().collect()
    }
}

/// The function symbols of `it` (and with [`Symbols::WithLabels`] untyped labels in executable
/// sections) at runtime addresses of `lay`.
fn collect_symbols(
    it: object::SymbolIterator<'_, '_>,
    lay: &Layout,
    which: Symbols,
    is_arm: bool,
    relocatable: bool,
) -> Vec<Symbol> {
    it.filter(|s| {
        (s.kind() == SymbolKind::Text && s.is_definition())
            || (which == Symbols::WithLabels
                && s.kind() == SymbolKind::Unknown
                && matches!(s.section(), SymbolSection::Section(i) if lay.exec.contains_key(&i)))
    })
    .filter_map(|s| {
        let name = s.name().ok()?;
        // ARM mapping symbols ($a, $t, $d) mark code/data regions, not functions.
        if name.is_empty() || name.starts_with('$') {
            return None;
        }
        // Thumb function symbols have bit 0 set.
        let value = if is_arm {
            s.address() & !1
        } else {
            s.address()
        };
        let addr = if relocatable {
            let SymbolSection::Section(i) = s.section() else {
                return None;
            };
            lay.base.get(&i)?.checked_add(value)?
        } else {
            value
        };
        let binding = if s.is_weak() {
            Binding::Weak
        } else if s.is_global() {
            Binding::Global
        } else {
            Binding::Local
        };
        Some(Symbol {
            addr,
            size: s.size(),
            name: name.to_string(),
            binding,
        })
    })
    .collect()
}

/// The `PT_LOAD` headers of `file` with file bytes.
fn loads_of(file: &object::File<'_>) -> Vec<Load> {
    file.segments()
        .filter_map(|g| {
            let (offset, filesz) = g.file_range();
            Some(Load {
                offset,
                filesz,
                vaddr: g.address(),
            })
            .filter(|_| filesz > 0)
        })
        .collect()
}

/// The executable ranges of `file`: its executable sections, or without section headers its
/// executable `PT_LOAD`s.
fn text_of(file: &object::File<'_>, lay: &Layout, relocatable: bool) -> Vec<Range<u64>> {
    let mut text: Vec<Range<u64>> = lay
        .exec
        .values()
        .filter(|r| r.start < r.end)
        .cloned()
        .collect();
    if text.is_empty() && !relocatable {
        for g in file.segments() {
            if let object::SegmentFlags::Elf { p_flags } = g.flags() {
                if p_flags & object::elf::PF_X != 0 {
                    if let Some(end) = g.address().checked_add(g.size()) {
                        text.push(g.address()..end);
                    }
                }
            }
        }
    }
    text
}

/// Whether `file` has DWARF (a non-empty `.debug_info`).
fn has_dwarf(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() != 0)
}

/// The ARM marks of `(file, its layout)` on the image's executable sections (`image`): moved
/// by address when `file` is a debug file (the section indexes of the two need not agree).
fn arm_marks_onto(
    (file, lay): (&object::File<'_>, &Layout),
    image: &Layout,
    relocatable: bool,
) -> ArmMarks {
    let marks = crate::resolve::calls::arm_marks(file, &lay.base, &lay.exec_set(), relocatable);
    if std::ptr::eq(lay, image) {
        return marks;
    }
    let mut all: Vec<(u64, Isa)> = marks.into_values().flatten().collect();
    all.sort_by_key(|m| m.0);
    image
        .exec
        .iter()
        .map(|(&i, r)| {
            (
                i,
                all.iter().copied().filter(|m| r.contains(&m.0)).collect(),
            )
        })
        .collect()
}

impl ElfImage {
    /// Loads an executable, shared object or vmlinux (its own virtual addresses); with
    /// `want_lines`, also its DWARF line tables. No debug file is looked for.
    /// Errors name `path`; their root cause is a short reason (shown as `(unreadable: reason)`).
    #[cfg(test)]
    pub fn load(path: &Path, want_lines: bool) -> Result<ElfImage> {
        ElfImage::load_with_debug(path, want_lines, None)
    }

    /// Like [`ElfImage::load`]; with `debug`, a stripped image's symbols (no `.symtab`) and
    /// line tables (none in the image, with `want_lines`) come from its separate debug file
    /// ([`crate::resolve::debugfile`]). Errors as [`ElfImage::load`]'s; a debug file never makes one.
    pub fn load_with_debug(
        path: &Path,
        want_lines: bool,
        debug: Option<DebugLookup<'_>>,
    ) -> Result<ElfImage> {
        ElfImage::load_placed(
            path,
            None,
            Symbols::Functions,
            want_lines,
            debug,
            |_| Ok(()),
        )
        .map(|(image, ())| image)
    }

    /// Loads a vmlinux like [`ElfImage::load_with_debug`], with its code labels too (see
    /// [`Symbols::WithLabels`]), so that it names addresses as the kernel's kallsyms does.
    pub fn load_kernel(
        path: &Path,
        want_lines: bool,
        debug: Option<DebugLookup<'_>>,
    ) -> Result<ElfImage> {
        ElfImage::load_placed(path, None, Symbols::WithLabels, want_lines, debug, |_| {
            Ok(())
        })
        .map(|(image, ())| image)
    }

    /// Like [`ElfImage::load_kernel`] (no debug file), also returning what `inspect` finds in
    /// the same parsed file (one read and parse for callers that need more than symbols).
    /// Errors name `path`.
    pub fn load_kernel_with<T>(
        path: &Path,
        want_lines: bool,
        inspect: impl FnOnce(&object::File<'_>) -> Result<T>,
    ) -> Result<(ElfImage, T)> {
        ElfImage::load_placed(path, None, Symbols::WithLabels, want_lines, None, inspect)
    }

    /// Loads a kernel module (`ET_REL`) with its sections at the runtime addresses `placement`
    /// (section name → address). Sections without an address get no symbols. `debug`: as
    /// [`ElfImage::load_with_debug`] (the debug file is placed the same way).
    pub fn load_module(
        path: &Path,
        placement: &BTreeMap<String, u64>,
        want_lines: bool,
        debug: Option<DebugLookup<'_>>,
    ) -> Result<ElfImage> {
        ElfImage::load_placed(
            path,
            Some(placement),
            Symbols::Functions,
            want_lines,
            debug,
            |_| Ok(()),
        )
        .map(|(image, ())| image)
    }

    fn load_placed<T>(
        path: &Path,
        placement: Option<&BTreeMap<String, u64>>,
        which: Symbols,
        want_lines: bool,
        debug: Option<DebugLookup<'_>>,
        inspect: impl FnOnce(&object::File<'_>) -> Result<T>,
    ) -> Result<(ElfImage, T)> {
        ElfImage::parse_placed(path, placement, which, want_lines, debug, inspect)
            .with_context(|| path.display().to_string())
    }

    fn parse_placed<T>(
        path: &Path,
        placement: Option<&BTreeMap<String, u64>>,
        which: Symbols,
        want_lines: bool,
        debug: Option<DebugLookup<'_>>,
        inspect: impl FnOnce(&object::File<'_>) -> Result<T>,
    ) -> Result<(ElfImage, T)> {
        let data = std::fs::read(path).map_err(|e| anyhow!("cannot read: {e}"))?;
        let file = object::File::parse(&*data).map_err(|e| anyhow!("not an ELF file ({e})"))?;
        if file.format() != object::BinaryFormat::Elf {
            bail!("not an ELF file ({:?})", file.format());
        }
        let relocatable = file.kind() == object::ObjectKind::Relocatable;
        if relocatable && placement.is_none() {
            bail!("a relocatable object (ET_REL), not an executable");
        }
        if !relocatable && placement.is_some() {
            bail!("not a relocatable object (ET_REL), as kernel modules are");
        }
        let is_arm = file.architecture() == object::Architecture::Arm;
        let lay = Layout::of(&file, placement);
        let text = text_of(&file, &lay, relocatable);
        let loads = loads_of(&file);
        let collect = |f: &object::File<'_>, l: &Layout| {
            collect_symbols(f.symbols(), l, which, is_arm, relocatable)
        };
        let mut syms = collect(&file, &lay);
        let own_symtab = !syms.is_empty();
        let own_dwarf = has_dwarf(&file);
        // The debug file: looked for when the image lacks what is wanted.
        let lookup = match debug {
            Some(d) if !own_symtab || (want_lines && !own_dwarf) => {
                d.search.find(&file, path, d.target, d.recorded)
            }
            _ => Default::default(),
        };
        let separate = lookup.found.as_ref().and_then(|f| {
            let d = object::File::parse(&*f.data).ok()?;
            let l = Layout::of(&d, placement);
            Some((
                d,
                l,
                DebugSource {
                    file: f.path.clone(),
                    method: f.method,
                },
            ))
        });
        let mut source = own_symtab.then(|| DebugSource {
            file: path.to_path_buf(),
            method: Method::Image,
        });
        // Symbols and ARM marks from the debug file when the image has no .symtab, else from
        // the image (its .dynsym as the last resort).
        let theirs = separate
            .as_ref()
            .filter(|_| !own_symtab)
            .map(|(d, l, src)| (d, l, src, collect(d, l)));
        let marks_from = match theirs {
            Some((d, l, src, ds)) if !ds.is_empty() => {
                (syms, source) = (ds, Some(src.clone()));
                (d, l)
            }
            _ => (&file, &lay),
        };
        if syms.is_empty() {
            syms = collect_symbols(file.dynamic_symbols(), &lay, which, is_arm, relocatable);
            if !syms.is_empty() {
                source = Some(DebugSource {
                    file: path.to_path_buf(),
                    method: Method::Dynsym,
                });
            }
        }
        // ARM and AArch64 (mapping symbols); empty for other machines.
        let marks = arm_marks_onto(marks_from, &lay, relocatable);
        let (lines, lines_error) = if want_lines {
            let (f, l) = match &separate {
                Some((d, l, src)) if !own_dwarf && has_dwarf(d) => {
                    source = Some(src.clone());
                    (d, l)
                }
                _ => (&file, &lay),
            };
            match load_dwarf(f, relocatable.then_some(&l.base)) {
                Ok(Some(c)) => (Some(c), None),
                Ok(None) => (None, Some("no debug info".to_string())),
                Err(e) => (None, Some(format!("bad debug info: {e:#}"))),
            }
        } else {
            (None, None)
        };
        let found = inspect(&file)?;
        let entered = crate::resolve::calls::entered_without_call(&file, &lay.base, &marks, &syms);
        let mut symbols = SymbolTable::new(syms, text);
        symbols.set_entered_without_call(entered);
        let arch = file.architecture();
        let mut code = lay.code;
        code.sort_by_key(|c| c.addr);
        let mut isa_marks: Vec<(u64, Isa)> = marks.into_values().flatten().collect();
        isa_marks.sort_by_key(|m| m.0);
        let image = ElfImage {
            path: path.to_path_buf(),
            loads,
            symbols,
            lines,
            lines_error,
            arch,
            code,
            isa_marks,
            debug: source,
            debug_notes: lookup.notes,
            ids: Ids::of(&file),
        };
        Ok((image, found))
    }

    /// An image of given symbols only, e.g. the kernel from a target's kallsyms (no program
    /// headers: pass `loads` empty; no line tables).
    pub fn from_symbols(path: &Path, symbols: SymbolTable, loads: Vec<Load>) -> ElfImage {
        ElfImage {
            path: path.to_path_buf(),
            loads,
            symbols,
            lines: None,
            lines_error: None,
            arch: object::Architecture::Unknown,
            code: vec![],
            isa_marks: vec![],
            debug: None,
            debug_notes: vec![],
            ids: Ids::default(),
        }
    }

    /// The instruction set at `addr`: on ARM and AArch64 from the last mapping symbol at or
    /// before it (ARM or A64 state when none); `None` for machines oprof does not disassemble.
    pub fn isa_at(&self, addr: u64) -> Option<Isa> {
        use object::Architecture as A;
        match self.arch {
            A::Arm => {
                let i = self.isa_marks.partition_point(|&(a, _)| a <= addr);
                Some(i.checked_sub(1).map_or(Isa::Arm, |i| self.isa_marks[i].1))
            }
            A::Aarch64 => {
                let i = self.isa_marks.partition_point(|&(a, _)| a <= addr);
                Some(i.checked_sub(1).map_or(Isa::Arm64, |i| self.isa_marks[i].1))
            }
            A::X86_64 => Some(Isa::X86_64),
            A::I386 => Some(Isa::X86),
            _ => None,
        }
    }

    /// The addresses inside `range` (exclusive of its start) where the instruction set changes.
    pub fn isa_changes(&self, range: &Range<u64>) -> Vec<u64> {
        self.isa_marks
            .iter()
            .map(|&(a, _)| a)
            .filter(|a| range.start < *a && *a < range.end)
            .collect()
    }

    /// The file bytes of the code at `range` (within one executable section). Errors say why
    /// there are none (no such section, a kallsyms-only image, the file unreadable now).
    pub fn code_bytes(&self, range: &Range<u64>) -> Result<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        let sec = self
            .code
            .iter()
            .find(|c| range.start >= c.addr && range.start - c.addr < c.size)
            .ok_or_else(|| anyhow!("{}: no code at {:#x}", self.path.display(), range.start))?;
        let skip = range.start - sec.addr;
        let len = (range.end.saturating_sub(range.start)).min(sec.size - skip);
        let mut f = std::fs::File::open(&self.path)
            .with_context(|| format!("opening {}", self.path.display()))?;
        let mut buf = vec![0; usize::try_from(len)?];
        f.seek(SeekFrom::Start(
            sec.file_offset
                .checked_add(skip)
                .context("file offset overflow")?,
        ))
        .and_then(|_| f.read_exact(&mut buf))
        .with_context(|| format!("reading code of {}", self.path.display()))?;
        Ok(buf)
    }

    /// The virtual address of file offset `off` (see [`offset_to_vaddr`]).
    pub fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        offset_to_vaddr(&self.loads, off)
    }

    /// Whether line tables were loaded.
    pub fn has_lines(&self) -> bool {
        self.lines.is_some()
    }

    /// The source line of `addr` (innermost inlined position), if the line tables have one.
    pub fn source(&self, addr: u64) -> Option<SourceLine> {
        let loc = self.lines.as_ref()?.find_location(addr).ok()??;
        Some(SourceLine {
            file: loc.file?.to_string(),
            line: loc.line,
        })
    }
}

/// Loads the DWARF of `file` into an `addr2line` context; `Ok(None)` without `.debug_info`.
/// `bases` (for `ET_REL`): section base addresses, to relocate the debug sections with.
fn load_dwarf(
    file: &object::File<'_>,
    bases: Option<&HashMap<SectionIndex, u64>>,
) -> Result<Option<addr2line::Context<Reader>>> {
    if !has_dwarf(file) {
        return Ok(None);
    }
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let empty = || {
        RelocateReader::new(
            EndianRcSlice::new(Rc::from(&[][..]), endian),
            Relocs::default(),
        )
    };
    let load = |id: gimli::SectionId| -> Result<Reader> {
        // Location lists are not needed for lines (and are large in a kernel's DWARF).
        if matches!(
            id,
            gimli::SectionId::DebugLoc | gimli::SectionId::DebugLocLists
        ) {
            return Ok(empty());
        }
        let Some(sec) = file.section_by_name(id.name()) else {
            return Ok(empty());
        };
        let data = sec
            .uncompressed_data()
            .with_context(|| format!("section {}", id.name()))?;
        let mut relocs = HashMap::new();
        if let Some(bases) = bases {
            for (off, r) in sec.relocations() {
                if r.kind() != RelocationKind::Absolute {
                    continue;
                }
                let s = match r.target() {
                    RelocationTarget::Symbol(i) => {
                        let Ok(sym) = file.symbol_by_index(i) else {
                            continue;
                        };
                        let b = match sym.section() {
                            SymbolSection::Section(si) => bases.get(&si).copied().unwrap_or(0),
                            _ => 0,
                        };
                        b.wrapping_add(sym.address())
                    }
                    RelocationTarget::Section(si) => bases.get(&si).copied().unwrap_or(0),
                    _ => continue,
                };
                let Ok(off) = usize::try_from(off) else {
                    continue;
                };
                let addend = (!r.has_implicit_addend()).then_some(r.addend());
                relocs.insert(off, (s, addend));
            }
        }
        Ok(RelocateReader::new(
            EndianRcSlice::new(Rc::from(&*data), endian),
            Relocs(Rc::new(relocs)),
        ))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    Ok(Some(
        addr2line::Context::from_dwarf(dwarf).map_err(|e| anyhow!("{e}"))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_offset_to_vaddr() {
        // A typical ARM executable: text at file offset 0 → 0x10000, data at 0x1f00 → 0x21f00.
        let loads = [
            Load {
                offset: 0,
                filesz: 0x1e00,
                vaddr: 0x1_0000,
            },
            Load {
                offset: 0x1f00,
                filesz: 0x200,
                vaddr: 0x2_1f00,
            },
        ];
        assert_eq!(offset_to_vaddr(&loads, 0x0), Some(0x1_0000));
        assert_eq!(offset_to_vaddr(&loads, 0x4a8), Some(0x1_04a8));
        assert_eq!(offset_to_vaddr(&loads, 0x1dff), Some(0x1_1dff));
        assert_eq!(offset_to_vaddr(&loads, 0x1e00), None);
        assert_eq!(offset_to_vaddr(&loads, 0x1f10), Some(0x2_1f10));
        assert_eq!(offset_to_vaddr(&loads, 0x2100), None);
        // A shared object whose text is not at offset = vaddr.
        let so = [Load {
            offset: 0x1000,
            filesz: 0x5000,
            vaddr: 0x11000,
        }];
        assert_eq!(offset_to_vaddr(&so, 0x1234), Some(0x11234));
        assert_eq!(offset_to_vaddr(&so, 0x234), None);
        // No overflow from file values.
        let big = [Load {
            offset: 0,
            filesz: u64::MAX,
            vaddr: u64::MAX,
        }];
        assert_eq!(offset_to_vaddr(&big, 1), None);
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("junk");
        std::fs::write(&p, b"\x7fELF\x01\x01\x01junk").unwrap();
        let e = format!("{:#}", ElfImage::load(&p, true).unwrap_err());
        assert!(e.contains("not an ELF file"), "{e}");
        assert!(format!("{:#}", ElfImage::load(&p, true).unwrap_err())
            .starts_with(&p.display().to_string()));
        let e = ElfImage::load(&dir.path().join("none"), false).unwrap_err();
        assert!(
            e.root_cause().to_string().starts_with("cannot read: "),
            "{e:#}"
        );
    }
}
