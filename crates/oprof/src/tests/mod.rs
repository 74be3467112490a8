//! End-to-end tests across the stages (stream → resolution → views) on real ELF files built at
//! test time and on the captured streams of `testdata/`.

mod annotate;
mod arm;
pub(crate) mod arm64;
mod debugfile;
mod frames;
mod pprof;
pub(crate) mod programs;
pub(crate) mod streaming;
