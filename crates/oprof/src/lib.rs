//! `oprof`: the oprofile-rs tool, for the host and (statically linked) for the target.
//!
//! - `oprof record [-e EVENT]... [-g DEPTH] [-o DIR] [-- CMD ARGS...]` (on the target, as
//!   root): load the module and mount oprofilefs if needed, profile the system while CMD runs (or
//!   until Ctrl-C / `--duration`), write a session directory ([`input::session`]).
//! - `oprof decode BUFFER`: print every record of a captured `/dev/oprofile/buffer` stream.
//! - `oprof report [DIR]`: the same on a session directory (default `./oprofile_data`), which
//!   supplies the stream and every file below by itself.
//! - `oprof report BUFFER [--images F] [--proc-modules F --module-sections F] [--vmlinux F]
//!   [--sysroot D] [--image-path D]... [-l] [-g] [-c] [--flame OUT.svg] [--folded]
//!   [--pprof OUT.pb.gz] [--json]`: samples per
//!   image (like `opreport`), per symbol (`-l`), per symbol and source line (`-g`), with a call
//!   graph (`-c`) and a flame graph (`--flame`); a column pair per counter when several counters
//!   sampled (`--counter`).
//! - `oprof events [--cpu-type T]`: the hardware events of a CPU type, like `ophelp`.
//! - `oprof setup --cpu-type T EVENTS`: place events on counters and print the oprofilefs writes.
//! - `oprof kprof VMLINUX KPDATA [--granularity BYTES] [--json] [-n N]`: the kprof kernel PC
//!   histogram (`/dev/oprofile/kprof/kpdata`) per kernel function, like Plan 9's kprof(1).
//! - `oprof points FILE [--json]`: the profile-point table (`/dev/oprofile/profile_points`, or
//!   as logged in dmesg), checked and sorted by total time.
//!
//! The modules follow a sample's way: [`input`] reads and checks a stream and its session
//! files, [`resolve`] names its words (images, symbols, source lines, call chains),
//! [`aggregate`] counts samples by key while the stream is read, [`view`] prints them; the
//! [`target`] side records sessions; [`cli`] is the command line (`main.rs` only calls it).

pub mod aggregate;
pub mod cli;
#[doc(hidden)]
pub mod fixtures;
pub mod input;
pub mod resolve;
pub mod target;
#[cfg(test)]
mod tests;
pub mod view;
