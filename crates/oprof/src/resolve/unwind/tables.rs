//! The unwind tables of one image, read from its ELF file(s) with `object`: the code bytes (for
//! the call check and the leaf proof), the `PT_LOAD` headers (file offset → ELF address), and
//! a list of table sources: the image itself, then any separate debug file (same addresses).

use super::cfi::{Cfi, Kind};
use super::ehabi::{Entry, Exidx};
use crate::resolve::elf::Load;
use anyhow::{anyhow, Context, Result};
use gimli::RunTimeEndian;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The unwind tables of one ELF file, at the ELF's own virtual addresses.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    pub exidx: Option<Exidx>,
    pub debug_frame: Option<Cfi>,
    pub eh_frame: Option<Cfi>,
}

/// Everything the unwinder needs of one image.
#[derive(Debug, Clone)]
pub struct ImageTables {
    pub path: PathBuf,
    /// `PT_LOAD` headers of the image.
    pub loads: Vec<Load>,
    /// Executable sections' bytes: (address, bytes), sorted.
    code: Vec<(u64, Rc<[u8]>)>,
    /// Table sources in order of preference (the image, then its debug file).
    pub sources: Vec<Source>,
    /// Sized function symbols (`.symtab` and `.dynsym`): (start, end), sorted by start.
    funcs: Vec<(u64, u64)>,
}

fn section_bytes(s: &object::Section<'_, '_>) -> Option<Rc<[u8]>> {
    let data = s.uncompressed_data().ok()?;
    (!data.is_empty()).then(|| Rc::from(&*data))
}

impl Source {
    /// The tables of a parsed ELF file `file` (read from `path`).
    pub fn from_object(file: &object::File<'_>, path: &Path) -> Source {
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let size = if file.is_64() { 8 } else { 4 };
        let text = file.section_by_name(".text").map_or(0, |s| s.address());
        let a64 = file.architecture() == object::Architecture::Aarch64;
        let cfi = |name: &str, kind: Kind| {
            let s = file.section_by_name(name)?;
            // A stripped debug file keeps the headers of allocated sections as NOBITS.
            let data = section_bytes(&s)?;
            let c = Cfi::new(kind, data, endian, size, text);
            Some(if a64 { c.aarch64() } else { c }).filter(|c| c.fdes() > 0)
        };
        let eh_addr = file.section_by_name(".eh_frame").map_or(0, |s| s.address());
        Source {
            path: path.to_path_buf(),
            exidx: exidx_of(file),
            debug_frame: cfi(".debug_frame", Kind::DebugFrame),
            eh_frame: cfi(".eh_frame", Kind::EhFrame { addr: eh_addr }),
        }
    }
}

/// The `.ARM.exidx` table of `file`, if it has entries.
///
/// The table does not say where its last entry ends. A program built without unwind tables
/// has one entry, crt1.o's `EXIDX_CANTUNWIND` for `_start`, placed before all the program's
/// functions: taken as unbounded it would claim all of them. The last entry is taken to end
/// with the function symbol at its start (its size), else at the next function symbol, else
/// with its executable section; beyond that no entry covers an address (`NoUnwindInfo`).
fn exidx_of(file: &object::File<'_>) -> Option<Exidx> {
    let s = file.section_by_name(".ARM.exidx")?;
    let data = section_bytes(&s)?;
    let extab = file
        .section_by_name(".ARM.extab")
        .and_then(|e| Some((e.address(), section_bytes(&e)?)));
    let probe = Exidx::parse(&data, s.address(), None, u64::MAX);
    let last = probe.entries().last()?.0;
    let funcs: Vec<(u64, u64)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|y| y.kind() == SymbolKind::Text && y.is_definition())
        .map(|y| (y.address() & !1, y.size()))
        .collect();
    let sized = funcs
        .iter()
        .filter(|f| f.0 == last && f.1 > 0)
        .map(|f| last.saturating_add(f.1))
        .max();
    let next = funcs.iter().map(|f| f.0).filter(|&a| a > last).min();
    let sec_end = file
        .sections()
        .filter(|x| x.kind() == SectionKind::Text && x.address() <= last)
        .map(|x| x.address().saturating_add(x.size()))
        .find(|&end| end > last);
    let last_end = sized.or(next).or(sec_end).unwrap_or(last);
    Some(Exidx::parse(&data, s.address(), extab, last_end))
}

impl ImageTables {
    /// The tables of a parsed ELF image `file` (read from `path`): its code, program headers and
    /// its own tables as the first source.
    pub fn from_object(file: &object::File<'_>, path: &Path) -> ImageTables {
        let mut code: Vec<(u64, Rc<[u8]>)> = file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .filter_map(|s| Some((s.address(), section_bytes(&s)?)))
            .collect();
        code.sort_by_key(|c| c.0);
        let loads = file
            .segments()
            .filter_map(|g| {
                let (offset, filesz) = g.file_range();
                Some(Load {
                    offset,
                    filesz,
                    vaddr: g.address(),
                })
                .filter(|_| filesz > 0)
            })
            .collect();
        // Bit 0 of an ARM function symbol is the Thumb bit; other machines have none.
        let mask = if file.architecture() == object::Architecture::Arm {
            !1
        } else {
            !0
        };
        let mut funcs: Vec<(u64, u64)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|y| y.kind() == SymbolKind::Text && y.is_definition() && y.size() > 0)
            .filter_map(|y| {
                Some((
                    y.address() & mask,
                    (y.address() & mask).checked_add(y.size())?,
                ))
            })
            .collect();
        funcs.sort_unstable();
        funcs.dedup();
        let sources = vec![Source::from_object(file, path)];
        ImageTables {
            path: path.to_path_buf(),
            loads,
            code,
            sources,
            funcs,
        }
    }

    /// The function symbol (of the image's own symbol tables) containing `addr`: its range; of
    /// nested ones the innermost (latest start).
    pub fn function_at(&self, addr: u64) -> Option<Range<u64>> {
        let n = self.funcs.partition_point(|f| f.0 <= addr);
        self.funcs[..n]
            .iter()
            .rev()
            .take(8)
            .find(|f| addr < f.1)
            .map(|f| f.0..f.1)
    }

    /// Reads the image at `path`. Errors name it.
    pub fn load(path: &Path) -> Result<ImageTables> {
        parse(path, |f| ImageTables::from_object(f, path))
    }

    /// Adds the tables of the image's separate debug file at `path` (same addresses), after
    /// those already there.
    pub fn add_debug_file(&mut self, path: &Path) -> Result<()> {
        let s = parse(path, |f| Source::from_object(f, path))?;
        self.sources.push(s);
        Ok(())
    }

    /// The code bytes at ELF addresses `range`, if one executable section holds them all.
    pub fn code(&self, range: Range<u64>) -> Option<&[u8]> {
        let i = self
            .code
            .partition_point(|c| c.0 <= range.start)
            .checked_sub(1)?;
        let (addr, bytes) = &self.code[i];
        let start = usize::try_from(range.start - addr).ok()?;
        let end = usize::try_from(range.end.checked_sub(*addr)?).ok()?;
        bytes.get(start..end)
    }

    /// The first CFI section (of any source) with an FDE covering `addr`.
    pub fn cfi_for(&self, addr: u64) -> Option<&Cfi> {
        self.sources
            .iter()
            .flat_map(|s| [s.debug_frame.as_ref(), s.eh_frame.as_ref()])
            .flatten()
            .find(|c| c.covers(addr))
    }

    /// The first EHABI entry (of any source) covering `addr`: its table, entry and range.
    pub fn exidx_for(&self, addr: u64) -> Option<(&Exidx, Entry, Range<u64>)> {
        self.sources
            .iter()
            .filter_map(|s| s.exidx.as_ref())
            .find_map(|x| {
                let (e, r) = x.lookup(addr)?;
                Some((x, e, r))
            })
    }
}

fn parse<T>(path: &Path, f: impl FnOnce(&object::File<'_>) -> T) -> Result<T> {
    let data = std::fs::read(path)
        .map_err(|e| anyhow!("cannot read: {e}"))
        .with_context(|| path.display().to_string())?;
    let file = object::File::parse(&*data)
        .map_err(|e| anyhow!("not an ELF file ({e})"))
        .with_context(|| path.display().to_string())?;
    Ok(f(&file))
}
