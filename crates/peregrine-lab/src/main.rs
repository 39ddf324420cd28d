//! `peregrine-lab`: verify a running server against the spec, and measure
//! servers side by side.
//!
//! One module per command (`ab`, `bench`, `load`, `stress`, `verify`,
//! `wsload`); what more
//! than one command needs (server processes, wrk, `/proc`, statistics, the
//! raw HTTP client) lives in `rig`, and commands never import each other.

mod ab;
mod bench;
mod load;
mod rig;
mod stress;
mod verify;
mod wsload;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "peregrine-lab", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark servers side by side with wrk, alternating them in rounds.
    Bench(bench::BenchArgs),
    /// The lab's own load generator: closed loop, reconnects every N,
    /// weighted request templates, HttpArena's profiles; `--vs-wrk` compares
    /// its cost per request with wrk's.
    Load(load::LoadArgs),
    /// Check a running server against SPEC.md (TFB, HttpArena, bad input).
    Verify(verify::VerifyArgs),
    /// Compare criterion micro-benchmarks between two git revisions.
    Ab(ab::AbArgs),
    /// Robustness scenarios: overload, noisy, slow clients, soak, database
    /// faults, shutdown under load. Each prints its figures and exits 1 when
    /// a limit is broken.
    Stress(stress::StressArgs),
    /// WebSocket echo load (HttpArena's echo-ws): N connections, one
    /// message in flight each; `--memory` for memory per connection.
    WsLoad(wsload::WsLoadArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Load(args) => load::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Ab(args) => ab::run(args),
        Command::Stress(args) => stress::run(args),
        Command::WsLoad(args) => wsload::run(args),
    }
}
