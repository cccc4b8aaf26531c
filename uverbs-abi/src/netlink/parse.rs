//! Reading netlink replies through checked views.
//!
//! Each view validates its lengths once, when it is made
//! ([`NlMsg::new_checked`], [`Attrs::new_checked`]); after that, iteration
//! and accessors only use checked slicing (`get`), so no input can make
//! them panic or read out of bounds. Malformed input is an
//! [`NlParseError`].

use zerocopy::FromBytes;

use super::{
    nl_align, NlMsgErr, NlMsgHdr, NLA_F_NESTED, NLA_HDRLEN, NLA_TYPE_MASK, NLMSGERR_ATTR_MSG,
    NLMSGERR_ATTR_OFFS, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN, NLMSG_NOOP, NLMSG_OVERRUN,
    NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_MULTI,
};

/// Malformed netlink bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NlParseError {
    /// Fewer bytes than a message header (16) remain.
    Truncated {
        /// Bytes a header needs.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// `nlmsg_len` below the header size or beyond the bytes left.
    BadMsgLen {
        /// The `nlmsg_len` read.
        len: u32,
        /// Bytes left from the header on.
        have: usize,
    },
    /// An attribute header cut short, or `nla_len` below 4 or beyond the
    /// bytes left.
    BadAttrLen {
        /// The `nla_len` read (0 when the header itself is cut).
        len: u16,
        /// Bytes left from the attribute on.
        have: usize,
    },
    /// An `NLMSG_ERROR` whose payload is shorter than `struct nlmsgerr`.
    ShortError {
        /// Payload bytes.
        have: usize,
    },
    /// An `NLMSG_ERROR` or `NLMSG_DONE` code that is neither 0 nor a
    /// negative errno (a positive number, or below -4095: `-i32::MIN` does
    /// not exist).
    BadErrorCode {
        /// The code read.
        code: i32,
    },
}

impl core::fmt::Display for NlParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NlParseError::Truncated { need, have } => {
                write!(f, "netlink header needs {need} bytes, {have} left")
            }
            NlParseError::BadMsgLen { len, have } => {
                write!(f, "netlink message of length {len} with {have} bytes left")
            }
            NlParseError::BadAttrLen { len, have } => {
                write!(
                    f,
                    "netlink attribute of length {len} with {have} bytes left"
                )
            }
            NlParseError::ShortError { have } => {
                write!(f, "NLMSG_ERROR payload of {have} bytes (needs 20)")
            }
            NlParseError::BadErrorCode { code } => {
                write!(f, "netlink error code {code}, not a negative errno")
            }
        }
    }
}

impl std::error::Error for NlParseError {}

/// One message: a header whose `nlmsg_len` was checked against the bytes,
/// and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NlMsg<'a> {
    header: NlMsgHdr,
    payload: &'a [u8],
}

impl<'a> NlMsg<'a> {
    /// Checks the message at the start of `bytes`; returns it and the bytes
    /// after it (from the next 4-byte boundary).
    pub fn new_checked(bytes: &'a [u8]) -> Result<(NlMsg<'a>, &'a [u8]), NlParseError> {
        let have = bytes.len();
        let (header, _) =
            NlMsgHdr::read_from_prefix(bytes).map_err(|_| NlParseError::Truncated {
                need: NLMSG_HDRLEN,
                have,
            })?;
        let len = header.nlmsg_len as usize;
        let bad = NlParseError::BadMsgLen {
            len: header.nlmsg_len,
            have,
        };
        if len < NLMSG_HDRLEN {
            return Err(bad);
        }
        let payload = bytes.get(NLMSG_HDRLEN..len).ok_or(bad)?;
        let rest = bytes.get(nl_align(len)..).unwrap_or_default();
        Ok((NlMsg { header, payload }, rest))
    }

    /// The header.
    pub fn header(&self) -> &NlMsgHdr {
        &self.header
    }

    /// The bytes after the header, within `nlmsg_len`.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The payload as attributes (NLDEV messages have no family header).
    pub fn attrs(&self) -> Result<Attrs<'a>, NlParseError> {
        Attrs::new_checked(self.payload)
    }
}

/// The messages of one datagram, in order. After an error it yields
/// nothing more.
#[derive(Debug, Clone)]
pub struct NlMsgIter<'a> {
    rest: &'a [u8],
}

impl<'a> NlMsgIter<'a> {
    /// The messages in `datagram`.
    pub fn new(datagram: &'a [u8]) -> NlMsgIter<'a> {
        NlMsgIter { rest: datagram }
    }
}

impl<'a> Iterator for NlMsgIter<'a> {
    type Item = Result<NlMsg<'a>, NlParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match NlMsg::new_checked(self.rest) {
            Ok((m, rest)) => {
                self.rest = rest;
                Some(Ok(m))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// One attribute: type and payload (without padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr<'a> {
    nla_type: u16,
    data: &'a [u8],
}

impl<'a> Attr<'a> {
    /// The type without the `NLA_F_NESTED`/`NLA_F_NET_BYTEORDER` flags.
    pub fn kind(&self) -> u16 {
        self.nla_type & NLA_TYPE_MASK
    }

    /// `nla_type` as received.
    pub fn raw_type(&self) -> u16 {
        self.nla_type
    }

    /// Whether `NLA_F_NESTED` is set.
    pub fn is_nested(&self) -> bool {
        self.nla_type & NLA_F_NESTED != 0
    }

    /// The payload.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// A one-byte payload.
    pub fn u8(&self) -> Option<u8> {
        match self.data {
            [b] => Some(*b),
            _ => None,
        }
    }

    /// A two-byte payload, host order.
    pub fn u16(&self) -> Option<u16> {
        self.data.try_into().ok().map(u16::from_ne_bytes)
    }

    /// A four-byte payload, host order.
    pub fn u32(&self) -> Option<u32> {
        self.data.try_into().ok().map(u32::from_ne_bytes)
    }

    /// An eight-byte payload, host order.
    pub fn u64(&self) -> Option<u64> {
        self.data.try_into().ok().map(u64::from_ne_bytes)
    }

    /// A string payload: the bytes up to the first NUL (or all of them),
    /// if they are UTF-8.
    pub fn str(&self) -> Option<&'a str> {
        let end = self
            .data
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.data.len());
        core::str::from_utf8(self.data.get(..end)?).ok()
    }

    /// The payload as nested attributes.
    pub fn nested(&self) -> Result<Attrs<'a>, NlParseError> {
        Attrs::new_checked(self.data)
    }
}

/// A run of attributes whose lengths were all checked.
#[derive(Debug, Clone, Copy)]
pub struct Attrs<'a> {
    bytes: &'a [u8],
}

impl<'a> Attrs<'a> {
    /// Checks every attribute header in `bytes`: each `nla_len` at least 4
    /// and within the bytes left; the last one's padding may be absent.
    pub fn new_checked(bytes: &'a [u8]) -> Result<Attrs<'a>, NlParseError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (_, next) = split_attr(rest)?;
            rest = next;
        }
        Ok(Attrs { bytes })
    }

    /// The attributes in order.
    pub fn iter(&self) -> AttrIter<'a> {
        AttrIter { rest: self.bytes }
    }

    /// The first attribute of type `kind` (flags ignored).
    pub fn find(&self, kind: u16) -> Option<Attr<'a>> {
        self.iter().find(|a| a.kind() == kind)
    }
}

impl<'a> IntoIterator for Attrs<'a> {
    type Item = Attr<'a>;
    type IntoIter = AttrIter<'a>;
    fn into_iter(self) -> AttrIter<'a> {
        self.iter()
    }
}

fn split_attr(bytes: &[u8]) -> Result<(Attr<'_>, &[u8]), NlParseError> {
    let have = bytes.len();
    let (len, nla_type) = match bytes {
        [a, b, c, d, ..] => (u16::from_ne_bytes([*a, *b]), u16::from_ne_bytes([*c, *d])),
        _ => return Err(NlParseError::BadAttrLen { len: 0, have }),
    };
    let bad = NlParseError::BadAttrLen { len, have };
    if usize::from(len) < NLA_HDRLEN {
        return Err(bad);
    }
    let data = bytes.get(NLA_HDRLEN..usize::from(len)).ok_or(bad)?;
    let rest = bytes.get(nl_align(usize::from(len))..).unwrap_or_default();
    Ok((Attr { nla_type, data }, rest))
}

/// Iterator over checked [`Attrs`].
#[derive(Debug, Clone)]
pub struct AttrIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for AttrIter<'a> {
    type Item = Attr<'a>;

    fn next(&mut self) -> Option<Attr<'a>> {
        // The bytes were checked by `Attrs::new_checked`; an error here is
        // impossible and would only end the iteration.
        let (a, rest) = split_attr(self.rest).ok()?;
        self.rest = rest;
        Some(a)
    }
}

/// What one message of a reply means.
#[derive(Debug, Clone, Copy)]
pub enum NlMessage<'a> {
    /// A data message (e.g. one device of a dump).
    Data(NlMsg<'a>),
    /// `NLMSG_DONE`: the dump is complete; `errno` is non-zero when the
    /// kernel ended the dump with an error.
    Done {
        /// The positive errno, or 0.
        errno: i32,
    },
    /// `NLMSG_ERROR` with error 0: the request succeeded.
    Ack,
    /// `NLMSG_ERROR` with an error.
    Error {
        /// The positive errno.
        errno: i32,
        /// The extended ack message (`NLMSGERR_ATTR_MSG`), if any.
        message: Option<&'a str>,
        /// The offset of the offending attribute in the request
        /// (`NLMSGERR_ATTR_OFFS`), if given.
        bad_attr_offset: Option<u32>,
    },
    /// `NLMSG_NOOP`.
    Noop,
    /// `NLMSG_OVERRUN`: messages were lost.
    Overrun,
}

impl<'a> NlMessage<'a> {
    /// Classifies a checked message.
    pub fn classify(m: NlMsg<'a>) -> Result<NlMessage<'a>, NlParseError> {
        Ok(match m.header.nlmsg_type {
            NLMSG_NOOP => NlMessage::Noop,
            NLMSG_OVERRUN => NlMessage::Overrun,
            NLMSG_DONE => {
                // Kernels have always sent the code; a bare DONE is success.
                let v = m
                    .payload
                    .first_chunk::<4>()
                    .map_or(0, |b| i32::from_ne_bytes(*b));
                NlMessage::Done {
                    errno: errno_of(v)?,
                }
            }
            NLMSG_ERROR => {
                let (e, after) = NlMsgErr::read_from_prefix(m.payload).map_err(|_| {
                    NlParseError::ShortError {
                        have: m.payload.len(),
                    }
                })?;
                if e.error == 0 {
                    NlMessage::Ack
                } else {
                    let (message, bad_attr_offset) = ext_ack(m.header.nlmsg_flags, &e, after);
                    NlMessage::Error {
                        errno: errno_of(e.error)?,
                        message,
                        bad_attr_offset,
                    }
                }
            }
            _ => NlMessage::Data(m),
        })
    }
}

/// The positive errno of a kernel error code (`-errno`), or 0 for 0. The
/// code is the kernel's word, not trusted: anything else is malformed.
fn errno_of(code: i32) -> Result<i32, NlParseError> {
    match code {
        0 => Ok(0),
        -4095..=-1 => Ok(-code),
        _ => Err(NlParseError::BadErrorCode { code }),
    }
}

/// The extended-ack TLVs after an `nlmsgerr`, ignored when malformed.
fn ext_ack<'a>(flags: u16, e: &NlMsgErr, after: &'a [u8]) -> (Option<&'a str>, Option<u32>) {
    if flags & NLM_F_ACK_TLVS == 0 {
        return (None, None);
    }
    let echoed = if flags & NLM_F_CAPPED != 0 {
        0
    } else {
        nl_align((e.msg.nlmsg_len as usize).saturating_sub(NLMSG_HDRLEN))
    };
    let Some(Ok(tlvs)) = after.get(echoed..).map(Attrs::new_checked) else {
        return (None, None);
    };
    let msg = tlvs.find(NLMSGERR_ATTR_MSG).and_then(|a| a.str());
    let offs = tlvs.find(NLMSGERR_ATTR_OFFS).and_then(|a| a.u32());
    (msg, offs)
}

/// A reply that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NlReplyError {
    /// The bytes were malformed.
    Malformed(NlParseError),
    /// The kernel answered with an errno (and maybe an extended ack text).
    Kernel {
        /// The positive errno.
        errno: i32,
        /// The extended ack message.
        message: Option<String>,
    },
    /// `NLMSG_OVERRUN`: the kernel dropped messages.
    Overrun,
}

impl core::fmt::Display for NlReplyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NlReplyError::Malformed(e) => write!(f, "malformed netlink reply: {e}"),
            NlReplyError::Kernel {
                errno,
                message: Some(m),
            } => {
                write!(f, "netlink error {errno}: {m}")
            }
            NlReplyError::Kernel {
                errno,
                message: None,
            } => write!(f, "netlink error {errno}"),
            NlReplyError::Overrun => write!(f, "netlink overrun"),
        }
    }
}

impl std::error::Error for NlReplyError {}

impl From<NlParseError> for NlReplyError {
    fn from(e: NlParseError) -> NlReplyError {
        NlReplyError::Malformed(e)
    }
}

/// Follows the reply to one request across datagrams: feed it each
/// datagram received until [`is_done`](Self::is_done).
///
/// A dump (`NLM_F_DUMP`) ends with `NLMSG_DONE`; a request with `NLM_F_ACK`
/// ends with the ack; any other request ends with its one answer. Messages
/// of another sequence number are skipped.
#[derive(Debug, Clone)]
pub struct ReplyReader {
    seq: u32,
    dump: bool,
    ack: bool,
    done: bool,
    interrupted: bool,
}

impl ReplyReader {
    /// A reader for the request sent with `nlmsg_seq` = `seq` and
    /// `nlmsg_flags` = `request_flags`.
    pub fn new(seq: u32, request_flags: u16) -> ReplyReader {
        ReplyReader {
            seq,
            dump: request_flags & NLM_F_DUMP == NLM_F_DUMP,
            ack: request_flags & NLM_F_ACK != 0,
            done: false,
            interrupted: false,
        }
    }

    /// Whether the reply is complete.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the kernel flagged the dump as inconsistent
    /// (`NLM_F_DUMP_INTR`): retry it.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// The data messages of one datagram that belong to the reply. An
    /// `NLMSG_ERROR` with an errno, a failed dump, an overrun or malformed
    /// bytes are errors, and end the reply.
    pub fn feed<'a>(&mut self, datagram: &'a [u8]) -> Result<Vec<NlMsg<'a>>, NlReplyError> {
        let mut out = Vec::new();
        for m in NlMsgIter::new(datagram) {
            if self.done {
                break;
            }
            let m = m.inspect_err(|_| self.done = true)?;
            if m.header.nlmsg_seq != self.seq {
                continue;
            }
            self.interrupted |= m.header.nlmsg_flags & NLM_F_DUMP_INTR != 0;
            match NlMessage::classify(m).inspect_err(|_| self.done = true)? {
                NlMessage::Data(d) => {
                    if !self.dump && !self.ack && d.header.nlmsg_flags & NLM_F_MULTI == 0 {
                        self.done = true;
                    }
                    out.push(d);
                }
                NlMessage::Noop => {}
                NlMessage::Ack | NlMessage::Done { errno: 0 } => self.done = true,
                NlMessage::Done { errno } => {
                    self.done = true;
                    return Err(NlReplyError::Kernel {
                        errno,
                        message: None,
                    });
                }
                NlMessage::Error { errno, message, .. } => {
                    self.done = true;
                    return Err(NlReplyError::Kernel {
                        errno,
                        message: message.map(str::to_owned),
                    });
                }
                NlMessage::Overrun => {
                    self.done = true;
                    return Err(NlReplyError::Overrun);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
