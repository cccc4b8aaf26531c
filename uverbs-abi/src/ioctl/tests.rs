//! Tests of the ioctl framing and the attribute array builder.

use proptest::collection::vec;
use proptest::prelude::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::*;
use crate::verbs::{cmds, IbUverbsCreateCq, IbUverbsCreateCqResp, IB_USER_VERBS_CMD_CREATE_CQ};

#[test]
fn request_number() {
    assert_eq!(RDMA_VERBS_IOCTL, 0xC018_1B01);
    assert_eq!(core::mem::size_of::<IbUverbsIoctlHdr>(), 24);
    assert_eq!(core::mem::size_of::<IbUverbsAttr>(), 16);
}

/// The attribute array's bytes: header and attributes.
fn parse(bytes: &[u8]) -> (IbUverbsIoctlHdr, Vec<IbUverbsAttr>) {
    let (hdr, rest) = IbUverbsIoctlHdr::read_from_prefix(bytes).unwrap();
    let attrs = <[IbUverbsAttr]>::ref_from_bytes(rest).unwrap().to_vec();
    (hdr, attrs)
}

proptest! {
    #[test]
    fn length_is_24_plus_16_per_attribute_and_reserved_is_zero(
        n in 0usize..=12,
        object in any::<u16>(),
        method in any::<u16>(),
        driver in any::<u32>(),
    ) {
        let mut storage = [0xffu64; attr_buf_words(12)];
        let mut a = AttrArray::new(&mut storage, object, method, driver);
        for i in 0..n {
            a.u32_in(i as u16, i as u32);
        }
        let bytes = a.ioctl_buf().unwrap();
        prop_assert_eq!(bytes.len(), 24 + 16 * n);
        let (hdr, attrs) = parse(bytes);
        prop_assert_eq!(usize::from(hdr.length), bytes.len());
        prop_assert_eq!(usize::from(hdr.num_attrs), n);
        prop_assert_eq!((hdr.object_id, hdr.method_id, hdr.driver_id), (object, method, driver));
        prop_assert_eq!((hdr.reserved1, hdr.reserved2), (0, 0));
        for (i, at) in attrs.iter().enumerate() {
            prop_assert_eq!(at.attr_id, i as u16);
            prop_assert_eq!(at.attr_data, [0, 0]);
            prop_assert_eq!(at.flags, 0);
            prop_assert_eq!(at.len, 4);
            prop_assert_eq!(at.data, u64::from(i as u32));
        }
    }

    #[test]
    fn ptr_in_is_inline_up_to_8_bytes(data in vec(any::<u8>(), 0..40)) {
        let mut storage = [0u64; attr_buf_words(1)];
        let mut a = AttrArray::new(&mut storage, 0, 0, 0);
        a.ptr_in(1, &data);
        let addr = data.as_ptr() as u64;
        let bytes = a.ioctl_buf().unwrap();
        let (_, attrs) = parse(bytes);
        prop_assert_eq!(usize::from(attrs[0].len), data.len());
        if data.len() <= 8 {
            let mut inline = [0u8; 8];
            inline[..data.len()].copy_from_slice(&data);
            prop_assert_eq!(attrs[0].data.to_ne_bytes(), inline);
        } else {
            prop_assert_eq!(attrs[0].data, addr);
        }
    }

    #[test]
    fn overflow_is_an_error_not_a_panic(cap in 0usize..6, extra in 1usize..4) {
        let mut storage = vec![0u64; attr_buf_words(cap)];
        let mut a = AttrArray::new(&mut storage, 0, 0, 0);
        prop_assert_eq!(a.capacity(), cap);
        for i in 0..cap + extra {
            a.idr_new(i as u16);
        }
        prop_assert_eq!(a.len(), cap);
        prop_assert_eq!(a.error(), Some(AttrError::Full { capacity: cap }));
        prop_assert_eq!(a.ioctl_buf().unwrap_err(), AttrError::Full { capacity: cap });
    }
}

#[test]
fn the_8_byte_boundary() {
    let eight = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let nine = [9u8; 9];
    let mut storage = [0u64; attr_buf_words(3)];
    let mut a = AttrArray::new(&mut storage, 0, 0, 0);
    a.ptr_in(1, &eight).ptr_in(2, &nine).inline_in(3, &nine);
    assert_eq!(a.error(), Some(AttrError::TooLong { attr_id: 3, len: 9 }));
    assert_eq!(a.len(), 2);
    assert_eq!(a.get(1).unwrap().data, u64::from_ne_bytes(eight));
    assert_eq!(a.get(2).unwrap().data, nine.as_ptr() as u64);
    assert_eq!(a.get(2).unwrap().len, 9);
}

#[test]
fn bad_attributes_are_errors() {
    let big = vec![0u8; 70_000];
    let mut storage = [0u64; attr_buf_words(4)];
    let mut a = AttrArray::new(&mut storage, 0, 0, 0);
    a.ptr_in(5, &big);
    assert_eq!(
        a.error(),
        Some(AttrError::TooLong {
            attr_id: 5,
            len: 70_000
        })
    );

    let mut storage = [0u64; attr_buf_words(4)];
    let mut a = AttrArray::new(&mut storage, 0, 0, 0);
    a.idr_in(1, 3).idr_in(1, 4);
    assert_eq!(a.error(), Some(AttrError::Duplicate { attr_id: 1 }));
    assert!(a.ioctl_buf().is_err());

    let mut tiny = [0u64; 2];
    let mut a = AttrArray::new(&mut tiny, 0, 0, 0);
    a.idr_new(0);
    assert_eq!(a.ioctl_buf().unwrap_err(), AttrError::Full { capacity: 0 });
}

#[test]
fn written_back_handles_fds_and_valid_outputs_read_back() {
    let mut resp = [0u8; 4];
    let mut storage = [0u64; attr_buf_words(5)];
    let mut a = AttrArray::new(&mut storage, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 14);
    a.idr_new(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .mandatory()
        .u32_in(UVERBS_ATTR_CREATE_CQ_CQE, 255)
        .fd_in(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, -1)
        .ptr_out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &mut resp)
        .fd_new(UVERBS_ATTR_CREATE_CQ_EVENT_FD);
    let bytes = a.ioctl_buf().unwrap();
    assert_eq!(bytes.len(), 24 + 5 * 16);
    // Play the kernel: write the new handle and fd into `data`, mark the
    // output written.
    let at = |i: usize| 24 + 16 * i;
    bytes[at(0) + 8..at(0) + 16].copy_from_slice(&42u64.to_ne_bytes());
    bytes[at(4) + 8..at(4) + 16].copy_from_slice(&7i64.to_ne_bytes());
    let flags =
        u16::from_ne_bytes([bytes[at(3) + 4], bytes[at(3) + 5]]) | UVERBS_ATTR_F_VALID_OUTPUT;
    bytes[at(3) + 4..at(3) + 6].copy_from_slice(&flags.to_ne_bytes());

    assert_eq!(
        a.get(UVERBS_ATTR_CREATE_CQ_HANDLE).unwrap().flags,
        UVERBS_ATTR_F_MANDATORY
    );
    assert_eq!(a.get(UVERBS_ATTR_CREATE_CQ_CQE).unwrap().flags, 0);
    assert_eq!(
        a.get(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL)
            .unwrap()
            .data_s64(),
        -1
    );
    assert_eq!(a.new_handle(UVERBS_ATTR_CREATE_CQ_HANDLE), Some(42));
    assert_eq!(a.new_fd(UVERBS_ATTR_CREATE_CQ_EVENT_FD), Some(7));
    assert_eq!(a.output_valid(UVERBS_ATTR_CREATE_CQ_RESP_CQE), Some(true));
    assert_eq!(a.output_valid(UVERBS_ATTR_CREATE_CQ_FLAGS), None);
    let out = a.finish();
    assert_eq!(out.new_handle(UVERBS_ATTR_CREATE_CQ_HANDLE), Some(42));
    assert_eq!(out.new_fd(UVERBS_ATTR_CREATE_CQ_EVENT_FD), Some(7));
    assert_eq!(out.output_valid(UVERBS_ATTR_CREATE_CQ_RESP_CQE), Some(true));
    // The borrow of `resp` has ended.
    resp[0] = 1;
    assert_eq!(resp[0], 1);
}

#[test]
fn enum_and_const_and_udata() {
    let payload = [5u8; 12];
    let uhw = [1u8; 16];
    let mut uhw_out = [0u8; 24];
    let mut storage = [0u64; attr_buf_words(6)];
    let mut a = AttrArray::new(&mut storage, 0, 0, 0);
    a.enum_in(3, 2, &payload)
        .const_in(4, 0x1234)
        .uhw_in(&[])
        .uhw_in(&uhw)
        .uhw_out(&mut uhw_out);
    assert_eq!(a.len(), 4, "empty udata is left out");
    let e = a.get(3).unwrap();
    assert_eq!((e.elem_id(), e.attr_data[1], e.len), (2, 0, 12));
    let c = a.get(4).unwrap();
    assert_eq!((c.len, c.data), (8, 0x1234));
    assert_eq!(a.get(UVERBS_ATTR_UHW_IN).unwrap().len, 16);
    assert_eq!(a.get(UVERBS_ATTR_UHW_OUT).unwrap().len, 24);
    assert_eq!(a.output_valid(UVERBS_ATTR_UHW_OUT), Some(false));
}

#[test]
fn invoke_write_tunnels_a_write_command() {
    let req = IbUverbsCreateCq {
        cqe: 16,
        comp_channel: -1,
        ..IbUverbsCreateCq::new_zeroed()
    };
    let req_addr = req.as_bytes().as_ptr() as u64;
    let mut resp = IbUverbsCreateCqResp::new_zeroed();
    let udata_in = [0u8; 8];
    let mut udata_out = [0u8; 16];
    let mut storage = [0u64; attr_buf_words(5)];
    let mut a = AttrArray::invoke_write::<cmds::CreateCq>(
        &mut storage,
        RdmaDriverId::RXE.0,
        &req,
        &mut resp,
        &udata_in,
        &mut udata_out,
    );
    let bytes = a.ioctl_buf().unwrap();
    let (hdr, attrs) = parse(bytes);
    assert_eq!(
        (hdr.object_id, hdr.method_id),
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE)
    );
    assert_eq!(hdr.driver_id, 14);
    assert_eq!(attrs.len(), 5);
    assert_eq!(attrs[0].attr_id, UVERBS_ATTR_WRITE_CMD);
    assert_eq!(attrs[0].data, u64::from(IB_USER_VERBS_CMD_CREATE_CQ));
    assert_eq!(attrs[0].flags, UVERBS_ATTR_F_MANDATORY);
    assert_eq!(
        (attrs[1].attr_id, attrs[1].len, attrs[1].data),
        (UVERBS_ATTR_CORE_IN, 32, req_addr)
    );
    assert_eq!((attrs[2].attr_id, attrs[2].len), (UVERBS_ATTR_CORE_OUT, 8));
    assert_eq!((attrs[3].attr_id, attrs[3].len), (UVERBS_ATTR_UHW_IN, 8));
    assert_eq!((attrs[4].attr_id, attrs[4].len), (UVERBS_ATTR_UHW_OUT, 16));
}

#[test]
fn gid_entry_bytes_are_in_memory_order() {
    let mut e = IbUverbsGidEntry::new_zeroed();
    e.as_mut_bytes()[..16].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(e.gid_bytes()[0], 0xfe);
    assert_eq!(e.gid_bytes()[15], 8);
    assert_eq!(format!("{:?}", RdmaDriverId::RXE), "RDMA_DRIVER_RXE");
    assert_eq!(RdmaDriverId(9).name(), Some("RDMA_DRIVER_I40IW"));
}
