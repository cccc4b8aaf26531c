//! The text of the sysfs attributes the verbs ABI leaves to sysfs
//! (`Documentation/ABI/stable/sysfs-class-infiniband`): device discovery
//! where RDMA netlink is missing (`/sys/class/infiniband_verbs/uverbsN`),
//! and the GID and P_Key tables where the ioctl methods are
//! (`/sys/class/infiniband/DEV/ports/P/...`).
//!
//! Each function reads one attribute's text as the kernel prints it
//! (trailing newline allowed) and returns `None` for anything else, never
//! panicking: the text is the kernel's word, and untrusted like the rest.

use crate::ioctl::IbUverbsGidType;

/// A GUID as `node_guid` and `sys_image_guid` print it
/// (`xxxx:xxxx:xxxx:xxxx`): the big-endian number the text spells.
pub fn guid(s: &str) -> Option<u64> {
    let hex: String = s.trim().split(':').collect();
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

/// A GID as `ports/P/gids/I` prints it (`fe80:0000:…:3456`, eight groups
/// of four hex digits): its 16 bytes in wire order.
pub fn gid(s: &str) -> Option<[u8; 16]> {
    let hex: String = s.trim().split(':').collect();
    // ASCII only: the byte slicing below must not cut a character.
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(g)
}

/// A P_Key as `ports/P/pkeys/I` prints it (`0xffff`).
pub fn pkey(s: &str) -> Option<u16> {
    u16::from_str_radix(s.trim().strip_prefix("0x")?, 16).ok()
}

/// A device number as `dev` prints it (`231:192`): `(major, minor)`.
pub fn dev_t(s: &str) -> Option<(u32, u32)> {
    let (major, minor) = s.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The number of a `node_type` (`1: CA`): an `RDMA_NODE_*` value.
pub fn node_type(s: &str) -> Option<u32> {
    s.split(':').next()?.trim().parse().ok()
}

/// A GID's type as `ports/P/gid_attrs/types/I` prints it (the kernel's
/// `gid_type_str`): `RoCE v2`, or `IB/RoCE v1`, which is IB on an
/// InfiniBand port (`ib_port`) and RoCE v1 on an Ethernet one.
pub fn gid_type(s: &str, ib_port: bool) -> Option<IbUverbsGidType> {
    match s.trim() {
        "RoCE v2" => Some(IbUverbsGidType::ROCE_V2),
        "IB/RoCE v1" if ib_port => Some(IbUverbsGidType::IB),
        "IB/RoCE v1" => Some(IbUverbsGidType::ROCE_V1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_parse_as_sysfs_prints_them() {
        assert_eq!(guid("5054:00ff:fe12:3456\n"), Some(0x5054_00ff_fe12_3456));
        assert_eq!(guid("5054:00ff:fe12"), None);
        assert_eq!(guid("zzzz:00ff:fe12:3456"), None);
        // from_str_radix takes a sign; a GUID has none.
        assert_eq!(guid("+054:00ff:fe12:3456"), None);
    }

    #[test]
    fn gids_parse_and_bad_text_is_none() {
        let g = gid("fe80:0000:0000:0000:5054:00ff:fe12:3456\n").unwrap();
        assert_eq!(g[..2], [0xfe, 0x80]);
        assert_eq!(g[15], 0x56);
        assert_eq!(gid("fe80::1"), None);
        // A two-byte character among the 32 bytes used to panic ("byte
        // index … is not a char boundary").
        assert_eq!(gid("fé0:0000:0000:0000:5054:00ff:fe12:345"), None);
        assert_eq!(gid(&"é".repeat(16)), None);
    }

    #[test]
    fn pkeys_device_numbers_and_node_types() {
        assert_eq!(pkey("0xffff\n"), Some(0xffff));
        assert_eq!(pkey("0x0001"), Some(1));
        assert_eq!(pkey("ffff"), None);
        assert_eq!(pkey("0x1ffff"), None);
        assert_eq!(pkey("0xé"), None);
        assert_eq!(dev_t("231:192\n"), Some((231, 192)));
        assert_eq!(dev_t("231"), None);
        assert_eq!(dev_t("231:x"), None);
        assert_eq!(node_type("1: CA\n"), Some(1));
        assert_eq!(node_type("4: RNIC"), Some(4));
        assert_eq!(node_type("CA"), None);
    }

    #[test]
    fn gid_types_follow_the_port() {
        assert_eq!(gid_type("RoCE v2\n", false), Some(IbUverbsGidType::ROCE_V2));
        assert_eq!(gid_type("IB/RoCE v1", true), Some(IbUverbsGidType::IB));
        assert_eq!(
            gid_type("IB/RoCE v1", false),
            Some(IbUverbsGidType::ROCE_V1)
        );
        assert_eq!(gid_type("RoCE v3", false), None);
    }
}
