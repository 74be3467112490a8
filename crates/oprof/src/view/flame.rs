//! Flame graphs: folded stacks (`root;caller;…;leaf COUNT`, outermost first) rendered to SVG
//! with `inferno`; differential flame graphs of two profiles (`STACK BEFORE AFTER`, Brendan
//! Gregg's difffolded.pl and `flamegraph.pl` colouring) with `inferno::differential`.

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Folded stacks with their sample counts.
#[derive(Debug, Default)]
pub struct Folded {
    stacks: HashMap<String, u64>,
}

/// Makes a frame label safe for the folded format (`;` separates frames, a line is one stack)
/// and for SVG (XML 1.0 allows no C0 control but tab and newline) and the terminal a folded
/// file is printed on: `;` becomes `,`, newline, CR and tab a space, U+FFFE and U+FFFF are
/// written `\u{fffe}` and `\u{ffff}`, and every other control character is escaped as the
/// text views escape it ([`super::printable::escape`]: an ESC sequence in a symbol name stays
/// inert text).
pub fn sanitize(label: &str) -> String {
    let mut s = String::with_capacity(label.len());
    for c in label.chars() {
        match c {
            ';' => s.push(','),
            '\n' | '\r' | '\t' => s.push(' '),
            // Not characters in XML 1.0 either.
            '\u{fffe}' | '\u{ffff}' => s.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => s.push(c),
        }
    }
    let s = s.trim();
    if s.is_empty() {
        "?".to_string()
    } else {
        super::printable::escape(s).into_owned()
    }
}

impl Folded {
    /// Adds one sample with `frames` outermost first (root first, sampled symbol last).
    #[cfg(test)]
    pub fn add<S: AsRef<str>>(&mut self, frames: &[S]) {
        self.add_n(frames, 1);
    }

    /// Adds `n` samples with the same stack.
    pub fn add_n<S: AsRef<str>>(&mut self, frames: &[S], n: u64) {
        let key = frames
            .iter()
            .map(|f| sanitize(f.as_ref()))
            .collect::<Vec<_>>()
            .join(";");
        *self.stacks.entry(key).or_default() += n;
    }

    /// Folded lines `a;b;c N`, sorted.
    pub fn lines(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .stacks
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        v.sort();
        v
    }

    /// The folded lines as text, each ending in a newline (`oprof report --folded`).
    pub fn text(&self) -> String {
        self.lines().iter().map(|l| format!("{l}\n")).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// Renders the flame graph SVG to `w`.
    pub fn write_svg(&self, title: &str, w: impl Write) -> Result<()> {
        if self.is_empty() {
            bail!("no samples to draw");
        }
        let lines = self.lines();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        opts.count_name = "samples".to_string();
        inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), w)
            .context("rendering the flame graph")?;
        Ok(())
    }

    /// Writes the flame graph SVG to `path`.
    pub fn write_svg_file(&self, title: &str, path: &Path) -> Result<()> {
        write_file(path, |w| self.write_svg(title, w))
    }
}

/// Creates `path` and writes it with `write` (buffered). Errors name `path`.
fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    write(&mut w).with_context(|| format!("writing {}", path.display()))?;
    w.flush()
        .with_context(|| format!("writing {}", path.display()))
}

/// A differential profile of two folded profiles, A (the baseline) and B: one line
/// `STACK FIRST SECOND` per stack of either, as `inferno::differential` (difffolded.pl)
/// writes it, sorted. FIRST is scaled to SECOND's total (`inferno::differential::Options::
/// normalize`: each count times SECOND's total / FIRST's total, truncated to an integer), so
/// shares compare, not sample counts.
///
/// Normally FIRST is A and SECOND is B: the flame graph draws B's stacks (widths: B's samples),
/// each frame coloured by the change of its own (self) samples, red where B has more than A
/// scaled, blue where less (`flamegraph.pl`'s differential hues, deeper for larger changes).
/// Stacks B no longer has have no width there; `negated` swaps the columns (FIRST is B, scaled
/// to A's total; SECOND is A) and sets `inferno`'s `negate_differentials` (`flamegraph.pl
/// --negate`): A's stacks are drawn, and red still means more in B.
///
/// # Invariants
/// `lines` is sorted and has no empty stack.
#[derive(Debug)]
pub struct Differential {
    lines: Vec<String>,
    negated: bool,
}

impl Differential {
    /// The differential of `a` (baseline) and `b`; `negated` as in [`Differential`]. Errors:
    /// either side has no samples (nothing to scale).
    pub fn new(a: &Folded, b: &Folded, negated: bool) -> Result<Self> {
        if a.is_empty() || b.is_empty() {
            bail!("no samples to compare");
        }
        let (first, second) = if negated { (b, a) } else { (a, b) };
        let opts = inferno::differential::Options {
            normalize: true,
            strip_hex: false,
        };
        let (t1, t2) = (first.text(), second.text());
        let mut out = Vec::new();
        inferno::differential::from_readers(opts, t1.as_bytes(), t2.as_bytes(), &mut out)
            .context("computing the differential profile")?;
        let mut lines: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        lines.sort();
        Ok(Differential { lines, negated })
    }

    /// The lines `STACK FIRST SECOND`, sorted.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The lines as text, each ending in a newline (`oprof diff --folded`).
    pub fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// Renders the differential flame graph SVG to `w`, with `title` and a subtitle saying
    /// what widths and colours mean.
    pub fn write_svg(&self, title: &str, w: impl Write) -> Result<()> {
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        opts.subtitle = Some(
            if self.negated {
                "widths: A's samples; red: more in B than in A, blue: less (shares of each total)"
            } else {
                "widths: B's samples; red: more in B than in A, blue: less (shares of each total)"
            }
            .to_string(),
        );
        opts.count_name = "samples".to_string();
        opts.negate_differentials = self.negated;
        inferno::flamegraph::from_lines(&mut opts, self.lines.iter().map(String::as_str), w)
            .context("rendering the differential flame graph")?;
        Ok(())
    }

    /// Writes the differential flame graph SVG to `path`.
    pub fn write_svg_file(&self, title: &str, path: &Path) -> Result<()> {
        write_file(path, |w| self.write_svg(title, w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_renders_svg() {
        let mut f = Folded::default();
        f.add(&["app", "main", "work", "leaf"]);
        f.add(&["app", "main", "work", "leaf"]);
        f.add(&["[kernel]", "kthread_fn; x"]);
        assert_eq!(
            f.lines(),
            ["[kernel];kthread_fn, x 1", "app;main;work;leaf 2"]
        );
        let mut svg = Vec::new();
        f.write_svg("test", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(
            svg.starts_with("<?xml") && svg.contains("<svg"),
            "{}",
            &svg[..100.min(svg.len())]
        );
        for name in ["main", "work", "leaf", "kthread_fn, x", "[kernel]", "app"] {
            assert!(svg.contains(name), "{name} missing in SVG");
        }
        assert!(Folded::default().write_svg("t", Vec::new()).is_err());
        assert_eq!(sanitize(" a\nb "), "a b");
        assert_eq!(sanitize(""), "?");
    }

    #[test]
    fn control_characters_in_a_name_reach_neither_the_folded_text_nor_the_svg() {
        // An OSC sequence (retitles a terminal) and a C1 CSI in symbol names of a profiled program.
        let osc = "evil\x1b]0;owned\x07";
        let csi = "f\u{9b}2J";
        assert_eq!(sanitize(osc), "evil\\x1b]0,owned\\x07");
        assert_eq!(sanitize(csi), "f\\u{9b}2J");
        assert_eq!(sanitize("a\u{fffe}b\u{ffff}"), "a\\u{fffe}b\\u{ffff}");
        let mut f = Folded::default();
        f.add(&["app", osc, csi]);
        let control = |c: char| c.is_control() && c != '\n';
        assert!(f.lines().iter().all(|l| !l.contains(control)));
        let mut svg = Vec::new();
        f.write_svg("test", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(!svg.contains(control), "a control character in the SVG");
        assert!(svg.contains("evil\\x1b]0,owned\\x07"));
    }
}
