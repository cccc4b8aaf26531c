//! Encoding write() commands into the bytes of one `write()`, and parsing
//! them back as the kernel does (see [`cmd`](super::cmd) for the layout).
//!
//! Each command is a zero-sized descriptor type (in [`cmds`](super::cmds))
//! implementing [`WriteCmd`] or [`ExWriteCmd`], so that the code that
//! issues commands is one generic function over the descriptor.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::cmd::{IbUverbsCmdHdr, IbUverbsExCmdHdr, IB_USER_VERBS_CMD_FLAG_EXTENDED};

/// A non-extended write() command: its number, its core request and its
/// core response (the C `struct ib_uverbs_<cmd>` and
/// `struct ib_uverbs_<cmd>_resp`, without their flexible `driver_data[]`).
pub trait WriteCmd {
    /// `IB_USER_VERBS_CMD_*`.
    const CMD: u32;
    /// The command's name, its C name without `IB_USER_VERBS_CMD_`
    /// (`"CREATE_QP"`): what errors call it.
    const NAME: &'static str;
    /// The core request. For a command with a response it begins with
    /// `__aligned_u64 response`, which [`encode_write`] fills in.
    type Req: IntoBytes + FromBytes + Immutable + KnownLayout;
    /// The core response; `()` for a command that answers nothing.
    type Resp: IntoBytes + FromBytes + Immutable + KnownLayout;
}

/// An extended write() command (`IB_USER_VERBS_EX_CMD_*`).
pub trait ExWriteCmd {
    /// `IB_USER_VERBS_EX_CMD_*` (without the extended flag).
    const CMD: u32;
    /// The command's name: its C name without `IB_USER_VERBS_EX_CMD_`,
    /// then `_EX` (`"QUERY_DEVICE_EX"`), so that it differs from the
    /// non-extended command of the same object.
    const NAME: &'static str;
    /// The core request (`struct ib_uverbs_ex_<cmd>`), a multiple of 8
    /// bytes.
    type Req: IntoBytes + FromBytes + Immutable + KnownLayout;
    /// The core response, a multiple of 8 bytes; `()` for none.
    type Resp: IntoBytes + FromBytes + Immutable + KnownLayout;
}

/// Why a command could not be framed or parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// A part's length is not a whole number of the header's words.
    Unaligned {
        /// Which part (`"udata in"`, `"udata out"`, …).
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The word size: 4 (write) or 8 (extended).
        unit: usize,
    },
    /// A word count does not fit the header's `u16`.
    TooLong {
        /// Which part.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// The bytes are not as long as the frame requires.
    BadLength {
        /// The length the frame requires.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// Parsing: the header names another command.
    WrongCommand {
        /// The command (with its extended flag) expected.
        expected: u32,
        /// The header's `command`.
        got: u32,
    },
    /// Parsing: a reserved header field is not 0.
    Reserved,
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FrameError::Unaligned { what, len, unit } => {
                write!(f, "{what} is {len} bytes, not a multiple of {unit}")
            }
            FrameError::TooLong { what, len } => {
                write!(f, "{what} is {len} bytes, too long for the header")
            }
            FrameError::BadLength { expected, got } => {
                write!(f, "frame of {got} bytes, {expected} expected")
            }
            FrameError::WrongCommand { expected, got } => {
                write!(f, "command {got:#x}, {expected:#x} expected")
            }
            FrameError::Reserved => f.write_str("a reserved header field is not 0"),
        }
    }
}

impl std::error::Error for FrameError {}

/// `len / unit` as a `u16`, if `len` is a whole number of units that fits.
fn words(what: &'static str, len: usize, unit: usize) -> Result<u16, FrameError> {
    if len % unit != 0 {
        return Err(FrameError::Unaligned { what, len, unit });
    }
    u16::try_from(len / unit).map_err(|_| FrameError::TooLong { what, len })
}

/// The length of a non-extended command's write: header, core request and
/// `udata_in_len` bytes of driver udata (or, for the post commands, of
/// work requests and SGEs).
pub const fn write_len<C: WriteCmd>(udata_in_len: usize) -> usize {
    core::mem::size_of::<IbUverbsCmdHdr>() + core::mem::size_of::<C::Req>() + udata_in_len
}

/// The header of a non-extended command carrying `udata_in_len` bytes of
/// driver udata in and a response buffer of the core response plus
/// `udata_out_len` bytes.
pub fn write_hdr<C: WriteCmd>(
    udata_in_len: usize,
    udata_out_len: usize,
) -> Result<IbUverbsCmdHdr, FrameError> {
    let out = core::mem::size_of::<C::Resp>() + udata_out_len;
    Ok(IbUverbsCmdHdr {
        command: C::CMD,
        in_words: words("write", write_len::<C>(udata_in_len), 4)?,
        out_words: words("response", out, 4)?,
    })
}

/// Writes a non-extended command into `buf` and returns its length.
///
/// `response` is the user address of a buffer of
/// `size_of::<C::Resp>() + udata_out_len` bytes; it is stored in the
/// request's leading `response` member when the command has a response
/// (and ignored otherwise). This crate never dereferences it.
pub fn encode_write<C: WriteCmd>(
    buf: &mut [u8],
    req: &C::Req,
    udata_in: &[u8],
    response: u64,
    udata_out_len: usize,
) -> Result<usize, FrameError> {
    let hdr = write_hdr::<C>(udata_in.len(), udata_out_len)?;
    let len = write_len::<C>(udata_in.len());
    let got = buf.len();
    let frame = buf
        .get_mut(..len)
        .ok_or(FrameError::BadLength { expected: len, got })?;
    let (h, rest) = frame.split_at_mut(core::mem::size_of::<IbUverbsCmdHdr>());
    h.copy_from_slice(hdr.as_bytes());
    let (r, tail) = rest.split_at_mut(core::mem::size_of::<C::Req>());
    r.copy_from_slice(req.as_bytes());
    if core::mem::size_of::<C::Resp>() != 0 {
        r[..8].copy_from_slice(&response.to_ne_bytes());
    }
    tail.copy_from_slice(udata_in);
    Ok(len)
}

/// [`encode_write`] into a new `Vec`.
pub fn encode_write_vec<C: WriteCmd>(
    req: &C::Req,
    udata_in: &[u8],
    response: u64,
    udata_out_len: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut v = vec![0u8; write_len::<C>(udata_in.len())];
    encode_write::<C>(&mut v, req, udata_in, response, udata_out_len)?;
    Ok(v)
}

/// A non-extended command read back from its bytes (what the kernel
/// sees): for tests and for software models of the kernel.
#[derive(Debug, Clone)]
pub struct ParsedWrite<'b, Req> {
    /// The header.
    pub hdr: IbUverbsCmdHdr,
    /// The core request.
    pub req: Req,
    /// What follows it: driver udata in (or work requests).
    pub udata_in: &'b [u8],
}

/// Parses the bytes of one non-extended command `C`, checking the command
/// number and that `in_words` covers exactly the bytes given.
pub fn parse_write<C: WriteCmd>(bytes: &[u8]) -> Result<ParsedWrite<'_, C::Req>, FrameError> {
    let bad = |expected| FrameError::BadLength {
        expected,
        got: bytes.len(),
    };
    let (hdr, rest) =
        IbUverbsCmdHdr::read_from_prefix(bytes).map_err(|_| bad(write_len::<C>(0)))?;
    if hdr.command != C::CMD {
        return Err(FrameError::WrongCommand {
            expected: C::CMD,
            got: hdr.command,
        });
    }
    if usize::from(hdr.in_words) * 4 != bytes.len() {
        return Err(bad(usize::from(hdr.in_words) * 4));
    }
    let (req, udata_in) = C::Req::read_from_prefix(rest).map_err(|_| bad(write_len::<C>(0)))?;
    Ok(ParsedWrite { hdr, req, udata_in })
}

/// The length of an extended command's write:
/// `24 + (in_words + provider_in_words) * 8`.
pub const fn ex_write_len<C: ExWriteCmd>(udata_in_len: usize) -> usize {
    core::mem::size_of::<IbUverbsCmdHdr>()
        + core::mem::size_of::<IbUverbsExCmdHdr>()
        + core::mem::size_of::<C::Req>()
        + udata_in_len
}

/// The two headers of an extended command. `response` is forced to 0 when
/// there is nothing to answer (the kernel requires it).
pub fn ex_write_hdrs<C: ExWriteCmd>(
    udata_in_len: usize,
    response: u64,
    udata_out_len: usize,
) -> Result<(IbUverbsCmdHdr, IbUverbsExCmdHdr), FrameError> {
    let resp_len = core::mem::size_of::<C::Resp>();
    let hdr = IbUverbsCmdHdr {
        command: C::CMD | IB_USER_VERBS_CMD_FLAG_EXTENDED,
        in_words: words("core request", core::mem::size_of::<C::Req>(), 8)?,
        out_words: words("core response", resp_len, 8)?,
    };
    let ex = IbUverbsExCmdHdr {
        response: if resp_len + udata_out_len == 0 {
            0
        } else {
            response
        },
        provider_in_words: words("udata in", udata_in_len, 8)?,
        provider_out_words: words("udata out", udata_out_len, 8)?,
        cmd_hdr_reserved: 0,
    };
    Ok((hdr, ex))
}

/// Writes an extended command into `buf` and returns its length.
///
/// `response` is the user address of a buffer of
/// `size_of::<C::Resp>() + udata_out_len` bytes; the driver udata out
/// begins at `response + size_of::<C::Resp>()`. Driver udata lengths must
/// be multiples of 8.
pub fn encode_ex_write<C: ExWriteCmd>(
    buf: &mut [u8],
    req: &C::Req,
    udata_in: &[u8],
    response: u64,
    udata_out_len: usize,
) -> Result<usize, FrameError> {
    let (hdr, ex) = ex_write_hdrs::<C>(udata_in.len(), response, udata_out_len)?;
    let len = ex_write_len::<C>(udata_in.len());
    let got = buf.len();
    let frame = buf
        .get_mut(..len)
        .ok_or(FrameError::BadLength { expected: len, got })?;
    let (h, rest) = frame.split_at_mut(core::mem::size_of::<IbUverbsCmdHdr>());
    h.copy_from_slice(hdr.as_bytes());
    let (e, rest) = rest.split_at_mut(core::mem::size_of::<IbUverbsExCmdHdr>());
    e.copy_from_slice(ex.as_bytes());
    let (r, tail) = rest.split_at_mut(core::mem::size_of::<C::Req>());
    r.copy_from_slice(req.as_bytes());
    tail.copy_from_slice(udata_in);
    Ok(len)
}

/// [`encode_ex_write`] into a new `Vec`.
pub fn encode_ex_write_vec<C: ExWriteCmd>(
    req: &C::Req,
    udata_in: &[u8],
    response: u64,
    udata_out_len: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut v = vec![0u8; ex_write_len::<C>(udata_in.len())];
    encode_ex_write::<C>(&mut v, req, udata_in, response, udata_out_len)?;
    Ok(v)
}

/// An extended command read back from its bytes.
#[derive(Debug, Clone)]
pub struct ParsedExWrite<'b, Req> {
    /// The common header.
    pub hdr: IbUverbsCmdHdr,
    /// The extended header.
    pub ex: IbUverbsExCmdHdr,
    /// The core request.
    pub req: Req,
    /// Driver udata in.
    pub udata_in: &'b [u8],
}

/// Parses the bytes of one extended command `C`, with the kernel's checks:
/// command number and flag, reserved field 0, total length
/// `24 + (in_words + provider_in_words) * 8`.
pub fn parse_ex_write<C: ExWriteCmd>(
    bytes: &[u8],
) -> Result<ParsedExWrite<'_, C::Req>, FrameError> {
    let bad = |expected| FrameError::BadLength {
        expected,
        got: bytes.len(),
    };
    let (hdr, rest) =
        IbUverbsCmdHdr::read_from_prefix(bytes).map_err(|_| bad(ex_write_len::<C>(0)))?;
    let want = C::CMD | IB_USER_VERBS_CMD_FLAG_EXTENDED;
    if hdr.command != want {
        return Err(FrameError::WrongCommand {
            expected: want,
            got: hdr.command,
        });
    }
    let (ex, rest) =
        IbUverbsExCmdHdr::read_from_prefix(rest).map_err(|_| bad(ex_write_len::<C>(0)))?;
    if ex.cmd_hdr_reserved != 0 {
        return Err(FrameError::Reserved);
    }
    let total = 24 + (usize::from(hdr.in_words) + usize::from(ex.provider_in_words)) * 8;
    if total != bytes.len() {
        return Err(bad(total));
    }
    let (req, udata_in) = C::Req::read_from_prefix(rest).map_err(|_| bad(ex_write_len::<C>(0)))?;
    Ok(ParsedExWrite {
        hdr,
        ex,
        req,
        udata_in,
    })
}

/// The core response at the start of a response buffer, if it is long
/// enough; the driver udata out is `&buf[size_of::<C::Resp>()..]`.
pub fn read_resp<R: FromBytes>(buf: &[u8]) -> Option<R> {
    R::read_from_prefix(buf).ok().map(|(r, _)| r)
}
