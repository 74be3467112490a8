//! `oprof events`: the hardware events of a CPU type, like ophelp.

use super::emit;
use crate::input::events;
use anyhow::Result;

/// `oprof events` options.
#[derive(clap::Args)]
pub struct Args {
    /// CPU type, e.g. arm/armv7 (default: /dev/oprofile/cpu_type of this machine).
    #[arg(long)]
    cpu_type: Option<String>,
    /// List the known CPU types instead.
    #[arg(long)]
    list_types: bool,
}

/// Prints the event list (or the CPU types). Errors: an unknown CPU type, no oprofilefs.
pub fn run(a: &Args) -> Result<()> {
    if a.list_types {
        emit(&events::list_types())
    } else {
        emit(&events::render(events::model(a.cpu_type.as_deref())?))
    }
}
