//! The floor: a bare responder that does no HTTP work at all.
//!
//! For every `\r\n\r\n` in the bytes a connection sends, it answers one
//! fixed, realistically sized plaintext response, and all the answers to
//! one read go out in one write. No parsing, no routing, no date
//! formatting, one thread. Whatever a real server measures on this machine,
//! this is the ceiling it is compared with, on each of the two event loops
//! a Linux server can have: epoll (`--engine epoll`, the default) and
//! io_uring (`--engine uring`). They are at least as lean as the C floors
//! in `../shared/floors/` (`floor.c`, `floor_uring.c`), which the lab's
//! figures were checked against; the io_uring one also names its sockets
//! by registered files and packs receives into incrementally consumed
//! buffers, as peregrine's own driver does, so that its kernel work per
//! request is not above a real server's.
//!
//! Usage: `peregrine-floor [--addr HOST:PORT] [--engine epoll|uring]`
//! (default `127.0.0.1:8080`, epoll).

mod epoll;
mod http;
mod socket;
mod uring;

use std::net::SocketAddr;
use std::process::ExitCode;

const DEFAULT_ADDR: &str = "127.0.0.1:8080";
const USAGE: &str = "usage: peregrine-floor [--addr HOST:PORT] [--engine epoll|uring]";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Epoll,
    Uring,
}

fn main() -> ExitCode {
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("peregrine-floor: a bare responder that answers every request head with one fixed response\n{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (addr, engine) = match parse_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(msg) => {
            eprintln!("peregrine-floor: {msg}");
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let served = match engine {
        Engine::Epoll => epoll::serve(addr),
        Engine::Uring => uring::serve(addr),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("peregrine-floor: {err}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(SocketAddr, Engine), String> {
    let mut addr = DEFAULT_ADDR.to_string();
    let mut engine = "epoll".to_string();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (arg, None),
        };
        let value = match inline {
            Some(value) => value,
            None if name == "--addr" || name == "--engine" => {
                args.next().ok_or(format!("{name} needs a value"))?
            }
            None => return Err(format!("unknown argument `{name}`")),
        };
        match name.as_str() {
            "--addr" => addr = value,
            "--engine" => engine = value,
            _ => return Err(format!("unknown argument `{name}`")),
        }
    }
    let engine = match engine.as_str() {
        "epoll" => Engine::Epoll,
        "uring" | "io_uring" => Engine::Uring,
        other => return Err(format!("unknown engine `{other}` (want epoll or uring)")),
    };
    let addr =
        addr.parse().map_err(|e| format!("bad --addr `{addr}`: {e} (want HOST:PORT with a numeric host)"))?;
    Ok((addr, engine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args() {
        let parse = |v: &[&str]| parse_args(v.iter().map(|s| s.to_string()));
        assert_eq!(parse(&[]).map(|(a, e)| (a.port(), e)), Ok((8080, Engine::Epoll)));
        assert_eq!(parse(&["--addr", "127.0.0.1:9"]).map(|(a, _)| a.port()), Ok(9));
        assert_eq!(parse(&["--addr=[::1]:7"]).map(|(a, _)| a.port()), Ok(7));
        assert_eq!(parse(&["--engine", "uring"]).map(|(_, e)| e), Ok(Engine::Uring));
        assert_eq!(parse(&["--engine=epoll"]).map(|(_, e)| e), Ok(Engine::Epoll));
        assert!(parse(&["--engine", "kqueue"]).is_err());
        assert!(parse(&["--addr"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }
}
