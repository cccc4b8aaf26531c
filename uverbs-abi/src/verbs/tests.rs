//! Tests of the write() framing: every command type round-trips through
//! its bytes (proptest), the extended framing arithmetic holds, and a few
//! frames are checked byte for byte.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::cmds::{self, ExWriteVisitor, WriteVisitor};
use super::*;

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Header + core request + udata in parse back into the same header,
/// request (with the response address filled in) and udata.
struct WriteRoundTrip(Vec<String>);

impl WriteVisitor for WriteRoundTrip {
    fn visit<C: WriteCmd>(&mut self, name: &'static str) {
        let req_len = core::mem::size_of::<C::Req>();
        let resp_len = core::mem::size_of::<C::Resp>();
        let strategy = (
            vec(any::<u8>(), req_len),
            (0usize..32).prop_flat_map(|w| vec(any::<u8>(), w * 4)),
            any::<u64>(),
            0usize..64,
        );
        let result = runner().run(&strategy, |(req_bytes, udata, response, out_words)| {
            let req = C::Req::read_from_bytes(&req_bytes).expect("any bytes are a request");
            let bytes = encode_write_vec::<C>(&req, &udata, response, out_words * 4)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(bytes.len(), 8 + req_len + udata.len());
            prop_assert_eq!(bytes.len(), write_len::<C>(udata.len()));
            let p = parse_write::<C>(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(p.hdr.command, C::CMD);
            prop_assert_eq!(usize::from(p.hdr.in_words) * 4, bytes.len());
            prop_assert_eq!(usize::from(p.hdr.out_words) * 4, resp_len + out_words * 4);
            let mut want = req_bytes.clone();
            if resp_len != 0 {
                want[..8].copy_from_slice(&response.to_ne_bytes());
            }
            prop_assert_eq!(p.req.as_bytes(), &want[..]);
            prop_assert_eq!(p.udata_in, &udata[..]);
            Ok(())
        });
        if let Err(e) = result {
            self.0.push(format!("{name}: {e}"));
        }
    }
}

/// The same for extended commands, with the framing arithmetic of the
/// kernel's `verify_hdr()`.
struct ExRoundTrip(Vec<String>);

impl ExWriteVisitor for ExRoundTrip {
    fn visit<C: ExWriteCmd>(&mut self, name: &'static str) {
        let req_len = core::mem::size_of::<C::Req>();
        let resp_len = core::mem::size_of::<C::Resp>();
        let strategy = (
            vec(any::<u8>(), req_len),
            (0usize..16).prop_flat_map(|w| vec(any::<u8>(), w * 8)),
            1u64..,
            0usize..16,
        );
        let result = runner().run(&strategy, |(req_bytes, udata, response, out_words)| {
            let req = C::Req::read_from_bytes(&req_bytes).expect("any bytes are a request");
            let bytes = encode_ex_write_vec::<C>(&req, &udata, response, out_words * 8)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let p = parse_ex_write::<C>(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(p.hdr.command, C::CMD | IB_USER_VERBS_CMD_FLAG_EXTENDED);
            prop_assert_eq!(usize::from(p.hdr.in_words) * 8, req_len);
            prop_assert_eq!(usize::from(p.hdr.out_words) * 8, resp_len);
            prop_assert_eq!(usize::from(p.ex.provider_in_words) * 8, udata.len());
            prop_assert_eq!(usize::from(p.ex.provider_out_words), out_words);
            prop_assert_eq!(
                bytes.len(),
                24 + (usize::from(p.hdr.in_words) + usize::from(p.ex.provider_in_words)) * 8
            );
            let answers = resp_len + out_words * 8 != 0;
            prop_assert_eq!(p.ex.response, if answers { response } else { 0 });
            prop_assert_eq!(p.ex.cmd_hdr_reserved, 0);
            prop_assert_eq!(p.req.as_bytes(), &req_bytes[..]);
            prop_assert_eq!(p.udata_in, &udata[..]);
            Ok(())
        });
        if let Err(e) = result {
            self.0.push(format!("{name}: {e}"));
        }
    }
}

#[test]
fn every_write_command_round_trips() {
    let mut v = WriteRoundTrip(Vec::new());
    cmds::visit_write(&mut v);
    assert!(v.0.is_empty(), "{}", v.0.join("\n"));
}

#[test]
fn every_extended_command_round_trips() {
    let mut v = ExRoundTrip(Vec::new());
    cmds::visit_ex_write(&mut v);
    assert!(v.0.is_empty(), "{}", v.0.join("\n"));
}

/// A command answers exactly when its request begins with `response`
/// (what `encode_write` relies on), and every command number is distinct.
struct ResponseMember {
    layouts: Vec<crate::layout::StructLayout>,
    seen: Vec<(u32, &'static str)>,
    bad: Vec<String>,
}

impl WriteVisitor for ResponseMember {
    fn visit<C: WriteCmd>(&mut self, name: &'static str) {
        let req = core::any::type_name::<C::Req>()
            .rsplit("::")
            .next()
            .unwrap_or("");
        let Some(l) = self.layouts.iter().find(|l| l.rust == req) else {
            self.bad.push(format!("{name}: {req} has no layout"));
            return;
        };
        let starts_with_response = l.fields.first() == Some(&("response", 0));
        if starts_with_response != (core::mem::size_of::<C::Resp>() != 0) {
            self.bad.push(format!(
                "{name}: response member and response type disagree"
            ));
        }
        if let Some((_, other)) = self.seen.iter().find(|(c, _)| *c == C::CMD) {
            self.bad
                .push(format!("{name} and {other} share command {}", C::CMD));
        }
        self.seen.push((C::CMD, name));
    }
}

#[test]
fn commands_with_a_response_begin_with_the_response_address() {
    let mut v = ResponseMember {
        layouts: layouts(),
        seen: Vec::new(),
        bad: Vec::new(),
    };
    cmds::visit_write(&mut v);
    assert!(v.bad.is_empty(), "{}", v.bad.join("\n"));
    assert!(v.seen.len() >= 35);
}

/// Every command's name is its C name's tail, and no two commands, plain
/// or extended, share one (errors name the command by it).
struct Names(Vec<&'static str>);

impl WriteVisitor for Names {
    fn visit<C: WriteCmd>(&mut self, _: &'static str) {
        self.0.push(C::NAME);
    }
}

impl ExWriteVisitor for Names {
    fn visit<C: ExWriteCmd>(&mut self, _: &'static str) {
        self.0.push(C::NAME);
    }
}

#[test]
fn command_names_come_from_the_c_names_and_are_distinct() {
    assert_eq!(cmds::DeallocMw::NAME, "DEALLOC_MW");
    assert_eq!(cmds::GetContext::NAME, "GET_CONTEXT");
    assert_eq!(cmds::PostSrqRecv::NAME, "POST_SRQ_RECV");
    assert_eq!(cmds::ExQueryDevice::NAME, "QUERY_DEVICE_EX");
    assert_eq!(cmds::ExCreateQp::NAME, "CREATE_QP_EX");
    let mut v = Names(Vec::new());
    cmds::visit_write(&mut v);
    cmds::visit_ex_write(&mut v);
    let n = v.0.len();
    v.0.sort_unstable();
    v.0.dedup();
    assert_eq!(v.0.len(), n, "{:?}", v.0);
    assert!(v.0.iter().all(|s| !s.is_empty() && !s.starts_with("IB_")));
}

#[test]
fn rxe_send_doorbell_is_eight_words_in_one_out() {
    let req = IbUverbsPostSend {
        response: 0,
        qp_handle: 7,
        wr_count: 0,
        sge_count: 0,
        wqe_size: core::mem::size_of::<IbUverbsSendWr>() as u32,
    };
    let mut buf = [0u8; 64];
    let n = encode_write::<cmds::PostSend>(&mut buf, &req, &[], 0x1122_3344_5566_7788, 0).unwrap();
    assert_eq!(n, 32);
    let hdr = IbUverbsCmdHdr::read_from_bytes(&buf[..8]).unwrap();
    assert_eq!(
        hdr,
        IbUverbsCmdHdr {
            command: IB_USER_VERBS_CMD_POST_SEND,
            in_words: 8,
            out_words: 1,
        }
    );
    assert_eq!(&buf[8..16], &0x1122_3344_5566_7788u64.to_ne_bytes());
    assert_eq!(&buf[16..20], &7u32.to_ne_bytes());
    assert_eq!(&buf[28..32], &56u32.to_ne_bytes());
}

#[test]
fn extended_query_device_frame() {
    let req = IbUverbsExQueryDevice::new_zeroed();
    let v = encode_ex_write_vec::<cmds::ExQueryDevice>(&req, &[], 0x1000, 0).unwrap();
    assert_eq!(v.len(), 24 + 8);
    let hdr = IbUverbsCmdHdr::read_from_bytes(&v[..8]).unwrap();
    assert_eq!(hdr.command, 0x8000_0001);
    assert_eq!(hdr.in_words, 1);
    assert_eq!(hdr.out_words, 304 / 8);
    let ex = IbUverbsExCmdHdr::read_from_bytes(&v[8..24]).unwrap();
    assert_eq!(ex.response, 0x1000);
    assert_eq!((ex.provider_in_words, ex.provider_out_words), (0, 0));
}

#[test]
fn modify_cq_has_no_response_address() {
    let req = IbUverbsExModifyCq::new_zeroed();
    let v = encode_ex_write_vec::<cmds::ExModifyCq>(&req, &[], 0xdead_0000, 0).unwrap();
    let p = parse_ex_write::<cmds::ExModifyCq>(&v).unwrap();
    assert_eq!(p.ex.response, 0);
    assert_eq!(p.hdr.out_words, 0);
}

#[test]
fn framing_errors_are_errors() {
    let req = IbUverbsCreateCq::new_zeroed();
    assert!(matches!(
        encode_write_vec::<cmds::CreateCq>(&req, &[0; 3], 0, 0),
        Err(FrameError::Unaligned { unit: 4, .. })
    ));
    assert!(matches!(
        encode_write_vec::<cmds::CreateCq>(&req, &[], 0, 6),
        Err(FrameError::Unaligned { unit: 4, .. })
    ));
    assert!(matches!(
        encode_write_vec::<cmds::CreateCq>(&req, &vec![0; 4 * 70_000], 0, 0),
        Err(FrameError::TooLong { .. })
    ));
    let mut small = [0u8; 16];
    assert!(matches!(
        encode_write::<cmds::CreateCq>(&mut small, &req, &[], 0, 0),
        Err(FrameError::BadLength {
            expected: 40,
            got: 16
        })
    ));
    let ex = IbUverbsExCreateCq::new_zeroed();
    assert!(matches!(
        encode_ex_write_vec::<cmds::ExCreateCq>(&ex, &[0; 4], 0, 0),
        Err(FrameError::Unaligned { unit: 8, .. })
    ));
    assert!(matches!(
        encode_ex_write_vec::<cmds::ExCreateCq>(&ex, &[], 0, 12),
        Err(FrameError::Unaligned { unit: 8, .. })
    ));
    // Parsing checks what the kernel checks.
    let mut v = encode_write_vec::<cmds::CreateCq>(&req, &[], 0, 0).unwrap();
    assert!(matches!(
        parse_write::<cmds::ResizeCq>(&v),
        Err(FrameError::WrongCommand { .. })
    ));
    v.extend_from_slice(&[0; 4]);
    assert!(matches!(
        parse_write::<cmds::CreateCq>(&v),
        Err(FrameError::BadLength { .. })
    ));
    let mut e = encode_ex_write_vec::<cmds::ExCreateCq>(&ex, &[], 0, 0).unwrap();
    e[20] = 1; // cmd_hdr_reserved
    assert_eq!(
        parse_ex_write::<cmds::ExCreateCq>(&e).unwrap_err(),
        FrameError::Reserved
    );
}

#[test]
fn sizes_the_kernel_expects() {
    use core::mem::{align_of, size_of};
    assert_eq!(size_of::<IbUverbsQueryDeviceResp>(), 176);
    assert_eq!(size_of::<IbUverbsExQueryDeviceResp>(), 304);
    assert_eq!(size_of::<IbUverbsQueryPortResp>(), 40);
    assert_eq!(size_of::<IbUverbsWc>(), 48);
    assert_eq!(size_of::<IbUverbsQpAttr>(), 144);
    assert_eq!(size_of::<IbUverbsModifyQp>(), 112);
    assert_eq!(size_of::<IbUverbsQueryQpResp>(), 128);
    assert_eq!(size_of::<IbUverbsSendWr>(), 56);
    assert_eq!(size_of::<IbUverbsCreateCqResp>(), 8);
    assert_eq!(align_of::<IbUverbsCreateCqResp>(), 8);
    assert_eq!(size_of::<IbUverbsAllocPdResp>(), 4);
}

#[test]
fn send_wr_union_variants() {
    let rdma = IbUverbsSendWrRdma {
        remote_addr: 0x1000,
        rkey: 0x42,
        reserved: 0,
    };
    let wr = IbUverbsSendWrWr::from_rdma(rdma);
    assert_eq!(wr.rdma(), rdma);
    assert_eq!(&wr.raw[16..], &[0; 16]);
    let atomic = IbUverbsSendWrAtomic {
        remote_addr: 1,
        compare_add: 2,
        swap: 3,
        rkey: 4,
        reserved: 0,
    };
    assert_eq!(IbUverbsSendWrWr::from_atomic(atomic).atomic(), atomic);
    let ud = IbUverbsSendWrUd {
        ah: 9,
        remote_qpn: 0x11,
        remote_qkey: 0x1111_1111,
        reserved: 0,
    };
    assert_eq!(IbUverbsSendWrWr::from_ud(ud).ud(), ud);
    assert_eq!(post_tail_len(2, 56, 3), Some(2 * 56 + 3 * 16));
    assert_eq!(
        post_tail_len(u32::MAX, u32::MAX, u32::MAX),
        None,
        "overflow"
    );
}

#[test]
fn values_print_their_c_names() {
    assert_eq!(
        format!("{:?}", IbWcStatus::WR_FLUSH_ERR),
        "IB_WC_WR_FLUSH_ERR"
    );
    assert_eq!(format!("{:?}", IbWcStatus(99)), "IbWcStatus(99)");
    assert_eq!(IbWcStatus(99).name(), None);
    assert_eq!(
        format!("{:?}", IbWcOpcode::RDMA_READ),
        "IB_UVERBS_WC_RDMA_READ"
    );
    assert!(IbWcOpcode::RECV_RDMA_WITH_IMM.is_recv());
    assert!(!IbWcOpcode::SEND.is_recv());
    assert_eq!(IbEventType::from(4u32), IbEventType::COMM_EST);
    assert_eq!(IbMtu::MTU_4096.bytes(), Some(4096));
    assert_eq!(IbMtu::MTU_256.bytes(), Some(256));
    assert_eq!(IbMtu(0).bytes(), None);
    let wc = IbUverbsWc {
        ex: 0x1234_5678u32.to_be(),
        wc_flags: (IbWcFlags::WITH_IMM | IbWcFlags::GRH).bits() | 1 << 20,
        ..IbUverbsWc::new_zeroed()
    };
    assert_eq!(wc.imm_data(), 0x1234_5678);
    assert!(wc.flags().contains(IbWcFlags::WITH_IMM));
    assert_eq!(
        wc.flags().bits() & 1 << 20,
        1 << 20,
        "unknown bits are kept"
    );
    assert_eq!(
        IbQpAttrMask::all().bits() & !((IB_USER_LEGACY_LAST_QP_ATTR_MASK << 1) - 1),
        IB_USER_LAST_QP_ATTR_MASK
    );
}

#[test]
fn responses_read_from_the_front_of_the_buffer() {
    let resp = IbUverbsCreateCqResp {
        cq_handle: 3,
        cqe: 255,
    };
    let mut buf = resp.as_bytes().to_vec();
    buf.extend_from_slice(&[0xaa; 16]); // driver udata out
    assert_eq!(read_resp::<IbUverbsCreateCqResp>(&buf), Some(resp));
    assert_eq!(read_resp::<IbUverbsCreateCqResp>(&buf[..4]), None);
}
