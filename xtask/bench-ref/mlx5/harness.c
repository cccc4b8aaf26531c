/*
 * rdma-core's own mlx5 data path over plain memory: the reference figures
 * of `cargo xtask bench` for provider-mlx5.
 *
 * Bench-only code, never linked into the library or the tool. xtask
 * compiles rdma-core 44's providers/mlx5/qp.c and cq.c unchanged (from
 * Debian's rdma-core source package, with Debian's compiler flags) and
 * links them with this file and stubs for the functions the measured
 * paths never reach (stubs.c, generated: each aborts). The QP, CQ and
 * context are rdma-core's own structures, filled in here as
 * mlx5_create_qp/mlx5_create_cq would for an RC QP on a device: an SQ ring,
 * a CQ ring, doorbell records and a doorbell (UAR) page, all plain memory.
 * A small "device" (device() below, not measured) consumes the WQEs, moves
 * the data and writes requester CQEs the way an mlx5 HCA does.
 *
 * Each measured call goes through its own out-of-line caller (ref_*), so
 * that callgrind's call graph separates the scenarios; xtask reads the
 * inclusive cost of mlx5_post_send / mlx5_poll_cq as called from each.
 * The work request is the one provider-mlx5's benchmark posts on the
 * device model: one signaled RDMA WRITE of 64 bytes, one SGE, RC.
 *
 * usage: harness ITERATIONS
 */
#include <config.h>

#include <endian.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlx5.h"
#include "wqe.h"

enum {
	SQ_WQES = 256,
	CQES = 256,
	QPN = 0x123,
	/* What mlx5 reports for a dedicated (low-latency) BlueFlame
	 * register: two buffers of 256 bytes each. */
	BF_BUF_SIZE = 256,
};

static struct mlx5_context *ctx;
static struct mlx5_qp *qp;
static struct mlx5_cq *cq;
static struct mlx5_bf bf;
static void *sq_ring, *cq_ring;
static __be32 qp_dbrec[2], cq_dbrec[2];
static char uar_page[4096] __attribute__((aligned(4096)));
static char src[64] __attribute__((aligned(64)));
static char dst[64] __attribute__((aligned(64)));

/* The device's own cursors: the next WQE it reads, the next CQE it
 * writes. */
static unsigned dev_sq, dev_cq;

static void *zalloc(size_t n)
{
	void *p;

	if (posix_memalign(&p, 4096, n)) {
		perror("posix_memalign");
		exit(2);
	}
	memset(p, 0, n);
	return p;
}

static void setup(void)
{
	struct ibv_qp *ibqp;
	struct mlx5_cqe64 *cqe;
	int i;

	ctx = zalloc(sizeof(*ctx));
	cq = zalloc(sizeof(*cq));
	qp = zalloc(sizeof(*qp));
	sq_ring = zalloc(SQ_WQES * MLX5_SEND_WQE_BB);
	cq_ring = zalloc(CQES * 64);

	/* The context as mlx5_init_context leaves it by default: BlueFlame
	 * only for inline sends (prefer_bf 0), CQE version 0. */
	ctx->prefer_bf = 0;
	ctx->shut_up_bf = 0;
	ctx->dbg_fp = stderr;

	/* The CQ, as mlx5_create_cq sets it: every CQE invalid and owned by
	 * the hardware, the consumer index at 0, no stalling, no lock
	 * (MLX5_SINGLE_THREADED=1, or a thread domain). */
	cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
	cq->verbs_cq.cq.cqe = CQES - 1;
	cq->buf_a.buf = cq_ring;
	cq->active_buf = &cq->buf_a;
	cq->cqe_sz = 64;
	cq->dbrec = cq_dbrec;
	cq->cqn = 7;
	pthread_spin_init(&cq->lock.lock, PTHREAD_PROCESS_PRIVATE);
	for (i = 0; i < CQES; i++) {
		cqe = (struct mlx5_cqe64 *)((char *)cq_ring + i * 64);
		cqe->op_own = MLX5_CQE_INVALID << 4;
	}

	/* The doorbell page: the UAR's first BlueFlame register. */
	bf.reg = uar_page;
	bf.buf_size = BF_BUF_SIZE;
	bf.uuarn = 1;
	pthread_spin_init(&bf.lock.lock, PTHREAD_PROCESS_PRIVATE);

	/* The QP in RTS, as mlx5_create_qp + modify to RTS leave it. */
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = QPN;
	qp->ibv_qp = &qp->verbs_qp.qp;
	ibqp = qp->ibv_qp;
	ibqp->context = &ctx->ibv_ctx.context;
	ibqp->qp_num = QPN;
	ibqp->qp_type = IBV_QPT_RC;
	ibqp->state = IBV_QPS_RTS;
	ibqp->send_cq = &cq->verbs_cq.cq;
	ibqp->recv_cq = &cq->verbs_cq.cq;
	qp->bf = &bf;
	qp->db = qp_dbrec;
	qp->sq_start = sq_ring;
	qp->sq.qend = (char *)sq_ring + SQ_WQES * MLX5_SEND_WQE_BB;
	qp->sq.wqe_cnt = SQ_WQES;
	qp->sq.max_post = SQ_WQES;
	qp->sq.max_gs = 1;
	qp->sq.qp_state_max_gs = 1;
	qp->sq.wqe_shift = 6;
	qp->sq.wrid = calloc(SQ_WQES, sizeof(*qp->sq.wrid));
	qp->sq.wqe_head = calloc(SQ_WQES, sizeof(*qp->sq.wqe_head));
	qp->sq.wr_data = calloc(SQ_WQES, sizeof(*qp->sq.wr_data));
	pthread_spin_init(&qp->sq.lock.lock, PTHREAD_PROCESS_PRIVATE);
	qp->max_inline_data = 0;
	if (!qp->sq.wrid || !qp->sq.wqe_head || !qp->sq.wr_data) {
		perror("calloc");
		exit(2);
	}
	/* The CQ finds the QP of a CQE by number in the context's table. */
	if (mlx5_store_qp(ctx, QPN, qp)) {
		fprintf(stderr, "mlx5_store_qp failed\n");
		exit(2);
	}
}

/* The HCA, not measured: executes every WQE posted since the last call
 * (an RDMA WRITE here: copies the data) and writes a requester CQE for
 * each signaled one, the owner bit flipping on every pass of the ring. */
static void device(void)
{
	while (dev_sq != qp->sq.cur_post) {
		char *wqe = (char *)sq_ring +
			    ((dev_sq & (SQ_WQES - 1)) << MLX5_SEND_WQE_SHIFT);
		struct mlx5_wqe_ctrl_seg *ctrl = (void *)wqe;
		struct mlx5_wqe_raddr_seg *raddr = (void *)(ctrl + 1);
		struct mlx5_wqe_data_seg *data = (void *)(raddr + 1);
		uint32_t word = be32toh(ctrl->opmod_idx_opcode);
		uint32_t ds = be32toh(ctrl->qpn_ds) & 0x3f;
		uint8_t opcode = word & 0xff;
		uint16_t counter = (word >> 8) & 0xffff;

		if (opcode != MLX5_OPCODE_RDMA_WRITE || ds != 3 ||
		    be32toh(data->byte_count) != 64) {
			fprintf(stderr, "device: unexpected WQE %08x ds %u\n",
				word, ds);
			exit(2);
		}
		memcpy((void *)(uintptr_t)be64toh(raddr->raddr),
		       (void *)(uintptr_t)be64toh(data->addr), 64);
		if (ctrl->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) {
			struct mlx5_cqe64 *cqe = (void *)((char *)cq_ring +
				(dev_cq & (CQES - 1)) * 64);

			memset(cqe, 0, 63);
			cqe->byte_cnt = htobe32(64);
			cqe->wqe_counter = htobe16(counter);
			cqe->sop_drop_qpn =
				htobe32((MLX5_OPCODE_RDMA_WRITE << 24) | QPN);
			__atomic_thread_fence(__ATOMIC_RELEASE);
			cqe->op_own = (MLX5_CQE_REQ << 4) |
				      ((dev_cq / CQES) & 1);
			dev_cq++;
		}
		dev_sq += (ds * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
	}
}

/* The measured callers: one per scenario, never inlined or merged, so
 * that each shows as its own caller of mlx5_post_send / mlx5_poll_cq. */
#define MEASURED __attribute__((noinline, noipa))

MEASURED int ref_post_db(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return mlx5_post_send(qp->ibv_qp, wr, &bad);
}

MEASURED int ref_post_locked(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return mlx5_post_send(qp->ibv_qp, wr, &bad);
}

MEASURED int ref_post_bf(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return mlx5_post_send(qp->ibv_qp, wr, &bad);
}

MEASURED int ref_poll_one(struct ibv_wc *wc)
{
	return mlx5_poll_cq(&cq->verbs_cq.cq, 1, wc);
}

MEASURED int ref_poll_four(struct ibv_wc *wc)
{
	return mlx5_poll_cq(&cq->verbs_cq.cq, 4, wc);
}

MEASURED int ref_poll_empty(struct ibv_wc *wc)
{
	return mlx5_poll_cq(&cq->verbs_cq.cq, 1, wc);
}

/* Not measured: posts for the poll scenarios. */
static void post_unmeasured(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (mlx5_post_send(qp->ibv_qp, wr, &bad)) {
		fprintf(stderr, "post failed\n");
		exit(2);
	}
}

static void check(int n, int want, struct ibv_wc *wc, uint64_t first_id,
		  const char *what)
{
	int i;

	if (n != want) {
		fprintf(stderr, "%s: polled %d, expected %d\n", what, n, want);
		exit(2);
	}
	for (i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].opcode != IBV_WC_RDMA_WRITE ||
		    wc[i].wr_id != first_id + i || wc[i].qp_num != QPN) {
			fprintf(stderr, "%s: bad completion %d: status %d "
				"opcode %d wr_id %llu\n", what, i,
				wc[i].status, wc[i].opcode,
				(unsigned long long)wc[i].wr_id);
			exit(2);
		}
	}
	if (n && memcmp(src, dst, sizeof(dst))) {
		fprintf(stderr, "%s: the data did not land\n", what);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 1000;
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	struct ibv_wc wc[4];
	uint64_t id = 0;
	long i;
	int j, n;

	setup();
	memset(&sge, 0, sizeof(sge));
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)src;
	sge.length = sizeof(src);
	sge.lkey = 0x1234;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = 0x5678;

	/* post (8-byte doorbell, no lock), then poll one completion. */
	for (i = 0; i < iters; i++) {
		memset(src, (int)(i * 13 + 1), sizeof(src));
		wr.wr_id = id;
		if (ref_post_db(&wr))
			return 1;
		device();
		n = ref_poll_one(wc);
		check(n, 1, wc, id, "poll one");
		id++;
		/* and an empty poll */
		check(ref_poll_empty(wc), 0, wc, id, "empty poll");
	}
	/* four completions in one poll */
	for (i = 0; i < iters; i++) {
		for (j = 0; j < 4; j++) {
			wr.wr_id = id + j;
			post_unmeasured(&wr);
		}
		device();
		n = ref_poll_four(wc);
		check(n, 4, wc, id, "poll four");
		id += 4;
	}
	/* post with rdma-core's default locking (the SQ spinlock) */
	qp->sq.lock.need_lock = 1;
	cq->lock.need_lock = 0;
	for (i = 0; i < iters; i++) {
		wr.wr_id = id;
		if (ref_post_locked(&wr))
			return 1;
		device();
		check(mlx5_poll_cq(&cq->verbs_cq.cq, 1, wc), 1, wc, id,
		      "locked");
		id++;
	}
	/* post through BlueFlame (MLX5_POST_SEND_PREFER_BF=1), no lock */
	qp->sq.lock.need_lock = 0;
	ctx->prefer_bf = 1;
	for (i = 0; i < iters; i++) {
		wr.wr_id = id;
		if (ref_post_bf(&wr))
			return 1;
		device();
		check(mlx5_poll_cq(&cq->verbs_cq.cq, 1, wc), 1, wc, id, "bf");
		id++;
	}
	printf("rdma-core mlx5 reference: %ld iterations of each scenario, "
	       "every completion checked\n", iters);
	return 0;
}
