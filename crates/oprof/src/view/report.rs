//! `oprof report`: attribute samples to images, symbols and source lines (like `opreport`,
//! `opreport -l`, `-g`, `-c`), as text, JSON and folded stacks for a flame graph.

use crate::aggregate;
use crate::input::session::Counter;
#[cfg(test)]
use crate::input::stream::{self, Stream};
use crate::resolve::Space;
use crate::resolve::{LocId, Resolver, Source, SymId, KERNEL_UNKNOWN, NO_CONTEXT, VMLINUX};
use crate::view::callgraph;
use crate::view::flame::Folded;
use crate::view::percent::percent;
use crate::view::printable::{escape, Printable};
#[cfg(test)]
use anyhow::Result;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A symbol-level row (symbol and, with `-g`, source line).
#[derive(Debug, Serialize)]
pub struct Row {
    /// Samples of every counter.
    pub samples: u64,
    /// Of all samples.
    pub percent: f64,
    /// Image display name (`vmlinux`, `NAME.ko`, target path, …).
    pub image: String,
    /// Demangled symbol, or `(no symbols)`, `(image not found)`, `(unreadable: …)`.
    pub symbol: String,
    /// Samples per counter (the sample's event word).
    pub per_event: BTreeMap<u64, u64>,
    /// With `-g`: the source line of the row's samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceJson>,
}

/// Source position of a row (`-g`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SourceJson {
    /// Source file as recorded in the DWARF; null without line information.
    pub file: Option<String>,
    /// 1-based line; null when unknown.
    pub line: Option<u32>,
    /// As shown in the text view: `file.c:12`, `(no line info)` or `(no debug info)`.
    pub display: String,
}

impl SourceJson {
    fn new(s: &Source) -> SourceJson {
        let (file, line) = match s {
            Source::Line(l) => (Some(l.file.clone()), l.line),
            _ => (None, None),
        };
        SourceJson {
            file,
            line,
            display: s.display(),
        }
    }
}

/// An image-level row.
#[derive(Debug, Serialize)]
pub struct ImageRow {
    pub samples: u64,
    pub percent: f64,
    pub image: String,
    /// The host file that gave the image's symbols, if any.
    pub path_on_host: Option<String>,
    /// The file that named the image's addresses: a separate debug file, the image itself, or
    /// the kallsyms file; null when nothing did.
    pub debug_file: Option<String>,
    /// How `debug_file` was found: `build-id`, `debuglink`, `minidebuginfo` (the image's
    /// `.gnu_debugdata`), `image` (its own `.symtab`), `dynsym` (its exported symbols only),
    /// `kallsyms`; null with `debug_file`.
    pub debug_found_by: Option<&'static str>,
    pub per_event: BTreeMap<u64, u64>,
}

/// The session line of the text report on a session directory (kernel, CPUs, events, length,
/// command shortened to 60 characters, totals), and the total of each counter that counted.
pub fn render_session(dir: &std::path::Path, s: &crate::input::session::SessionInfo) -> String {
    let what = if s.counters.is_empty() {
        match s.timer_hz {
            Some(hz) => format!("timer mode ({hz} Hz per CPU)"),
            None => "timer mode".to_string(),
        }
    } else {
        let ev: Vec<String> = s
            .counters
            .iter()
            .map(|c| format!("{}:{}", c.event, c.count))
            .collect();
        format!("{} {}", s.cpu_type, ev.join(","))
    };
    let cmd = match &s.command {
        Some(c) => {
            let mut text = c.join(" ");
            if text.chars().count() > 60 {
                text = text.chars().take(57).collect::<String>() + "...";
            }
            let st = s
                .exit_status
                .map_or(String::new(), |st| format!(" (exit {st})"));
            format!(" of `{text}`{st}")
        }
        None => format!(", whole system until {}", s.ended_by),
    };
    let cpus = if s.cpus == 1 {
        "1 CPU".to_string()
    } else {
        format!("{} CPUs", s.cpus)
    };
    let line = format!(
        "Session {}: Linux {} {}, {cpus}, {what}, {:.1} s{cmd}: {} samples, {} lost",
        dir.display(),
        s.kernel.release,
        s.kernel.machine,
        s.duration_ns as f64 / 1e9,
        s.totals.samples,
        s.totals.lost
    );
    // Every field but the numbers comes from session.json: the whole line is escaped.
    let mut out = format!("{}\n", escape(&line));
    if let (Some(max), Some(d)) = (s.max_size, &s.totals.dropped) {
        out.push_str(&format!(
            "Flight recorder (--max-size {max} bytes): the last {} bytes of the stream; {} older \
             samples in {} chunks ({} bytes) dropped\n",
            s.totals.bytes, d.samples, d.chunks, d.bytes
        ));
    }
    for c in &s.counters {
        if let Some(t) = c.total {
            let how = if c.count == 0 {
                "counting only".to_string()
            } else {
                format!("one sample every {}", c.count)
            };
            out.push_str(&format!(
                "Counter {}: {} counted {t} events ({how})\n",
                c.counter,
                Printable(&c.event)
            ));
        }
    }
    out
}

/// What to compute besides the flat profile.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Group symbol rows by source line too (`-g`; the resolver must load line tables).
    pub lines: bool,
    /// Collect folded stacks for a flame graph.
    pub flame: bool,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub total: u64,
    pub kernel: u64,
    pub user: u64,
    /// Samples before any KERNEL_ENTER/EXIT record (mode unknown; legacy daemon drops them).
    pub no_context: u64,
    pub per_cpu: BTreeMap<u64, u64>,
    pub per_event: BTreeMap<u64, u64>,
    /// The counters that delivered samples (event words), described by `--counter` if given.
    pub counters: Vec<Counter>,
    /// Symbol-level rows (with `-g`: symbol and source line), hottest first.
    pub rows: Vec<Row>,
    /// Image-level rows, hottest first.
    pub images: Vec<ImageRow>,
    /// MODULE_LOADED records in the stream.
    pub module_loaded: u64,
    /// Samples that came with a call chain (TRACE_BEGIN).
    pub traced: u64,
    /// Call graph by symbol, when any sample was traced.
    pub callgraph: Option<Vec<callgraph::Entry>>,
    /// Notes about missing or unusable inputs.
    pub warnings: Vec<String>,
    /// What `--force` skipped of a stream that is not as the module writes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<crate::input::validate::Skipped>,
    /// Folded stacks, with [`Options::flame`].
    #[serde(skip)]
    pub folded: Folded,
}

/// Builds the report of the samples counted in `agg` (see [`crate::aggregate`]), resolving
/// each distinct sample once with `res`; `counters` names the counters (sample event words).
pub fn build_counts(
    agg: &aggregate::Aggregated,
    res: &mut Resolver,
    counters: &[Counter],
    opts: Options,
) -> Report {
    let mut t = Tally::new(opts);
    let mut chain: Vec<LocId> = Vec::new();
    for counts in &agg.parts {
        t.r.module_loaded += counts.module_loaded;
        for (&cpu, &n) in &counts.per_cpu {
            *t.r.per_cpu.entry(cpu).or_default() += n;
        }
        // Resolved entries of this part (its space indexes are its own).
        let mut cache: HashMap<(&[u64], bool), LocId, crate::resolve::FastState> =
            HashMap::default();
        for (k, &n) in &counts.keys {
            let key = counts.key(k);
            chain.clear();
            let mut first_space = None;
            for (i, ((space, word), packed)) in key.entries().zip(key.packed_entries()).enumerate()
            {
                let space = counts.spaces[space as usize];
                first_space.get_or_insert(space);
                let ret = i > 0;
                let l = *cache
                    .entry((packed, ret))
                    .or_insert_with(|| res.resolve(space, word, ret));
                chain.push(l);
            }
            let in_kernel = match first_space {
                Some(Space::Kernel) => Some(true),
                Some(Space::User { .. }) => Some(false),
                Some(Space::NoContext) | None => None,
            };
            t.add(
                res,
                Sampled {
                    event: key.event,
                    in_kernel,
                    traced: key.traced,
                    app_cookie: key.app_cookie,
                },
                &chain,
                n,
            );
        }
    }
    t.finish(res, counters)
}

/// Builds the report of a stream in memory (see [`build_counts`]).
#[cfg(test)]
pub fn build(
    stream: &Stream,
    res: &mut Resolver,
    counters: &[Counter],
    opts: Options,
) -> Result<Report> {
    let agg = aggregate::from_words(
        &stream.words,
        stream.word_bytes,
        aggregate::Options {
            app: opts.flame,
            task: false,
        },
    )?;
    Ok(build_counts(&agg, res, counters, opts))
}

/// The report as built before it streamed: every sample decoded into memory, then resolved
/// and counted one by one. The oracle [`build_counts`] is tested against.
#[cfg(test)]
pub fn build_reference(
    stream: &Stream,
    res: &mut Resolver,
    counters: &[Counter],
    opts: Options,
) -> Result<Report> {
    let decoded = stream::decode(stream)?;
    let mut t = Tally::new(opts);
    t.r.module_loaded = decoded.module_loaded;
    let mut chain: Vec<LocId> = Vec::new();
    for s in &decoded.samples {
        if let Some(cpu) = s.ctx.cpu {
            *t.r.per_cpu.entry(cpu).or_default() += 1;
        }
        chain.clear();
        chain.push(res.sample(s));
        for f in &s.frames {
            chain.push(res.frame(f, s));
        }
        let app_cookie = s.ctx.app_cookie.filter(|_| opts.flame);
        t.add(
            res,
            Sampled {
                event: s.event,
                in_kernel: s.ctx.in_kernel,
                traced: s.traced,
                app_cookie,
            },
            &chain,
            1,
        );
    }
    Ok(t.finish(res, counters))
}

/// What a report needs of a sample besides its resolved call chain.
#[derive(Debug, Clone, Copy)]
struct Sampled {
    event: u64,
    in_kernel: Option<bool>,
    traced: bool,
    /// The task's executable (flame graphs).
    app_cookie: Option<u64>,
}

/// The sums of a report before its tables are sorted.
struct Tally {
    r: Report,
    opts: Options,
    by_row: HashMap<(SymId, Option<Source>), BTreeMap<u64, u64>>,
    by_image: HashMap<usize, BTreeMap<u64, u64>>,
    cg: callgraph::Builder<SymId>,
}

impl Tally {
    fn new(opts: Options) -> Tally {
        let r = Report {
            total: 0,
            kernel: 0,
            user: 0,
            no_context: 0,
            per_cpu: BTreeMap::new(),
            per_event: BTreeMap::new(),
            counters: vec![],
            rows: vec![],
            images: vec![],
            module_loaded: 0,
            traced: 0,
            callgraph: None,
            warnings: vec![],
            skipped: None,
            folded: Folded::default(),
        };
        Tally {
            r,
            opts,
            by_row: HashMap::new(),
            by_image: HashMap::new(),
            cg: callgraph::Builder::new(),
        }
    }

    /// Adds `n` samples `s` whose sample and callers, innermost first, resolved to `chain`.
    fn add(&mut self, res: &Resolver, s: Sampled, chain: &[LocId], n: u64) {
        let r = &mut self.r;
        r.total += n;
        *r.per_event.entry(s.event).or_default() += n;
        match s.in_kernel {
            None => r.no_context += n,
            Some(true) => r.kernel += n,
            Some(false) => r.user += n,
        }
        if s.traced {
            r.traced += n;
        }
        let loc = &res.locs[chain[0]];
        let key = (
            loc.sym,
            if self.opts.lines {
                loc.source.clone()
            } else {
                None
            },
        );
        *self
            .by_row
            .entry(key)
            .or_default()
            .entry(s.event)
            .or_default() += n;
        *self
            .by_image
            .entry(res.symbols[loc.sym].0)
            .or_default()
            .entry(s.event)
            .or_default() += n;
        let syms: Vec<SymId> = chain.iter().map(|&l| res.locs[l].sym).collect();
        self.cg.add_n(&syms, n);
        if self.opts.flame {
            let mut frames = vec![flame_root(res, s.app_cookie)];
            frames.extend(
                chain
                    .iter()
                    .rev()
                    .map(|&l| flame_label(res, l, s.app_cookie)),
            );
            r.folded.add_n(&frames, n);
        }
    }

    /// Sorts the tables and names the counters.
    fn finish(self, res: &Resolver, counters: &[Counter]) -> Report {
        let Tally {
            mut r,
            by_row,
            by_image,
            cg,
            ..
        } = self;
        r.counters = r
            .per_event
            .keys()
            .map(|&e| {
                counters
                    .iter()
                    .find(|c| c.counter == e)
                    .cloned()
                    .unwrap_or(Counter {
                        counter: e,
                        event: format!("counter {e}"),
                        count: None,
                    })
            })
            .collect();
        let first = r.per_event.keys().next().copied().unwrap_or(0);
        let total = r.total;
        let pct = |n: u64| percent(n, total);
        let mut rows: Vec<_> = by_row
            .into_iter()
            .map(|((sym, src), m)| {
                let (img, name) = &res.symbols[sym];
                ((res.images[*img].name.clone(), name.clone(), src), m)
            })
            .collect();
        sort_rows(&mut rows, first);
        r.rows = rows
            .into_iter()
            .map(|((image, symbol, src), m)| {
                let n = m.values().sum();
                Row {
                    samples: n,
                    percent: pct(n),
                    image,
                    symbol,
                    per_event: m,
                    source: src.as_ref().map(SourceJson::new),
                }
            })
            .collect();
        let mut images: Vec<_> = by_image.into_iter().collect();
        images.sort_by(|a, b| {
            let (fa, fb) = (
                a.1.get(&first).copied().unwrap_or(0),
                b.1.get(&first).copied().unwrap_or(0),
            );
            let (na, nb) = (a.1.values().sum::<u64>(), b.1.values().sum::<u64>());
            fb.cmp(&fa)
                .then(nb.cmp(&na))
                .then_with(|| res.images[a.0].name.cmp(&res.images[b.0].name))
        });
        r.images = images
            .into_iter()
            .map(|(i, m)| {
                let n = m.values().sum();
                let info = &res.images[i];
                ImageRow {
                    samples: n,
                    percent: pct(n),
                    image: info.name.clone(),
                    path_on_host: info.host_path.as_ref().map(|p| p.display().to_string()),
                    debug_file: info.debug.as_ref().map(|d| d.file.display().to_string()),
                    debug_found_by: info.debug.as_ref().map(|d| d.method.name()),
                    per_event: m,
                }
            })
            .collect();
        if r.traced > 0 {
            r.callgraph = Some(cg.entries(|k| {
                let (img, name) = &res.symbols[k];
                (res.images[*img].name.clone(), name.clone())
            }));
        }
        r.warnings = res.notes();
        r
    }
}

/// Like opreport: by the first counter's samples, then by all samples, then by name.
fn sort_rows<K: Ord>(rows: &mut [(K, BTreeMap<u64, u64>)], first: u64) {
    let first_of = |m: &BTreeMap<u64, u64>| m.get(&first).copied().unwrap_or(0);
    rows.sort_by(|a, b| {
        let (na, nb) = (a.1.values().sum::<u64>(), b.1.values().sum::<u64>());
        first_of(&b.1)
            .cmp(&first_of(&a.1))
            .then(nb.cmp(&na))
            .then_with(|| a.0.cmp(&b.0))
    });
}

/// Last path component of an image name (`/lib/libc.so.6` → `libc.so.6`).
fn basename(p: &str) -> &str {
    let p = p.strip_suffix(" (deleted)").unwrap_or(p);
    p.rsplit('/').next().filter(|b| !b.is_empty()).unwrap_or(p)
}

/// Root frame of a sample's flame stack: the task's executable (basename), `[kernel]` for
/// kernel threads, `[image N]` when the images file does not name it, `[unknown]` before any
/// task switch.
fn flame_root(res: &Resolver, app_cookie: Option<u64>) -> String {
    match app_cookie {
        Some(0) => "[kernel]".to_string(),
        Some(c) => match res.image_path(c) {
            Some(p) => basename(p).to_string(),
            None => format!("[image {c}]"),
        },
        None => "[unknown]".to_string(),
    }
}

/// Flame frame label: the symbol; with ` [image]` (basename) unless the image is vmlinux or the
/// task's executable; images without symbols show as the image name alone.
fn flame_label(res: &Resolver, l: LocId, app_cookie: Option<u64>) -> String {
    let (img, sym) = res.names(l);
    if img.name == KERNEL_UNKNOWN || img.name == NO_CONTEXT {
        return img.name.clone();
    }
    if img.name.starts_with("[anon]") {
        return "[anon]".to_string();
    }
    let app = app_cookie
        .and_then(|c| res.image_path(c))
        .map(|p| p.strip_suffix(" (deleted)").unwrap_or(p));
    if sym.starts_with('(') {
        return format!("{sym} [{}]", basename(&img.name));
    }
    if img.name == VMLINUX || Some(img.name.as_str()) == app {
        sym.to_string()
    } else {
        format!("{sym} [{}]", basename(&img.name))
    }
}

/// Which table the text report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Samples per image (opreport's default).
    Images,
    /// Samples per symbol (`-l`), with a source column when the report has source lines (`-g`).
    Symbols,
}

/// The header lines: sample totals, CPUs, counters, traces and module loads.
pub fn render_header(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Samples: {} total, {} kernel, {} user{}",
        r.total,
        r.kernel,
        r.user,
        if r.no_context > 0 {
            format!(", {} without context", r.no_context)
        } else {
            String::new()
        }
    );
    let cpus: Vec<String> = r
        .per_cpu
        .iter()
        .map(|(c, n)| format!("cpu{c}: {n}"))
        .collect();
    let _ = writeln!(out, "Per CPU: {}", cpus.join(", "));
    for c in &r.counters {
        let n = r.per_event.get(&c.counter).copied().unwrap_or(0);
        let _ = match c.count {
            Some(k) => writeln!(
                out,
                "Counter {}: {} samples of {} events, one every {} events",
                c.counter,
                n,
                Printable(&c.event),
                k
            ),
            None => writeln!(
                out,
                "Counter {}: {} samples of {}",
                c.counter,
                n,
                Printable(&c.event)
            ),
        };
    }
    if r.traced > 0 {
        let _ = writeln!(
            out,
            "Call chains: {} of {} samples traced",
            r.traced, r.total
        );
    }
    if r.module_loaded > 0 {
        let _ = writeln!(out, "Modules loaded while profiling: {}", r.module_loaded);
    }
    out
}

/// A table row: name cells, samples per counter, samples, percent.
type TableRow<'a> = (Vec<String>, &'a BTreeMap<u64, u64>, u64, f64);

/// Renders a table: `labels` are the name columns (the last one unpadded), each row has its
/// per-counter samples; one `samples %` pair per counter when several counters sampled.
fn render_table(
    r: &Report,
    labels: &[(&str, usize)],
    rows: &[TableRow<'_>],
    limit: usize,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let names = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            match labels.get(i) {
                Some((_, w)) if i + 1 < labels.len() => {
                    let _ = write!(s, "{:<w$} ", Printable(c));
                }
                _ => s.push_str(&escape(c)),
            }
        }
        s
    };
    let head: Vec<String> = labels.iter().map(|(h, _)| h.to_string()).collect();
    let n = super::shown(rows.len(), limit);
    if r.counters.len() > 1 {
        // One `samples %` pair per counter, as opreport with several events.
        let mut h = String::new();
        for c in &r.counters {
            let _ = write!(h, "{:<20}", format!("{:.19}", escape(&c.event)));
        }
        let _ = writeln!(out, "{}", h.trim_end());
        let mut h = String::new();
        for _ in &r.counters {
            let _ = write!(h, "{:<9} {:>7}    ", "samples", "%");
        }
        let _ = writeln!(out, "{h}{}", names(&head));
        for (cells, m, _, _) in &rows[..n] {
            let mut line = String::new();
            for c in &r.counters {
                let k = m.get(&c.counter).copied().unwrap_or(0);
                let all = r.per_event.get(&c.counter).copied().unwrap_or(0);
                let pct = percent(k, all);
                let _ = write!(line, "{k:<9} {pct:>7.4}    ");
            }
            let _ = writeln!(out, "{line}{}", names(cells));
        }
    } else {
        let _ = writeln!(out, "{:<9} {:>7}  {}", "samples", "%", names(&head));
        for (cells, _, k, pct) in &rows[..n] {
            let _ = writeln!(out, "{k:<9} {pct:>7.4}  {}", names(cells));
        }
    }
    if n < rows.len() {
        let rest: u64 = rows[n..].iter().map(|x| x.2).sum();
        let _ = writeln!(out, "({} more rows, {} samples)", rows.len() - n, rest);
    }
    out
}

/// Renders the text report: header and the `view` table, `limit` rows at most (0: all).
pub fn render(r: &Report, view: View, limit: usize) -> String {
    let mut out = render_header(r);
    match view {
        View::Images => {
            let rows: Vec<_> = r
                .images
                .iter()
                .map(|x| (vec![x.image.clone()], &x.per_event, x.samples, x.percent))
                .collect();
            out.push_str(&render_table(r, &[("image name", 0)], &rows, limit));
        }
        View::Symbols => {
            let with_source = r.rows.iter().any(|x| x.source.is_some());
            let rows: Vec<_> = r
                .rows
                .iter()
                .map(|x| {
                    let mut cells = vec![];
                    if let Some(s) = &x.source {
                        cells.push(s.display.clone());
                    }
                    cells.push(x.image.clone());
                    cells.push(x.symbol.clone());
                    (cells, &x.per_event, x.samples, x.percent)
                })
                .collect();
            let labels: &[(&str, usize)] = if with_source {
                &[("source", 24), ("image name", 28), ("symbol name", 0)]
            } else {
                &[("image name", 28), ("symbol name", 0)]
            };
            out.push_str(&render_table(r, labels, &rows, limit));
        }
    }
    out
}

/// The `--verbose` section: which file named each image of the report and how it was found.
pub fn render_debug_files(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::from("Debug files (image: file that named it, how it was found):\n");
    for i in &r.images {
        let _ = match (&i.debug_file, i.debug_found_by) {
            (Some(f), Some(how)) => {
                writeln!(out, "  {}: {} ({how})", Printable(&i.image), Printable(f))
            }
            _ => writeln!(out, "  {}: none", Printable(&i.image)),
        };
    }
    out
}

/// The call graph section of the text report (`-c`).
pub fn render_callgraph(r: &Report, limit: usize) -> String {
    match &r.callgraph {
        Some(cg) => callgraph::render(cg, limit, r.total),
        None => "Call graph: no call chains recorded (backtrace_depth was 0)\n".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::stream;
    use crate::resolve::elf::ElfImage;
    use crate::resolve::images::{ImageMap, ModuleSnapshot};
    use crate::resolve::symbols::{Binding, Symbol, SymbolTable};
    use crate::resolve::{self, Resolver};
    use oprofile_common::event::Record;
    use oprofile_common::events::CpuModel;
    use std::path::Path;

    fn kernel_syms() -> SymbolTable {
        SymbolTable::new(
            vec![
                Symbol {
                    addr: 0xc000_1000,
                    size: 0x100,
                    name: "memcpy".into(),
                    binding: Binding::Global,
                },
                Symbol {
                    addr: 0xc000_2000,
                    size: 0x100,
                    name: "__memzero".into(),
                    binding: Binding::Global,
                },
                Symbol {
                    addr: 0xc000_3000,
                    size: 0x100,
                    name: "sys_read".into(),
                    binding: Binding::Global,
                },
                Symbol {
                    addr: 0xc000_3100,
                    size: 0x100,
                    name: "next_fn".into(),
                    binding: Binding::Global,
                },
                Symbol {
                    addr: 0xc000_4000,
                    size: 0x100,
                    name: "_RNvNtCs1234_6kernel4task5sched".into(),
                    binding: Binding::Global,
                },
            ],
            std::iter::once(0xc000_0000..0xc001_0000).collect(),
        )
    }

    fn resolver(images: Option<ImageMap>, snap: &ModuleSnapshot) -> Resolver {
        let vm = ElfImage::from_symbols(Path::new("/host/vmlinux"), kernel_syms(), vec![]);
        Resolver::new(
            resolve::Options::default(),
            images,
            Some(("/host/vmlinux".into(), vm)),
            snap,
        )
    }

    fn s(pc: u64) -> Record {
        Record::Sample { pc, event: 0 }
    }

    #[test]
    fn report_on_crafted_stream() {
        let st = stream(&[
            s(0xc000_1000), // before any mode switch: no context
            Record::CpuSwitch { cpu: 0 },
            Record::KernelEnter,
            Record::CtxSwitch {
                pid: 5,
                tgid: 5,
                app_cookie: 0,
            },
            s(0xc000_1004),
            s(0xc000_1008),
            s(0xc000_1010),
            s(0xc000_2000),
            s(0xbf00_0000), // a module address, no modules known: unknown kernel
            Record::CpuSwitch { cpu: 1 },
            Record::KernelExit,
            Record::CtxSwitch {
                pid: 6,
                tgid: 6,
                app_cookie: 0,
            },
            Record::CookieSwitch { cookie: 0 },
            s(0x1_0000),
        ]);
        let mut res = resolver(None, &ModuleSnapshot::default());
        let r = build(&st, &mut res, &[], Options::default()).unwrap();
        assert_eq!(
            (r.total, r.kernel, r.user, r.no_context, r.traced),
            (7, 5, 1, 1, 0)
        );
        assert_eq!(r.per_cpu.get(&0), Some(&5));
        assert_eq!(r.per_cpu.get(&1), Some(&1));
        assert_eq!(
            (
                r.rows[0].image.as_str(),
                r.rows[0].symbol.as_str(),
                r.rows[0].samples
            ),
            ("vmlinux", "memcpy", 3)
        );
        assert!((r.rows[0].percent - 300.0 / 7.0).abs() < 1e-9);
        assert!(r
            .rows
            .iter()
            .any(|x| x.symbol == "__memzero" && x.samples == 1));
        assert!(r
            .rows
            .iter()
            .any(|x| x.image == "(kernel, unknown)" && x.symbol == "(no symbols)"));
        assert!(r.rows.iter().any(|x| x.image == "[anon] (tgid 6)"));
        assert!(r.rows.iter().any(|x| x.image == "(no context)"));
        assert!(r.rows.iter().all(|x| x.source.is_none()));
        assert_eq!(r.images[0].image, "vmlinux");
        assert_eq!(r.images[0].samples, 4);
        assert_eq!(r.images[0].path_on_host.as_deref(), Some("/host/vmlinux"));
        assert!(r.callgraph.is_none());
        let text = render(&r, View::Images, 0);
        assert!(
            text.contains("Samples: 7 total, 5 kernel, 1 user, 1 without context"),
            "{text}"
        );
        assert!(
            text.contains("image name") && !text.contains("memcpy"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("4 ") && l.ends_with("vmlinux")),
            "{text}"
        );
        let text = render(&r, View::Symbols, 2);
        assert!(
            text.contains("memcpy") && text.contains("(3 more rows, 3 samples)"),
            "{text}"
        );
        assert!(render_callgraph(&r, 0).contains("no call chains recorded (backtrace_depth was 0)"));
        // The JSON keeps the fields the QEMU tests read.
        let j = serde_json::to_value(&r).unwrap();
        for k in [
            "total",
            "kernel",
            "user",
            "no_context",
            "per_cpu",
            "per_event",
            "counters",
            "rows",
            "images",
            "module_loaded",
            "traced",
            "callgraph",
            "warnings",
        ] {
            assert!(j.get(k).is_some(), "JSON lacks {k}");
        }
        assert_eq!(j["rows"][0]["image"], "vmlinux");
        assert!(j["rows"][0].get("source").is_none());
        assert!(j["callgraph"].is_null());
    }

    #[test]
    fn per_counter_columns() {
        let s = |pc, event| Record::Sample { pc, event };
        let st = stream(&[
            Record::CpuSwitch { cpu: 0 },
            Record::KernelEnter,
            Record::CtxSwitch {
                pid: 5,
                tgid: 5,
                app_cookie: 0,
            },
            s(0xc000_1000, 0),
            s(0xc000_1004, 1),
            s(0xc000_1008, 1),
            s(0xc000_2000, 1),
            s(0xc000_2004, 1),
            s(0xc000_2008, 1),
        ]);
        let a15 = CpuModel::by_cpu_type("arm/armv7-ca15");
        let ctrs = [
            Counter::parse("0:CPU_CYCLES:2000000", a15).unwrap(),
            Counter::parse("1:0x11:1000000", a15).unwrap(),
        ];
        let mut res = resolver(None, &ModuleSnapshot::default());
        let r = build(&st, &mut res, &ctrs, Options::default()).unwrap();
        assert_eq!(r.per_event.get(&0), Some(&1));
        assert_eq!(r.per_event.get(&1), Some(&5));
        assert_eq!(r.counters[1].event, "CLOCK_CYCLES");
        // Sorted by the first counter: memcpy (1 CPU_CYCLES sample) before __memzero (0).
        assert_eq!(r.rows[0].symbol, "memcpy");
        assert_eq!(r.rows[1].per_event.get(&1), Some(&3));
        let text = render(&r, View::Symbols, 0);
        assert!(
            text.contains("Counter 1: 5 samples of CLOCK_CYCLES events, one every 1000000 events"),
            "{text}"
        );
        assert!(
            text.contains("CPU_CYCLES") && text.contains("60.0000"),
            "{text}"
        );
        let text = render(&r, View::Images, 0);
        assert!(
            text.contains("CLOCK_CYCLES") && text.contains("100.0000") && text.contains("vmlinux"),
            "{text}"
        );
        let e = Counter::parse("1:NOPE", a15).unwrap_err();
        assert!(
            format!("{e:#}").contains("no event \"NOPE\" for arm/armv7-ca15"),
            "{e:#}"
        );
        assert!(Counter::parse("x:CPU_CYCLES", None).is_err());
        assert!(Counter::parse("0", None).is_err());
    }

    #[test]
    fn bad_streams_name_the_offset() {
        let err = Stream::from_bytes(&[1, 2, 3, 4, 5], 4).err().unwrap();
        assert!(format!("{err:#}").contains("byte offset 4"), "{err:#}");
        let bytes: Vec<u8> = [!0u32, 2, 0, !0, 12]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let st = Stream::from_bytes(&bytes, 4).unwrap();
        let mut res = resolver(None, &ModuleSnapshot::default());
        let err = build(&st, &mut res, &[], Options::default()).err().unwrap();
        assert!(
            format!("{err:#}").contains("unknown escape code 12 at byte offset 12"),
            "{err:#}"
        );
    }

    /// Traces: frames resolve but do not count; call graph, flame stacks, modules by
    /// /proc/modules range, images file names and missing images.
    #[test]
    fn traced_report_callgraph_and_flame() {
        let images = ImageMap::parse(b"3 /usr/bin/app\n4 /lib/libc.so.6\n", "images").unwrap();
        let mut snap = ModuleSnapshot::default();
        snap.add_proc_modules("netfoo 8192 0 - Live 0xbf000000\n", "proc_modules")
            .unwrap();
        let mut res = resolver(Some(images), &snap);
        let st = stream(&[
            Record::CpuSwitch { cpu: 0 },
            Record::CtxSwitch {
                pid: 9,
                tgid: 9,
                app_cookie: 3,
            },
            Record::KernelEnter,
            // memcpy <- sys_read <- (user) app+0x100
            Record::TraceBegin,
            s(0xc000_1010),
            s(0xc000_3044), // return address into sys_read
            Record::KernelExit,
            Record::CookieSwitch { cookie: 3 },
            s(0x100),
            Record::KernelEnter,
            Record::TraceBegin,
            s(0xc000_1020),
            // A call as sys_read's last instruction: the return address is next_fn's first
            // byte, and the lookup at address - 1 finds the caller.
            s(0xc000_3100),
            Record::TraceBegin,
            s(0xc000_3000), // sys_read itself, no frames
            Record::TraceBegin,
            s(0xbf00_0100), // module without .ko
            s(0xc000_4010), // Rust-mangled caller
            Record::ModuleLoaded,
            Record::KernelExit,
            Record::CookieSwitch { cookie: 4 },
            Record::TraceBegin,
            s(0x2000), // libc: not found on the host
            Record::CookieSwitch { cookie: 3 },
            s(0x200), // its caller in app: a frame
            Record::CtxSwitch {
                pid: 2,
                tgid: 2,
                app_cookie: 0,
            },
            Record::KernelEnter,
            s(0xc000_2000), // kernel thread, untraced
        ]);
        let r = build(
            &st,
            &mut res,
            &[],
            Options {
                lines: false,
                flame: true,
            },
        )
        .unwrap();
        assert_eq!(
            (r.total, r.kernel, r.user, r.traced, r.module_loaded),
            (6, 5, 1, 5, 1)
        );
        assert_eq!(
            r.rows.iter().map(|x| x.samples).sum::<u64>(),
            6,
            "frames must not count"
        );
        let row = |sym: &str| r.rows.iter().find(|x| x.symbol == sym);
        assert_eq!(row("memcpy").unwrap().samples, 2);
        assert_eq!(row("sys_read").unwrap().samples, 1);
        assert!(
            row("kernel::task::sched").is_none(),
            "a frame is not a sample"
        );
        assert!(
            r.callgraph
                .as_ref()
                .unwrap()
                .iter()
                .all(|e| e.symbol != "next_fn"),
            "return address - 1"
        );
        let m = r.rows.iter().find(|x| x.image == "netfoo.ko").unwrap();
        assert_eq!((m.symbol.as_str(), m.samples), ("(no symbols)", 1));
        let libc = r.rows.iter().find(|x| x.image == "/lib/libc.so.6").unwrap();
        assert_eq!(libc.symbol, "(image not found)");
        assert_eq!(
            r.images
                .iter()
                .find(|x| x.image == "netfoo.ko")
                .unwrap()
                .samples,
            1
        );
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("/lib/libc.so.6: not found")),
            "{:?}",
            r.warnings
        );
        // Call graph: memcpy's callers, sys_read's callees and callers.
        let cg = r.callgraph.as_ref().unwrap();
        let e = |sym: &str| cg.iter().find(|x| x.symbol == sym).unwrap();
        let memcpy = e("memcpy");
        assert_eq!((memcpy.self_samples, memcpy.total), (2, 2));
        assert_eq!(memcpy.callers.len(), 1);
        assert_eq!(
            (memcpy.callers[0].symbol.as_str(), memcpy.callers[0].samples),
            ("sys_read", 2)
        );
        let sys_read = e("sys_read");
        assert_eq!((sys_read.self_samples, sys_read.total), (1, 3));
        assert_eq!(sys_read.callees[0].symbol, "memcpy");
        assert_eq!(
            (
                sys_read.callers[0].image.as_str(),
                sys_read.callers[0].symbol.as_str()
            ),
            ("/usr/bin/app", "(image not found)")
        );
        let sched = e("kernel::task::sched");
        assert_eq!(
            (
                sched.self_samples,
                sched.total,
                sched.callees[0].image.as_str()
            ),
            (0, 1, "netfoo.ko")
        );
        let text = render_callgraph(&r, 0);
        assert!(text.contains("memcpy  [self; total 2]"), "{text}");
        // Flame stacks: root = app basename / [kernel], outermost caller first.
        let lines = r.folded.lines();
        assert!(
            lines.contains(&"app;(image not found) [app];sys_read;memcpy 1".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"app;sys_read;memcpy 1".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"app;kernel::task::sched;(no symbols) [netfoo.ko] 1".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(
                &"app;(image not found) [app];(image not found) [libc.so.6] 1".to_string()
            ),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"[kernel];__memzero 1".to_string()),
            "{lines:?}"
        );
        let text = render(&r, View::Images, 0);
        assert!(
            text.contains("Call chains: 5 of 6 samples traced"),
            "{text}"
        );
        assert!(text.contains("Modules loaded while profiling: 1"), "{text}");
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["traced"], 5);
        assert_eq!(j["module_loaded"], 1);
        assert_eq!(j["callgraph"][0]["symbol"], "memcpy");
        assert_eq!(j["callgraph"][0]["self"], 2);
        assert_eq!(j["callgraph"][0]["callers"][0]["samples"], 2);
        assert!(j["images"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["image"] == "/lib/libc.so.6" && i["path_on_host"].is_null()));
    }
}
