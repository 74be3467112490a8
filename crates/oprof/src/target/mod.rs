//! The target side: [`record`] profiles the system and writes a session directory, through
//! [`system`] (oprofilefs, the module, the mount) and the event tables of
//! [`crate::input::events`]; [`session_dir`] writes the session directory privately and without
//! following links; [`legacy`] runs a legacy OProfile 0.9.x command with its `lookup_dcookie` calls
//! answered (`oprof legacy`).

pub mod flight;
pub mod legacy;
pub mod record;
pub mod session_dir;
pub mod system;
