//! Flame graphs: folded stacks (`root;caller;…;leaf COUNT`, outermost first) rendered to SVG
//! with `inferno`.

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Folded stacks with their sample counts.
#[derive(Debug, Default)]
pub struct Folded {
    stacks: HashMap<String, u64>,
}

/// Makes a frame label safe for the folded format (`;` separates frames, a line is one stack).
pub fn sanitize(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| match c {
            ';' => ',',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect();
    let s = s.trim();
    if s.is_empty() {
        "?".to_string()
    } else {
        s.to_string()
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
        let f =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        self.write_svg(title, &mut w)
            .with_context(|| format!("writing {}", path.display()))?;
        w.flush()
            .with_context(|| format!("writing {}", path.display()))
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
}
