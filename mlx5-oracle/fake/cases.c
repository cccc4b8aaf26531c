/*
 * The C side of the creation differential against the fake uverbs device
 * (issue 29; `xtask/src/test/fake_mlx5.rs` runs it, this crate's
 * `src/bin/fake_cases.rs` is the Rust side): opens mlx5_0 with rdma-core's
 * libibverbs and libmlx5, allocates a PD and registers an MR, then for
 * every case of the file named by argv[1] registers a dma-buf MR (over a
 * memfd of 16 MiB: the fake takes any file for a dma-buf) and deregisters
 * it, then creates a CQ, an SRQ if the case has one, and a QP on them, and
 * destroys them again. One line a case on
 * stdout: the errno of each step (0: created; '-': not tried) and what
 * the provider granted. Before each case, "case N" goes into the fake's
 * log, which is how the checker finds each case's commands.
 *
 * A case: cqe srq_max_wr srq_max_sge qp_type max_send_wr max_recv_wr
 * max_send_sge max_recv_sge max_inline_data sq_sig_all (srq_max_wr 0: no
 * SRQ) dmabuf_offset dmabuf_length dmabuf_iova dmabuf_access.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static void die(const char *what)
{
	fprintf(stderr, "cases: %s: %s\n", what, strerror(errno));
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: cases FILE\n");
		return 2;
	}
	FILE *in = fopen(argv[1], "r");
	const char *lp = getenv("FAKE_UVERBS_LOG");
	FILE *log = lp ? fopen(lp, "a") : NULL;
	if (!in || !log)
		die("open");
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		die("no device");
	struct ibv_context *ctx = NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "mlx5_0"))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("open mlx5_0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	static char mem[8192];
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, sizeof mem,
				       IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	int dmabuf = memfd_create("dmabuf", MFD_CLOEXEC);
	if (dmabuf < 0 || ftruncate(dmabuf, 16 << 20))
		die("memfd");
	unsigned cqe, srq_wr, srq_sge, type, sw, rw, ss, rs, inl, sig, acc;
	unsigned long long off, len, iova;
	for (int k = 0; fscanf(in, "%u %u %u %u %u %u %u %u %u %u %llu %llu %llu %u",
			       &cqe, &srq_wr, &srq_sge, &type, &sw, &rw, &ss,
			       &rs, &inl, &sig, &off, &len, &iova, &acc) == 14;
	     k++) {
		fprintf(log, "case %d\n", k);
		fflush(log);
		printf("case %d", k);
		struct ibv_mr *dm =
			ibv_reg_dmabuf_mr(pd, off, len, iova, dmabuf, acc);
		printf(" dmabuf=%d", dm ? 0 : errno);
		if (dm && ibv_dereg_mr(dm))
			die("ibv_dereg_mr");
		struct ibv_cq *cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
		if (!cq) {
			printf(" cq=%d\n", errno);
			continue;
		}
		printf(" cq=0/%d", cq->cqe);
		struct ibv_srq *srq = NULL;
		if (srq_wr) {
			struct ibv_srq_init_attr sa = {
				.attr = { .max_wr = srq_wr, .max_sge = srq_sge }
			};
			srq = ibv_create_srq(pd, &sa);
			if (!srq) {
				printf(" srq=%d\n", errno);
				ibv_destroy_cq(cq);
				continue;
			}
			printf(" srq=0/%u", sa.attr.max_wr);
		}
		struct ibv_qp_init_attr qa = {
			.send_cq = cq,
			.recv_cq = cq,
			.srq = srq,
			.qp_type = type,
			.sq_sig_all = sig,
			.cap = { .max_send_wr = sw,
				 .max_recv_wr = rw,
				 .max_send_sge = ss,
				 .max_recv_sge = rs,
				 .max_inline_data = inl },
		};
		struct ibv_qp *qp = ibv_create_qp(pd, &qa);
		if (!qp) {
			printf(" qp=%d\n", errno);
		} else {
			printf(" qp=0/%u/%u/%u/%u/%u\n", qa.cap.max_send_wr,
			       qa.cap.max_recv_wr, qa.cap.max_send_sge,
			       qa.cap.max_recv_sge, qa.cap.max_inline_data);
			if (ibv_destroy_qp(qp))
				die("ibv_destroy_qp");
		}
		if (srq && ibv_destroy_srq(srq))
			die("ibv_destroy_srq");
		if (ibv_destroy_cq(cq))
			die("ibv_destroy_cq");
	}
	if (ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("tear-down");
	ibv_free_device_list(list);
	return 0;
}
