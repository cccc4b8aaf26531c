//! `rdma_getaddrinfo`-like resolution: the addresses an rdma_cm id binds to
//! or connects to, from a host name or an address string and a port.
//! Host names go through the system resolver (as librdmacm's own
//! `getaddrinfo` call does); the ACM service librdmacm may also ask is not
//! consulted.

use super::PortSpace;
use crate::error::{Error, Result};
use crate::qp::QpType;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// What [`getaddrinfo`] is asked for (librdmacm's `hints`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrHints {
    /// `RAI_PASSIVE`: addresses to listen on (the node, or every address
    /// when there is none) rather than to connect to.
    pub passive: bool,
    /// `RAI_NUMERICHOST`: the node must be an address; no name lookup.
    pub numeric_host: bool,
    /// Only IPv4 (`Some(false)`) or only IPv6 (`Some(true)`) answers.
    pub ipv6: Option<bool>,
    /// The port space, and so the QP type, of the answers.
    pub port_space: PortSpace,
}

impl Default for AddrHints {
    fn default() -> AddrHints {
        AddrHints {
            passive: false,
            numeric_host: false,
            ipv6: None,
            port_space: PortSpace::TCP,
        }
    }
}

/// One answer (`struct rdma_addrinfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaAddrInfo {
    /// Where to bind: set for passive answers.
    pub src: Option<SocketAddr>,
    /// Where to connect: set for active answers.
    pub dst: Option<SocketAddr>,
    /// The port space.
    pub port_space: PortSpace,
    /// The QP type that port space takes (RC for TCP, UD for UDP/IPoIB).
    pub qp_type: QpType,
}

/// Resolves `node` (a host name or an address; `None` with `passive`: any
/// address) and `service` (a port number; `None`: 0) into rdma_cm
/// addresses, as `rdma_getaddrinfo` does. An unknown name, a name with
/// `numeric_host`, a service that is not a port number, or no node for an
/// active lookup are errors naming the input.
pub fn getaddrinfo(
    node: Option<&str>,
    service: Option<&str>,
    hints: &AddrHints,
) -> Result<Vec<RdmaAddrInfo>> {
    let port: u16 = match service {
        None => 0,
        Some(s) => s.parse().map_err(|_| {
            Error::invalid(format!(
                "rdma_getaddrinfo: service {s:?} is not a port number"
            ))
        })?,
    };
    let family_ok = |ip: &IpAddr| hints.ipv6.is_none_or(|v6| ip.is_ipv6() == v6);
    let addrs: Vec<SocketAddr> = match node {
        None if hints.passive => {
            let any: IpAddr = if hints.ipv6 == Some(true) {
                Ipv6Addr::UNSPECIFIED.into()
            } else {
                Ipv4Addr::UNSPECIFIED.into()
            };
            vec![SocketAddr::new(any, port)]
        }
        None => {
            return Err(Error::invalid(
                "rdma_getaddrinfo: an active lookup needs a node (host name or address)",
            ))
        }
        Some(n) => match n.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) if hints.numeric_host => {
                return Err(Error::invalid(format!(
                    "rdma_getaddrinfo: {n:?} is not a numeric address (numeric_host)"
                )))
            }
            Err(_) => (n, port)
                .to_socket_addrs()
                .map_err(|e| Error::Io {
                    what: format!("rdma_getaddrinfo: resolving host name {n:?}"),
                    source: e,
                })?
                .collect(),
        },
    };
    let qp_type = if hints.port_space == PortSpace::TCP || hints.port_space == PortSpace::IB {
        QpType::Rc
    } else {
        QpType::Ud
    };
    let out: Vec<RdmaAddrInfo> = addrs
        .into_iter()
        .filter(|a| family_ok(&a.ip()))
        .map(|a| RdmaAddrInfo {
            src: hints.passive.then_some(a),
            dst: (!hints.passive).then_some(a),
            port_space: hints.port_space,
            qp_type,
        })
        .collect();
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "rdma_getaddrinfo: {} has no address of the family asked for",
            node.unwrap_or("the node")
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_names_and_errors() {
        let active = AddrHints::default();
        let r = getaddrinfo(Some("10.77.0.1"), Some("7471"), &active).unwrap();
        assert_eq!(r[0].dst, Some("10.77.0.1:7471".parse().unwrap()));
        assert_eq!((r[0].src, r[0].qp_type), (None, QpType::Rc));
        let r = getaddrinfo(Some("localhost"), Some("1"), &active).unwrap();
        assert!(r.iter().all(|a| a.dst.unwrap().ip().is_loopback()), "{r:?}");
        let passive = AddrHints {
            passive: true,
            port_space: PortSpace::UDP,
            ..AddrHints::default()
        };
        let r = getaddrinfo(None, Some("7174"), &passive).unwrap();
        assert_eq!(r[0].src, Some("0.0.0.0:7174".parse().unwrap()));
        assert_eq!(r[0].qp_type, QpType::Ud);
        let numeric = AddrHints {
            numeric_host: true,
            ..AddrHints::default()
        };
        for (node, service, hints, why) in [
            (Some("localhost"), None, numeric, "not a numeric address"),
            (Some("10.0.0.1"), Some("http"), active, "not a port number"),
            (None, None, active, "needs a node"),
            (
                Some("10.0.0.1"),
                None,
                AddrHints {
                    ipv6: Some(true),
                    ..active
                },
                "no address of the family",
            ),
        ] {
            let e = getaddrinfo(node, service, &hints).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
        }
        assert!(getaddrinfo(Some("no-such-host.invalid"), None, &active).is_err());
    }
}
