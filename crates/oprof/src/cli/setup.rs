//! `oprof setup EVENTS`: events placed on counters, printed as oprofilefs writes.

use super::emit;
use crate::input::events;
use anyhow::Result;

/// `oprof setup` options.
#[derive(clap::Args)]
pub struct Args {
    /// CPU type, e.g. arm/armv7 (default: /dev/oprofile/cpu_type of this machine).
    #[arg(long)]
    cpu_type: Option<String>,
    /// Events, `NAME[:COUNT[:UNITMASK[:KERNEL[:USER]]]],...` (opcontrol syntax); COUNT 0
    /// counts without sampling (see N/total).
    events: String,
    /// oprofilefs mount point.
    #[arg(long, default_value = "/dev/oprofile")]
    dir: String,
    /// Print the matching `oprof report --counter` arguments instead.
    #[arg(long)]
    report_args: bool,
}

/// Prints the shell lines (or `--report-args`). Errors: timer mode (no counters), an event
/// that does not exist or fits no counter.
pub fn run(a: &Args) -> Result<()> {
    let Some(model) = events::model(a.cpu_type.as_deref())? else {
        anyhow::bail!("cpu_type timer has no counters to set up");
    };
    let placed = events::place(model, &a.events)?;
    if a.report_args {
        let args: Vec<String> = placed
            .iter()
            .map(|p| format!("--counter {}:{}:{}", p.counter, p.event.name, p.count))
            .collect();
        emit(&format!("--cpu-type {} {}\n", model.name(), args.join(" ")))
    } else {
        emit(&events::setup_script(model, &placed, &a.dir))
    }
}
