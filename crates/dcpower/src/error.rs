//! Typed errors. Every one a user can cause (an impossible parameter) names the parameter, the
//! value given and what would be accepted, in one line.

use thiserror::Error;

/// Errors from the model, the topologies, the scheduler and the simulator.
#[derive(Debug, Error)]
pub enum Error {
    /// A parameter outside the range the model or the experiment accepts.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidParameter { name: &'static str, value: String, expected: &'static str },
    /// The cooling plant cannot remove the heat at these settings (CRAH flow above 100%).
    #[error(
        "cooling cannot remove {heat_kw:.0} kW at {what}: CRAHs would need more than full flow"
    )]
    CoolingInfeasible { heat_kw: f64, what: String },
    /// The LP solver gave up (numerical failure or an unexpected status).
    #[error("LP solver failed in {stage}: {message}")]
    Solver { stage: &'static str, message: String },
    /// A claim set that breaks the verdict rules (a "differs" without its cause).
    #[error(transparent)]
    Verdict(#[from] experiments::verdict::RuleError),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// An [`Error::InvalidParameter`] for `name = value`.
pub(crate) fn invalid(name: &'static str, value: impl ToString, expected: &'static str) -> Error {
    Error::InvalidParameter { name, value: value.to_string(), expected }
}
