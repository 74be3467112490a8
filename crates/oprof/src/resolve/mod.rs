//! Attributing stream words to images, symbols and source lines.
//!
//! Kernel PCs: vmlinux text → `vmlinux`; a module's placed `.ko` text or its `/proc/modules`
//! range → `NAME.ko`; anything else → `(kernel, unknown)`. User words: a file offset in the image
//! of the current cookie (shown as its target path without ` (deleted)`; converted to an ELF
//! virtual address through `PT_LOAD`), or a raw PC in
//! anonymous memory (cookie 0; `[anon] (APP)`), or, with no COOKIE_SWITCH since the last CPU or
//! task switch, `(user, no image) (APP)`. Host files: `SYSROOT/PATH` for each sysroot in order,
//! else `DIR/basename(PATH)` for each `--image-path` DIR, else the executable of the build-id
//! `--archive` recorded from the debuginfod servers ([`debuginfod`]); modules: the `.ko` named in
//! [`Options::module_files`], else `DIR/NAME.ko` (with `-`/`_` swapped too), else the module's
//! symbols from the target's kallsyms ([`Options::module_symbols`], names only). Parsed ELF files
//! are cached per host path, resolved addresses per (space, word).
//!
//! Names are interned: [`Resolver::images`] (display name, host file), [`Resolver::symbols`]
//! (image, demangled symbol) and [`Resolver::locs`] (symbol, source line), indexed by
//! [`ImageId`], [`SymId`], [`LocId`].

pub mod calls;
pub mod confine;
pub mod debugfile;
pub mod debuginfod;
pub mod disasm;
pub mod elf;
pub mod images;
pub mod isa;
pub mod kallsyms;
pub mod symbols;
// The host unwinder of `--call-graph dwarf`-style samples (issue 21); the stream that will carry
// the kernel's register + stack snapshots to it is not there yet.
#[cfg_attr(not(test), allow(dead_code))]
pub mod unwind;

use crate::input::session::Ids;
use crate::input::stream::SampleCtx;
#[cfg(test)]
use crate::input::stream::{Frame, Sample};
use crate::resolve::debugfile::{Method, Search};
use crate::resolve::elf::{DebugLookup, DebugSource, ElfImage, SourceLine};
use crate::resolve::images::{ImageMap, ModuleSnapshot};
use crate::resolve::symbols::{demangle, SymbolTable};
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// ahash with constant seeds. `ahash::RandomState::new()` and even `AHasher::default()` (its
/// "fixed" keys are drawn once per process) read getrandom(2), which blocks until the kernel's
/// entropy pool is ready: on a board without a hardware RNG that is minutes after boot (the
/// QEMU realview-pb-a8 guest's `oprof report` waited 328 s for "crng init done").
#[derive(Clone, Copy, Default)]
pub struct FastState;

impl std::hash::BuildHasher for FastState {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> ahash::AHasher {
        const SEEDS: ahash::RandomState = ahash::RandomState::with_seeds(1, 2, 3, 4);
        SEEDS.build_hasher()
    }
}

/// Symbol of addresses that no symbol covers, or of images without symbols.
pub const NO_SYMBOLS: &str = "(no symbols)";
/// Symbol of user images whose file was not found on the host.
pub const IMAGE_NOT_FOUND: &str = "(image not found)";
/// Image of samples before any KERNEL_ENTER/EXIT.
pub const NO_CONTEXT: &str = "(no context)";
/// Image of kernel PCs outside vmlinux and every module.
pub const KERNEL_UNKNOWN: &str = "(kernel, unknown)";
/// Image name of the kernel.
pub const VMLINUX: &str = "vmlinux";

/// Where to find host copies of target files, and whether to read line tables.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Roots of copies of the target's filesystem, tried in order (`--archive`'s `DIR/root`
    /// first, then `--sysroot`, then `/` when reporting on the system that recorded).
    pub sysroots: Vec<PathBuf>,
    pub image_path: Vec<PathBuf>,
    /// Host files of kernel modules by name, tried before `image_path`.
    pub module_files: BTreeMap<String, PathBuf>,
    /// Module symbols from the target's kallsyms (placed at runtime addresses), for modules
    /// whose `.ko` is not found.
    pub module_symbols: BTreeMap<String, SymbolTable>,
    /// Load DWARF line tables (`-g`).
    pub lines: bool,
    /// `--debug-dir` directories: searched for separate debug files before
    /// `SYSROOT/usr/lib/debug` of each sysroot ([`crate::resolve::debugfile`]).
    pub debug_dirs: Vec<PathBuf>,
    /// The file kernel and module symbols came from when no vmlinux or `.ko` named them (a
    /// session's `kallsyms`).
    pub kallsyms: Option<PathBuf>,
    /// Build-id and debuglink of images as read on the target (`session.json` `debug_ids`),
    /// by target path: they find debug files for host copies without them, and reveal host
    /// copies that are not the profiled file.
    pub recorded_ids: BTreeMap<String, Ids>,
}

/// The address space a word was taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// Before any KERNEL_ENTER/EXIT.
    NoContext,
    Kernel,
    /// User mode: `cookie` is the image (`Some(0)`: anonymous memory); `app`/`tgid` name
    /// anonymous memory.
    User {
        cookie: Option<u64>,
        app: Option<u64>,
        tgid: Option<u64>,
    },
}

impl Space {
    pub fn of_sample(ctx: &SampleCtx) -> Space {
        Space::of(ctx.in_kernel, ctx.cookie, ctx)
    }

    #[cfg(test)]
    pub fn of_frame(f: &Frame, ctx: &SampleCtx) -> Space {
        Space::of(f.in_kernel, f.cookie, ctx)
    }

    fn of(in_kernel: Option<bool>, cookie: Option<u64>, ctx: &SampleCtx) -> Space {
        match in_kernel {
            None => Space::NoContext,
            Some(true) => Space::Kernel,
            // The task only matters for naming anonymous memory.
            Some(false) if matches!(cookie, Some(c) if c != 0) => Space::User {
                cookie,
                app: None,
                tgid: None,
            },
            Some(false) => Space::User {
                cookie,
                app: ctx.app_cookie,
                tgid: ctx.tgid,
            },
        }
    }
}

/// Source position of a resolved address (with `-g`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    Line(SourceLine),
    /// The image has line tables but none covers the address.
    NoLine,
    /// The image has no (readable) DWARF, or no host file.
    NoDebugInfo,
}

impl Source {
    /// `file:line` (file basename), or `(no line info)` / `(no debug info)`.
    pub fn display(&self) -> String {
        match self {
            Source::Line(l) => {
                let base = l.file.rsplit('/').next().unwrap_or(&l.file);
                match l.line {
                    Some(n) => format!("{base}:{n}"),
                    None => base.to_string(),
                }
            }
            Source::NoLine => "(no line info)".into(),
            Source::NoDebugInfo => "(no debug info)".into(),
        }
    }
}

/// An image as shown in the report.
#[derive(Debug, Clone)]
pub struct ImageInfo {
    /// Display name: `vmlinux`, `NAME.ko`, the target path, `[anon] (APP)`, `(kernel, unknown)`,
    /// `(no context)`, …
    pub name: String,
    /// The host file that gave its symbols.
    pub host_path: Option<PathBuf>,
    /// The file that named its addresses and how it was found (a separate debug file, the image
    /// itself, kallsyms); `None` when nothing did.
    pub debug: Option<DebugSource>,
}

/// Index into [`Resolver::images`].
pub type ImageId = usize;
/// Index into [`Resolver::symbols`].
pub type SymId = usize;
/// Index into [`Resolver::locs`].
pub type LocId = usize;

/// A resolved address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Loc {
    pub sym: SymId,
    /// With [`Options::lines`] only.
    pub source: Option<Source>,
}

/// Host file of a kernel module, and its state.
enum Ko {
    NotFound,
    /// Found, but the target gave no section addresses to place it.
    Unplaced(PathBuf),
    Unreadable(PathBuf, String),
    Loaded(Rc<ElfImage>),
    /// Not found, but the target's kallsyms named its functions.
    Kallsyms(SymbolTable),
}

struct Module {
    name: String,
    core: Option<Range<u64>>,
    ko: Ko,
}

/// How a user image id resolves.
#[derive(Clone)]
struct UserImage {
    image: ImageId,
    /// The loaded ELF, or the symbol to show for every address.
    elf: Result<Rc<ElfImage>, &'static str>,
    /// `(unreadable: reason)` symbol when the file failed to parse.
    unreadable: Option<String>,
}

/// Resolves words to interned images, symbols and locations.
pub struct Resolver {
    opts: Options,
    images_file: Option<ImageMap>,
    vmlinux: Option<(PathBuf, Rc<ElfImage>)>,
    modules: Vec<Module>,
    /// Interned images; `image_ids` maps names back.
    pub images: Vec<ImageInfo>,
    image_ids: HashMap<String, ImageId>,
    /// Interned (image, demangled symbol) pairs.
    pub symbols: Vec<(ImageId, String)>,
    symbol_ids: HashMap<(ImageId, String), SymId>,
    /// Interned locations (symbol + source).
    pub locs: Vec<Loc>,
    loc_ids: HashMap<Loc, LocId>,
    /// Resolved (space, word, is-return-address) → location.
    cache: HashMap<(Space, u64, bool), LocId>,
    elf_cache: HashMap<PathBuf, Result<Rc<ElfImage>, String>>,
    user_cache: HashMap<u64, UserImage>,
    /// Notes for the user (missing files, …), each once.
    pub warnings: BTreeSet<String>,
    /// Loaded images without a debug file: display name → what named them (`None`: nothing,
    /// `Some(Dynsym)`: exported symbols only). Summarised in one note by [`Resolver::notes`].
    unnamed: BTreeMap<String, Option<Method>>,
    /// Where separate debug files are looked for.
    search: Search,
}

/// Strips the ` (deleted)` the kernel appends to paths of unlinked files.
fn live_path(p: &str) -> &str {
    p.strip_suffix(" (deleted)").unwrap_or(p)
}

impl Resolver {
    /// `vmlinux`: the loaded kernel image and its path; `modules`: the snapshot, whose `.ko`
    /// files are searched in `opts.image_path` and loaded now.
    pub fn new(
        opts: Options,
        images_file: Option<ImageMap>,
        vmlinux: Option<(PathBuf, ElfImage)>,
        snapshot: &ModuleSnapshot,
    ) -> Resolver {
        let search = Search::new(&opts.debug_dirs, &opts.sysroots);
        let mut r = Resolver {
            opts,
            images_file,
            vmlinux: vmlinux.map(|(p, e)| (p, Rc::new(e))),
            modules: Vec::new(),
            images: Vec::new(),
            image_ids: HashMap::new(),
            symbols: Vec::new(),
            symbol_ids: HashMap::new(),
            locs: Vec::new(),
            loc_ids: HashMap::new(),
            cache: HashMap::new(),
            elf_cache: HashMap::new(),
            user_cache: HashMap::new(),
            warnings: BTreeSet::new(),
            unnamed: BTreeMap::new(),
            search,
        };
        if let Some((_, v)) = &r.vmlinux {
            if let Some(e) = &v.lines_error {
                r.warnings.insert(format!("vmlinux: {e}: no source lines"));
            }
            r.warnings.extend(v.debug_notes.iter().cloned());
        }
        for m in snapshot.modules.values() {
            let ko = match r.find_ko(&m.name) {
                None => match r.opts.module_symbols.get(&m.name) {
                    Some(t) if !t.is_empty() => Ko::Kallsyms(t.clone()),
                    _ => Ko::NotFound,
                },
                Some(p) if m.sections.is_empty() => Ko::Unplaced(p),
                Some(p) => {
                    match ElfImage::load_module(&p, &m.sections, r.opts.lines, Some(r.lookup(None)))
                    {
                        Ok(e) => {
                            r.warnings.extend(e.debug_notes.iter().cloned());
                            Ko::Loaded(Rc::new(e))
                        }
                        Err(e) => {
                            r.warnings.insert(format!("unreadable module: {e:#}"));
                            Ko::Unreadable(p, e.root_cause().to_string())
                        }
                    }
                }
            };
            let core = m.core.and_then(|(a, n)| Some(a..a.checked_add(n)?));
            r.modules.push(Module {
                name: m.name.clone(),
                core,
                ko,
            });
        }
        r
    }

    /// Where to look for the debug file of an image at target path `target`.
    fn lookup<'a>(&'a self, target: Option<&'a str>) -> DebugLookup<'a> {
        let recorded = target.and_then(|t| self.opts.recorded_ids.get(t));
        DebugLookup {
            search: &self.search,
            target,
            recorded,
        }
    }

    /// A note when the host copy `e` of target image `target` has another build-id than the
    /// one recorded on the target.
    fn check_recorded(&mut self, target: &str, e: &ElfImage) {
        let recorded = self
            .opts
            .recorded_ids
            .get(target)
            .and_then(|r| r.build_id.as_deref());
        if let (Some(want), Some(got)) = (recorded, e.ids.build_id.as_deref()) {
            if want != got {
                self.warnings.insert(format!(
                    "{}: build-id {got} differs from the profiled {target}'s {want} (recorded on the target): its names may not be the profiled code's",
                    e.path.display()
                ));
            }
        }
    }

    /// Notes for the user: [`Resolver::warnings`], and one note listing the loaded images that
    /// no debug file named.
    pub fn notes(&self) -> Vec<String> {
        let mut out: Vec<String> = self.warnings.iter().cloned().collect();
        if !self.unnamed.is_empty() {
            let list: Vec<String> = self
                .unnamed
                .iter()
                .map(|(name, m)| {
                    format!(
                        "{name} ({})",
                        if m.is_some() {
                            "exported symbols only"
                        } else {
                            "no symbols"
                        }
                    )
                })
                .collect();
            let dirs: Vec<String> = self
                .search
                .dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            out.push(format!(
                "no debug file (build-id, .gnu_debuglink, .gnu_debugdata) for {} stripped image{} (searched {}; try --debug-dir): {}",
                list.len(),
                if list.len() == 1 { "" } else { "s" },
                if dirs.is_empty() { "no debug directories".to_string() } else { dirs.join(", ") },
                list.join(", ")
            ));
        }
        out
    }

    /// Records what named the loaded ELF `e` of interned image `image` (see
    /// [`ImageInfo::debug`]); images without symbols or with exported ones only are listed in
    /// [`Resolver::notes`]' summary.
    fn note_debug(&mut self, image: ImageId, e: &ElfImage) {
        self.images[image].debug = e.debug.clone();
        match e.debug.as_ref().map(|d| d.method) {
            None => {
                self.unnamed.insert(self.images[image].name.clone(), None);
            }
            Some(Method::Dynsym) => {
                self.unnamed
                    .insert(self.images[image].name.clone(), Some(Method::Dynsym));
            }
            Some(_) => {}
        }
    }

    /// What kallsyms names (a kernel or module image without an ELF file).
    fn kallsyms_source(&self) -> DebugSource {
        let file = self
            .opts
            .kallsyms
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/kallsyms"));
        DebugSource {
            file,
            method: Method::Kallsyms,
        }
    }

    fn find_ko(&self, name: &str) -> Option<PathBuf> {
        let mut names = vec![
            name.to_string(),
            name.replace('_', "-"),
            name.replace('-', "_"),
        ];
        names.dedup();
        names.retain(|n| confine::is_file_name(n));
        if let Some(p) = names
            .iter()
            .find_map(|n| self.opts.module_files.get(n))
            .filter(|p| p.is_file())
        {
            return Some(p.clone());
        }
        self.opts
            .image_path
            .iter()
            .flat_map(|d| names.iter().map(move |n| d.join(format!("{n}.ko"))))
            .find(|p| p.is_file())
    }

    /// The unwind tables ([`crate::resolve::unwind::ImageTables`]) of the user image with id `id`: its
    /// host file and, when one is found, its separate debug file (build-id or debuglink: CFI
    /// of `-g` builds lives there). `None` without a host file or when it cannot be read.
    pub fn unwind_tables(&self, id: u64) -> Option<crate::resolve::unwind::ImageTables> {
        let target = self.image_path(id)?;
        let host = self.find_host_file(target)?;
        let data = std::fs::read(&host).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let mut tables = crate::resolve::unwind::ImageTables::from_object(&file, &host);
        let lk = self.lookup(Some(target));
        let found = lk
            .search
            .find(&file, &host, Some(target), lk.recorded)
            .found;
        if let Some(f) =
            found.filter(|f| f.method != crate::resolve::debugfile::Method::MiniDebugInfo)
        {
            // A debug file that cannot be read adds nothing: the image's own tables stay.
            let _ = tables.add_debug_file(&f.path);
        }
        Some(tables)
    }

    /// The host file of target path `target`: `SYSROOT/target` for each sysroot (its links
    /// resolved inside the sysroot: [`confine::file_in`]), else `DIR/basename` for each
    /// `--image-path` DIR. `None` also for a target with a `..` component
    /// ([`confine::relative`]: it would leave the sysroot).
    pub fn find_host_file(&self, target: &str) -> Option<PathBuf> {
        let target = live_path(target);
        let rel = confine::relative(target).ok()?;
        if let Some(p) = self
            .opts
            .sysroots
            .iter()
            .find_map(|root| confine::file_in(root, target))
        {
            return Some(p);
        }
        let base = rel.file_name()?;
        self.opts
            .image_path
            .iter()
            .map(|d| d.join(base))
            .find(|p| p.is_file())
    }

    /// [`Resolver::find_host_file`], else the executable of the build-id `oprof record
    /// --archive` recorded for `target`, from the debuginfod servers or their cache
    /// ([`debuginfod`]); their notes become warnings.
    fn host_file_or_debuginfod(&mut self, target: &str) -> Option<PathBuf> {
        if let Some(p) = self.find_host_file(target) {
            return Some(p);
        }
        let id = self.opts.recorded_ids.get(target)?.build_id.clone()?;
        let mut notes = vec![];
        let got = debuginfod::client()?.fetch(&id, debuginfod::Kind::Executable, &mut notes);
        self.warnings.extend(notes);
        Some(got?.path)
    }

    fn image(&mut self, name: &str, host_path: Option<&Path>) -> ImageId {
        if let Some(&id) = self.image_ids.get(name) {
            return id;
        }
        let id = self.images.len();
        self.images.push(ImageInfo {
            name: name.to_string(),
            host_path: host_path.map(Path::to_path_buf),
            debug: None,
        });
        self.image_ids.insert(name.to_string(), id);
        id
    }

    fn loc(&mut self, image: ImageId, symbol: &str, source: Option<Source>) -> LocId {
        let key = (image, symbol.to_string());
        let sym = match self.symbol_ids.get(&key) {
            Some(&s) => s,
            None => {
                let s = self.symbols.len();
                self.symbols.push(key.clone());
                self.symbol_ids.insert(key, s);
                s
            }
        };
        let loc = Loc { sym, source };
        if let Some(&l) = self.loc_ids.get(&loc) {
            return l;
        }
        let l = self.locs.len();
        self.locs.push(loc.clone());
        self.loc_ids.insert(loc, l);
        l
    }

    /// The location of a sample.
    #[cfg(test)]
    pub fn sample(&mut self, s: &Sample) -> LocId {
        self.resolve(Space::of_sample(&s.ctx), s.pc, false)
    }

    /// The location of a call-chain frame of `s` (a return address: looked up at `pc - 1`).
    #[cfg(test)]
    pub fn frame(&mut self, f: &Frame, s: &Sample) -> LocId {
        self.resolve(Space::of_frame(f, &s.ctx), f.pc, true)
    }

    /// Resolves `word` taken in `space`; `ret`: it is a return address.
    pub fn resolve(&mut self, space: Space, word: u64, ret: bool) -> LocId {
        if let Some(&l) = self.cache.get(&(space, word, ret)) {
            return l;
        }
        let l = match space {
            Space::NoContext => {
                let i = self.image(NO_CONTEXT, None);
                self.loc(
                    i,
                    NO_SYMBOLS,
                    self.opts.lines.then_some(Source::NoDebugInfo),
                )
            }
            Space::Kernel => {
                let pc = if ret && !self.kernel_entered_without_call(word) {
                    word.saturating_sub(1)
                } else {
                    word
                };
                self.kernel(pc)
            }
            Space::User {
                cookie: Some(c), ..
            } if c != 0 => self.user(c, word, ret),
            Space::User { cookie, app, tgid } => {
                let who = match (
                    app.filter(|&a| a != 0)
                        .and_then(|a| self.images_file.as_ref()?.path(a)),
                    tgid,
                ) {
                    (Some(p), _) => live_path(p).to_string(),
                    (None, Some(t)) => format!("tgid {t}"),
                    (None, None) => "tgid ?".to_string(),
                };
                let name = if cookie.is_some() {
                    format!("[anon] ({who})")
                } else {
                    format!("(user, no image) ({who})")
                };
                let i = self.image(&name, None);
                self.loc(
                    i,
                    NO_SYMBOLS,
                    self.opts.lines.then_some(Source::NoDebugInfo),
                )
            }
        };
        self.cache.insert((space, word, ret), l);
        l
    }

    fn source_of(&self, elf: Option<&ElfImage>, addr: u64) -> Option<Source> {
        if !self.opts.lines {
            return None;
        }
        Some(match elf {
            Some(e) if e.has_lines() => e.source(addr).map_or(Source::NoLine, Source::Line),
            _ => Source::NoDebugInfo,
        })
    }

    /// Whether kernel address `pc` starts a symbol of vmlinux or a module that code reaches
    /// without a call ([`SymbolTable::frame_address`]).
    fn kernel_entered_without_call(&self, pc: u64) -> bool {
        self.vmlinux
            .as_ref()
            .is_some_and(|(_, v)| v.symbols.entered_without_call(pc))
            || self.modules.iter().any(|m| match &m.ko {
                Ko::Loaded(e) => e.symbols.entered_without_call(pc),
                Ko::Kallsyms(t) => t.entered_without_call(pc),
                _ => false,
            })
    }

    fn kernel(&mut self, pc: u64) -> LocId {
        if let Some((path, v)) = &self.vmlinux {
            if v.symbols.text_range(pc).is_some() {
                let sym = v
                    .symbols
                    .lookup(pc)
                    .map_or_else(|| NO_SYMBOLS.to_string(), |s| demangle(&s.name));
                let src = self.source_of(Some(v), pc);
                let (path, v) = (path.clone(), v.clone());
                let i = self.image(VMLINUX, Some(&path));
                if self.images[i].debug.is_none() {
                    match v.debug {
                        Some(_) => self.note_debug(i, &v),
                        None => self.images[i].debug = Some(self.kallsyms_source()),
                    }
                }
                return self.loc(i, &sym, src);
            }
        }
        // A placed .ko's text is exact; the /proc/modules range is the fallback.
        let hit = self
            .modules
            .iter()
            .position(|m| match &m.ko {
                Ko::Loaded(e) => e.symbols.text_range(pc).is_some(),
                Ko::Kallsyms(t) => t.text_range(pc).is_some(),
                _ => false,
            })
            .or_else(|| {
                self.modules
                    .iter()
                    .position(|m| m.core.as_ref().is_some_and(|r| r.contains(&pc)))
            });
        let Some(mi) = hit else {
            let i = self.image(KERNEL_UNKNOWN, None);
            return self.loc(
                i,
                NO_SYMBOLS,
                self.opts.lines.then_some(Source::NoDebugInfo),
            );
        };
        let m = &self.modules[mi];
        let name = format!("{}.ko", m.name);
        let (sym, host, src, warn) = match &m.ko {
            Ko::Loaded(e) => (
                e.symbols
                    .lookup(pc)
                    .map_or_else(|| NO_SYMBOLS.to_string(), |s| demangle(&s.name)),
                Some(e.path.clone()),
                self.source_of(Some(e), pc),
                e.lines_error
                    .as_ref()
                    .map(|err| format!("{}: {err}: no source lines", e.path.display())),
            ),
            Ko::Kallsyms(t) => (
                t.lookup(pc)
                    .map_or_else(|| NO_SYMBOLS.to_string(), |s| demangle(&s.name)),
                None,
                self.source_of(None, pc),
                None,
            ),
            Ko::NotFound => (
                NO_SYMBOLS.to_string(),
                None,
                self.source_of(None, pc),
                Some(format!(
                    "{name}: not found in --image-path: its samples have no symbols"
                )),
            ),
            Ko::Unplaced(p) => (
                NO_SYMBOLS.to_string(),
                Some(p.clone()),
                self.source_of(None, pc),
                Some(format!(
                    "{}: no section addresses for module {} (--module-sections): no symbols",
                    p.display(),
                    m.name
                )),
            ),
            Ko::Unreadable(p, e) => (
                format!("(unreadable: {e})"),
                Some(p.clone()),
                self.source_of(None, pc),
                None,
            ),
        };
        if let Some(w) = warn {
            self.warnings.insert(w);
        }
        let debug = match &m.ko {
            Ko::Loaded(e) => Some(e.clone()),
            _ => None,
        };
        let kallsyms = matches!(m.ko, Ko::Kallsyms(_));
        let i = self.image(&name, host.as_deref());
        if self.images[i].debug.is_none() {
            if let Some(e) = debug {
                self.note_debug(i, &e);
            } else if kallsyms {
                self.images[i].debug = Some(self.kallsyms_source());
            }
        }
        self.loc(i, &sym, src)
    }

    fn user_image(&mut self, cookie: u64) -> UserImage {
        if let Some(u) = self.user_cache.get(&cookie) {
            return u.clone();
        }
        let target = self
            .images_file
            .as_ref()
            .and_then(|m| m.path(cookie))
            .map(|t| {
                if t.ends_with(" (deleted)") {
                    self.warnings.insert(format!(
                        "{}: deleted on the target while profiled (the host copy may differ)",
                        live_path(t)
                    ));
                }
                // Shown without the kernel's " (deleted)": one name per path.
                live_path(t).to_string()
            });
        let u = match target {
            None => {
                self.warnings.insert(match &self.images_file {
                    None => "no --images file: user images are shown by id".to_string(),
                    Some(_) => format!("image id {cookie} is not in the images file"),
                });
                let i = self.image(&format!("(unknown image {cookie})"), None);
                UserImage {
                    image: i,
                    elf: Err(NO_SYMBOLS),
                    unreadable: None,
                }
            }
            Some(t) => match self.host_file_or_debuginfod(&t) {
                None if confine::relative(&t).is_err() => {
                    self.warnings
                        .insert(format!("{t}: {}", confine::CLIMBS_OUT));
                    let i = self.image(&t, None);
                    UserImage {
                        image: i,
                        elf: Err(IMAGE_NOT_FOUND),
                        unreadable: None,
                    }
                }
                None => {
                    self.warnings
                        .insert(format!("{t}: not found in --sysroot or --image-path"));
                    let i = self.image(&t, None);
                    UserImage {
                        image: i,
                        elf: Err(IMAGE_NOT_FOUND),
                        unreadable: None,
                    }
                }
                Some(host) => {
                    let loaded = match self.elf_cache.get(&host) {
                        Some(l) => l.clone(),
                        None => {
                            let l = ElfImage::load_with_debug(
                                &host,
                                self.opts.lines,
                                Some(self.lookup(Some(&t))),
                            )
                            .map(Rc::new)
                            .map_err(|e| e.root_cause().to_string());
                            self.elf_cache.insert(host.clone(), l.clone());
                            l
                        }
                    };
                    let i = self.image(&t, Some(&host));
                    match loaded {
                        Ok(e) => {
                            self.warnings.extend(e.debug_notes.iter().cloned());
                            self.note_debug(i, &e);
                            self.check_recorded(&t, &e);
                            if let Some(err) = &e.lines_error {
                                self.warnings
                                    .insert(format!("{}: {err}: no source lines", host.display()));
                            }
                            UserImage {
                                image: i,
                                elf: Ok(e),
                                unreadable: None,
                            }
                        }
                        Err(reason) => {
                            self.warnings
                                .insert(format!("{}: unreadable: {reason}", host.display()));
                            UserImage {
                                image: i,
                                elf: Err(NO_SYMBOLS),
                                unreadable: Some(format!("(unreadable: {reason})")),
                            }
                        }
                    }
                }
            },
        };
        self.user_cache.insert(cookie, u.clone());
        u
    }

    /// `offset`: a file offset in image `cookie`; `ret`: a return address (looked up where
    /// [`SymbolTable::frame_address`] says).
    fn user(&mut self, cookie: u64, offset: u64, ret: bool) -> LocId {
        let u = self.user_image(cookie);
        let (sym, src) = match (&u.elf, &u.unreadable) {
            (_, Some(s)) => (s.clone(), self.source_of(None, 0)),
            (Err(s), None) => (s.to_string(), self.source_of(None, 0)),
            (Ok(e), None) => match e.offset_to_vaddr(offset).map(|va| {
                if ret {
                    e.symbols.frame_address(va)
                } else {
                    va
                }
            }) {
                Some(va) => (
                    e.symbols
                        .lookup(va)
                        .map_or_else(|| NO_SYMBOLS.to_string(), |s| demangle(&s.name)),
                    self.source_of(Some(e), va),
                ),
                None => (NO_SYMBOLS.to_string(), self.source_of(None, 0)),
            },
        };
        self.loc(u.image, &sym, src)
    }

    /// The virtual address of file offset `offset` in user image `cookie`, when its ELF is
    /// loaded (pprof locations).
    pub fn user_vaddr(&mut self, cookie: u64, offset: u64) -> Option<u64> {
        self.user_image(cookie).elf.ok()?.offset_to_vaddr(offset)
    }

    /// The host ELF image holding the code at sample word `word` taken in `space`, and the
    /// word's address in that image's address space (vmlinux: the kernel address; a placed
    /// module: the runtime address; a user image: its ELF virtual address, from the file
    /// offset). `None` for anonymous memory, unknown kernel addresses, kallsyms-only modules and
    /// images without a host file.
    pub fn code_at(&mut self, space: Space, word: u64) -> Option<(Rc<ElfImage>, u64)> {
        match space {
            Space::NoContext => None,
            Space::Kernel => {
                if let Some((_, v)) = &self.vmlinux {
                    if v.symbols.text_range(word).is_some() {
                        return Some((v.clone(), word));
                    }
                }
                self.modules.iter().find_map(|m| match &m.ko {
                    Ko::Loaded(e) if e.symbols.text_range(word).is_some() => {
                        Some((e.clone(), word))
                    }
                    _ => None,
                })
            }
            Space::User {
                cookie: Some(c), ..
            } if c != 0 => {
                let e = self.user_image(c).elf.ok()?;
                let va = e.offset_to_vaddr(word)?;
                Some((e, va))
            }
            Space::User { .. } => None,
        }
    }

    /// The target path of image id `id` (images file).
    pub fn image_path(&self, id: u64) -> Option<&str> {
        self.images_file.as_ref()?.path(id)
    }

    /// The image and symbol names of a location.
    pub fn names(&self, l: LocId) -> (&ImageInfo, &str) {
        let (i, s) = &self.symbols[self.locs[l].sym];
        (&self.images[*i], s)
    }
}

/// Fails unless every given directory exists (typos in `--sysroot`/`--image-path`/
/// `--debug-dir`): one line naming the first that does not.
pub fn check_dirs(opts: &Options) -> Result<()> {
    for d in opts.sysroots.iter().chain(&opts.image_path) {
        if !d.is_dir() {
            bail!("{}: not a directory", d.display());
        }
    }
    if let Some(d) = opts.debug_dirs.iter().find(|d| !d.is_dir()) {
        bail!("--debug-dir {}: not a directory", d.display());
    }
    Ok(())
}
