//! Views: what the subcommands print of aggregated samples. [`report`] (images, symbols, source
//! lines, with [`callgraph`], [`flame`] and [`pprof`] output), [`annotate`] (source lines and
//! instructions), [`diff`] (two profiles), [`listing`] (the records of a stream); [`kprof`] and
//! [`points`] print the module's own tables; [`percent`] is the share every view prints;
//! [`printable`] escapes the control characters of names in every text view.

pub mod annotate;
pub mod callgraph;
pub mod diff;
pub mod flame;
pub mod kprof;
pub mod listing;
pub mod percent;
pub mod points;
pub mod pprof;
pub mod printable;
pub mod report;

/// How many of `len` rows a view shows with `-n limit`: all for 0, else at most `limit`.
pub fn shown(len: usize, limit: usize) -> usize {
    if limit == 0 {
        len
    } else {
        limit.min(len)
    }
}
