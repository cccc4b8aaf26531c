//! rdma-core's own mlx5 provider as an oracle for provider-mlx5.
//!
//! `cargo xtask test` compiles rdma-core's `providers/mlx5/qp.c`,
//! `cq.c` and `srq.c` from Debian 13's source package (56.1; `docs/mlx5.md` says why
//! not bookworm's 44.0), unchanged and with Debian's flags,
//! together with `oracle.c` (this crate's C side) into a shared object, and
//! names it in `RVERBS_MLX5_ORACLE`. The tests here load it with `dlopen`,
//! so that nothing in the workspace links C at build time, and post the
//! same requests through rdma-core's `mlx5_post_send` and provider-mlx5
//! over the same queue geometry. A test run without the variable fails,
//! naming it: the oracle is never skipped.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;

pub use provider_mlx5::Sge;

/// `enum ibv_wr_opcode` (`verbs.h`).
pub mod opcode {
    pub const RDMA_WRITE: i32 = 0;
    pub const RDMA_WRITE_WITH_IMM: i32 = 1;
    pub const SEND: i32 = 2;
    pub const SEND_WITH_IMM: i32 = 3;
    pub const RDMA_READ: i32 = 4;
    pub const ATOMIC_CMP_AND_SWP: i32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: i32 = 6;
    pub const SEND_WITH_INV: i32 = 9;
}

/// `enum ibv_send_flags`.
pub mod send_flags {
    pub const FENCE: u32 = 1;
    pub const SIGNALED: u32 = 2;
    pub const SOLICITED: u32 = 4;
    pub const INLINE: u32 = 8;
}

/// `enum ibv_qp_type`.
pub mod qp_type {
    pub const RC: i32 = 2;
    pub const UC: i32 = 3;
    pub const UD: i32 = 4;
}

/// One send request, flat (`struct oracle_req` in `oracle.c`, which the C
/// side turns into an `ibv_send_wr`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OracleReq {
    pub wr_id: u64,
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub sges: *const Sge,
    pub ah: *mut c_void,
    pub opcode: i32,
    pub send_flags: u32,
    /// `imm_data` as the C struct holds it (network order), or
    /// `invalidate_rkey` (host order).
    pub imm_or_inv: u32,
    pub num_sge: i32,
    pub rkey: u32,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub pad: u32,
}

type NewFn = unsafe extern "C" fn(
    c_int,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_int,
    c_int,
    c_int,
    c_uint,
    c_uint,
) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type AhFn = unsafe extern "C" fn(*const u8) -> *mut c_void;
type PostFn = unsafe extern "C" fn(*mut c_void, *const OracleReq, c_int, *mut c_int) -> c_int;
type BytesFn = unsafe extern "C" fn(*const c_void) -> *const u8;
type U32Fn = unsafe extern "C" fn(*const c_void) -> u32;
type LenFn = unsafe extern "C" fn(*const c_void) -> usize;
type SizeFn = unsafe extern "C" fn() -> usize;
type CqInitFn = unsafe extern "C" fn(*mut c_void, c_uint) -> c_int;
type PollFn = unsafe extern "C" fn(*mut c_void, c_int, *mut IbvWc) -> c_int;
type CqRingFn = unsafe extern "C" fn(*mut c_void) -> *mut u8;
type RqInitFn = unsafe extern "C" fn(*mut c_void, c_uint, c_uint, c_uint) -> c_int;
type PostRecvFn = unsafe extern "C" fn(*mut c_void, *const OracleRecv, c_int, *mut c_int) -> c_int;
type SrqInitFn = unsafe extern "C" fn(*mut c_void, c_uint, c_uint, c_uint, c_uint) -> c_int;

/// The oracle's functions, from the shared object.
struct Lib {
    new: NewFn,
    free: FreeFn,
    ah: AhFn,
    ah_free: FreeFn,
    post: PostFn,
    retire: FreeFn,
    ring: BytesFn,
    snd_dbrec: U32Fn,
    uar: BytesFn,
    uar_len: LenFn,
    cur_post: U32Fn,
    cq_init: CqInitFn,
    poll: PollFn,
    cq_ring: CqRingFn,
    rq_init: RqInitFn,
    post_recv: PostRecvFn,
    rq_ring: CqRingFn,
    rcv_dbrec: U32Fn,
    srq_init: SrqInitFn,
    post_srq_recv: PostRecvFn,
    srq_ring: CqRingFn,
    srq_dbrec: U32Fn,
}

/// One receive request, flat (`struct oracle_recv`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OracleRecv {
    pub wr_id: u64,
    pub sges: *const Sge,
    pub num_sge: i32,
    pub pad: u32,
}

/// `struct ibv_wc` (`verbs.h`): what `mlx5_poll_cq` writes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvWc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` (network order) or `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    /// `IBV_WC_*` flags (numbered unlike the kernel's `IB_WC_*`).
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// The environment variable naming the shared object.
pub const ENV: &str = "RVERBS_MLX5_ORACLE";

fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    LIB.get_or_init(|| load().unwrap_or_else(|e| panic!("the rdma-core mlx5 oracle: {e}")))
}

fn load() -> Result<Lib, String> {
    let path = std::env::var(ENV).map_err(|_| {
        format!("{ENV} is not set: run these tests through `cargo xtask test`, which builds rdma-core's mlx5 provider into the oracle and names it there")
    })?;
    let c = CString::new(path.clone()).map_err(|e| e.to_string())?;
    // SAFETY: a NUL-terminated path; the object is ours (oracle.c and
    // rdma-core's qp.c/cq.c), whose initialisers do nothing but set up
    // rdma-core's static tables.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        // SAFETY: dlerror returns NULL or a NUL-terminated message.
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "unknown".to_string()
        } else {
            // SAFETY: as above, not NULL.
            unsafe { CStr::from_ptr(why) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(format!("dlopen {path}: {why}"));
    }
    let sym = |name: &str| -> Result<*mut c_void, String> {
        let n = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: h is a live handle (never closed), n NUL-terminated.
        let p = unsafe { libc::dlsym(h, n.as_ptr() as *const c_char) };
        if p.is_null() {
            Err(format!("{path}: no symbol {name}"))
        } else {
            Ok(p)
        }
    };
    // Each symbol is the oracle.c function of that name, whose C
    // prototype the field's type spells out.
    macro_rules! f {
        ($name:literal, $t:ty) => {
            // SAFETY: the symbol is oracle.c's function of this name, and
            // $t is its prototype (the request layout is checked below;
            // the rest are plain pointers and integers).
            unsafe { std::mem::transmute::<*mut c_void, $t>(sym($name)?) }
        };
    }
    let size = f!("oracle_sizeof_req", SizeFn);
    let rkey_at = f!("oracle_offsetof_req_rkey", SizeFn);
    // SAFETY: both take nothing and return a size.
    let (size, rkey_at) = unsafe { (size(), rkey_at()) };
    let ours = (
        std::mem::size_of::<OracleReq>(),
        std::mem::offset_of!(OracleReq, rkey),
    );
    let (wc_size, recv_size) = (
        f!("oracle_sizeof_wc", SizeFn),
        f!("oracle_sizeof_recv", SizeFn),
    );
    // SAFETY: both take nothing and return a size.
    let (wc_size, recv_size) = unsafe { (wc_size(), recv_size()) };
    let sizes = (
        std::mem::size_of::<IbvWc>(),
        std::mem::size_of::<OracleRecv>(),
    );
    if (wc_size, recv_size) != sizes {
        return Err(format!(
            "struct ibv_wc is {wc_size} bytes and struct oracle_recv {recv_size}; IbvWc {} and OracleRecv {}",
            sizes.0, sizes.1
        ));
    }
    if (size, rkey_at) != ours {
        return Err(format!(
            "struct oracle_req is {size} bytes with rkey at {rkey_at}; OracleReq {} at {}",
            ours.0, ours.1
        ));
    }
    Ok(Lib {
        new: f!("oracle_new", NewFn),
        free: f!("oracle_free", FreeFn),
        ah: f!("oracle_ah", AhFn),
        ah_free: f!("oracle_ah_free", FreeFn),
        post: f!("oracle_post", PostFn),
        retire: f!("oracle_retire", FreeFn),
        ring: f!("oracle_ring", BytesFn),
        snd_dbrec: f!("oracle_snd_dbrec", U32Fn),
        uar: f!("oracle_uar", BytesFn),
        uar_len: f!("oracle_uar_len", LenFn),
        cur_post: f!("oracle_cur_post", U32Fn),
        cq_init: f!("oracle_cq_init", CqInitFn),
        poll: f!("oracle_poll", PollFn),
        cq_ring: f!("oracle_cq_ring", CqRingFn),
        rq_init: f!("oracle_rq_init", RqInitFn),
        post_recv: f!("oracle_post_recv", PostRecvFn),
        rq_ring: f!("oracle_rq_ring", CqRingFn),
        rcv_dbrec: f!("oracle_rcv_dbrec", U32Fn),
        srq_init: f!("oracle_srq_init", SrqInitFn),
        post_srq_recv: f!("oracle_post_srq_recv", PostRecvFn),
        srq_ring: f!("oracle_srq_ring", CqRingFn),
        srq_dbrec: f!("oracle_srq_dbrec", U32Fn),
    })
}

/// A send queue's geometry and options, as both sides are given them.
#[derive(Debug, Clone, Copy)]
pub struct QpCfg {
    /// [`qp_type`].
    pub qp_type: i32,
    pub qpn: u32,
    /// Basic blocks in the ring (a power of two).
    pub wqe_cnt: u32,
    pub max_sge: u32,
    pub max_inline: u32,
    /// Each BlueFlame half, bytes.
    pub bf_size: u32,
    /// A register with BlueFlame buffers (not bfreg 0).
    pub blueflame: bool,
    pub prefer_bf: bool,
    pub sig_all: bool,
}

/// One rdma-core mlx5 QP's send side over plain memory.
pub struct Oracle {
    p: *mut c_void,
    wqe_cnt: u32,
    /// CQEs in the send CQ, once made ([`Oracle::cq_init`]).
    ncqe: u32,
    /// Bytes of the RQ ring, once made ([`Oracle::rq_init`]).
    rq_len: usize,
    /// Bytes of the SRQ ring, once made ([`Oracle::srq_init`]).
    srq_len: usize,
}

impl Oracle {
    /// A QP as `mlx5_create_qp` and a modify to RTS leave it; `max_post`
    /// in WQEs, as rdma-core sizes it.
    pub fn new(cfg: &QpCfg, max_post: u32) -> Oracle {
        let l = lib();
        // SAFETY: plain values; NULL only when memory runs out.
        let p = unsafe {
            (l.new)(
                cfg.qp_type,
                cfg.wqe_cnt,
                cfg.max_sge,
                cfg.max_inline,
                cfg.bf_size,
                cfg.blueflame as c_int,
                cfg.prefer_bf as c_int,
                cfg.sig_all as c_int,
                cfg.qpn,
                max_post,
            )
        };
        assert!(!p.is_null(), "oracle_new: out of memory");
        Oracle {
            p,
            wqe_cnt: cfg.wqe_cnt,
            ncqe: 0,
            rq_len: 0,
            srq_len: 0,
        }
    }

    /// `mlx5_post_send` of `reqs` as one list: its errno and the index of
    /// the request it named in `bad_wr` (or `None`).
    ///
    /// # Safety
    /// Every request's `sges` must point to `num_sge` readable SGEs, its
    /// inline data (if `INLINE`) must be readable, and `ah` must be an
    /// [`Ah`]'s or NULL.
    pub unsafe fn post(&mut self, reqs: &[OracleReq]) -> (i32, Option<usize>) {
        let mut bad = -1;
        // SAFETY: the caller's contract; reqs is a live array of len.
        let e = unsafe { (lib().post)(self.p, reqs.as_ptr(), reqs.len() as c_int, &mut bad) };
        (e, usize::try_from(bad).ok())
    }

    /// Every WQE posted so far completed.
    pub fn retire(&mut self) {
        // SAFETY: a live oracle.
        unsafe { (lib().retire)(self.p) }
    }

    /// The SQ ring.
    pub fn ring(&self) -> &[u8] {
        // SAFETY: oracle_new allocated wqe_cnt blocks of 64 bytes, alive
        // with self; only posts (which take &mut self) write them.
        unsafe { std::slice::from_raw_parts((lib().ring)(self.p), self.wqe_cnt as usize * 64) }
    }

    /// Fills the ring with `ring` and the register with `uar` (between
    /// lists, while nothing is outstanding), so that afterwards every byte
    /// not of that value was written by the posts in between.
    pub fn fill(&mut self, ring: u8, uar: u8) {
        let l = lib();
        // SAFETY: oracle_new's heap buffers of these lengths, writable
        // (only handed out as const to keep the C side's reads honest);
        // &mut self: no slice of them is alive.
        unsafe {
            std::ptr::write_bytes(
                (l.ring)(self.p) as *mut u8,
                ring,
                self.wqe_cnt as usize * 64,
            );
            std::ptr::write_bytes((l.uar)(self.p) as *mut u8, uar, (l.uar_len)(self.p));
        }
    }

    /// The SND doorbell record, host order.
    pub fn snd_dbrec(&self) -> u32 {
        // SAFETY: a live oracle.
        unsafe { (lib().snd_dbrec)(self.p) }
    }

    /// The BlueFlame register's two halves.
    pub fn uar(&self) -> &[u8] {
        let l = lib();
        // SAFETY: oracle_new allocated uar_len bytes, alive with self.
        unsafe { std::slice::from_raw_parts((l.uar)(self.p), (l.uar_len)(self.p)) }
    }

    /// The free-running basic-block counter (`sq.cur_post`).
    pub fn cur_post(&self) -> u32 {
        // SAFETY: a live oracle.
        unsafe { (lib().cur_post)(self.p) }
    }
}

impl Oracle {
    /// Gives the QP a send CQ of `ncqe` 64-byte CQEs (every one invalid,
    /// owned by the hardware) and enters the QP where `mlx5_poll_cq` looks
    /// CQEs' QPs up. Once per oracle.
    pub fn cq_init(&mut self, ncqe: u32) {
        // SAFETY: a live oracle; called once (the tests' use).
        let e = unsafe { (lib().cq_init)(self.p, ncqe) };
        assert_eq!(e, 0, "oracle_cq_init");
        self.ncqe = ncqe;
    }

    /// Writes `cqe` (64 bytes) into CQ slot `i` (masked), as the device
    /// writes one: all but the last byte, then `op_own`.
    pub fn put_cqe(&mut self, i: u32, cqe: &[u8; 64]) {
        assert!(self.ncqe > 0, "put_cqe before cq_init");
        let at = (i & (self.ncqe - 1)) as usize * 64;
        // SAFETY: oracle_cq_init allocated ncqe * 64 writable bytes, alive
        // with self; &mut self: no poll is running.
        unsafe {
            let ring = (lib().cq_ring)(self.p);
            std::ptr::copy_nonoverlapping(cqe.as_ptr(), ring.add(at), 64);
        }
    }

    /// Gives the QP a receive queue of `wqe_cnt` WQEs of `1 << wqe_shift`
    /// bytes and `max_sge` SGEs, completing on the send CQ. Once per
    /// oracle.
    pub fn rq_init(&mut self, wqe_cnt: u32, wqe_shift: u32, max_sge: u32) {
        // SAFETY: a live oracle; called once (the tests' use).
        let e = unsafe { (lib().rq_init)(self.p, wqe_cnt, wqe_shift, max_sge) };
        assert_eq!(e, 0, "oracle_rq_init");
        self.rq_len = (wqe_cnt as usize) << wqe_shift;
    }

    /// `mlx5_post_recv` of `reqs` as one list: its errno and the index of
    /// the request it named in `bad_wr`.
    ///
    /// # Safety
    /// Every request's `sges` must point to `num_sge` readable SGEs.
    pub unsafe fn post_recv(&mut self, reqs: &[OracleRecv]) -> (i32, Option<usize>) {
        let mut bad = -1;
        // SAFETY: the caller's contract; reqs is a live array of len.
        let e = unsafe { (lib().post_recv)(self.p, reqs.as_ptr(), reqs.len() as c_int, &mut bad) };
        (e, usize::try_from(bad).ok())
    }

    /// The RQ ring.
    pub fn rq_ring(&self) -> &[u8] {
        assert!(self.rq_len > 0, "rq_ring before rq_init");
        // SAFETY: oracle_rq_init allocated rq_len bytes, alive with self;
        // only posts and polls (which take &mut self) write them.
        unsafe { std::slice::from_raw_parts((lib().rq_ring)(self.p), self.rq_len) }
    }

    /// Fills the RQ ring with `byte` (see [`Oracle::fill`]).
    pub fn fill_rq(&mut self, byte: u8) {
        // SAFETY: as rq_ring, and &mut self: no slice of it is alive.
        unsafe { std::ptr::write_bytes((lib().rq_ring)(self.p), byte, self.rq_len) }
    }

    /// The RCV doorbell record, host order.
    pub fn rcv_dbrec(&self) -> u32 {
        // SAFETY: a live oracle.
        unsafe { (lib().rcv_dbrec)(self.p) }
    }

    /// `mlx5_poll_cq` of up to `out.len()` completions: how many, or its
    /// negative error.
    pub fn poll(&mut self, out: &mut [IbvWc]) -> i32 {
        // SAFETY: a live oracle with a CQ; out has room for len entries.
        unsafe { (lib().poll)(self.p, out.len() as c_int, out.as_mut_ptr()) }
    }
}

impl Oracle {
    /// Gives the context a shared receive queue numbered `srqn` of
    /// `nwqes` WQEs of `1 << wqe_shift` bytes and `max_sge` SGEs, every
    /// WQE free and linked to the next (no wait queue), where
    /// `mlx5_poll_cq` finds it by the CQE's SRQ number. Once per oracle.
    pub fn srq_init(&mut self, nwqes: u32, wqe_shift: u32, max_sge: u32, srqn: u32) {
        // SAFETY: a live oracle; called once (the tests' use).
        let e = unsafe { (lib().srq_init)(self.p, nwqes, wqe_shift, max_sge, srqn) };
        assert_eq!(e, 0, "oracle_srq_init");
        self.srq_len = (nwqes as usize) << wqe_shift;
    }

    /// `mlx5_post_srq_recv` of `reqs` as one list: its errno and the index
    /// of the request it named in `bad_wr`.
    ///
    /// # Safety
    /// Every request's `sges` must point to `num_sge` readable SGEs.
    pub unsafe fn post_srq_recv(&mut self, reqs: &[OracleRecv]) -> (i32, Option<usize>) {
        let mut bad = -1;
        // SAFETY: the caller's contract; reqs is a live array of len.
        let e =
            unsafe { (lib().post_srq_recv)(self.p, reqs.as_ptr(), reqs.len() as c_int, &mut bad) };
        (e, usize::try_from(bad).ok())
    }

    /// The SRQ ring.
    pub fn srq_ring(&self) -> &[u8] {
        assert!(self.srq_len > 0, "srq_ring before srq_init");
        // SAFETY: oracle_srq_init allocated srq_len bytes, alive with
        // self; only posts and polls (which take &mut self) write them.
        unsafe { std::slice::from_raw_parts((lib().srq_ring)(self.p), self.srq_len) }
    }

    /// Writes `data` at `off` of the SRQ ring (between posts and polls:
    /// a test filling the WQEs the queue does not hold).
    pub fn srq_write(&mut self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.srq_len, "write past the SRQ ring");
        // SAFETY: oracle_srq_init allocated srq_len writable bytes, alive
        // with self (in bounds, asserted); &mut self: no slice of them is
        // alive and no post or poll runs.
        unsafe {
            let ring = (lib().srq_ring)(self.p);
            std::ptr::copy_nonoverlapping(data.as_ptr(), ring.add(off), data.len());
        }
    }

    /// The SRQ's doorbell record, host order.
    pub fn srq_dbrec(&self) -> u32 {
        // SAFETY: a live oracle.
        unsafe { (lib().srq_dbrec)(self.p) }
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        // SAFETY: allocated by oracle_new, freed once.
        unsafe { (lib().free)(self.p) }
    }
}

/// An `mlx5_ah` holding an address vector, for UD requests.
pub struct Ah(*mut c_void);

impl Ah {
    pub fn new(av: &[u8; 48]) -> Ah {
        // SAFETY: 48 readable bytes.
        let p = unsafe { (lib().ah)(av.as_ptr()) };
        assert!(!p.is_null(), "oracle_ah: out of memory");
        Ah(p)
    }

    /// The `struct ibv_ah *` to put in a request.
    pub fn as_ptr(&self) -> *mut c_void {
        self.0
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: allocated by oracle_ah, freed once.
        unsafe { (lib().ah_free)(self.0) }
    }
}
