//! The lab's shared rig: everything `bench`, `stress` and `verify` use to
//! stand a server up and measure it, so no command reaches into another.
//!
//! - `server`: starting a server process pinned to a CPU, waiting for its
//!   port, stopping it (and building it first);
//! - `wrk`: the wrk command line, running it, parsing its report;
//! - `h2load`: the same for nghttp2's HTTP/2 load generator;
//! - `procfs`: CPU time, memory and open files of a process from `/proc`;
//! - `dbcpu`: the CPU time of a PostgreSQL cluster on this machine;
//! - `stats`: medians, spreads, ratios and percentiles;
//! - `fdlimit`: raising the open-files limit before opening many sockets;
//! - `cpu`: pinning the lab's own client threads;
//! - `load`: the lab's own load generator (closed loop, one epoll thread,
//!   reconnects, weighted request templates);
//! - `arena`: HttpArena's HTTP/1.1 profiles as load templates;
//! - `client`: the blocking raw-TCP HTTP/1.1 client (the verifier's, and
//!   the probe stress scenarios send while a server is under load);
//! - `wsframe`: WebSocket client frames (verify's battery, the echo load);
//! - `sources`: client sockets to a loopback server, spread over many
//!   source addresses (the stress clients and the echo load).
//!
//! The rig depends on no command module; commands depend on it.

pub mod arena;
pub mod client;
pub mod cpu;
pub mod dbcpu;
pub mod fdlimit;
pub mod h2load;
pub mod load;
pub mod procfs;
pub mod server;
pub mod sources;
pub mod stats;
pub mod wrk;
pub mod wsframe;
