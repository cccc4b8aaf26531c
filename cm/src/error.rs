//! Errors: which rdma_cm command failed, on which id, with which errno.

use std::fmt;
pub use uverbs_abi::Errno;

/// What went wrong in an rdma_cm call.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The kernel refused a command.
    Kernel {
        /// The command (`"RESOLVE_ADDR"`, `"GET_EVENT"`…).
        op: &'static str,
        /// The id's kernel handle, if the command names one.
        id: Option<u32>,
        /// The errno.
        errno: Errno,
    },
    /// An argument was rejected before reaching the kernel.
    InvalidArgument(String),
    /// The kernel answered something that breaks its ABI.
    BadKernelAnswer(String),
}

impl Error {
    /// The errno of a kernel error.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Kernel { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    pub(crate) fn kernel(op: &'static str, id: Option<u32>, errno: Errno) -> Error {
        Error::Kernel { op, id, errno }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Kernel { op, id, errno } => match id {
                Some(id) => write!(f, "rdma_cm {op} on id {id}: {errno}"),
                None => write!(f, "rdma_cm {op}: {errno}"),
            },
            Error::InvalidArgument(w) => write!(f, "invalid argument: {w}"),
            Error::BadKernelAnswer(w) => write!(f, "unexpected answer from the kernel: {w}"),
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
