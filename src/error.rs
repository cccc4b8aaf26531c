//! Errors of the safe API: every failure names what failed.

use rverbs_cm::EventType as CmEventType;
use rverbs_types::Access;
use std::fmt;

pub use rverbs_types::PostError;
pub use uverbs_abi::Errno;

/// Everything that can go wrong in rverbs.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A kernel call failed: which command, on which object, with which errno.
    Kernel {
        /// The command, e.g. `"CREATE_QP"`, `"mmap of the SQ ring"`.
        op: &'static str,
        /// The errno the kernel returned.
        errno: Errno,
    },
    /// A kernel call failed for want of something the process is limited
    /// in (locked memory for REG_MR, reserved huge pages): which call, the
    /// errno, and the limit.
    ResourceLimit {
        /// The command.
        op: &'static str,
        /// The errno the kernel returned.
        errno: Errno,
        /// Which limit, with the figures (its `Display` says how to raise
        /// it).
        limit: Limit,
    },
    /// The device (or its driver) lacks what was asked for: which device,
    /// and what.
    Unsupported {
        /// The device.
        device: String,
        /// What it lacks.
        feature: Feature,
    },
    /// An argument was rejected before anything reached the kernel.
    InvalidArgument {
        /// What was wrong, in words.
        what: String,
    },
    /// No device by that name, or no device at all.
    NoDevice {
        /// The name asked for, if any.
        name: Option<String>,
    },
    /// The device exists but its driver has no rverbs provider.
    UnsupportedDriver {
        /// The device.
        device: String,
        /// The driver's name or id.
        driver: String,
    },
    /// The kernel answered something that breaks its ABI (a short response,
    /// a queue geometry outside the mapping).
    BadKernelAnswer {
        /// What was wrong.
        what: String,
    },
    /// A work-request queue is full: the work request was not posted.
    QueueFull {
        /// Which queue.
        queue: &'static str,
        /// The index in the list of the first work request not posted.
        index: usize,
    },
    /// A work request was refused before posting: invalid for its queue,
    /// or an operation the provider or kernel does not offer
    /// ([`PostError::is_unsupported`]).
    InvalidWorkRequest {
        /// The index in the list of the refused work request (none of it
        /// and after it was posted; those before it were).
        index: usize,
        /// Why.
        reason: PostError,
    },
    /// A device cannot be deleted without waiting: these processes hold it
    /// open (`(pid, command name)`), and the kernel would block the delete
    /// until they close it.
    DeviceInUse {
        /// The device.
        device: String,
        /// Who holds it.
        holders: Vec<(u32, String)>,
    },
    /// An rdma_cm command failed (which command, on which id, errno).
    Cm(rverbs_cm::Error),
    /// An rdma_cm id got another event than the one it waited for (an
    /// error event such as `ADDR_ERROR`, `REJECTED`, `UNREACHABLE`).
    CmEvent {
        /// What was awaited (`None`: one of several events, not this one).
        expected: Option<CmEventType>,
        /// What came (`RDMA_CM_EVENT_REJECTED`).
        got: CmEventType,
        /// Whether it came for another id of the channel.
        other_id: bool,
        /// Its status: a negative errno or a reject reason.
        status: i32,
        /// Private data that came with it (a reject's).
        private_data: Vec<u8>,
    },
    /// An I/O error outside the verbs ABI (sysfs, netlink socket).
    Io {
        /// What was being read or written.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// A process limit a kernel call ran into ([`Error::ResourceLimit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// Registering `len` bytes pins them, beyond `RLIMIT_MEMLOCK`
    /// (`limit` bytes).
    Memlock {
        /// The bytes asked for.
        len: usize,
        /// `RLIMIT_MEMLOCK`'s soft value.
        limit: u64,
    },
    /// `len` bytes of huge pages need `pages` free 2 MiB pages of the
    /// kernel's reserved pool; `free` were (if known).
    HugePages {
        /// The bytes asked for (a whole number of pages).
        len: usize,
        /// The pages they need.
        pages: usize,
        /// The pages free, from `/proc/meminfo`.
        free: Option<u64>,
    },
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Limit::Memlock { len, limit } => write!(
                f,
                "registering {len} bytes pins them, and RLIMIT_MEMLOCK is {limit} bytes (raise it \
                 with ulimit -l, or run with CAP_IPC_LOCK)"
            ),
            Limit::HugePages { len, pages, free } => {
                write!(f, "{len} bytes need {pages} free 2 MiB huge pages and ")?;
                match free {
                    Some(n) => write!(f, "{n} are free")?,
                    None => write!(f, "the number free is unknown")?,
                }
                write!(
                    f,
                    "; reserve them with `sysctl vm.nr_hugepages=N` (or hugepages=N on the \
                     kernel command line)"
                )
            }
        }
    }
}

/// What a device lacks ([`Error::Unsupported`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Feature {
    /// MR access flags that need a capability the device does not report
    /// (refused before the kernel is asked).
    MrAccess {
        /// The flags.
        access: Access,
        /// The capability, in words.
        needs: &'static str,
    },
    /// MR access flags the driver refused at `REG_MR` (rxe: `ZERO_BASED`,
    /// `HUGETLB`; `FLUSH_PERSISTENT` over memory that is not persistent).
    MrAccessRefused {
        /// The flags.
        access: Access,
        /// The driver's errno.
        errno: Errno,
        /// Why, in words.
        why: &'static str,
    },
    /// MR prefetch (`ibv_advise_mr`; rxe has it with on-demand paging, from
    /// Linux 6.14): the kernel answered `errno`.
    AdviseMr {
        /// The kernel's errno.
        errno: Errno,
    },
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Feature::MrAccess { access, needs } => write!(f, "MR access {access:?}: {needs}"),
            Feature::MrAccessRefused { access, errno, why } => {
                write!(f, "MR access {access:?}: REG_MR failed with {errno}: {why}")
            }
            Feature::AdviseMr { errno } => write!(
                f,
                "ADVISE_MR failed with {errno}: the device offers no MR prefetch (ibv_advise_mr; \
                 rxe has it with on-demand paging, Linux 6.14 on)"
            ),
        }
    }
}

impl Error {
    pub(crate) fn kernel(op: &'static str, errno: Errno) -> Error {
        Error::Kernel { op, errno }
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Error {
        Error::InvalidArgument { what: what.into() }
    }

    pub(crate) fn bad_answer(what: impl Into<String>) -> Error {
        Error::BadKernelAnswer { what: what.into() }
    }

    /// The kernel's errno, when the error came from the kernel.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Kernel { errno, .. } | Error::ResourceLimit { errno, .. } => Some(*errno),
            Error::Unsupported {
                feature: Feature::MrAccessRefused { errno, .. } | Feature::AdviseMr { errno },
                ..
            } => Some(*errno),
            Error::Io { source, .. } => source.raw_os_error().map(Errno),
            Error::Cm(e) => e.errno(),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Kernel { op, errno } => write!(f, "{op} failed: {errno}"),
            Error::ResourceLimit { op, errno, limit } => {
                write!(f, "{op} failed: {errno}: {limit}")
            }
            Error::InvalidArgument { what } => write!(f, "invalid argument: {what}"),
            Error::Unsupported { device, feature } => {
                write!(f, "{device}: not supported: {feature}")
            }
            Error::NoDevice { name: Some(n) } => write!(f, "no RDMA device named {n}"),
            Error::NoDevice { name: None } => write!(f, "no RDMA device found"),
            Error::UnsupportedDriver { device, driver } => {
                write!(
                    f,
                    "device {device} uses driver {driver}, which rverbs has no provider for"
                )
            }
            Error::BadKernelAnswer { what } => {
                write!(f, "unexpected answer from the kernel: {what}")
            }
            Error::QueueFull { queue, index } => {
                write!(
                    f,
                    "{queue} is full: work request {index} and later were not posted"
                )
            }
            Error::InvalidWorkRequest { index, reason } => {
                write!(f, "work request {index} rejected: {reason}")
            }
            Error::DeviceInUse { device, holders } => {
                write!(f, "device {device} is in use by")?;
                for (i, (pid, comm)) in holders.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}pid {pid} ({comm})")?;
                }
                write!(
                    f,
                    ": deleting it would block until they close it (delete with --wait to do that)"
                )
            }
            Error::Cm(e) => write!(f, "{e}"),
            Error::CmEvent {
                expected,
                got,
                other_id,
                status,
                ..
            } => {
                let whose = if *other_id { " of another id" } else { "" };
                match expected {
                    Some(e) => write!(f, "waiting for {e}: ")?,
                    None => write!(f, "unexpected event: ")?,
                }
                write!(f, "got {got}{whose} (status {status})")
            }
            Error::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Cm(e) => Some(e),
            _ => None,
        }
    }
}

/// `Result<T, rverbs::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl From<rverbs_cm::Error> for Error {
    fn from(e: rverbs_cm::Error) -> Error {
        Error::Cm(e)
    }
}
