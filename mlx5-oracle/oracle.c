/*
 * rdma-core's own mlx5 post path as an oracle for provider-mlx5: the
 * differential tests (crate rverbs-mlx5-oracle) post the same requests
 * through rdma-core's mlx5_post_send and through provider-mlx5 over the
 * same queue geometry, and compare the bytes each writes.
 *
 * Test-only code, never linked into the library or the tool. `cargo xtask
 * test` compiles rdma-core's providers/mlx5/qp.c, cq.c and srq.c unchanged
 * (Debian 13's source package, 56.1, with Debian's flags) with
 * this file and the bench's stubs into a shared object, which the tests
 * load with dlopen (RVERBS_MLX5_ORACLE names it).
 *
 * Each QP is rdma-core's own struct mlx5_qp, filled in as mlx5_create_qp
 * and a modify to RTS leave it (send side only): an SQ ring, a doorbell
 * record and a BlueFlame register, all plain memory. Requests come in a
 * flat form of ours (struct oracle_req), turned into a C ibv_send_wr list
 * here, so the Rust side declares no C union.
 */
#include <config.h>

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlx5.h"
#include "wqe.h"

/* One send request, flat. Field for field the Rust `OracleReq`. */
struct oracle_req {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	const struct ibv_sge *sges;
	struct ibv_ah *ah;
	int32_t opcode;		/* enum ibv_wr_opcode */
	uint32_t send_flags;	/* IBV_SEND_* */
	uint32_t imm_or_inv;	/* imm_data (network order) or invalidate_rkey */
	int32_t num_sge;
	uint32_t rkey;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	uint32_t pad;
};

struct oracle {
	struct mlx5_context ctx;
	/* The QP's PD: scatter-to-CQE copies find the context through it
	 * (mlx5_copy_to_recv_wqe). */
	struct ibv_pd pd;
	struct mlx5_cq cq;
	struct mlx5_qp qp;
	struct mlx5_bf bf;
	void *ring;
	__be32 dbrec[2];
	/* Both BlueFlame halves (at least one 8-byte doorbell each). */
	uint8_t *uar;
	size_t uar_len;
	/* The send CQ's ring (oracle_cq_init), and whether the QP is in the
	 * context's table. */
	uint8_t *cq_ring;
	unsigned ncqe;
	__be32 cq_dbrec[2];
	int stored;
	/* The receive queue's ring (oracle_rq_init). */
	uint8_t *rq_ring;
	size_t rq_len;
	/* A shared receive queue (oracle_srq_init), and whether it is in the
	 * context's table. */
	struct mlx5_srq srq;
	uint8_t *srq_ring;
	size_t srq_len;
	__be32 srq_dbrec;
	int srq_stored;
};

/* One receive request, flat. Field for field the Rust `OracleRecv`. */
struct oracle_recv {
	uint64_t wr_id;
	const struct ibv_sge *sges;
	int32_t num_sge;
	uint32_t pad;
};

void oracle_free(struct oracle *o);

/* For the Rust side's layout checks. */
size_t oracle_sizeof_req(void)
{
	return sizeof(struct oracle_req);
}

size_t oracle_offsetof_req_rkey(void)
{
	return offsetof(struct oracle_req, rkey);
}

size_t oracle_sizeof_recv(void)
{
	return sizeof(struct oracle_recv);
}

/* /dev/null as a stream, opened once (stderr if it cannot be). */
static FILE *quiet(void)
{
	static FILE *f;

	if (!f)
		f = fopen("/dev/null", "w");
	return f ? f : stderr;
}

static void *zalloc(size_t n)
{
	void *p;

	if (posix_memalign(&p, 4096, n ? n : 1))
		return NULL;
	memset(p, 0, n);
	return p;
}

/*
 * A QP of type qp_type (IBV_QPT_RC/UC/UD) with an SQ of wqe_cnt basic
 * blocks, max_gs SGEs and max_inline inline bytes per request, a
 * BlueFlame register of two bf_size halves (blueflame: 0 for bfreg 0,
 * which only has the doorbell), rdma-core's prefer_bf, and every send
 * signaled if sig_all. NULL if memory runs out.
 */
struct oracle *oracle_new(int qp_type, unsigned wqe_cnt, unsigned max_gs,
			  unsigned max_inline, unsigned bf_size, int blueflame,
			  int prefer_bf, int sig_all, unsigned qpn,
			  unsigned max_post)
{
	struct oracle *o = zalloc(sizeof(*o));
	struct ibv_qp *ibqp;

	if (!o)
		return NULL;
	o->ring = zalloc((size_t)wqe_cnt * MLX5_SEND_WQE_BB);
	o->uar_len = bf_size ? 2 * (size_t)bf_size : 16;
	o->uar = zalloc(o->uar_len);
	o->qp.sq.wrid = calloc(wqe_cnt, sizeof(*o->qp.sq.wrid));
	o->qp.sq.wqe_head = calloc(wqe_cnt, sizeof(*o->qp.sq.wqe_head));
	o->qp.sq.wr_data = calloc(wqe_cnt, sizeof(*o->qp.sq.wr_data));
	if (!o->ring || !o->uar || !o->qp.sq.wrid || !o->qp.sq.wqe_head ||
	    !o->qp.sq.wr_data) {
		oracle_free(o);
		return NULL;
	}

	/* mlx5_init_context's defaults but prefer_bf, which is asked, and
	 * the debug stream: every error CQE the tests feed would be dumped
	 * to it (mlx5_handle_error_cqe), tens of thousands a run. */
	o->ctx.prefer_bf = prefer_bf;
	o->ctx.shut_up_bf = 0;
	o->ctx.dbg_fp = quiet();

	/* The send CQ: only its lock is read (mlx5_wq_overflow), and only
	 * when the queue looks full. */
	o->cq.verbs_cq.cq.context = &o->ctx.ibv_ctx.context;

	/* The register: a dedicated bfreg's two halves, or bfreg 0 (uuarn
	 * 0: doorbell only). Unlocked, as for a dedicated register. */
	o->bf.reg = o->uar;
	o->bf.buf_size = bf_size;
	o->bf.uuarn = blueflame ? 1 : 0;
	o->bf.need_lock = 0;

	o->qp.rsc.type = MLX5_RSC_TYPE_QP;
	o->qp.rsc.rsn = qpn;
	o->qp.ibv_qp = &o->qp.verbs_qp.qp;
	ibqp = o->qp.ibv_qp;
	ibqp->context = &o->ctx.ibv_ctx.context;
	o->pd.context = &o->ctx.ibv_ctx.context;
	ibqp->pd = &o->pd;
	ibqp->qp_num = qpn;
	ibqp->qp_type = qp_type;
	ibqp->state = IBV_QPS_RTS;
	ibqp->send_cq = &o->cq.verbs_cq.cq;
	ibqp->recv_cq = &o->cq.verbs_cq.cq;
	o->qp.bf = &o->bf;
	o->qp.db = o->dbrec;
	o->qp.sq_start = o->ring;
	o->qp.sq.qend = (char *)o->ring + (size_t)wqe_cnt * MLX5_SEND_WQE_BB;
	o->qp.sq.wqe_cnt = wqe_cnt;
	o->qp.sq.max_post = max_post;
	o->qp.sq.max_gs = max_gs;
	o->qp.sq.qp_state_max_gs = max_gs;
	o->qp.sq.wqe_shift = MLX5_SEND_WQE_SHIFT;
	o->qp.max_inline_data = max_inline;
	/* mlx5_create_qp: MLX5_WQE_CTRL_CQ_UPDATE in every WQE if sq_sig_all. */
	o->qp.sq_signal_bits = sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	/* A device with atomics (mlx5_create_qp sets it from the caps). */
	o->qp.atomics_enabled = 1;
	return o;
}

/* An address handle holding the 48-byte address vector av, as
 * mlx5_create_ah leaves struct mlx5_ah for a user AH. */
struct ibv_ah *oracle_ah(const uint8_t *av)
{
	struct mlx5_ah *ah = zalloc(sizeof(*ah));

	if (!ah)
		return NULL;
	memcpy(&ah->av, av, sizeof(ah->av));
	return &ah->ibv_ah;
}

/*
 * Posts the n requests of reqs as one ibv_send_wr list through rdma-core's
 * mlx5_post_send. Returns its errno (0 on success); *bad the index of the
 * request it named in bad_wr, or -1.
 */
int oracle_post(struct oracle *o, const struct oracle_req *reqs, int n,
		int *bad)
{
	struct ibv_send_wr *wrs = calloc(n ? n : 1, sizeof(*wrs));
	struct ibv_send_wr *bad_wr = NULL;
	int i, err;

	if (!wrs)
		return ENOMEM;
	for (i = 0; i < n; i++) {
		const struct oracle_req *r = &reqs[i];
		struct ibv_send_wr *w = &wrs[i];

		w->wr_id = r->wr_id;
		w->next = i + 1 < n ? &wrs[i + 1] : NULL;
		w->sg_list = (struct ibv_sge *)r->sges;
		w->num_sge = r->num_sge;
		w->opcode = r->opcode;
		w->send_flags = r->send_flags;
		if (r->opcode == IBV_WR_SEND_WITH_INV ||
		    r->opcode == IBV_WR_LOCAL_INV)
			w->invalidate_rkey = r->imm_or_inv;
		else
			w->imm_data = r->imm_or_inv;
		switch (r->opcode) {
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			w->wr.atomic.remote_addr = r->remote_addr;
			w->wr.atomic.compare_add = r->compare_add;
			w->wr.atomic.swap = r->swap;
			w->wr.atomic.rkey = r->rkey;
			break;
		default:
			if (r->ah) {
				w->wr.ud.ah = r->ah;
				w->wr.ud.remote_qpn = r->remote_qpn;
				w->wr.ud.remote_qkey = r->remote_qkey;
			} else {
				w->wr.rdma.remote_addr = r->remote_addr;
				w->wr.rdma.rkey = r->rkey;
			}
		}
	}
	err = mlx5_post_send(o->qp.ibv_qp, wrs, &bad_wr);
	*bad = bad_wr ? (int)(bad_wr - wrs) : -1;
	free(wrs);
	return err;
}

/* Every WQE posted so far completed: what the poller's retirement leaves
 * (the queue's tail caught up with its head). */
void oracle_retire(struct oracle *o)
{
	o->qp.sq.tail = o->qp.sq.head;
}

const uint8_t *oracle_ring(const struct oracle *o)
{
	return o->ring;
}

uint32_t oracle_snd_dbrec(const struct oracle *o)
{
	return be32toh(o->dbrec[MLX5_SND_DBR]);
}

const uint8_t *oracle_uar(const struct oracle *o)
{
	return o->uar;
}

size_t oracle_uar_len(const struct oracle *o)
{
	return o->uar_len;
}

unsigned oracle_cur_post(const struct oracle *o)
{
	return o->qp.sq.cur_post;
}

/*
 * Gives the QP a send CQ of ncqe 64-byte CQEs, as mlx5_create_cq leaves
 * it (every CQE invalid and owned by the hardware, consumer index 0, CQE
 * version 0, no lock), and enters the QP in the context's table, where
 * mlx5_poll_cq finds a CQE's QP by number. 0 or an errno.
 */
int oracle_cq_init(struct oracle *o, unsigned ncqe)
{
	unsigned i;

	o->cq_ring = zalloc((size_t)ncqe * 64);
	if (!o->cq_ring)
		return ENOMEM;
	o->ncqe = ncqe;
	o->cq.verbs_cq.cq.cqe = ncqe - 1;
	o->cq.buf_a.buf = o->cq_ring;
	o->cq.active_buf = &o->cq.buf_a;
	o->cq.cqe_sz = 64;
	o->cq.dbrec = o->cq_dbrec;
	o->cq.cqn = 7;
	pthread_spin_init(&o->cq.lock.lock, PTHREAD_PROCESS_PRIVATE);
	for (i = 0; i < ncqe; i++) {
		struct mlx5_cqe64 *cqe = (void *)(o->cq_ring + (size_t)i * 64);

		cqe->op_own = MLX5_CQE_INVALID << 4;
	}
	if (mlx5_store_qp(&o->ctx, o->qp.ibv_qp->qp_num, &o->qp))
		return ENOMEM;
	o->stored = 1;
	return 0;
}

/*
 * Gives the QP a receive queue of wqe_cnt WQEs of 1 << wqe_shift bytes and
 * max_gs SGEs, as mlx5_create_qp leaves it (its buffer apart from the
 * SQ's here; no WQE signature), receiving on the send CQ. 0 or an errno.
 */
int oracle_rq_init(struct oracle *o, unsigned wqe_cnt, unsigned wqe_shift,
		   unsigned max_gs)
{
	o->rq_len = (size_t)wqe_cnt << wqe_shift;
	o->rq_ring = zalloc(o->rq_len);
	o->qp.rq.wrid = calloc(wqe_cnt, sizeof(*o->qp.rq.wrid));
	if (!o->rq_ring || !o->qp.rq.wrid)
		return ENOMEM;
	o->qp.buf.buf = o->rq_ring;
	o->qp.rq.offset = 0;
	o->qp.rq.wqe_cnt = wqe_cnt;
	o->qp.rq.wqe_shift = wqe_shift;
	o->qp.rq.max_gs = max_gs;
	o->qp.rq.qp_state_max_gs = max_gs;
	o->qp.rq.max_post = wqe_cnt;
	return 0;
}

/* mlx5_post_recv of reqs as one list: its errno; *bad the index of the
 * request it named in bad_wr, or -1. */
/* reqs as one C list, for a receive post (NULL if memory runs out). */
static struct ibv_recv_wr *recv_list(const struct oracle_recv *reqs, int n)
{
	struct ibv_recv_wr *wrs = calloc(n ? n : 1, sizeof(*wrs));
	int i;

	if (!wrs)
		return NULL;
	for (i = 0; i < n; i++) {
		wrs[i].wr_id = reqs[i].wr_id;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		wrs[i].sg_list = (struct ibv_sge *)reqs[i].sges;
		wrs[i].num_sge = reqs[i].num_sge;
	}
	return wrs;
}

int oracle_post_recv(struct oracle *o, const struct oracle_recv *reqs, int n,
		     int *bad)
{
	struct ibv_recv_wr *wrs = recv_list(reqs, n);
	struct ibv_recv_wr *bad_wr = NULL;
	int err;

	if (!wrs)
		return ENOMEM;
	err = mlx5_post_recv(o->qp.ibv_qp, wrs, &bad_wr);
	*bad = bad_wr ? (int)(bad_wr - wrs) : -1;
	free(wrs);
	return err;
}

uint8_t *oracle_rq_ring(struct oracle *o)
{
	return o->rq_ring;
}

uint32_t oracle_rcv_dbrec(const struct oracle *o)
{
	return be32toh(o->dbrec[MLX5_RCV_DBR]);
}

/*
 * A shared receive queue of nwqes WQEs of 1 << wqe_shift bytes (a 16-byte
 * next segment, then max_gs data segments), numbered srqn, as
 * mlx5_create_srq leaves it when the device has no room for the wait
 * queue (mlx5_alloc_srq_buf's have_wq false; provider-mlx5 keeps none,
 * docs/mlx5.md): every WQE free and linked to the next, head 0, tail the
 * last; entered in the context's table, where mlx5_poll_cq finds a CQE's
 * SRQ by number. 0 or an errno.
 */
int oracle_srq_init(struct oracle *o, unsigned nwqes, unsigned wqe_shift,
		    unsigned max_gs, unsigned srqn)
{
	struct mlx5_srq *srq = &o->srq;
	size_t longs = (nwqes + 8 * sizeof(long) - 1) / (8 * sizeof(long));
	unsigned i;

	o->srq_len = (size_t)nwqes << wqe_shift;
	o->srq_ring = zalloc(o->srq_len);
	srq->wrid = calloc(nwqes, sizeof(*srq->wrid));
	/* bitmap_alloc0's layout: longs, bit i of word i / BITS_PER_LONG. */
	srq->free_wqe_bitmap = calloc(longs, sizeof(long));
	if (!o->srq_ring || !srq->wrid || !srq->free_wqe_bitmap)
		return ENOMEM;
	srq->vsrq.srq.context = &o->ctx.ibv_ctx.context;
	srq->buf.buf = o->srq_ring;
	srq->srqn = srqn;
	srq->max = nwqes;
	srq->max_gs = max_gs;
	srq->wqe_shift = wqe_shift;
	srq->head = 0;
	srq->tail = nwqes - 1;
	srq->nwqes = nwqes;
	srq->waitq_head = -1;
	srq->waitq_tail = -1;
	srq->db = &o->srq_dbrec;
	pthread_spin_init(&srq->lock.lock, PTHREAD_PROCESS_PRIVATE);
	for (i = 0; i + 1 < nwqes; i++) {
		struct mlx5_wqe_srq_next_seg *next =
			(void *)(o->srq_ring + ((size_t)i << wqe_shift));

		next->next_wqe_index = htobe16(i + 1);
	}
	if (mlx5_store_srq(&o->ctx, srqn, srq))
		return ENOMEM;
	o->srq_stored = 1;
	return 0;
}

/* mlx5_post_srq_recv of reqs as one list: its errno; *bad the index of
 * the request it named in bad_wr, or -1. */
int oracle_post_srq_recv(struct oracle *o, const struct oracle_recv *reqs,
			 int n, int *bad)
{
	struct ibv_recv_wr *wrs = recv_list(reqs, n);
	struct ibv_recv_wr *bad_wr = NULL;
	int err;

	if (!wrs)
		return ENOMEM;
	err = mlx5_post_srq_recv(&o->srq.vsrq.srq, wrs, &bad_wr);
	*bad = bad_wr ? (int)(bad_wr - wrs) : -1;
	free(wrs);
	return err;
}

uint8_t *oracle_srq_ring(struct oracle *o)
{
	return o->srq_ring;
}

/* The SRQ's doorbell record (its 16-bit post counter), host order. */
uint32_t oracle_srq_dbrec(const struct oracle *o)
{
	return be32toh(o->srq_dbrec);
}

/* mlx5_poll_cq of up to n completions into wc. */
int oracle_poll(struct oracle *o, int n, struct ibv_wc *wc)
{
	return mlx5_poll_cq(&o->cq.verbs_cq.cq, n, wc);
}

/* The CQ ring, which the tests write CQEs into as the device would. */
uint8_t *oracle_cq_ring(struct oracle *o)
{
	return o->cq_ring;
}

/* For the Rust side's layout check of its ibv_wc. */
size_t oracle_sizeof_wc(void)
{
	return sizeof(struct ibv_wc);
}

void oracle_free(struct oracle *o)
{
	if (!o)
		return;
	if (o->stored)
		mlx5_clear_qp(&o->ctx, o->qp.ibv_qp->qp_num);
	if (o->srq_stored)
		mlx5_clear_srq(&o->ctx, o->srq.srqn);
	free(o->srq_ring);
	free(o->srq.wrid);
	free(o->srq.free_wqe_bitmap);
	free(o->cq_ring);
	free(o->rq_ring);
	free(o->qp.rq.wrid);
	free(o->qp.sq.wrid);
	free(o->qp.sq.wqe_head);
	free(o->qp.sq.wr_data);
	free(o->ring);
	free(o->uar);
	free(o);
}

void oracle_ah_free(struct ibv_ah *ah)
{
	free(ah ? to_mah(ah) : NULL);
}
