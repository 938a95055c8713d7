//! `bb7`: with no arguments, serves the stdio protocol for the Neovim plugin; `bb7 tools …` inspects
//! and runs the sandboxed tool components.

use std::process::ExitCode;

fn main() -> ExitCode {
    bb7::cli::main()
}
