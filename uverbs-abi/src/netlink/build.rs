//! Writing netlink requests: an `nlmsghdr` followed by attributes, each
//! padded to 4 bytes, into a `Vec<u8>` or a caller's fixed buffer.

use zerocopy::IntoBytes;

use super::{nl_align, NlAttr, NlMsgHdr, NLA_HDRLEN, NLMSG_HDRLEN};

/// Why a message could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NlBuildError {
    /// The fixed buffer is too small.
    NoSpace {
        /// Bytes the message needs so far.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
    /// An attribute payload longer than a 16-bit `nla_len` can describe.
    AttrTooLong(usize),
    /// A string attribute containing a NUL byte.
    InteriorNul,
}

impl core::fmt::Display for NlBuildError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NlBuildError::NoSpace { need, have } => {
                write!(f, "netlink message needs {need} bytes, buffer has {have}")
            }
            NlBuildError::AttrTooLong(n) => write!(f, "netlink attribute of {n} bytes"),
            NlBuildError::InteriorNul => write!(f, "NUL byte inside a netlink string attribute"),
        }
    }
}

impl std::error::Error for NlBuildError {}

/// Where a message is written: appended to what the buffer already holds.
pub trait NlBuf {
    /// The bytes written so far.
    fn filled(&mut self) -> &mut [u8];
    /// Appends `bytes`, or fails without writing anything.
    fn append(&mut self, bytes: &[u8]) -> Result<(), NlBuildError>;
}

impl NlBuf for Vec<u8> {
    fn filled(&mut self) -> &mut [u8] {
        self
    }
    fn append(&mut self, bytes: &[u8]) -> Result<(), NlBuildError> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

impl<B: NlBuf + ?Sized> NlBuf for &mut B {
    fn filled(&mut self) -> &mut [u8] {
        (**self).filled()
    }
    fn append(&mut self, bytes: &[u8]) -> Result<(), NlBuildError> {
        (**self).append(bytes)
    }
}

/// A caller-provided buffer of fixed size and the count of bytes written.
#[derive(Debug)]
pub struct FixedBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> FixedBuf<'a> {
    /// An empty message area over `buf`.
    pub fn new(buf: &'a mut [u8]) -> FixedBuf<'a> {
        FixedBuf { buf, len: 0 }
    }

    /// The bytes written.
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl NlBuf for FixedBuf<'_> {
    fn filled(&mut self) -> &mut [u8] {
        self.buf.get_mut(..self.len).unwrap_or_default()
    }
    fn append(&mut self, bytes: &[u8]) -> Result<(), NlBuildError> {
        let have = self.buf.len();
        let end = self.len.checked_add(bytes.len()).filter(|&e| e <= have);
        match end.and_then(|end| self.buf.get_mut(self.len..end)) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len += bytes.len();
                Ok(())
            }
            None => Err(NlBuildError::NoSpace {
                need: self.len.saturating_add(bytes.len()),
                have,
            }),
        }
    }
}

/// Builds one netlink message: header first, attributes after, and
/// `nlmsg_len` filled in by [`finish`](Self::finish). The first error is
/// remembered and returned by `finish`; later calls do nothing.
///
/// ```
/// use uverbs_abi::netlink::*;
/// let msg = NlMsgBuilder::new(
///     Vec::new(),
///     rdma_nl_get_type(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_NEWLINK),
///     NLM_F_REQUEST | NLM_F_ACK,
///     1,
/// )
/// .str(RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
/// .str(RDMA_NLDEV_ATTR_LINK_TYPE, "rxe")
/// .str(RDMA_NLDEV_ATTR_NDEV_NAME, "eth0")
/// .finish()
/// .unwrap();
/// assert_eq!(msg.len(), 16 + 12 + 8 + 12);
/// ```
#[derive(Debug)]
pub struct NlMsgBuilder<B: NlBuf> {
    buf: B,
    start: usize,
    err: Option<NlBuildError>,
}

impl<B: NlBuf> NlMsgBuilder<B> {
    /// Starts a message of `nlmsg_type` with `nlmsg_flags` and `nlmsg_seq`
    /// (`nlmsg_pid` 0: the kernel fills in the sender), after any bytes
    /// already in `buf` (padding them to 4 first).
    pub fn new(mut buf: B, nlmsg_type: u16, nlmsg_flags: u16, nlmsg_seq: u32) -> NlMsgBuilder<B> {
        let pad = nl_align(buf.filled().len()) - buf.filled().len();
        let mut err = buf.append(&[0; 3][..pad]).err();
        let start = buf.filled().len();
        let hdr = NlMsgHdr {
            nlmsg_len: 0,
            nlmsg_type,
            nlmsg_flags,
            nlmsg_seq,
            nlmsg_pid: 0,
        };
        if err.is_none() {
            err = buf.append(hdr.as_bytes()).err();
        }
        NlMsgBuilder { buf, start, err }
    }

    /// Appends an attribute with a raw payload.
    pub fn attr(mut self, nla_type: u16, data: &[u8]) -> NlMsgBuilder<B> {
        if self.err.is_some() {
            return self;
        }
        let Ok(nla_len) = u16::try_from(NLA_HDRLEN + data.len()) else {
            self.err = Some(NlBuildError::AttrTooLong(data.len()));
            return self;
        };
        let hdr = NlAttr { nla_len, nla_type };
        let pad = nl_align(data.len()) - data.len();
        self.err = self
            .buf
            .append(hdr.as_bytes())
            .and_then(|()| self.buf.append(data))
            .and_then(|()| self.buf.append(&[0; 3][..pad]))
            .err();
        self
    }

    /// Appends a `u8` attribute.
    pub fn u8(self, nla_type: u16, v: u8) -> NlMsgBuilder<B> {
        self.attr(nla_type, &[v])
    }

    /// Appends a `u16` attribute (host order).
    pub fn u16(self, nla_type: u16, v: u16) -> NlMsgBuilder<B> {
        self.attr(nla_type, &v.to_ne_bytes())
    }

    /// Appends a `u32` attribute (host order).
    pub fn u32(self, nla_type: u16, v: u32) -> NlMsgBuilder<B> {
        self.attr(nla_type, &v.to_ne_bytes())
    }

    /// Appends a `u64` attribute (host order).
    pub fn u64(self, nla_type: u16, v: u64) -> NlMsgBuilder<B> {
        self.attr(nla_type, &v.to_ne_bytes())
    }

    /// Appends a NUL-terminated string attribute (`NLA_NUL_STRING`).
    pub fn str(mut self, nla_type: u16, s: &str) -> NlMsgBuilder<B> {
        if s.as_bytes().contains(&0) {
            self.err.get_or_insert(NlBuildError::InteriorNul);
            return self;
        }
        if self.err.is_some() {
            return self;
        }
        let Ok(nla_len) = u16::try_from(NLA_HDRLEN + s.len() + 1) else {
            self.err = Some(NlBuildError::AttrTooLong(s.len() + 1));
            return self;
        };
        let hdr = NlAttr { nla_len, nla_type };
        let pad = nl_align(s.len() + 1) - (s.len() + 1);
        self.err = self
            .buf
            .append(hdr.as_bytes())
            .and_then(|()| self.buf.append(s.as_bytes()))
            .and_then(|()| self.buf.append(&[0; 4][..pad + 1]))
            .err();
        self
    }

    /// Writes `nlmsg_len` and returns the buffer, or the first error.
    pub fn finish(mut self) -> Result<B, NlBuildError> {
        if let Some(e) = self.err {
            return Err(e);
        }
        let filled = self.buf.filled();
        let len = filled.len().saturating_sub(self.start);
        let len32 = u32::try_from(len).map_err(|_| NlBuildError::AttrTooLong(len))?;
        debug_assert!(len >= NLMSG_HDRLEN);
        if let Some(dst) = filled.get_mut(self.start..self.start + 4) {
            dst.copy_from_slice(&len32.to_ne_bytes());
        }
        Ok(self.buf)
    }
}
