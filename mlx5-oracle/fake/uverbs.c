/*
 * A fake uverbs device for an mlx5 device, in the process itself: an
 * LD_PRELOAD library that answers the uverbs write() commands the way a
 * pre-DYN_UAR mlx5_ib does, so that rdma-core's real libmlx5 and rverbs'
 * mlx5 glue (built with --cfg rverbs_libc_syscalls, so that its writes go
 * through libc) can each be run against it, and what each sends recorded
 * (issue 29, the kernel-facing differential; `xtask/src/test/fake_mlx5.rs`
 * runs it).
 *
 * - /dev/infiniband/uverbs0 is /dev/null (its st_rdev, 1:3, is what the fake
 *   sysfs tree's `dev` says, which both stacks check); the fd opened for
 *   it is the device.
 * - Every ioctl() on it fails with ENOTTY, as on a kernel without the ioctl
 *   methods: libibverbs then falls back to write() for everything it needs.
 * - write() on it is answered here: the response is written where the
 *   command's response pointer says, as the kernel writes it.
 * - mmap() on it gets anonymous pages (UARs, the core clock page).
 * - An RDMA netlink socket cannot be opened: devices come from sysfs.
 *
 * Every request, response and mapping is logged, one line each, to
 * $FAKE_UVERBS_LOG (else stderr):
 *   write cmd=N ex=E len=L <bytes in hex, 4 to a group>
 *     resp <bytes>
 *   mmap off=0x... len=0x...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <linux/netlink.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#define CDEV "/dev/infiniband/uverbs0"

static int fake_fd = -1;
static FILE *log_file;

/* The path the caller asked for, or /dev/null for the device. */
static const char *redirect(const char *p)
{
	return p && strcmp(p, CDEV) == 0 ? "/dev/null" : p;
}

#define NEXT(name)                                                             \
	static __typeof__(name) *real;                                         \
	if (!real)                                                             \
		real = dlsym(RTLD_NEXT, #name)

static void log_bytes(const char *what, const void *b, size_t n)
{
	if (!log_file) {
		const char *p = getenv("FAKE_UVERBS_LOG");
		log_file = fopen(p ? p : "/dev/stderr", "a");
		if (!log_file)
			abort();
	}
	fprintf(log_file, "%s", what);
	for (size_t i = 0; i < n; i++)
		fprintf(log_file, "%s%02x", i % 4 ? "" : " ",
			((const uint8_t *)b)[i]);
	fprintf(log_file, "\n");
	fflush(log_file);
}

static int opened(int fd, const char *p)
{
	if (fd >= 0 && p && strcmp(p, CDEV) == 0)
		fake_fd = fd;
	return fd;
}

int stat(const char *p, struct stat *b)
{
	NEXT(stat);
	return real(redirect(p), b);
}

int stat64(const char *p, struct stat64 *b)
{
	NEXT(stat64);
	return real(redirect(p), b);
}

int fstatat(int d, const char *p, struct stat *b, int f)
{
	NEXT(fstatat);
	return real(d, redirect(p), b, f);
}

int fstatat64(int d, const char *p, struct stat64 *b, int f)
{
	NEXT(fstatat64);
	return real(d, redirect(p), b, f);
}

int statx(int d, const char *p, int f, unsigned int m, struct statx *b)
{
	NEXT(statx);
	return real(d, redirect(p), f, m, b);
}

static int mode_of(int flags, va_list a)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(a, int) : 0;
}

/* open() and its kin: the mode is read only when the flags say one
 * follows, as the C library does. */
#define OPEN(name)                                                             \
	int name(const char *p, int fl, ...)                                   \
	{                                                                      \
		va_list a;                                                     \
		va_start(a, fl);                                               \
		int m = mode_of(fl, a);                                        \
		va_end(a);                                                     \
		NEXT(name);                                                    \
		return opened(real(redirect(p), fl, m), p);                    \
	}
#define OPENAT(name)                                                           \
	int name(int d, const char *p, int fl, ...)                            \
	{                                                                      \
		va_list a;                                                     \
		va_start(a, fl);                                               \
		int m = mode_of(fl, a);                                        \
		va_end(a);                                                     \
		NEXT(name);                                                    \
		return opened(real(d, redirect(p), fl, m), p);                 \
	}
OPEN(open)
OPEN(open64)
OPENAT(openat)
OPENAT(openat64)

/* No RDMA netlink, as on a kernel without ib_core: both stacks then list
 * devices from sysfs (SYSFS_PATH), whatever the host has loaded. */
int socket(int domain, int type, int protocol)
{
	NEXT(socket);
	if (domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return real(domain, type, protocol);
}

int close(int fd)
{
	NEXT(close);
	if (fd == fake_fd)
		fake_fd = -1;
	return real(fd);
}


void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	NEXT(mmap);
	if (fd >= 0 && fd == fake_fd) {
		char w[80];
		snprintf(w, sizeof w, "mmap off=%#lx len=%#zx",
			 (unsigned long)off, len);
		log_bytes(w, NULL, 0);
		return real(addr, len, prot,
			    (flags & ~MAP_SHARED) | MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	}
	return real(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

/* The context: what GET_CONTEXT agreed (the CQE version, the bfregs). */
static int cqe_version;
static uint32_t tot_bfregs, lowlat_bfregs;

/* The response to GET_CONTEXT: one completion vector, an eventfd as the
 * async fd, and mlx5_ib's answer for a device without dynamic UARs (the
 * static bfregs the request asked for, 4 KiB UARs, one to a page). */
static void get_context(const uint8_t *buf, size_t len, uint8_t *r, size_t out)
{
	struct ib_uverbs_get_context_resp c = {
		.async_fd = eventfd(0, EFD_CLOEXEC),
		.num_comp_vectors = 1,
	};
	memcpy(r, &c, out < sizeof c ? out : sizeof c);
	struct mlx5_ib_alloc_ucontext_req_v2 q = { 0 };
	size_t in = len > 16 ? len - 16 : 0;
	memcpy(&q, buf + 16, in < sizeof q ? in : sizeof q);
	tot_bfregs = q.total_num_bfregs;
	lowlat_bfregs = q.num_low_latency_bfregs;
	cqe_version = q.max_cqe_version ? 1 : 0;
	struct mlx5_ib_alloc_ucontext_resp m = {
		.qp_tab_size = 1 << 18,
		.bf_reg_size = 512,
		.tot_bfregs = q.total_num_bfregs,
		.cache_line_size = 64,
		.max_sq_desc_sz = 512,
		.max_rq_desc_sz = 512,
		.max_send_wqebb = 1 << 15,
		.max_recv_wr = 1 << 15,
		.max_srq_recv_wr = 1 << 15,
		.num_ports = 1,
		.comp_mask = MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET,
		.response_length = sizeof m,
		.cqe_version = cqe_version,
		.cmds_supp_uhw = MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE |
				 MLX5_USER_CMDS_SUPP_UHW_CREATE_AH,
		.log_uar_size = 12,
		.num_uars_per_page = 1,
	};
	if (out > sizeof c) {
		size_t room = out - sizeof c;
		memcpy(r + sizeof c, &m, room < sizeof m ? room : sizeof m);
	}
}

/* A ConnectX-5 (vendor part 4119) with one Ethernet port, firmware
 * 16.30.0. */
static void query_device(uint8_t *r, size_t out, int ex)
{
	struct ib_uverbs_query_device_resp d = {
		.fw_ver = (16ull << 32) | (30ull << 16),
		.max_mr_size = ~0ull,
		.page_size_cap = 0xfffff000,
		.vendor_id = 0x02c9,
		.vendor_part_id = 0x1017,
		.max_qp = 1 << 18,
		.max_qp_wr = 1 << 15,
		.max_sge = 30,
		.max_cq = 1 << 24,
		.max_cqe = (1 << 22) - 1,
		.max_mr = 1 << 24,
		.max_pd = 1 << 24,
		.max_srq = 1 << 23,
		.max_srq_wr = (1 << 15) - 1,
		.max_srq_sge = 31,
		.atomic_cap = 1, /* IB_ATOMIC_HCA */
		.phys_port_cnt = 1,
	};
	memcpy(r, &d, out < sizeof d ? out : sizeof d);
	size_t at = offsetof(struct ib_uverbs_ex_query_device_resp,
			     response_length);
	if (ex && out >= at + 4) {
		uint32_t n = out < sizeof(struct ib_uverbs_ex_query_device_resp) ?
				     out :
				     sizeof(struct ib_uverbs_ex_query_device_resp);
		memcpy(r + at, &n, 4);
	}
}

static void query_port(uint8_t *r, size_t out)
{
	struct ib_uverbs_query_port_resp p = {
		.state = 4, /* ACTIVE */
		.max_mtu = 5,
		.active_mtu = 5,
		.gid_tbl_len = 256,
		.pkey_tbl_len = 1,
		.max_msg_sz = 1u << 30,
		.phys_state = 5,
		.link_layer = 2, /* Ethernet */
		.active_width = 2,
		.active_speed = 32,
	};
	memcpy(r, &p, out < sizeof p ? out : sizeof p);
}

/* The device's limits (query_device above, as log sizes where mlx5_ib
 * reads them from the HCA's capabilities). */
#define LOG_MAX_CQ_SZ 22
#define LOG_MAX_QP_SZ 15
#define LOG_MAX_SRQ_SZ 15
#define MAX_WQE_SZ_RQ 512
/* mlx5_ib.h's: the user index of a QP or SRQ under CQE version 0. */
#define MLX5_IB_DEFAULT_UIDX 0xffffff

/* Live objects, by handle: what each is, and a QP's bfreg. */
enum kind { FREE, PD, MR, CQ, SRQ, QP };
static struct object {
	enum kind kind;
	int bfreg;
} *objects;
static uint32_t n_objects, room;

static uint32_t new_object(enum kind k)
{
	uint32_t h = n_objects++;
	if (h == room) {
		room = room ? 2 * room : 64;
		objects = realloc(objects, room * sizeof *objects);
		if (!objects)
			abort();
	}
	objects[h] = (struct object){ .kind = k, .bfreg = -1 };
	return h;
}

static int live(uint32_t h, enum kind k)
{
	return h < n_objects && objects[h].kind == k;
}

/* A refusal, as the kernel's write() returns it: logged with its reason. */
static ssize_t refuse(int e, const char *why)
{
	char w[160];
	snprintf(w, sizeof w, "  refused errno=%d %s", e, why);
	log_bytes(w, NULL, 0);
	errno = e;
	return -1;
}

/* ib_umem_get's first step: every page of [addr, addr + len) must be
 * mapped in the caller (the kernel would pin them; mincore() fails with
 * ENOMEM on a hole). A zero length is refused as ib_umem_get does. */
static int mapped(uint64_t addr, uint64_t len)
{
	if (!len || addr + len < addr)
		return 0;
	uint64_t first = addr & ~4095ull, last = (addr + len + 4095) & ~4095ull;
	size_t pages = (last - first) / 4096;
	unsigned char *v = malloc(pages);
	if (!v)
		abort();
	int ok = mincore((void *)(uintptr_t)first, last - first, v) == 0;
	free(v);
	return ok;
}

static int is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static uint64_t roundup_pow2(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

/* The core request of a write() command, after its 8-byte header: 0 when
 * the command is too short for it. */
static int core(const uint8_t *buf, size_t len, void *c, size_t n)
{
	if (len < 8 + n)
		return 0;
	memcpy(c, buf + 8, n);
	return 1;
}

/* The udata of a write() command: after the core request, up to the
 * command's in_words (all of `len` for the legacy commands, which count
 * the header in their words). Copied into `u` (zeroed past its end),
 * returning the bytes there were. */
static size_t udata(const uint8_t *buf, size_t len, size_t core, void *u,
		    size_t ulen)
{
	memset(u, 0, ulen);
	size_t at = sizeof(struct ib_uverbs_cmd_hdr) + core;
	size_t n = len > at ? len - at : 0;
	memcpy(u, buf + at, n < ulen ? n : ulen);
	return n;
}

/* mlx5_ib's verify_assign_uidx: a user index only with CQE version 1. */
static int uidx_ok(uint32_t uidx)
{
	if (!cqe_version)
		return 1;
	return uidx != MLX5_IB_DEFAULT_UIDX && !(uidx & ~0xffffffu);
}

static ssize_t alloc_pd(uint8_t *r, size_t out)
{
	struct {
		struct ib_uverbs_alloc_pd_resp c;
		struct mlx5_ib_alloc_pd_resp m;
	} a = { { .pd_handle = new_object(PD) }, { .pdn = 0x10 + n_objects } };
	memcpy(r, &a, out < sizeof a ? out : sizeof a);
	log_bytes("  obj pd", NULL, 0);
	return 0;
}

static ssize_t reg_mr(const uint8_t *buf, size_t len, uint8_t *r, size_t out)
{
	struct ib_uverbs_reg_mr c;
	if (!core(buf, len, &c, sizeof c))
		return refuse(EINVAL, "REG_MR: short");
	if (!live(c.pd_handle, PD))
		return refuse(EINVAL, "REG_MR: no such PD");
	if (!mapped(c.start, c.length))
		return refuse(EFAULT, "REG_MR: memory not mapped");
	uint32_t h = new_object(MR);
	struct ib_uverbs_reg_mr_resp a = { .mr_handle = h,
					   .lkey = h << 8 | 0x11,
					   .rkey = h << 8 | 0x11 };
	memcpy(r, &a, out < sizeof a ? out : sizeof a);
	char w[160];
	snprintf(w, sizeof w, "  obj mr length=%llu hca_va_is_start=%d access=%#x",
		 (unsigned long long)c.length, c.hca_va == c.start,
		 c.access_flags);
	log_bytes(w, NULL, 0);
	return 0;
}

/* mlx5_ib_create_cq and create_cq_user: the entries rounded up to a power
 * of two, the CQE buffer of entries * cqe_size bytes and the doorbell
 * record mapped. */
static ssize_t create_cq(const uint8_t *buf, size_t len, uint8_t *r,
			 size_t out)
{
	struct ib_uverbs_create_cq c;
	struct mlx5_ib_create_cq u;
	if (!core(buf, len, &c, sizeof c))
		return refuse(EINVAL, "CREATE_CQ: short");
	size_t n = udata(buf, len, sizeof c, &u, sizeof u);
	if (n < offsetof(struct mlx5_ib_create_cq, flags))
		return refuse(EINVAL, "CREATE_CQ: short udata");
	if ((int)c.cqe < 0 || c.cqe > (1u << LOG_MAX_CQ_SZ))
		return refuse(EINVAL, "CREATE_CQ: cqe above the device's");
	uint64_t entries = roundup_pow2((uint64_t)c.cqe + 1);
	if (entries > (1u << LOG_MAX_CQ_SZ))
		return refuse(EINVAL, "CREATE_CQ: entries above the device's");
	if ((u.cqe_size != 64 && u.cqe_size != 128) || u.reserved0 ||
	    u.reserved1)
		return refuse(EINVAL, "CREATE_CQ: cqe_size or reserved");
	if (u.flags & ~(MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD |
			MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX))
		return refuse(EINVAL, "CREATE_CQ: flags");
	if (u.cqe_comp_en)
		return refuse(EOPNOTSUPP, "CREATE_CQ: no CQE compression");
	uint64_t umem = entries * u.cqe_size;
	if (!mapped(u.buf_addr, umem))
		return refuse(EFAULT, "CREATE_CQ: CQE buffer not mapped");
	if (!mapped(u.db_addr, 8))
		return refuse(EFAULT, "CREATE_CQ: doorbell record not mapped");
	uint32_t h = new_object(CQ);
	struct {
		struct ib_uverbs_create_cq_resp c;
		struct mlx5_ib_create_cq_resp m;
	} a = { { .cq_handle = h, .cqe = entries - 1 }, { .cqn = 0x400 + h } };
	memcpy(r, &a, out < sizeof a ? out : sizeof a);
	char w[240];
	snprintf(w, sizeof w,
		 "  obj cq cqe=%u comp_vector=%u channel=%d udata=%zu cqe_size=%u flags=%#x uar_page_index=%u umem=%llu entries=%llu",
		 c.cqe, c.comp_vector, c.comp_channel, n, u.cqe_size, u.flags,
		 u.uar_page_index, (unsigned long long)umem,
		 (unsigned long long)entries);
	log_bytes(w, NULL, 0);
	return 0;
}

/* mlx5_ib_create_srq and create_srq_user: the kernel sizes the buffer
 * from max_wr and max_sge (a power of two of WQEs, each a power of two of
 * at least 32 bytes) and maps that much at buf_addr. */
static ssize_t create_srq(const uint8_t *buf, size_t len, int x, uint8_t *r,
			  size_t out)
{
	uint32_t pd, max_wr, max_sge, limit, type = IB_UVERBS_SRQT_BASIC;
	size_t core_len;
	if (x) {
		struct ib_uverbs_create_xsrq c;
		if (!core(buf, len, &c, sizeof c))
			return refuse(EINVAL, "CREATE_XSRQ: short");
		pd = c.pd_handle, max_wr = c.max_wr, max_sge = c.max_sge;
		limit = c.srq_limit, type = c.srq_type, core_len = sizeof c;
	} else {
		struct ib_uverbs_create_srq c;
		if (!core(buf, len, &c, sizeof c))
			return refuse(EINVAL, "CREATE_SRQ: short");
		pd = c.pd_handle, max_wr = c.max_wr, max_sge = c.max_sge;
		limit = c.srq_limit, core_len = sizeof c;
	}
	struct mlx5_ib_create_srq u;
	size_t n = udata(buf, len, core_len, &u, sizeof u);
	if (!live(pd, PD))
		return refuse(EINVAL, "CREATE_SRQ: no such PD");
	if (type != IB_UVERBS_SRQT_BASIC)
		return refuse(EOPNOTSUPP, "CREATE_SRQ: not a basic SRQ");
	if (max_wr >= (1u << LOG_MAX_SRQ_SZ))
		return refuse(EINVAL, "CREATE_SRQ: max_wr above the device's");
	if (max_sge > MAX_WQE_SZ_RQ / 16)
		return refuse(EINVAL, "CREATE_SRQ: max_sge above max_wqe_sz_rq's");
	if (u.reserved0 || u.reserved1)
		return refuse(EINVAL, "CREATE_SRQ: reserved");
	if (u.flags & ~MLX5_SRQ_FLAG_SIGNATURE)
		return refuse(EINVAL, "CREATE_SRQ: flags");
	uint64_t wqes = roundup_pow2((uint64_t)max_wr + 1);
	uint64_t desc = 16 + (uint64_t)max_sge * 16;
	desc = roundup_pow2(desc);
	if (desc < 32)
		desc = 32;
	uint64_t umem = wqes * desc;
	if (!mapped(u.buf_addr, umem))
		return refuse(EFAULT, "CREATE_SRQ: buffer not mapped");
	if (!mapped(u.db_addr, 8))
		return refuse(EFAULT, "CREATE_SRQ: doorbell record not mapped");
	uint32_t h = new_object(SRQ);
	struct {
		struct ib_uverbs_create_srq_resp c;
		struct mlx5_ib_create_srq_resp m;
	} a = { { .srq_handle = h,
		  .max_wr = wqes - 1,
		  .max_sge = max_sge,
		  .srqn = 0x800 + h },
		{ .srqn = 0x800 + h } };
	memcpy(r, &a, out < sizeof a ? out : sizeof a);
	char w[240];
	snprintf(w, sizeof w,
		 "  obj srq max_wr=%u max_sge=%u limit=%u udata=%zu flags=%#x umem=%llu",
		 max_wr, max_sge, limit, n, u.flags, (unsigned long long)umem);
	log_bytes(w, NULL, 0);
	return 0;
}

/* mlx5_ib's bfregs for QPs that name none (alloc_bfreg, a context of
 * version 2), counted in the allocator's numbering: two non-fast-path
 * bfregs a UAR, total_num_bfregs of them. A low-latency register of its
 * own while one is free (the last num_low_latency_bfregs), else the least
 * used medium one (from 1), else bfreg 0 (shared, no BlueFlame). */
static int bfreg_count[1024];

static int alloc_bfreg(void)
{
	int tot = tot_bfregs < 1024 ? (int)tot_bfregs : 1024;
	int med = tot - (int)lowlat_bfregs - 1;
	if (med < 0)
		med = 0;
	for (int i = med + 1; i < tot; i++)
		if (!bfreg_count[i]) {
			bfreg_count[i]++;
			return i;
		}
	int min = 1;
	for (int i = 1; i <= med; i++) {
		if (bfreg_count[i] < bfreg_count[min])
			min = i;
		if (!bfreg_count[min])
			break;
	}
	min = med ? min : 0;
	bfreg_count[min]++;
	return min;
}

/* The index the response carries (adjust_bfregn): the UAR's four bfregs
 * counted, its two fast-path ones (never a user QP's) included. */
static uint32_t adjust_bfregn(int n)
{
	return n / 2 * 4 + n % 2;
}

/* mlx5_ib's create_qp for a user RC, UC or UD QP: the queue sizes come in
 * the udata (set_rq_size, set_user_buf_size), the buffer is RQ then SQ
 * (64-byte SQ WQE basic blocks), the doorbell record mapped, a bfreg
 * chosen. The core caps are answered as asked. */
static ssize_t create_qp(const uint8_t *buf, size_t len, uint8_t *r,
			 size_t out)
{
	struct ib_uverbs_create_qp c;
	struct mlx5_ib_create_qp u;
	if (!core(buf, len, &c, sizeof c))
		return refuse(EINVAL, "CREATE_QP: short");
	size_t n = udata(buf, len, sizeof c, &u, sizeof u);
	if (!live(c.pd_handle, PD) || !live(c.send_cq_handle, CQ) ||
	    !live(c.recv_cq_handle, CQ) ||
	    (c.is_srq && !live(c.srq_handle, SRQ)))
		return refuse(EINVAL, "CREATE_QP: no such PD, CQ or SRQ");
	if (c.qp_type != IB_UVERBS_QPT_RC && c.qp_type != IB_UVERBS_QPT_UC &&
	    c.qp_type != IB_UVERBS_QPT_UD)
		return refuse(EOPNOTSUPP, "CREATE_QP: type");
	if (n < offsetof(struct mlx5_ib_create_qp, sq_buf_addr))
		return refuse(EINVAL, "CREATE_QP: short udata");
	if (!uidx_ok(u.uidx))
		return refuse(EINVAL, "CREATE_QP: uidx for the CQE version");
	if (c.max_recv_wr > (1u << LOG_MAX_QP_SZ))
		return refuse(EINVAL, "CREATE_QP: max_recv_wr above the device's");
	uint64_t rq = 0;
	if (!c.is_srq) {
		if (u.rq_wqe_shift > 32)
			return refuse(EINVAL, "CREATE_QP: rq_wqe_shift");
		/* mlx5_ib takes any count; the RQ context holds its log, so
		 * anything but a power of two (or none) would be misread. */
		if (u.rq_wqe_count && !is_pow2(u.rq_wqe_count))
			return refuse(EINVAL, "CREATE_QP: rq_wqe_count not a power of two");
		if (u.rq_wqe_count && (1ull << u.rq_wqe_shift) < 16)
			return refuse(EINVAL, "CREATE_QP: RQ WQE under one SGE");
		rq = (uint64_t)u.rq_wqe_count << u.rq_wqe_shift;
	} else if (u.rq_wqe_count) {
		return refuse(EINVAL, "CREATE_QP: an RQ beside an SRQ");
	}
	if (u.sq_wqe_count && !is_pow2(u.sq_wqe_count))
		return refuse(EINVAL, "CREATE_QP: sq_wqe_count not a power of two");
	if (u.sq_wqe_count > (1u << LOG_MAX_QP_SZ))
		return refuse(EINVAL, "CREATE_QP: sq_wqe_count above the device's");
	uint64_t umem = rq + ((uint64_t)u.sq_wqe_count << 6);
	if (umem && !mapped(u.buf_addr, umem))
		return refuse(EFAULT, "CREATE_QP: buffer not mapped");
	if (!mapped(u.db_addr, 8))
		return refuse(EFAULT, "CREATE_QP: doorbell record not mapped");
	int bfreg;
	if (u.flags & MLX5_QP_FLAG_BFREG_INDEX) {
		/* Named in the response's numbering; not counted. */
		if (u.bfreg_index >= 2 * tot_bfregs)
			return refuse(EINVAL, "CREATE_QP: bfreg_index");
		bfreg = -1;
	} else {
		bfreg = alloc_bfreg();
	}
	uint32_t h = new_object(QP);
	objects[h].bfreg = bfreg;
	struct {
		struct ib_uverbs_create_qp_resp c;
		struct mlx5_ib_create_qp_resp m;
	} a = { { .qp_handle = h,
		  .qpn = 0x100 + h,
		  .max_send_wr = c.max_send_wr,
		  .max_recv_wr = c.max_recv_wr,
		  .max_send_sge = c.max_send_sge,
		  .max_recv_sge = c.max_recv_sge,
		  .max_inline_data = c.max_inline_data },
		{ .bfreg_index = bfreg < 0 ? u.bfreg_index :
					     adjust_bfregn(bfreg) } };
	memcpy(r, &a, out < sizeof a ? out : sizeof a);
	char w[400];
	snprintf(w, sizeof w,
		 "  obj qp type=%u sig_all=%u is_srq=%u max_send_wr=%u max_recv_wr=%u max_send_sge=%u max_recv_sge=%u max_inline_data=%u udata=%zu sq_wqe_count=%u rq_wqe_count=%u rq_wqe_shift=%u flags=%#x uidx=%#x bfreg_index=%u umem=%llu",
		 c.qp_type, c.sq_sig_all, c.is_srq, c.max_send_wr,
		 c.max_recv_wr, c.max_send_sge, c.max_recv_sge,
		 c.max_inline_data, n, u.sq_wqe_count, u.rq_wqe_count,
		 u.rq_wqe_shift, u.flags, u.uidx, a.m.bfreg_index,
		 (unsigned long long)umem);
	log_bytes(w, NULL, 0);
	return 0;
}

/* DEALLOC_PD, DEREG_MR, DESTROY_CQ/SRQ/QP: the handle (the first word
 * after the header, or after the response pointer for the three that
 * answer) must name a live object of that kind; the answers are zero (no
 * events were reported). */
static ssize_t destroy(const uint8_t *buf, size_t len, enum kind k,
		       int with_resp)
{
	size_t at = 8 + (with_resp ? 8 : 0);
	uint32_t h;
	if (len < at + 4)
		return refuse(EINVAL, "DESTROY: short");
	memcpy(&h, buf + at, 4);
	if (!live(h, k))
		return refuse(EINVAL, "DESTROY: no such object");
	if (k == QP && objects[h].bfreg >= 0)
		bfreg_count[objects[h].bfreg]--;
	objects[h].kind = FREE;
	return 0;
}

static ssize_t answer(const uint8_t *buf, size_t len)
{
	struct ib_uverbs_cmd_hdr h;
	if (len < sizeof h + 4) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&h, buf, sizeof h);
	uint32_t cmd = h.command & IB_USER_VERBS_CMD_COMMAND_MASK;
	int ex = !!(h.command & IB_USER_VERBS_CMD_FLAG_EXTENDED);
	char w[80];
	snprintf(w, sizeof w, "write cmd=%u ex=%d len=%zu", cmd, ex, len);
	log_bytes(w, buf, len);
	/* The two that answer nothing: the handle follows the header. */
	if (!ex && cmd == IB_USER_VERBS_CMD_DEALLOC_PD)
		return destroy(buf, len, PD, 0) < 0 ? -1 : (ssize_t)len;
	if (!ex && cmd == IB_USER_VERBS_CMD_DEREG_MR)
		return destroy(buf, len, MR, 0) < 0 ? -1 : (ssize_t)len;
	if (len < sizeof h + 8)
		return refuse(EINVAL, "short command");
	uint64_t resp;
	size_t out;
	if (ex) {
		struct ib_uverbs_ex_cmd_hdr eh;
		if (len < sizeof h + sizeof eh) {
			errno = EINVAL;
			return -1;
		}
		memcpy(&eh, buf + sizeof h, sizeof eh);
		resp = eh.response;
		out = (h.out_words + eh.provider_out_words) * 8;
	} else {
		memcpy(&resp, buf + sizeof h, 8);
		out = h.out_words * 4;
	}
	uint8_t *r = (uint8_t *)(uintptr_t)resp;
	if (!r || !out)
		return refuse(EINVAL, "no response buffer");
	memset(r, 0, out);
	ssize_t rc = 0;
	switch (ex ? 0x100 | cmd : cmd) {
	case IB_USER_VERBS_CMD_GET_CONTEXT:
		get_context(buf, len, r, out);
		break;
	case IB_USER_VERBS_CMD_QUERY_DEVICE:
		query_device(r, out, 0);
		break;
	case 0x100 | IB_USER_VERBS_EX_CMD_QUERY_DEVICE:
		query_device(r, out, 1);
		break;
	case IB_USER_VERBS_CMD_QUERY_PORT:
		query_port(r, out);
		break;
	case IB_USER_VERBS_CMD_ALLOC_PD:
		rc = alloc_pd(r, out);
		break;
	case IB_USER_VERBS_CMD_REG_MR:
		rc = reg_mr(buf, len, r, out);
		break;
	case IB_USER_VERBS_CMD_CREATE_CQ:
		rc = create_cq(buf, len, r, out);
		break;
	case IB_USER_VERBS_CMD_CREATE_SRQ:
		rc = create_srq(buf, len, 0, r, out);
		break;
	case IB_USER_VERBS_CMD_CREATE_XSRQ:
		rc = create_srq(buf, len, 1, r, out);
		break;
	case IB_USER_VERBS_CMD_CREATE_QP:
		rc = create_qp(buf, len, r, out);
		break;
	case IB_USER_VERBS_CMD_DESTROY_CQ:
		rc = destroy(buf, len, CQ, 1);
		break;
	case IB_USER_VERBS_CMD_DESTROY_SRQ:
		rc = destroy(buf, len, SRQ, 1);
		break;
	case IB_USER_VERBS_CMD_DESTROY_QP:
		rc = destroy(buf, len, QP, 1);
		break;
	default:
		return refuse(ENOSYS, "not a command this fake answers");
	}
	if (rc < 0)
		return rc;
	log_bytes("  resp", r, out);
	return (ssize_t)len;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	if (fd >= 0 && fd == fake_fd)
		return answer(buf, len);
	NEXT(write);
	return real(fd, buf, len);
}

/* The one ioctl() method answered: REG_DMABUF_MR (UVERBS_METHOD_
 * REG_DMABUF_MR, which has no write() form), as uverbs_std_types_mr.c and
 * mlx5_ib do: every attribute mandatory, the access flags checked as
 * ib_check_mr_access does, the IOVA's place in its page the offset's, and
 * the region inside the dma-buf (here any file: its size is the
 * dma-buf's). The new handle goes into the handle attribute's data, the
 * keys to the two outputs, each marked UVERBS_ATTR_F_VALID_OUTPUT.
 * Everything else fails with ENOTTY, as on a kernel without the ioctl
 * methods, so libibverbs keeps to write() for the rest. */
static int reg_dmabuf_mr(struct ib_uverbs_ioctl_hdr *h)
{
	struct ib_uverbs_attr *at[UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY + 1] = { 0 };
	for (unsigned i = 0; i < h->num_attrs; i++) {
		struct ib_uverbs_attr *a = &h->attrs[i];
		if (a->attr_id > UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY) {
			if (a->flags & UVERBS_ATTR_F_MANDATORY)
				return refuse(EPROTONOSUPPORT, "REG_DMABUF_MR: unknown mandatory attribute");
			continue;
		}
		if (at[a->attr_id])
			return refuse(EINVAL, "REG_DMABUF_MR: an attribute twice");
		at[a->attr_id] = a;
	}
	/* The attributes by id (their order in the array means nothing to
	 * the kernel): id:len:flags. */
	char sig[400] = "";
	size_t used = 0;
	for (unsigned i = 0; i <= UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY; i++) {
		if (!at[i])
			return refuse(EINVAL, "REG_DMABUF_MR: an attribute missing");
		if (used < sizeof sig)
			used += snprintf(sig + used, sizeof sig - used,
					 "%s%u:%u:%u", i ? "," : "", i,
					 at[i]->len, at[i]->flags);
	}
	if (at[UVERBS_ATTR_REG_DMABUF_MR_OFFSET]->len != 8 ||
	    at[UVERBS_ATTR_REG_DMABUF_MR_LENGTH]->len != 8 ||
	    at[UVERBS_ATTR_REG_DMABUF_MR_IOVA]->len != 8 ||
	    at[UVERBS_ATTR_REG_DMABUF_MR_FD]->len != 4 ||
	    (at[UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS]->len != 4 &&
	     at[UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS]->len != 8) ||
	    at[UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY]->len < 4 ||
	    at[UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY]->len < 4)
		return refuse(EINVAL, "REG_DMABUF_MR: an attribute's length");
	uint64_t offset = at[UVERBS_ATTR_REG_DMABUF_MR_OFFSET]->data;
	uint64_t length = at[UVERBS_ATTR_REG_DMABUF_MR_LENGTH]->data;
	uint64_t iova = at[UVERBS_ATTR_REG_DMABUF_MR_IOVA]->data;
	int fd = (int)(uint32_t)at[UVERBS_ATTR_REG_DMABUF_MR_FD]->data;
	uint64_t access = at[UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS]->data;
	if (at[UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS]->len == 4)
		access = (uint32_t)access;
	if (!live(at[UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE]->data, PD))
		return refuse(EINVAL, "REG_DMABUF_MR: no such PD");
	uint64_t supported = ((uint64_t)IB_UVERBS_ACCESS_HUGETLB << 3) - 1;
	if (access & ~(supported | IB_UVERBS_ACCESS_OPTIONAL_RANGE))
		return refuse(EINVAL, "REG_DMABUF_MR: unknown access flags");
	if ((access & (IB_UVERBS_ACCESS_REMOTE_WRITE |
		       IB_UVERBS_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_UVERBS_ACCESS_LOCAL_WRITE))
		return refuse(EINVAL, "REG_DMABUF_MR: remote write without local write");
	if (access & (IB_UVERBS_ACCESS_ON_DEMAND | (1u << 8) | (1u << 9)))
		return refuse(EOPNOTSUPP, "REG_DMABUF_MR: ODP or FLUSH on this device");
	if ((offset & 4095) != (iova & 4095))
		return refuse(EINVAL, "REG_DMABUF_MR: the IOVA off the offset's place in its page");
	struct stat st;
	if (fstat(fd, &st))
		return refuse(EBADF, "REG_DMABUF_MR: no such file");
	if (!length || offset + length < offset ||
	    (uint64_t)st.st_size < offset + length)
		return refuse(EINVAL, "REG_DMABUF_MR: the region is not inside the dma-buf");
	uint32_t hnd = new_object(MR), key = hnd << 8 | 0x22;
	at[UVERBS_ATTR_REG_DMABUF_MR_HANDLE]->data = hnd;
	for (int i = UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY;
	     i <= UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY; i++) {
		memcpy((void *)(uintptr_t)at[i]->data, &key, 4);
		at[i]->flags |= UVERBS_ATTR_F_VALID_OUTPUT;
	}
	char w[600];
	snprintf(w, sizeof w,
		 "  obj dmabuf_mr attrs=%s driver_id=%u offset=%llu length=%llu iova=%#llx access=%#llx",
		 sig, h->driver_id, (unsigned long long)offset,
		 (unsigned long long)length, (unsigned long long)iova,
		 (unsigned long long)access);
	log_bytes(w, NULL, 0);
	return 0;
}

static int answer_ioctl(unsigned long req, void *arg)
{
	struct ib_uverbs_ioctl_hdr *h = arg;
	if (req != RDMA_VERBS_IOCTL || h->object_id != UVERBS_OBJECT_MR ||
	    h->method_id != UVERBS_METHOD_REG_DMABUF_MR) {
		errno = ENOTTY;
		return -1;
	}
	char w[120];
	snprintf(w, sizeof w, "ioctl object=%u method=%u attrs=%u",
		 h->object_id, h->method_id, h->num_attrs);
	log_bytes(w, NULL, 0);
	if (h->length != sizeof *h + h->num_attrs * sizeof h->attrs[0] ||
	    h->reserved1 || h->reserved2)
		return refuse(EINVAL, "ioctl: header");
	return reg_dmabuf_mr(h) < 0 ? -1 : 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list a;
	va_start(a, req);
	void *arg = va_arg(a, void *);
	va_end(a);
	if (fd >= 0 && fd == fake_fd)
		return answer_ioctl(req, arg);
	NEXT(ioctl);
	return real(fd, req, arg);
}
