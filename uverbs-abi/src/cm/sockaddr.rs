//! Socket addresses as the RDMA ABIs embed them: `struct sockaddr_in`
//! (`<linux/in.h>`), `struct sockaddr_in6` (`<linux/in6.h>`) and
//! `struct __kernel_sockaddr_storage` (`<linux/socket.h>`), with pure
//! conversions to and from [`std::net::SocketAddr`].
//!
//! The family is stored in host order, the port in network order, as the
//! kernel expects. `sin6_flowinfo` and `sin6_scope_id` are stored as the raw
//! values [`SocketAddrV6::flowinfo`] and [`SocketAddrV6::scope_id`] give
//! (std hands them to the kernel unchanged too).
//!
//! Legacy commands (`RDMA_USER_CM_CMD_BIND_IP`, `RESOLVE_IP`,
//! `JOIN_IP_MCAST`) carry a `struct sockaddr_in6` field that may hold a
//! `sockaddr_in` image; [`SockaddrIn6::from_socket_addr`] writes whichever the
//! address needs, and [`SockaddrIn6::to_socket_addr`] reads either.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;

/// `AF_INET` (Linux value; `<sys/socket.h>`), the family of a `sockaddr_in`.
pub const AF_INET: u16 = 2;
/// `AF_INET6` (Linux value; `<sys/socket.h>`), the family of a `sockaddr_in6`.
pub const AF_INET6: u16 = 10;
/// `AF_IB` (Linux value; `<sys/socket.h>`), the family of the `sockaddr_ib`
/// that rdma_cm accepts for native InfiniBand addressing (not decoded here).
pub const AF_IB: u16 = 27;

/// `sizeof(struct sockaddr_in)`.
pub const SOCKADDR_IN_LEN: u16 = 16;
/// `sizeof(struct sockaddr_in6)`.
pub const SOCKADDR_IN6_LEN: u16 = 28;

/// Why bytes could not be read as, or written as, a socket address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockaddrError {
    /// The buffer is shorter than the address family requires.
    TooShort {
        /// Bytes the family's struct needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A family other than `AF_INET`/`AF_INET6` (e.g. `AF_IB`, or zero for
    /// "no address").
    Family(u16),
}

impl core::fmt::Display for SockaddrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SockaddrError::TooShort { need, have } => {
                write!(f, "socket address needs {need} bytes, got {have}")
            }
            SockaddrError::Family(fam) => write!(f, "unsupported address family {fam}"),
        }
    }
}

impl std::error::Error for SockaddrError {}

/// `struct sockaddr_in` of `<linux/in.h>`: 16 bytes, 4-aligned.
#[repr(C, align(4))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SockaddrIn {
    /// `sin_family`: [`AF_INET`], host order.
    pub sin_family: u16,
    /// `sin_port`, network order.
    pub sin_port: U16,
    /// `sin_addr`: the IPv4 address, in network (wire) byte order.
    pub sin_addr: [u8; 4],
    /// `__pad` (`sin_zero`): zero.
    pub sin_zero: [u8; 8],
}

/// `struct sockaddr_in6` of `<linux/in6.h>`: 28 bytes, 4-aligned.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SockaddrIn6 {
    /// `sin6_family`: [`AF_INET6`] (or [`AF_INET`] when the 28 bytes hold a
    /// `sockaddr_in` image), host order.
    pub sin6_family: u16,
    /// `sin6_port`, network order.
    pub sin6_port: U16,
    /// `sin6_flowinfo` (`__be32`), as [`SocketAddrV6::flowinfo`] gives it.
    pub sin6_flowinfo: u32,
    /// `sin6_addr`: the IPv6 address in network byte order.
    pub sin6_addr: [u8; 16],
    /// `sin6_scope_id`, host order.
    pub sin6_scope_id: u32,
}

/// `struct __kernel_sockaddr_storage` of `<linux/socket.h>`: 128 bytes,
/// aligned like a pointer; holds any family's address.
#[repr(C, align(8))]
#[derive(Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct KernelSockaddrStorage {
    /// `ss_family`, host order.
    pub ss_family: u16,
    /// `__data`: the rest of the family's struct, then zeroes.
    pub data: [u8; 126],
}

impl core::fmt::Debug for KernelSockaddrStorage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.to_socket_addr() {
            Ok(a) => write!(f, "KernelSockaddrStorage({a})"),
            Err(_) => write!(f, "KernelSockaddrStorage(family {})", self.ss_family),
        }
    }
}

/// The size of the C struct that holds `addr`: 16 for IPv4, 28 for IPv6 —
/// the value of the `*_size`/`addr_size` fields next to a
/// `__kernel_sockaddr_storage`.
pub const fn sockaddr_len(addr: &SocketAddr) -> u16 {
    match addr {
        SocketAddr::V4(_) => SOCKADDR_IN_LEN,
        SocketAddr::V6(_) => SOCKADDR_IN6_LEN,
    }
}

/// Writes `addr` as a `sockaddr_in` or `sockaddr_in6` at the start of `out`
/// and zeroes the rest of `out`; returns the bytes used ([`sockaddr_len`]).
pub fn write_sockaddr(addr: &SocketAddr, out: &mut [u8]) -> Result<usize, SockaddrError> {
    let have = out.len();
    let too_short = |need: usize| SockaddrError::TooShort { need, have };
    out.fill(0);
    match addr {
        SocketAddr::V4(a) => {
            let sin = SockaddrIn::from_v4(a);
            sin.write_to_prefix(out).map_err(|_| too_short(16))?;
            Ok(16)
        }
        SocketAddr::V6(a) => {
            let sin6 = SockaddrIn6::from_v6(a);
            sin6.write_to_prefix(out).map_err(|_| too_short(28))?;
            Ok(28)
        }
    }
}

/// Reads a `sockaddr_in` or `sockaddr_in6` from the start of `bytes`, by its
/// family field.
pub fn read_sockaddr(bytes: &[u8]) -> Result<SocketAddr, SockaddrError> {
    let have = bytes.len();
    let too_short = |need: usize| SockaddrError::TooShort { need, have };
    let family = match bytes {
        [a, b, ..] => u16::from_ne_bytes([*a, *b]),
        _ => return Err(too_short(2)),
    };
    match family {
        AF_INET => {
            let (sin, _) = SockaddrIn::read_from_prefix(bytes).map_err(|_| too_short(16))?;
            Ok(SocketAddr::V4(sin.to_v4()))
        }
        AF_INET6 => {
            let (sin6, _) = SockaddrIn6::read_from_prefix(bytes).map_err(|_| too_short(28))?;
            Ok(SocketAddr::V6(sin6.to_v6()))
        }
        other => Err(SockaddrError::Family(other)),
    }
}

impl SockaddrIn {
    /// The `sockaddr_in` of an IPv4 socket address.
    pub fn from_v4(a: &SocketAddrV4) -> SockaddrIn {
        SockaddrIn {
            sin_family: AF_INET,
            sin_port: U16::new(a.port()),
            sin_addr: a.ip().octets(),
            sin_zero: [0; 8],
        }
    }

    /// The IPv4 socket address (the family field is not checked).
    pub fn to_v4(&self) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from(self.sin_addr), self.sin_port.get())
    }
}

impl SockaddrIn6 {
    /// The `sockaddr_in6` of an IPv6 socket address.
    pub fn from_v6(a: &SocketAddrV6) -> SockaddrIn6 {
        SockaddrIn6 {
            sin6_family: AF_INET6,
            sin6_port: U16::new(a.port()),
            sin6_flowinfo: a.flowinfo(),
            sin6_addr: a.ip().octets(),
            sin6_scope_id: a.scope_id(),
        }
    }

    /// The IPv6 socket address (the family field is not checked).
    pub fn to_v6(&self) -> SocketAddrV6 {
        SocketAddrV6::new(
            Ipv6Addr::from(self.sin6_addr),
            self.sin6_port.get(),
            self.sin6_flowinfo,
            self.sin6_scope_id,
        )
    }

    /// The 28 bytes for `addr`: a `sockaddr_in6`, or for IPv4 a
    /// `sockaddr_in` image followed by zeroes (what the legacy `*_IP`
    /// commands accept).
    pub fn from_socket_addr(addr: &SocketAddr) -> SockaddrIn6 {
        match addr {
            SocketAddr::V6(a) => SockaddrIn6::from_v6(a),
            SocketAddr::V4(a) => {
                let mut s = SockaddrIn6::new_zeroed();
                let sin = SockaddrIn::from_v4(a);
                // A 16-byte sockaddr_in always fits the 28-byte struct.
                let _fits = sin.write_to_prefix(s.as_mut_bytes());
                s
            }
        }
    }

    /// The address these bytes hold, by family (`AF_INET` or `AF_INET6`).
    pub fn to_socket_addr(&self) -> Result<SocketAddr, SockaddrError> {
        read_sockaddr(self.as_bytes())
    }
}

impl KernelSockaddrStorage {
    /// The storage holding `addr` (family struct first, zeroes after).
    pub fn from_socket_addr(addr: &SocketAddr) -> KernelSockaddrStorage {
        let mut s = KernelSockaddrStorage::new_zeroed();
        // 128 bytes always hold a sockaddr_in or sockaddr_in6.
        let _fits = write_sockaddr(addr, s.as_mut_bytes());
        s
    }

    /// The address the storage holds, by family (`AF_INET` or `AF_INET6`).
    pub fn to_socket_addr(&self) -> Result<SocketAddr, SockaddrError> {
        read_sockaddr(self.as_bytes())
    }
}

/// The types above, for the header comparison test.
pub(crate) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(SockaddrIn => "struct sockaddr_in" {
            sin_family => "sin_family",
            sin_port => "sin_port",
            sin_addr => "sin_addr",
            sin_zero => "sin_zero",
        }),
        crate::c_layout!(SockaddrIn6 => "struct sockaddr_in6" {
            sin6_family => "sin6_family",
            sin6_port => "sin6_port",
            sin6_flowinfo => "sin6_flowinfo",
            sin6_addr => "sin6_addr",
            sin6_scope_id => "sin6_scope_id",
        }),
        crate::c_layout!(KernelSockaddrStorage => "struct __kernel_sockaddr_storage" {
            ss_family => "ss_family",
            data => "__data",
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_socket_addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::from((Ipv4Addr::from(ip), port))),
            (any::<[u8; 16]>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(
                |(ip, port, flow, scope)| {
                    SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope))
                }
            ),
        ]
    }

    #[test]
    fn ipv4_bytes_are_the_kernel_image() {
        let a: SocketAddr = "192.168.1.2:4791".parse().unwrap();
        let s = KernelSockaddrStorage::from_socket_addr(&a);
        let b = s.as_bytes();
        assert_eq!(&b[..2], &AF_INET.to_ne_bytes());
        assert_eq!(&b[2..4], &[0x12, 0xb7]);
        assert_eq!(&b[4..8], &[192, 168, 1, 2]);
        assert!(b[8..].iter().all(|&x| x == 0));
        assert_eq!(sockaddr_len(&a), 16);
    }

    #[test]
    fn ipv6_bytes_are_the_kernel_image() {
        let a: SocketAddr = "[fe80::1%3]:18515".parse().unwrap();
        let s = SockaddrIn6::from_socket_addr(&a);
        let b = s.as_bytes();
        assert_eq!(&b[..2], &AF_INET6.to_ne_bytes());
        assert_eq!(&b[2..4], &18515u16.to_be_bytes());
        assert_eq!(b[8], 0xfe);
        assert_eq!(b[23], 1);
        assert_eq!(&b[24..28], &3u32.to_ne_bytes());
        assert_eq!(s.to_socket_addr(), Ok(a));
    }

    #[test]
    fn short_and_foreign_inputs_are_errors() {
        assert_eq!(
            read_sockaddr(&[2]),
            Err(SockaddrError::TooShort { need: 2, have: 1 })
        );
        let mut b = [0u8; 20];
        b[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
        assert_eq!(
            read_sockaddr(&b),
            Err(SockaddrError::TooShort { need: 28, have: 20 })
        );
        b[..2].copy_from_slice(&AF_IB.to_ne_bytes());
        assert_eq!(read_sockaddr(&b), Err(SockaddrError::Family(AF_IB)));
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(
            write_sockaddr(&v6, &mut b),
            Err(SockaddrError::TooShort { need: 28, have: 20 })
        );
    }

    proptest! {
        #[test]
        fn round_trip_through_every_container(a in any_socket_addr()) {
            prop_assert_eq!(KernelSockaddrStorage::from_socket_addr(&a).to_socket_addr(), Ok(a));
            prop_assert_eq!(SockaddrIn6::from_socket_addr(&a).to_socket_addr(), Ok(a));
            let mut buf = [0xffu8; 40];
            let n = write_sockaddr(&a, &mut buf).unwrap();
            prop_assert_eq!(n, usize::from(sockaddr_len(&a)));
            prop_assert_eq!(read_sockaddr(&buf[..n]), Ok(a));
        }

        #[test]
        fn reading_arbitrary_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..160)) {
            let _ = read_sockaddr(&b);
        }
    }
}
