//! gRPC over HTTP/2: message framing ([`codec`]) and status codes
//! ([`Status`]). The service layer that routes `/package.Service/Method`
//! to handlers sits on the router like any other endpoint.

pub mod codec;
mod service;
mod status;

pub use service::{GrpcService, DEFAULT_MAX_MESSAGE};
pub use status::{Code, Status};
