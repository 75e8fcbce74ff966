//! Errors of the queues, the analyser and the command line.

/// What went wrong, in words a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    #[error("the queue is full ({slots} entries); dequeue, or format a larger region")]
    Full { slots: u64 },
    #[error("too many inserts in flight (at most {limit}); use fewer threads")]
    TooManyInFlight { limit: u64 },
    #[error("corrupt queue region: {0}")]
    Corrupt(String),
    #[error("engine: {0}")]
    Engine(String),
    #[error("pmem: {0}")]
    Pmem(#[from] pmem::PmemError),
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Error {
    Error::Invalid { what, reason: reason.into() }
}
