//! The target side: [`record`] profiles the system and writes a session directory, through
//! [`system`] (oprofilefs, the module, the mount); [`events`] knows the hardware events of each
//! `cpu_type` and places them on counters (`oprof events`, `oprof setup`); [`session_dir`] writes
//! the session directory privately and without following links; [`legacy`] runs a
//! legacy OProfile 0.9.x command with its `lookup_dcookie` calls answered (`oprof legacy`).

pub mod events;
pub mod legacy;
pub mod record;
pub mod session_dir;
pub mod system;
