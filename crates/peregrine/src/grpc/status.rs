//! gRPC status codes and the error a handler returns.

use std::fmt;

/// A gRPC status code (the `grpc-status` trailer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// Success.
    Ok = 0,
    /// The client cancelled the call.
    Cancelled = 1,
    /// An error of no other kind.
    Unknown = 2,
    /// The request is invalid whatever the server's state.
    InvalidArgument = 3,
    /// The deadline (`grpc-timeout`) passed before the call finished.
    DeadlineExceeded = 4,
    /// The entity asked for does not exist.
    NotFound = 5,
    /// The entity to create exists already.
    AlreadyExists = 6,
    /// The caller may not do this.
    PermissionDenied = 7,
    /// A limit was hit (for example the message size).
    ResourceExhausted = 8,
    /// The system is not in the state the call needs.
    FailedPrecondition = 9,
    /// Aborted by a conflict, such as a transaction's.
    Aborted = 10,
    /// Past the valid range.
    OutOfRange = 11,
    /// No such method, or a feature the server lacks.
    Unimplemented = 12,
    /// The server broke an invariant, or the message framing is broken.
    Internal = 13,
    /// The service is unavailable for now; retrying may work.
    Unavailable = 14,
    /// Unrecoverable data loss.
    DataLoss = 15,
    /// No valid credentials.
    Unauthenticated = 16,
}

impl Code {
    /// The decimal value sent in `grpc-status`.
    pub fn as_str(self) -> &'static str {
        const NAMES: [&str; 17] =
            ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"];
        NAMES[self as usize]
    }
}

/// A call's outcome other than success: a code and a message for the
/// client (sent percent-encoded in `grpc-message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    message: String,
}

impl Status {
    /// A status with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status { code, message: message.into() }
    }

    /// `INVALID_ARGUMENT`: the request is wrong, whatever the server's state.
    pub fn invalid_argument(message: impl Into<String>) -> Status {
        Status::new(Code::InvalidArgument, message)
    }

    /// `NOT_FOUND`.
    pub fn not_found(message: impl Into<String>) -> Status {
        Status::new(Code::NotFound, message)
    }

    /// `INTERNAL`: the server failed.
    pub fn internal(message: impl Into<String>) -> Status {
        Status::new(Code::Internal, message)
    }

    /// `UNIMPLEMENTED`: no such method, or a feature the server lacks.
    pub fn unimplemented(message: impl Into<String>) -> Status {
        Status::new(Code::Unimplemented, message)
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gRPC status {:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Status {}
