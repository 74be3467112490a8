//! Input: a captured `/dev/oprofile/buffer` stream ([`stream`]), checked against what the module
//! writes ([`validate`]), with the files a session directory keeps beside it ([`session`]),
//! which [`crate::aggregate::inputs`] loads for a view; [`events`] has the hardware events of
//! each `cpu_type` and places them on counters (`oprof events`, `setup`, `record`);
//! [`points`] reads the module's profile-point table; [`synth`] makes large streams of a
//! captured one for benchmarks.

pub mod events;
pub mod points;
pub mod session;
pub mod stream;
pub mod synth;
pub mod validate;
