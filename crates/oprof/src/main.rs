//! `oprof`: the command line of the `oprof` library (see its documentation, `src/lib.rs`).

use clap::Parser;

fn main() {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::process::exit(oprof::cli::exit_code(oprof::cli::Cli::parse(), &argv));
}
