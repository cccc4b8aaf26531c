//! Memory the program owns, registered on rxe0: every buffer kind moves
//! data by SEND, RDMA WRITE and RDMA READ and comes back with the bytes the
//! device wrote; IOVA and zero-based MRs are addressed by a peer; huge
//! pages; every access flag, accepted or refused by name as the device
//! reports it; and a fork() while an MR is registered and in use.

mod common;

use common::rc::{contents, ok, pair, pattern, wait, Pair, RW};

use memmap2::{MmapMut, MmapOptions};
use rverbs::{
    Access, Errno, Error, Feature, Limit, Mr, MrMemory, RecvWr, Remote, SendOp, SendWr, WcOpcode,
    WcStatus,
};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// `mr` (of any kind, `len` bytes) receives a SEND, is the target of an
/// RDMA WRITE and the source of an RDMA READ, and is itself the source of a
/// SEND; every byte is checked each time. Returns the bytes it ends with.
fn exercise<B: MrMemory>(p: &mut Pair, mr: &Mr<B>, what: &str) -> Vec<u8> {
    let len = mr.len();
    let helper = p.pd.alloc_mr(len, RW).unwrap();

    // SEND from the helper into `mr`.
    let sent = pattern(len, 1);
    helper.write(0, &sent).unwrap();
    let rs = [mr.all().unwrap()];
    p.b.qp
        .post_recv(&[RecvWr {
            wr_id: 1,
            sges: &rs,
        }])
        .unwrap();
    let ss = [helper.all().unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(2, SendOp::Send, &ss)])
        .unwrap();
    ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::SEND);
    let r = wait(&mut p.b.cq, 1);
    ok(&r[0], WcOpcode::RECV);
    assert_eq!(r[0].byte_len as usize, len, "{what}");
    assert_eq!(contents(mr), sent, "{what}: received bytes");

    // RDMA WRITE into `mr` through its rkey and IOVA.
    let written = pattern(len, 2);
    helper.write(0, &written).unwrap();
    let remote = Remote {
        addr: mr.iova(),
        rkey: mr.rkey(),
    };
    p.a.qp
        .post_send(&[SendWr::new(3, SendOp::Write(remote), &ss)])
        .unwrap();
    ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::RDMA_WRITE);
    assert_eq!(contents(mr), written, "{what}: RDMA WRITE");

    // RDMA READ out of `mr`.
    helper.fill(0, len, 0).unwrap();
    p.a.qp
        .post_send(&[SendWr::new(4, SendOp::Read(remote), &ss)])
        .unwrap();
    ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::RDMA_READ);
    assert_eq!(contents(&helper), written, "{what}: RDMA READ");

    // `mr` as the local source of a SEND, its message built in place
    // through the atomic view (no copy, no unsafe).
    let cells = mr.cells(0, len).unwrap();
    let built = pattern(len, 3);
    for (c, b) in cells.iter().zip(&built) {
        c.store(*b, Relaxed);
    }
    helper.fill(0, len, 0).unwrap();
    let hr = [helper.all().unwrap()];
    p.a.qp
        .post_recv(&[RecvWr {
            wr_id: 5,
            sges: &hr,
        }])
        .unwrap();
    let ms = [mr.all().unwrap()];
    p.b.qp
        .post_send(&[SendWr::new(6, SendOp::Send, &ms)])
        .unwrap();
    ok(&wait(&mut p.b.cq, 1)[0], WcOpcode::SEND);
    ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::RECV);
    // Read the received copy without copying it out.
    let hc = helper.cells(0, len).unwrap();
    assert!(
        hc.iter().zip(&built).all(|(c, b)| c.load(Acquire) == *b),
        "{what}: SEND from an MR built in place"
    );
    built
}

#[test]
fn every_buffer_kind_moves_data_and_comes_back_with_it() {
    let mut p = pair();
    let len = 3 * 4096 + 123;

    // Vec<u8>: not page-aligned, heap memory.
    let mut v = vec![0u8; len + 7];
    v.truncate(len);
    let at = v.as_ptr();
    let mr = p.pd.register(v, RW).expect("register a Vec");
    assert_eq!(mr.iova(), at as u64, "an ordinary MR's IOVA is its address");
    let last = exercise(&mut p, &mr, "Vec");
    let v: Vec<u8> = mr.deregister().expect("the Vec back");
    assert_eq!(v.as_ptr(), at, "the same allocation");
    assert_eq!(v, last, "the Vec holds what the device wrote");

    // Box<[u8]>.
    let b: Box<[u8]> = vec![9u8; len].into_boxed_slice();
    let mr = p.pd.register(b, RW).expect("register a Box");
    let last = exercise(&mut p, &mr, "Box");
    let b: Box<[u8]> = mr.deregister().expect("the Box back");
    assert_eq!(&b[..], &last[..]);

    // An anonymous mapping.
    let m = MmapMut::map_anon(len).unwrap();
    let mr = p.pd.register(m, RW).expect("register an anonymous MmapMut");
    let last = exercise(&mut p, &mr, "anonymous MmapMut");
    let m = mr.deregister().expect("the mapping back");
    assert_eq!(&m[..], &last[..]);

    // A file in tmpfs, mapped shared: the device's writes reach the file.
    let path = format!("/dev/shm/rverbs-mr-{}", std::process::id());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    file.set_len(len as u64).unwrap();
    // SAFETY: the file is this test's own, not truncated while mapped.
    let m = unsafe { MmapMut::map_mut(&file) }.unwrap();
    let mr =
        p.pd.register(m, RW)
            .expect("register a shared tmpfs file mapping");
    let last = exercise(&mut p, &mr, "tmpfs file MmapMut");
    drop(mr.deregister().expect("the mapping back"));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        last,
        "the file holds the bytes"
    );

    // A file mapped privately (copy-on-write): the device writes the
    // process's copy, the file is untouched.
    std::fs::write(&path, vec![0x5a; len]).unwrap();
    // SAFETY: as above.
    let m = unsafe { MmapOptions::new().map_copy(&file) }.unwrap();
    let mr =
        p.pd.register(m, RW)
            .expect("register a private file mapping");
    let last = exercise(&mut p, &mr, "private file MmapMut");
    let m = mr.deregister().expect("the mapping back");
    assert_eq!(&m[..], &last[..]);
    assert_eq!(std::fs::read(&path).unwrap(), vec![0x5a; len]);
    std::fs::remove_file(&path).unwrap();

    // Memory rverbs does not own, under register_raw's contract.
    let mut raw = vec![0u8; len].into_boxed_slice();
    let ptr = raw.as_mut_ptr();
    // SAFETY: `raw` stays allocated and unmoved, and is not touched through
    // a reference, until deregister() below has returned.
    let mr = unsafe { p.pd.register_raw(ptr, len, RW) }.expect("register_raw");
    let last = exercise(&mut p, &mr, "register_raw");
    let gone: rverbs::Released = mr.deregister().expect("deregistered");
    assert_eq!((gone.ptr.as_ptr(), gone.len), (ptr, len));
    assert_eq!(&raw[..], &last[..]);
}

#[test]
fn huge_pages_are_used_and_running_out_says_how_to_reserve_more() {
    let mut p = pair();
    // 3 MiB rounds up to two 2 MiB pages of the 8 the test bed reserves.
    let mr = p.pd.alloc_mr_huge(3 << 20, RW).expect("MR in huge pages");
    assert_eq!(mr.len(), 4 << 20);
    exercise(&mut p, &mr, "alloc_mr_huge");

    // memmap2's huge-page mapping, registered like any MmapMut.
    let m = MmapOptions::new()
        .len(2 << 20)
        .huge(Some(21))
        .map_anon()
        .expect("a 2 MiB huge page from memmap2");
    let mr2 = p.pd.register(m, RW).expect("register a huge-page MmapMut");
    exercise(&mut p, &mr2, "huge-page MmapMut");

    // More than are left: a named error with the way out.
    match p.pd.alloc_mr_huge(64 << 20, RW) {
        Err(e @ Error::ResourceLimit { limit, .. }) => {
            assert!(
                matches!(
                    limit,
                    Limit::HugePages {
                        pages: 32,
                        free: Some(_),
                        ..
                    }
                ),
                "{limit:?}"
            );
            let what = e.to_string();
            assert!(what.contains("nr_hugepages"), "{what}");
            assert!(what.contains("free"), "{what}");
        }
        other => panic!("64 MiB of huge pages with 16 MiB reserved: {other:?}"),
    }
}

#[test]
fn iova_and_zero_based_mrs_are_addressed_by_a_peer() {
    let mut p = pair();
    let len = 2 * 4096;
    for iova in [0u64, 0x7e57_0000_0000] {
        let m = MmapMut::map_anon(len).unwrap();
        let va = m.as_ptr() as u64;
        let mr = p.pd.register_iova(m, RW, iova).expect("register_iova");
        assert_eq!((mr.iova(), mr.addr()), (iova, iova));
        // Local SGEs are IOVA-based too: exercise() sends from and receives
        // into it, and the peer writes and reads it at its IOVA.
        exercise(&mut p, &mr, &format!("IOVA {iova:#x}"));
        // A WRITE at an offset lands at that offset.
        let helper = p.pd.alloc_mr(16, RW).unwrap();
        helper.write(0, b"at offset 4100!!").unwrap();
        let s = [helper.all().unwrap()];
        let r = Remote {
            addr: iova + 4100,
            rkey: mr.rkey(),
        };
        p.a.qp
            .post_send(&[SendWr::new(9, SendOp::Write(r), &s)])
            .unwrap();
        ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::RDMA_WRITE);
        let mut got = [0u8; 16];
        mr.read(4100, &mut got).unwrap();
        assert_eq!(&got, b"at offset 4100!!");
        assert_ne!(va, iova);
    }

    // An IOVA must keep the buffer's offset in its page.
    let v = vec![0u8; 4096 * 2];
    let off = v.as_ptr() as u64 % 4096;
    let e =
        p.pd.register_iova(v, RW, 0x1000 + (off + 1) % 4096)
            .expect_err("an IOVA with another page offset");
    assert!(
        matches!(&e, Error::InvalidArgument { what } if what.contains("IOVA")),
        "{e}"
    );

    // The peer must use the IOVA: the buffer's own address is outside the
    // MR, and the access fails at the responder.
    let m = MmapMut::map_anon(4096).unwrap();
    let va = m.as_ptr() as u64;
    let mr = p.pd.register_iova(m, RW, 0).unwrap();
    let helper = p.pd.alloc_mr(8, RW).unwrap();
    let s = [helper.all().unwrap()];
    let r = Remote {
        addr: va,
        rkey: mr.rkey(),
    };
    p.a.qp
        .post_send(&[SendWr::new(10, SendOp::Write(r), &s)])
        .unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(c[0].status, WcStatus::REM_ACCESS_ERR, "{:?}", c[0]);
}

#[test]
fn access_flags_are_taken_or_refused_by_name() {
    let p = pair();
    let attr = p.ctx.query_device_ex().unwrap();
    let caps = attr.device_cap_flags_ex;
    let has_mw = caps & (1 << 17 | 1 << 23 | 1 << 24) != 0;
    let has_odp = attr.odp_general_caps & 1 != 0;
    let has_flush_global = caps & (1 << 38) != 0;
    let has_atomics = attr.orig.atomic_cap != 0;
    let lw = Access::LOCAL_WRITE;
    let cases = [
        (lw | Access::REMOTE_ATOMIC, has_atomics),
        (lw | Access::MW_BIND, has_mw),
        (lw | Access::ON_DEMAND, has_odp),
        (lw | Access::FLUSH_GLOBAL, has_flush_global),
        // Optional: taken whether or not the device has it.
        (lw | Access::RELAXED_ORDERING, true),
    ];
    for (access, offered) in cases {
        let r = p.pd.alloc_mr(4096, access);
        match (&r, offered) {
            (Ok(mr), true) => assert_eq!(mr.access(), access),
            (Err(Error::Unsupported { device, feature }), false) => {
                assert_eq!(device, &common::env().dev);
                assert!(
                    matches!(feature, Feature::MrAccess { access: a, .. } if access.contains(*a)),
                    "{feature:?}"
                );
            }
            _ => panic!("{access:?} (device offers it: {offered}): {r:?}"),
        }
    }
    // Flags no capability bit announces: the driver takes them, or they
    // are refused by name (rxe refuses both for MRs with EOPNOTSUPP).
    for flag in [Access::ZERO_BASED, Access::HUGETLB] {
        match p.pd.alloc_mr(4096, lw | flag) {
            Ok(mr) => assert!(mr.access().contains(flag)),
            Err(Error::Unsupported { feature, .. }) => assert!(
                matches!(
                    feature,
                    Feature::MrAccessRefused { access, errno, .. }
                        if access == flag && errno == Errno::EOPNOTSUPP
                ),
                "{flag:?}: {feature:?}"
            ),
            Err(e) => panic!("{flag:?}: {e}"),
        }
    }
    // FLUSH to persistence: refused by name where the device lacks it, and
    // where it has it, refused by name over ordinary RAM (no pmem here).
    let has_flush_persistent = caps & (1 << 39) != 0;
    match p.pd.alloc_mr(4096, lw | Access::FLUSH_PERSISTENT) {
        Err(Error::Unsupported { feature, .. }) => {
            let what = feature.to_string();
            let why = if has_flush_persistent {
                "persistent memory"
            } else {
                "offers no FLUSH to persistence"
            };
            assert!(what.contains(why), "{what}");
        }
        r => panic!("FLUSH_PERSISTENT over RAM: {r:?}"),
    }
    // rxe 6.12 offers no ODP: the error says which kernel does.
    if !has_odp {
        let e = p.pd.alloc_mr(4096, lw | Access::ON_DEMAND).unwrap_err();
        assert!(e.to_string().contains("on-demand paging"), "{e}");
    }
    // Remote write without local write is refused before the kernel.
    assert!(matches!(
        p.pd.alloc_mr(4096, Access::REMOTE_WRITE),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn deregister_waits_for_the_last_clone() {
    let p = pair();
    let mr = p.pd.register(vec![1u8; 64], RW).unwrap();
    let other = mr.clone();
    let mr = match mr.deregister() {
        Err(rverbs::DeregisterError::Shared(mr)) => mr,
        r => panic!("deregister with a clone alive: {r:?}"),
    };
    drop(other);
    assert_eq!(mr.deregister().unwrap(), vec![1u8; 64]);
}

/// A child forked while an MR is registered and in use gets its own copy
/// (Linux copies pinned pages at fork): it reads what the parent had, its
/// writes stay its own, and the parent's RDMA keeps landing where the
/// parent reads, before, during and after the child's life.
#[test]
fn fork_while_registered_leaves_the_parent_working() {
    let mut p = pair();
    let len = 8192;
    let mr = p.pd.register(vec![0u8; len], RW).unwrap();
    exercise(&mut p, &mr, "before fork");
    let before = contents(&mr);
    let cells = mr.cells(0, len).unwrap();
    // The child signals through a pipe when it has scribbled over its copy.
    let mut fds = [0i32; 2];
    // SAFETY: fds is two ints for pipe() to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only reads and writes memory it already has
    // (atomic cells, a stack byte) and calls write() and _exit(), which are
    // async-signal-safe: nothing that could deadlock on a lock another
    // thread held at the fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let same = cells
            .iter()
            .zip(&before)
            .all(|(c, b)| c.load(Relaxed) == *b);
        for c in cells {
            c.store(0xee, Release);
        }
        let byte = [u8::from(same)];
        // SAFETY: write of one byte from the stack, then exit without
        // running the parent's destructors (which would DEREG its MR).
        unsafe {
            libc::write(fds[1], byte.as_ptr().cast(), 1);
            libc::_exit(if same { 0 } else { 3 });
        }
    }
    let mut byte = [0u8; 1];
    // SAFETY: read of one byte into the stack buffer.
    let n = unsafe { libc::read(fds[0], byte.as_mut_ptr().cast(), 1) };
    assert_eq!((n, byte[0]), (1, 1), "the child saw the parent's bytes");
    // The child has written 0xee all over its copy: the parent's is intact.
    assert_eq!(
        contents(&mr),
        before,
        "the child's writes reached the parent"
    );
    // RDMA while the child may still live.
    exercise(&mut p, &mr, "child alive");
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    let last = exercise(&mut p, &mr, "after the child exited");
    // SAFETY: closing the pipe's own fds.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert_eq!(mr.deregister().unwrap(), last);
}

/// A dma-buf for the test: a `udmabuf` over a sealed memfd of `len`
/// bytes where the kernel has `/dev/udmabuf` (Debian's 6.12 and 7.2),
/// else the memfd itself (6.1 has no udmabuf; rxe refuses before it looks
/// at the descriptor). Returns the descriptor and whether it is a dma-buf.
fn dmabuf(len: usize) -> (std::os::fd::OwnedFd, bool) {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain system calls on descriptors this function owns; each
    // result is checked before use.
    unsafe {
        let memfd = libc::memfd_create(c"rverbs-dmabuf".as_ptr(), libc::MFD_ALLOW_SEALING);
        assert!(
            memfd >= 0,
            "memfd_create: {}",
            std::io::Error::last_os_error()
        );
        let memfd = OwnedFd::from_raw_fd(memfd);
        use std::os::fd::AsRawFd;
        assert_eq!(libc::ftruncate(memfd.as_raw_fd(), len as libc::off_t), 0);
        assert_eq!(
            libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK),
            0,
            "F_SEAL_SHRINK: {}",
            std::io::Error::last_os_error()
        );
        let dev = libc::open(c"/dev/udmabuf".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if dev < 0 {
            return (memfd, false);
        }
        let dev = OwnedFd::from_raw_fd(dev);
        /// `struct udmabuf_create` (linux/udmabuf.h).
        #[repr(C)]
        struct UdmabufCreate {
            memfd: u32,
            flags: u32,
            offset: u64,
            size: u64,
        }
        let req = UdmabufCreate {
            memfd: memfd.as_raw_fd() as u32,
            flags: 1, // UDMABUF_FLAGS_CLOEXEC
            offset: 0,
            size: len as u64,
        };
        // UDMABUF_CREATE = _IOW('u', 0x42, struct udmabuf_create).
        let create = (1u64 << 30)
            | ((std::mem::size_of::<UdmabufCreate>() as u64) << 16)
            | (u64::from(b'u') << 8)
            | 0x42;
        let buf = libc::ioctl(dev.as_raw_fd(), create as _, &req);
        assert!(
            buf >= 0,
            "UDMABUF_CREATE: {}",
            std::io::Error::last_os_error()
        );
        (OwnedFd::from_raw_fd(buf), true)
    }
}

/// `Pd::reg_dmabuf_mr` goes through `UVERBS_METHOD_REG_DMABUF_MR`, and rxe,
/// which has no dma-buf support, refuses it by name with EOPNOTSUPP — over
/// a real dma-buf where the kernel can make one. Bad arguments are refused
/// before the kernel, naming what was wrong.
#[test]
fn dmabuf_mrs_are_refused_by_rxe_by_name() {
    let p = pair();
    let (fd, real) = dmabuf(2 * 4096);
    println!("dma-buf from /dev/udmabuf: {real}");
    let e =
        p.pd.reg_dmabuf_mr(fd, 0, 4096, 0x10000, Access::LOCAL_WRITE)
            .unwrap_err();
    assert!(
        matches!(&e, Error::Kernel { op: "REG_DMABUF_MR", errno } if *errno == Errno(libc::EOPNOTSUPP)),
        "{e:?}"
    );
    assert!(e.to_string().contains("REG_DMABUF_MR"), "{e}");
    // Refused before the kernel.
    let (fd, _) = dmabuf(4096);
    let e =
        p.pd.reg_dmabuf_mr(fd, 0, 0, 0, Access::LOCAL_WRITE)
            .unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let (fd, _) = dmabuf(4096);
    let e =
        p.pd.reg_dmabuf_mr(fd, 0, 4096, 0x10010, Access::LOCAL_WRITE)
            .unwrap_err();
    assert!(e.to_string().contains("IOVA"), "{e}");
}
