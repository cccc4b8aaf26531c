//! Construct/parse pairs, malformed inputs, and property tests: every
//! message the builder writes parses back to the same attributes, and no
//! byte string makes the parser panic.

use super::super::*;
use super::*;
use proptest::prelude::*;

fn nldev(op: u16) -> u16 {
    rdma_nl_get_type(RDMA_NL_NLDEV, op)
}

/// A kernel-style reply message: header, then raw payload.
fn reply(nlmsg_type: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    v.extend_from_slice(&nlmsg_type.to_ne_bytes());
    v.extend_from_slice(&flags.to_ne_bytes());
    v.extend_from_slice(&seq.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes());
    v.extend_from_slice(payload);
    while v.len() % 4 != 0 {
        v.push(0);
    }
    v
}

fn error_payload(errno: i32, req: &NlMsgHdr) -> Vec<u8> {
    let mut p = (-errno).to_ne_bytes().to_vec();
    p.extend_from_slice(zerocopy::IntoBytes::as_bytes(req));
    p
}

#[test]
fn request_bytes_are_exact() {
    let msg = NlMsgBuilder::new(
        Vec::new(),
        nldev(RDMA_NLDEV_CMD_GET_CHARDEV),
        NLM_F_REQUEST,
        7,
    )
    .u32(RDMA_NLDEV_ATTR_DEV_INDEX, 3)
    .str(RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
    .finish()
    .unwrap();
    let mut want = Vec::new();
    want.extend_from_slice(&36u32.to_ne_bytes());
    want.extend_from_slice(&((5u16 << 10) | 15).to_ne_bytes());
    want.extend_from_slice(&1u16.to_ne_bytes());
    want.extend_from_slice(&7u32.to_ne_bytes());
    want.extend_from_slice(&0u32.to_ne_bytes());
    want.extend_from_slice(&8u16.to_ne_bytes());
    want.extend_from_slice(&1u16.to_ne_bytes());
    want.extend_from_slice(&3u32.to_ne_bytes());
    want.extend_from_slice(&11u16.to_ne_bytes());
    want.extend_from_slice(&69u16.to_ne_bytes());
    want.extend_from_slice(b"uverbs\0\0");
    assert_eq!(msg, want);
}

#[test]
fn fixed_buffer_reports_overflow_and_appends_after_existing_bytes() {
    let mut small = [0u8; 20];
    let err = NlMsgBuilder::new(FixedBuf::new(&mut small), 1, 0, 0)
        .u64(RDMA_NLDEV_ATTR_NODE_GUID, 1)
        .finish()
        .unwrap_err();
    assert_eq!(err, NlBuildError::NoSpace { need: 28, have: 20 });

    let mut v = vec![0xaa];
    NlMsgBuilder::new(&mut v, 1, 0, 0)
        .u8(RDMA_NLDEV_ATTR_LMC, 2)
        .finish()
        .unwrap();
    assert_eq!(v.len(), 4 + 16 + 8);
    let (m, rest) = NlMsg::new_checked(&v[4..]).unwrap();
    assert!(rest.is_empty());
    assert_eq!(
        m.attrs().unwrap().find(RDMA_NLDEV_ATTR_LMC).unwrap().u8(),
        Some(2)
    );

    let err = NlMsgBuilder::new(Vec::new(), 1, 0, 0)
        .str(2, "a\0b")
        .finish()
        .unwrap_err();
    assert_eq!(err, NlBuildError::InteriorNul);
    let err = NlMsgBuilder::new(Vec::new(), 1, 0, 0)
        .attr(2, &[0; 70000])
        .finish()
        .unwrap_err();
    assert_eq!(err, NlBuildError::AttrTooLong(70000));
}

#[test]
fn truncated_and_overlong_attributes_are_errors() {
    // nla_len 12 but only 8 bytes.
    let b = [12u8, 0, 1, 0, 1, 2, 3, 4];
    assert_eq!(
        Attrs::new_checked(&b).unwrap_err(),
        NlParseError::BadAttrLen { len: 12, have: 8 }
    );
    // nla_len below the header.
    let b = [3u8, 0, 1, 0];
    assert_eq!(
        Attrs::new_checked(&b).unwrap_err(),
        NlParseError::BadAttrLen { len: 3, have: 4 }
    );
    // A header cut short after a good attribute.
    let b = [5u8, 0, 1, 0, 9, 0, 0, 0, 8, 0];
    assert_eq!(
        Attrs::new_checked(&b).unwrap_err(),
        NlParseError::BadAttrLen { len: 0, have: 2 }
    );
    // The last attribute may omit its padding.
    let b = [5u8, 0, 14, 0, 1];
    let a = Attrs::new_checked(&b)
        .unwrap()
        .find(RDMA_NLDEV_ATTR_DEV_NODE_TYPE)
        .unwrap();
    assert_eq!(a.u8(), Some(1));
    assert_eq!(a.u32(), None, "accessors check the exact width");
    // Message length beyond the datagram, and below the header.
    let mut m = reply(nldev(1), 0, 1, &[]);
    m[0] = 40;
    assert_eq!(
        NlMsg::new_checked(&m).unwrap_err(),
        NlParseError::BadMsgLen { len: 40, have: 16 }
    );
    m[0] = 8;
    assert_eq!(
        NlMsg::new_checked(&m).unwrap_err(),
        NlParseError::BadMsgLen { len: 8, have: 16 }
    );
    assert_eq!(
        NlMsg::new_checked(&m[..9]).unwrap_err(),
        NlParseError::Truncated { need: 16, have: 9 }
    );
}

#[test]
fn dump_across_datagrams_ends_at_done() {
    let dev = |idx: u32, name: &str| {
        NlMsgBuilder::new(Vec::new(), nldev(RDMA_NLDEV_CMD_GET), NLM_F_MULTI, 9)
            .u32(RDMA_NLDEV_ATTR_DEV_INDEX, idx)
            .str(RDMA_NLDEV_ATTR_DEV_NAME, name)
            .u64(RDMA_NLDEV_ATTR_NODE_GUID, 0x1122_3344_5566_7788)
            .finish()
            .unwrap()
    };
    let mut first = dev(0, "rxe0");
    first.extend(reply(nldev(1), NLM_F_MULTI, 8, &[])); // stale sequence: skipped
    let mut second = dev(1, "mlx5_0");
    second.extend(reply(NLMSG_DONE, NLM_F_MULTI, 9, &0i32.to_ne_bytes()));

    let mut r = ReplyReader::new(9, NLM_F_REQUEST | NLM_F_DUMP);
    let a = r.feed(&first).unwrap();
    assert_eq!(a.len(), 1);
    assert!(!r.is_done());
    let b = r.feed(&second).unwrap();
    assert!(r.is_done());
    let attrs = b[0].attrs().unwrap();
    assert_eq!(
        attrs.find(RDMA_NLDEV_ATTR_DEV_NAME).unwrap().str(),
        Some("mlx5_0")
    );
    assert_eq!(
        attrs.find(RDMA_NLDEV_ATTR_DEV_INDEX).unwrap().u32(),
        Some(1)
    );
    assert_eq!(
        attrs.find(RDMA_NLDEV_ATTR_NODE_GUID).unwrap().u64(),
        Some(0x1122_3344_5566_7788)
    );
    assert!(!r.interrupted());
}

#[test]
fn errors_carry_errno_and_extended_ack() {
    let req = NlMsgHdr {
        nlmsg_len: 24,
        nlmsg_type: nldev(3),
        nlmsg_flags: 5,
        nlmsg_seq: 4,
        nlmsg_pid: 0,
    };
    // Plain error, original request echoed (8 payload bytes).
    let mut p = error_payload(1, &req);
    p.extend_from_slice(&[0; 8]);
    let e = reply(NLMSG_ERROR, 0, 4, &p);
    let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_ACK);
    assert_eq!(
        r.feed(&e),
        Err(NlReplyError::Kernel {
            errno: 1,
            message: None
        })
    );
    assert!(r.is_done());

    // Capped, with TLVs.
    let mut p = error_payload(95, &req);
    let tlvs = NlMsgBuilder::new(Vec::new(), 0, 0, 0)
        .str(NLMSGERR_ATTR_MSG, "Unknown device type")
        .u32(NLMSGERR_ATTR_OFFS, 20)
        .finish()
        .unwrap();
    p.extend_from_slice(&tlvs[16..]);
    let e = reply(NLMSG_ERROR, NLM_F_CAPPED | NLM_F_ACK_TLVS, 4, &p);
    let (m, _) = NlMsg::new_checked(&e).unwrap();
    match NlMessage::classify(m).unwrap() {
        NlMessage::Error {
            errno,
            message,
            bad_attr_offset,
        } => {
            assert_eq!(errno, 95);
            assert_eq!(message, Some("Unknown device type"));
            assert_eq!(bad_attr_offset, Some(20));
        }
        other => panic!("{other:?}"),
    }

    // An ack ends a non-dump request; a short NLMSG_ERROR is malformed.
    let ack = reply(NLMSG_ERROR, NLM_F_CAPPED, 4, &error_payload(0, &req));
    let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_ACK);
    assert_eq!(r.feed(&ack).unwrap().len(), 0);
    assert!(r.is_done());
    let short = reply(NLMSG_ERROR, 0, 4, &[0; 8]);
    let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_ACK);
    assert_eq!(
        r.feed(&short),
        Err(NlReplyError::Malformed(NlParseError::ShortError {
            have: 8
        }))
    );
    // A dump that ends in error.
    let done = reply(NLMSG_DONE, NLM_F_MULTI, 4, &(-19i32).to_ne_bytes());
    let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_DUMP);
    assert_eq!(
        r.feed(&done),
        Err(NlReplyError::Kernel {
            errno: 19,
            message: None
        })
    );
}

/// An error code the kernel never sends (`i32::MIN`, whose negation
/// overflows; a positive one; one past the errno range) is malformed, not
/// a wrapped errno, in `NLMSG_ERROR` and `NLMSG_DONE` alike.
#[test]
fn error_codes_outside_the_errno_range_are_malformed() {
    let req = NlMsgHdr {
        nlmsg_len: 16,
        nlmsg_type: nldev(1),
        nlmsg_flags: 5,
        nlmsg_seq: 4,
        nlmsg_pid: 0,
    };
    for code in [i32::MIN, -4096, 1, 5, i32::MAX] {
        let mut p = code.to_ne_bytes().to_vec();
        p.extend_from_slice(zerocopy::IntoBytes::as_bytes(&req));
        let e = reply(NLMSG_ERROR, NLM_F_CAPPED, 4, &p);
        let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_ACK);
        let bad = NlReplyError::Malformed(NlParseError::BadErrorCode { code });
        assert_eq!(r.feed(&e), Err(bad.clone()), "{code}");
        let done = reply(NLMSG_DONE, NLM_F_MULTI, 4, &code.to_ne_bytes());
        let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(r.feed(&done), Err(bad), "{code}");
    }
    // The edges of the range are errnos.
    let done = reply(NLMSG_DONE, NLM_F_MULTI, 4, &(-4095i32).to_ne_bytes());
    let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_DUMP);
    assert_eq!(
        r.feed(&done),
        Err(NlReplyError::Kernel {
            errno: 4095,
            message: None
        })
    );
    let done = reply(NLMSG_DONE, NLM_F_MULTI, 4, &[]);
    let mut r = ReplyReader::new(4, NLM_F_REQUEST | NLM_F_DUMP);
    assert_eq!(r.feed(&done).unwrap().len(), 0);
    assert!(r.is_done());
}

#[test]
fn nested_attributes() {
    let inner = NlMsgBuilder::new(Vec::new(), 0, 0, 0)
        .u32(RDMA_NLDEV_ATTR_RES_LQPN, 17)
        .finish()
        .unwrap();
    let msg = NlMsgBuilder::new(Vec::new(), nldev(RDMA_NLDEV_CMD_RES_QP_GET), 0, 1)
        .attr(RDMA_NLDEV_ATTR_RES_QP | NLA_F_NESTED, &inner[16..])
        .finish()
        .unwrap();
    let (m, _) = NlMsg::new_checked(&msg).unwrap();
    let outer = m.attrs().unwrap().find(RDMA_NLDEV_ATTR_RES_QP).unwrap();
    assert!(outer.is_nested());
    assert_eq!(
        outer
            .nested()
            .unwrap()
            .find(RDMA_NLDEV_ATTR_RES_LQPN)
            .unwrap()
            .u32(),
        Some(17)
    );
}

#[derive(Debug, Clone)]
enum Value {
    U8(u8),
    U32(u32),
    U64(u64),
    Str(String),
    Bytes(Vec<u8>),
}

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<u32>().prop_map(Value::U32),
        any::<u64>().prop_map(Value::U64),
        "[a-z0-9_]{0,40}".prop_map(Value::Str),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::Bytes),
    ]
}

proptest! {
    #[test]
    fn build_then_parse_round_trips(
        attrs in proptest::collection::vec((1u16..=RDMA_NLDEV_ATTR_RES_SUBTYPE, any_value()), 0..24),
        seq in any::<u32>(),
        flags in any::<u16>(),
    ) {
        let mut b = NlMsgBuilder::new(Vec::new(), nldev(RDMA_NLDEV_CMD_GET), flags, seq);
        for (k, v) in &attrs {
            b = match v {
                Value::U8(x) => b.u8(*k, *x),
                Value::U32(x) => b.u32(*k, *x),
                Value::U64(x) => b.u64(*k, *x),
                Value::Str(s) => b.str(*k, s),
                Value::Bytes(d) => b.attr(*k, d),
            };
        }
        let bytes = b.finish().unwrap();
        prop_assert_eq!(bytes.len() % 4, 0);
        let (m, rest) = NlMsg::new_checked(&bytes).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(m.header().nlmsg_len as usize, bytes.len());
        prop_assert_eq!(m.header().nlmsg_seq, seq);
        prop_assert_eq!(m.header().nlmsg_flags, flags);
        let parsed: Vec<Attr<'_>> = m.attrs().unwrap().iter().collect();
        prop_assert_eq!(parsed.len(), attrs.len());
        for (a, (k, v)) in parsed.iter().zip(&attrs) {
            prop_assert_eq!(a.kind(), *k);
            match v {
                Value::U8(x) => prop_assert_eq!(a.u8(), Some(*x)),
                Value::U32(x) => prop_assert_eq!(a.u32(), Some(*x)),
                Value::U64(x) => prop_assert_eq!(a.u64(), Some(*x)),
                Value::Str(s) => {
                    prop_assert_eq!(a.str(), Some(s.as_str()));
                    prop_assert_eq!(a.data().len(), s.len() + 1);
                }
                Value::Bytes(d) => prop_assert_eq!(a.data(), d.as_slice()),
            }
        }
    }

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for m in NlMsgIter::new(&bytes) {
            let Ok(m) = m else { break };
            let _ = NlMessage::classify(m);
            if let Ok(attrs) = m.attrs() {
                for a in attrs {
                    let _ = (a.u8(), a.u16(), a.u32(), a.u64(), a.str(), a.nested().map(|n| n.iter().count()));
                }
            }
        }
        let _ = Attrs::new_checked(&bytes).map(|a| a.iter().count());
        let mut r = ReplyReader::new(0, NLM_F_DUMP);
        let _ = r.feed(&bytes);
    }

    #[test]
    fn arbitrary_payloads_in_valid_frames_never_panic(
        payload in proptest::collection::vec(any::<u8>(), 0..256),
        kind in prop_oneof![Just(NLMSG_ERROR), Just(NLMSG_DONE), Just(nldev(1))],
        flags in any::<u16>(),
    ) {
        let bytes = reply(kind, flags, 3, &payload);
        let mut r = ReplyReader::new(3, NLM_F_REQUEST | NLM_F_ACK);
        if let Ok(msgs) = r.feed(&bytes) {
            for m in msgs {
                if let Ok(a) = m.attrs() {
                    for x in a {
                        let _ = x.str();
                    }
                }
            }
        }
    }
}
