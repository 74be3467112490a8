//! `oprof generate` (hidden, used by `make install`): man pages and shell completions from the
//! clap definitions.

use super::{emit, Cli};
use anyhow::{Context, Result};
use clap::CommandFactory;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum Generate {
    /// Man pages (section 1): oprof.1 and oprof-SUBCOMMAND.1 for each subcommand, into DIR.
    Man {
        /// Directory to write the pages to (created if missing).
        dir: PathBuf,
    },
    /// A completion script for SHELL on stdout.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// Writes the man pages or prints the completion script.
pub fn run(what: &Generate) -> Result<()> {
    match what {
        Generate::Man { dir } => write_man_pages(&Cli::command(), dir),
        Generate::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "oprof", &mut out);
            emit(&String::from_utf8_lossy(&out))
        }
    }
}

/// Writes the man pages of `cmd` and of each visible subcommand into `dir` (`clap_mangen`).
pub fn write_man_pages(cmd: &clap::Command, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut pages = vec![(cmd.get_name().to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut out)
            .with_context(|| format!("rendering {name}.1"))?;
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
