//! `oprof annotate`: the source lines and instructions of sampled functions with their samples,
//! like `opannotate --source/--assembly` and `perf annotate`.
//!
//! A sample counts for the instruction at its PC (exact on ARM, whose sampled PC is the
//! interrupted instruction), and for that instruction's source line (the innermost inlined
//! position in the DWARF, as `oprof report -g`). Call-chain frames do not count. The code comes
//! from the host copy of the image ([`Resolver::code_at`]), disassembled with capstone
//! ([`crate::resolve::disasm`]); the source from the file the DWARF names (or one found in
//! `--source-dir`). Every row counts the samples of all counters.

use crate::aggregate::inputs::Profile;
use crate::input::session::Counter;
use crate::resolve::disasm::{self, Insn};
use crate::resolve::elf::{ElfImage, SourceLine};
use crate::resolve::isa::Isa;
use crate::resolve::{Resolver, Space, SymId};
use crate::view::percent::percent;
use crate::view::printable::Printable;
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Most code bytes disassembled for one symbol.
const MAX_CODE: u64 = 256 * 1024;

/// What to annotate and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only this symbol (demangled name, as `oprof report -l` shows it).
    pub symbol: Option<String>,
    /// Only symbols of this image (its name as the report shows it, or its basename).
    pub image: Option<String>,
    /// Show the source lines.
    pub source: bool,
    /// Show the instructions (interleaved with source lines when the image has DWARF).
    pub assembly: bool,
    /// Only symbols with at least this percentage of all samples (opannotate's `--threshold`).
    pub threshold: f64,
    /// Mark (`*`) lines and instructions with at least this percentage of their symbol's samples.
    pub hot: f64,
    /// At most this many symbols, hottest first (0: all).
    pub limit: usize,
    /// Directories to look for source files in when the DWARF's path does not exist on this
    /// machine: `DIR/PATH` (the DWARF path without its leading `/`), then `DIR/BASENAME`.
    pub source_dirs: Vec<PathBuf>,
}

/// A source line of an annotated symbol.
#[derive(Debug, Serialize)]
pub struct LineRow {
    pub file: String,
    pub line: u32,
    pub samples: u64,
    /// Of the symbol's samples.
    pub percent: f64,
    /// The line's text, when the source file was found.
    pub text: Option<String>,
    /// At least `--hot` percent of the symbol's samples.
    pub hot: bool,
}

/// An instruction of an annotated symbol.
#[derive(Debug, Serialize)]
pub struct InsnRow {
    /// Address in the image's address space (ELF virtual address; runtime address for the
    /// kernel and placed modules).
    pub addr: u64,
    /// The instruction's encoding in hex as objdump shows it: A32 and data as one 32-bit word,
    /// T32 as 16-bit halfwords (space-separated), other machines byte by byte (little-endian
    /// images).
    pub bytes: String,
    pub text: String,
    pub isa: Isa,
    pub samples: u64,
    /// Of the symbol's samples.
    pub percent: f64,
    /// `file:line` (basename) of the instruction, with DWARF.
    pub source: Option<String>,
    /// The text of that line, when the source file was found.
    pub line_text: Option<String>,
    pub hot: bool,
}

/// One annotated symbol.
#[derive(Debug, Serialize)]
pub struct Annotation {
    pub image: String,
    pub symbol: String,
    /// The host file the code came from.
    pub host_path: Option<String>,
    /// The symbol's addresses (`end` exclusive); 0..0 when its code is not available.
    pub start: u64,
    pub end: u64,
    pub samples: u64,
    /// Of all samples.
    pub percent: f64,
    /// Samples per counter.
    pub per_event: BTreeMap<u64, u64>,
    /// Source lines, when asked for and the image has DWARF: per file, from the symbol's first
    /// to its last line in that file.
    pub lines: Vec<LineRow>,
    /// Instructions, when asked for.
    pub instructions: Vec<InsnRow>,
    /// Samples whose instruction has no line in the DWARF.
    pub no_line_samples: u64,
    /// Why a part is missing (no host file, no DWARF, source file not found, …).
    pub notes: Vec<String>,
}

/// `oprof annotate --json`.
#[derive(Debug, Serialize)]
pub struct Annotated {
    /// All samples of the session.
    pub total: u64,
    pub counters: Vec<Counter>,
    pub symbols: Vec<Annotation>,
    pub warnings: Vec<String>,
}

/// The samples of one symbol: per counter, and per sampled (space, word).
#[derive(Default)]
struct Sampled {
    per_event: BTreeMap<u64, u64>,
    words: HashMap<(Space, u64), u64>,
}

impl Sampled {
    fn total(&self) -> u64 {
        self.per_event.values().sum()
    }
}

/// Symbol names that are placeholders, not functions.
fn placeholder(name: &str) -> bool {
    name.starts_with('(')
}

/// Whether image display name `name` is the one `want` names (the name or its basename).
fn image_matches(name: &str, want: &str) -> bool {
    name == want || name.rsplit('/').next() == Some(want)
}

/// Up to three of `names` close to `want`, for "did you mean" in errors.
fn close_matches<'a>(want: &str, names: impl Iterator<Item = &'a str>) -> String {
    let mut scored: Vec<(f64, &str)> = names
        .map(|n| (strsim::jaro_winkler(want, n), n))
        .filter(|s| s.0 > 0.7)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.dedup_by_key(|s| s.1);
    let v: Vec<&str> = scored.iter().take(3).map(|s| s.1).collect();
    if v.is_empty() {
        String::new()
    } else {
        format!(" (close: {})", v.join(", "))
    }
}

/// Annotates the symbols of `p` that `opts` selects. Errors (one line each): `--symbol` or
/// `--image` matches no sampled symbol; with `--source` alone, a selected symbol's image has
/// no DWARF.
pub fn build(p: &mut Profile, opts: &Options) -> Result<Annotated> {
    let res = &mut p.res;
    let mut by_sym: HashMap<SymId, Sampled> = HashMap::new();
    let mut total = 0u64;
    for counts in &p.counts.parts {
        for (k, &n) in &counts.keys {
            let key = counts.key(k);
            let Some((space, word)) = key.entries().next() else {
                continue;
            };
            let space = counts.spaces[space as usize];
            total += n;
            let l = res.resolve(space, word, false);
            let s = by_sym.entry(res.locs[l].sym).or_default();
            *s.per_event.entry(key.event).or_default() += n;
            *s.words.entry((space, word)).or_default() += n;
        }
    }
    let name_of = |res: &Resolver, s: SymId| {
        let (i, n) = &res.symbols[s];
        (res.images[*i].name.clone(), n.clone())
    };
    let mut picked: Vec<(SymId, Sampled)> = by_sym
        .into_iter()
        .filter(|(s, _)| {
            let (img, name) = name_of(res, *s);
            !placeholder(&name)
                && opts.symbol.as_ref().is_none_or(|w| *w == name)
                && opts.image.as_ref().is_none_or(|w| image_matches(&img, w))
        })
        .collect();
    if picked.is_empty() {
        let sampled = || {
            res.symbols
                .iter()
                .map(|(i, n)| (res.images[*i].name.as_str(), n.as_str()))
        };
        match (&opts.symbol, &opts.image) {
            (Some(s), _) => bail!(
                "no sampled symbol `{s}`{}{}",
                opts.image
                    .as_ref()
                    .map_or(String::new(), |i| format!(" in {i}")),
                close_matches(
                    s,
                    sampled().filter(|(_, n)| !placeholder(n)).map(|(_, n)| n)
                )
            ),
            (None, Some(i)) => {
                if sampled().any(|(img, _)| image_matches(img, i)) {
                    bail!("{i}: its samples have no symbols (stripped, or not found on this host)")
                }
                bail!(
                    "no samples in image `{i}`{}",
                    close_matches(i, sampled().map(|(img, _)| img))
                )
            }
            (None, None) => {}
        }
    }
    picked.retain(|(_, s)| percent(s.total(), total) >= opts.threshold);
    picked.sort_by(|a, b| {
        b.1.total()
            .cmp(&a.1.total())
            .then_with(|| name_of(res, a.0).cmp(&name_of(res, b.0)))
    });
    if opts.limit > 0 {
        picked.truncate(opts.limit);
    }
    let mut symbols = Vec::new();
    for (sym, sampled) in picked {
        let (image, symbol) = name_of(res, sym);
        let mut a = Annotation {
            image,
            symbol,
            host_path: None,
            start: 0,
            end: 0,
            samples: sampled.total(),
            percent: percent(sampled.total(), total),
            per_event: sampled.per_event.clone(),
            lines: vec![],
            instructions: vec![],
            no_line_samples: 0,
            notes: vec![],
        };
        annotate_symbol(res, &sampled, opts, &mut a)?;
        symbols.push(a);
    }
    let counters = p.counters.clone();
    // Missing line tables are noted per annotated symbol; the resolver's notes of the same kind
    // name every image of the session.
    let warnings = res
        .notes()
        .into_iter()
        .filter(|w| !w.ends_with(": no source lines"))
        .collect();
    Ok(Annotated {
        total,
        counters,
        symbols,
        warnings,
    })
}

/// Fills the rows of `a` from its samples: addresses, instructions, lines.
fn annotate_symbol(
    res: &mut Resolver,
    sampled: &Sampled,
    opts: &Options,
    a: &mut Annotation,
) -> Result<()> {
    // The symbol's samples by address in its host image.
    let mut elf: Option<Rc<ElfImage>> = None;
    let mut at: BTreeMap<u64, u64> = BTreeMap::new();
    for (&(space, word), &n) in &sampled.words {
        if let Some((e, va)) = res.code_at(space, word) {
            *at.entry(va).or_default() += n;
            elf.get_or_insert(e);
        }
    }
    let Some(elf) = elf else {
        a.notes.push(format!(
            "{}: no code on this host (image not found, anonymous memory, or kernel symbols from kallsyms: give --vmlinux)",
            a.image
        ));
        return Ok(());
    };
    a.host_path = Some(elf.path.display().to_string());
    let Some((_, range)) = at.keys().next().and_then(|&va| elf.symbols.extent(va)) else {
        a.notes.push(format!(
            "{}: no symbol covers the samples",
            elf.path.display()
        ));
        return Ok(());
    };
    // A size-less symbol extends to the next one or the end of its text: at most 256 KiB.
    let mut range = range;
    if range.end - range.start > MAX_CODE {
        a.notes.push(format!(
            "a size-less symbol: only its first {} KiB are shown",
            MAX_CODE / 1024
        ));
        range.end = range.start + MAX_CODE;
    }
    (a.start, a.end) = (range.start, range.end);
    if opts.source && !opts.assembly && !elf.has_lines() {
        bail!(
            "{}: no debug info (DWARF) for --source{}",
            elf.path.display(),
            lines_reason(&elf)
        );
    }
    let insns = match disasm::disassemble(&elf, range.clone()) {
        Ok(v) => v,
        Err(e) => {
            a.notes.push(format!("{e:#}"));
            vec![]
        }
    };
    // Samples per instruction: the one containing the sampled address.
    let mut per_insn = vec![0u64; insns.len()];
    let mut outside = 0u64;
    for (&va, &n) in &at {
        match insns
            .partition_point(|i| i.addr <= va)
            .checked_sub(1)
            .filter(|&i| va < insns[i].end())
        {
            Some(i) => per_insn[i] += n,
            None => outside += n,
        }
    }
    if outside > 0 && !insns.is_empty() {
        a.notes.push(format!(
            "{outside} samples outside the disassembled instructions"
        ));
    }
    let lines: Vec<Option<SourceLine>> = insns.iter().map(|i| elf.source(i.addr)).collect();
    if !elf.has_lines() {
        a.notes.push(format!(
            "{}: no debug info (DWARF): no source lines{}",
            elf.path.display(),
            lines_reason(&elf)
        ));
    }
    let mut sources = Sources::new(&opts.source_dirs);
    if opts.assembly {
        for (i, insn) in insns.iter().enumerate() {
            let src = lines[i].as_ref();
            let text = src.and_then(|s| sources.line(&s.file, s.line?));
            a.instructions
                .push(insn_row(insn, per_insn[i], a.samples, opts.hot, src, text));
        }
    }
    if opts.source && elf.has_lines() {
        a.lines = line_rows(&per_insn, &lines, a.samples, opts.hot, &mut sources);
    }
    a.no_line_samples = if elf.has_lines() {
        per_insn
            .iter()
            .zip(&lines)
            .filter(|(_, l)| l.as_ref().is_none_or(|l| l.line.is_none()))
            .map(|(n, _)| n)
            .sum()
    } else {
        0
    };
    a.notes.extend(
        sources
            .missing
            .into_iter()
            .map(|f| format!("{f}: source file not found (try --source-dir)")),
    );
    Ok(())
}

/// `: REASON` when the image's line tables failed to load for another reason than absence.
fn lines_reason(elf: &ElfImage) -> String {
    match &elf.lines_error {
        Some(e) if e != "no debug info" => format!(" ({e})"),
        _ => String::new(),
    }
}

fn insn_row(
    insn: &Insn,
    n: u64,
    of: u64,
    hot: f64,
    src: Option<&SourceLine>,
    line_text: Option<String>,
) -> InsnRow {
    let percent = percent(n, of);
    InsnRow {
        addr: insn.addr,
        bytes: encoding(insn),
        text: insn.text.clone(),
        isa: insn.isa,
        samples: n,
        percent,
        source: src.map(|s| crate::resolve::Source::Line(s.clone()).display()),
        line_text,
        hot: n > 0 && percent >= hot,
    }
}

/// [`InsnRow::bytes`] of `insn`.
fn encoding(insn: &Insn) -> String {
    let unit = match insn.isa {
        Isa::Arm | Isa::Data | Isa::Arm64 => 4,
        Isa::Thumb => 2,
        Isa::X86_64 | Isa::X86 => 1,
    };
    insn.bytes
        .chunks(unit)
        .map(|c| {
            c.iter()
                .rev()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The source rows: per file (the file of the symbol's first instruction first, then by
/// samples), its lines from the first to the last the symbol's instructions name.
fn line_rows(
    per_insn: &[u64],
    lines: &[Option<SourceLine>],
    of: u64,
    hot: f64,
    sources: &mut Sources,
) -> Vec<LineRow> {
    // file → line → samples (lines without samples included: they bound the listing).
    let mut files: Vec<(String, BTreeMap<u32, u64>)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(SourceLine {
            file,
            line: Some(line),
        }) = l
        else {
            continue;
        };
        let idx = match files.iter().position(|(f, _)| f == file) {
            Some(x) => x,
            None => {
                files.push((file.clone(), BTreeMap::new()));
                files.len() - 1
            }
        };
        *files[idx].1.entry(*line).or_default() += per_insn.get(i).copied().unwrap_or(0);
    }
    if files.len() > 1 {
        let first = files.remove(0);
        files.sort_by(|a, b| {
            b.1.values()
                .sum::<u64>()
                .cmp(&a.1.values().sum::<u64>())
                .then(a.0.cmp(&b.0))
        });
        files.insert(0, first);
    }
    let mut rows = Vec::new();
    for (file, counts) in files {
        let (Some(&lo), Some(&hi)) = (counts.keys().next(), counts.keys().next_back()) else {
            continue;
        };
        // A function's lines are close together; inlined code from far away in a file shows
        // its own lines only.
        let listed: Vec<u32> = if hi - lo <= 200 {
            (lo..=hi).collect()
        } else {
            counts.keys().copied().collect()
        };
        for line in listed {
            let n = counts.get(&line).copied().unwrap_or(0);
            let percent = percent(n, of);
            let t = sources.line(&file, line);
            rows.push(LineRow {
                file: file.clone(),
                line,
                samples: n,
                percent,
                text: t,
                hot: n > 0 && percent >= hot,
            });
        }
    }
    rows
}

/// Source files read once, looked up where the DWARF says or in `--source-dir`.
struct Sources<'a> {
    dirs: &'a [PathBuf],
    files: HashMap<String, Option<Vec<String>>>,
    missing: Vec<String>,
}

impl<'a> Sources<'a> {
    fn new(dirs: &'a [PathBuf]) -> Sources<'a> {
        Sources {
            dirs,
            files: HashMap::new(),
            missing: vec![],
        }
    }

    /// The lines of `file` (a DWARF path), if found.
    fn get(&mut self, file: &str) -> Option<&Vec<String>> {
        if !self.files.contains_key(file) {
            let p = Path::new(file);
            let base = p.file_name().map(PathBuf::from);
            let candidates = std::iter::once(p.to_path_buf())
                .chain(
                    self.dirs
                        .iter()
                        .map(|d| d.join(file.trim_start_matches('/'))),
                )
                .chain(
                    self.dirs
                        .iter()
                        .filter_map(|d| Some(d.join(base.as_ref()?))),
                );
            let text = candidates
                .filter(|c| c.is_file())
                .find_map(|c| std::fs::read(c).ok())
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .lines()
                        .map(|l| l.replace('\t', "    "))
                        .collect::<Vec<_>>()
                });
            if text.is_none() {
                self.missing.push(file.to_string());
            }
            self.files.insert(file.to_string(), text);
        }
        self.files.get(file)?.as_ref()
    }

    /// Line `line` (1-based) of `file`, if found.
    fn line(&mut self, file: &str, line: u32) -> Option<String> {
        let i = usize::try_from(line).ok()?.checked_sub(1)?;
        self.get(file)?.get(i).cloned()
    }
}

/// Count and percent columns; blank for lines without samples (as perf annotate).
fn counts(n: u64, percent: f64, hot: bool) -> String {
    let mark = if hot { '*' } else { ' ' };
    if n == 0 {
        format!("{:>9} {:>7} {mark}", "", "")
    } else {
        format!("{n:>9} {percent:>6.2}% {mark}")
    }
}

/// The text view: per symbol a header, its source lines, then its instructions with the
/// source line printed above each run of instructions of that line.
pub fn render(a: &Annotated, opts: &Options) -> String {
    let mut out = String::new();
    if a.symbols.is_empty() {
        out.push_str(&format!(
            "no symbol with at least {:.2}% of the {} samples\n",
            opts.threshold, a.total
        ));
    }
    for s in &a.symbols {
        out.push_str(&format!(
            "== {} in {}: {} samples ({:.2}% of {}){}\n",
            Printable(&s.symbol),
            Printable(&s.image),
            s.samples,
            s.percent,
            a.total,
            if s.end > s.start {
                format!(", {:#x}..{:#x}", s.start, s.end)
            } else {
                String::new()
            }
        ));
        if let Some(h) = &s.host_path {
            out.push_str(&format!("   code from {}\n", Printable(h)));
        }
        for n in &s.notes {
            out.push_str(&format!("   note: {}\n", Printable(n)));
        }
        if !s.lines.is_empty() {
            out.push_str(&format!(
                "-- source{}\n",
                if s.no_line_samples > 0 {
                    format!(" ({} samples without line info)", s.no_line_samples)
                } else {
                    String::new()
                }
            ));
            out.push_str(&format!("{:>9} {:>7}   {:>5}\n", "samples", "%", "line"));
            let mut file = "";
            for l in &s.lines {
                if l.file != file {
                    file = &l.file;
                    out.push_str(&format!("{:>21}{}\n", "", Printable(file)));
                }
                out.push_str(&format!(
                    "{} {:>5}  {}\n",
                    counts(l.samples, l.percent, l.hot),
                    l.line,
                    Printable(l.text.as_deref().unwrap_or(""))
                ));
            }
        }
        if !s.instructions.is_empty() {
            let isas: Vec<&str> = {
                let mut v: Vec<&str> = s.instructions.iter().map(|i| isa_name(i.isa)).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            out.push_str(&format!("-- assembly ({})\n", isas.join(", ")));
            out.push_str(&format!("{:>9} {:>7}   {:>8}\n", "samples", "%", "address"));
            let mut last: Option<&str> = None;
            for i in &s.instructions {
                if let Some(src) = i.source.as_deref() {
                    if last != Some(src) {
                        out.push_str(&format!(
                            "{:>21}{}  {}\n",
                            "",
                            Printable(src),
                            Printable(i.line_text.as_deref().unwrap_or("").trim())
                        ));
                        last = Some(src);
                    }
                }
                out.push_str(&format!(
                    "{} {:>8x}:  {:<20} {}\n",
                    counts(i.samples, i.percent, i.hot),
                    i.addr,
                    i.bytes,
                    Printable(&i.text)
                ));
            }
        }
        out.push('\n');
    }
    out
}

fn isa_name(i: Isa) -> &'static str {
    match i {
        Isa::Arm => "arm",
        Isa::Thumb => "thumb",
        Isa::Data => "data",
        Isa::Arm64 => "arm64",
        Isa::X86_64 => "x86-64",
        Isa::X86 => "x86",
    }
}
