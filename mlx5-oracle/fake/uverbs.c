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

int ioctl(int fd, unsigned long req, ...)
{
	va_list a;
	va_start(a, req);
	void *arg = va_arg(a, void *);
	va_end(a);
	if (fd >= 0 && fd == fake_fd) {
		errno = ENOTTY;
		return -1;
	}
	NEXT(ioctl);
	return real(fd, req, arg);
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

static uint32_t next_handle = 1;

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
		.cqe_version = q.max_cqe_version ? 1 : 0,
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

static ssize_t answer(const uint8_t *buf, size_t len)
{
	struct ib_uverbs_cmd_hdr h;
	if (len < sizeof h + 8) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&h, buf, sizeof h);
	uint32_t cmd = h.command & IB_USER_VERBS_CMD_COMMAND_MASK;
	int ex = !!(h.command & IB_USER_VERBS_CMD_FLAG_EXTENDED);
	char w[80];
	snprintf(w, sizeof w, "write cmd=%u ex=%d len=%zu", cmd, ex, len);
	log_bytes(w, buf, len);
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
		return (ssize_t)len;
	memset(r, 0, out);
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
	default: {
		/* Objects (ALLOC_PD, ...): a handle in the first word. */
		uint32_t hnd = next_handle++;
		if (out >= 4)
			memcpy(r, &hnd, 4);
		break;
	}
	}
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
