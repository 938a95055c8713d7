//! `bb7-mock-llm --script FILE.json [--port N]`: serves a JSON script on 127.0.0.1 for the offline demo.
//!
//! The first line on stdout is `listening on http://127.0.0.1:PORT`; nothing else goes to stdout.
//! It serves until killed or until its stdin closes (so a parent that dies takes it along), unless
//! `--ignore-stdin` is given. Warnings (and with `--verbose`, one line per request) go to stderr.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use bb7_mock_llm::{MockServer, Script};
use clap::Parser;

/// A scripted stand-in for OpenRouter on 127.0.0.1.
#[derive(Parser, Debug)]
#[command(name = "bb7-mock-llm", version)]
struct Args {
    /// The JSON script to serve (see the bb7-mock-llm crate documentation for the format).
    #[arg(long, value_name = "FILE.json")]
    script: PathBuf,
    /// The port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Keep serving when stdin closes (for running in the background with stdin at /dev/null).
    #[arg(long)]
    ignore_stdin: bool,
    /// Log one line per request to stderr.
    #[arg(long, short)]
    verbose: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(if args.verbose {
            tracing::Level::INFO
        } else {
            tracing::Level::WARN
        })
        .with_target(false)
        .init();

    let script = match Script::load(&args.script) {
        Ok(script) => script,
        Err(e) => {
            eprintln!("bb7-mock-llm: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match MockServer::try_start(script, args.port) {
        Ok(server) => server,
        Err(e) => {
            eprintln!(
                "bb7-mock-llm: cannot listen on 127.0.0.1:{}: {e}",
                args.port
            );
            return ExitCode::from(2);
        }
    };
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "listening on http://{}", server.addr())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(1);
    }

    if args.ignore_stdin {
        loop {
            std::thread::park();
        }
    }
    // Serve until stdin reaches EOF (or fails); what is read is ignored.
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 4096];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    drop(server);
    ExitCode::SUCCESS
}
