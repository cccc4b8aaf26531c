/*
 * What a destroy, an event and an ibv_wr_* batch answer when the answer
 * matters for memory safety (vm-tests/tests/libibverbs_sound.rs compiles
 * this in the VM and runs each case over rdma-core's libibverbs.so.1 and
 * over rverbs'; the outputs must be identical):
 *
 *   mr_window  ibv_dereg_mr while a type 1 window is bound: the kernel
 *              refuses (EINVAL); the MR stays registered and usable, and
 *              its PD cannot be deallocated (EBUSY).
 *   mr_retry   the same, then ibv_dealloc_mw and ibv_dereg_mr again: the
 *              MR goes.
 *   qp_mcast   ibv_destroy_qp of a QP attached to a multicast group: EBUSY,
 *              the QP stays usable; after the detach it goes.
 *   cq_events  ibv_destroy_cq waits for the event handed out to be
 *              acknowledged.
 *   cq_race    get_cq_event on one thread against create/destroy_cq on
 *              another, many rounds: every event names a live CQ.
 *   wr_batch   with sends outstanding, an ibv_wr_* batch larger than the
 *              room left fails and posts nothing; a batch that fits goes;
 *              so does a send whose SGE list lies at an odd address.
 *   cq_ex      extended CQs: the SINGLE_THREADED flag, a poll of -1, and
 *              two threads' poll sessions, which must not interleave.
 *   wr_batch_inline  wr_batch, then an inline send whose ibv_data_buf list
 *              lies at an odd address (its bytes must land).
 *   dmabuf     ibv_reg_dmabuf_mr over a memfd, an empty one, a closed
 *              descriptor and a misplaced IOVA: what each answers (rxe
 *              has no dma-buf MRs), and the PD still goes.
 *   eintr      ibv_get_cq_event blocked when a signal handler runs: one
 *              installed without SA_RESTART ends it with EINTR; with
 *              SA_RESTART the wait goes on, to the CQ's event.
 *   cancel     a thread blocked in ibv_get_cq_event is cancelled (rping
 *              ends its CQ thread so) and its cleanup runs; the channel
 *              then serves the next reader; a cancellation pending on
 *              entry acts there even with an event queued, which stays;
 *              a blocking read after both gets its event (nothing was
 *              left locked), and the CQ and channel go.
 *   answers    what the control path answers where the kernel or the
 *              library refuses: GID queries of an empty entry, of an index
 *              past the table and of a missing port (a scan for a GID
 *              index must end); ibv_rereg_mr (rxe has none) with good and
 *              bad arguments; ibv_query_qp of an attribute only the
 *              extended command takes.
 *
 * No QP numbers, keys or addresses are printed.
 */
#define _GNU_SOURCE /* memfd_create */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c, what)                                                        \
	do {                                                                  \
		if (!(c)) {                                                   \
			printf("FATAL line %d: %s (errno %d)\n", __LINE__,    \
			       what, errno);                                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gidx;
static char *buf;
static struct ibv_mr *mr;

enum { BUF = 1 << 16, QKEY = 0x11111111 };

static struct ibv_cq *cq_on(int n, struct ibv_comp_channel *ch, void *cq_ctx)
{
	struct ibv_cq *c = ibv_create_cq(ctx, n, cq_ctx, ch, 0);

	CHECK(c, "ibv_create_cq");
	return c;
}

static struct ibv_qp *qp_new(enum ibv_qp_type t, struct ibv_cq *cq, int depth)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = t,
		.cap = { .max_send_wr = depth,
			 .max_recv_wr = depth,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *q = ibv_create_qp(pd, &a);

	CHECK(q, "ibv_create_qp");
	return q;
}

static struct ibv_ah_attr to_self(void)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1 };

	a.grh.dgid = gid;
	a.grh.sgid_index = gidx;
	a.grh.hop_limit = 1;
	return a;
}

/* To RTS; an RC QP connects to `peer`, retrying RNR forever. */
static void to_rts(struct ibv_qp *q, uint32_t peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (q->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		m |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ;
		m |= IBV_QP_ACCESS_FLAGS;
	}
	CHECK(!ibv_modify_qp(q, &a, m), "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	m = IBV_QP_STATE;
	if (q->qp_type == IBV_QPT_RC) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer;
		a.ah_attr = to_self();
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 1;
		m |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		     IBV_QP_MIN_RNR_TIMER;
	}
	CHECK(!ibv_modify_qp(q, &a, m), "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	m = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (q->qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		m |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		     IBV_QP_MAX_QP_RD_ATOMIC;
	}
	CHECK(!ibv_modify_qp(q, &a, m), "RTS");
}

static int by_id(const void *a, const void *b)
{
	const struct ibv_wc *x = a, *y = b;

	return x->wr_id < y->wr_id ? -1 : x->wr_id > y->wr_id;
}

/* Waits for n completions on cq (20 s at most), prints them by wr_id. */
static void wait_wc(struct ibv_cq *cq, int n, const char *what)
{
	struct ibv_wc wc[64];
	time_t until = time(NULL) + 20;
	int got = 0;

	CHECK(n <= 64, "n <= 64");
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		CHECK(r >= 0, "ibv_poll_cq");
		got += r;
		CHECK(time(NULL) < until, what);
	}
	qsort(wc, n, sizeof(wc[0]), by_id);
	for (int i = 0; i < n; i++)
		printf("%s: wr %llu %s\n", what, (unsigned long long)wc[i].wr_id,
		       ibv_wc_status_str(wc[i].status));
}

/* Completions on cq within ms milliseconds. */
static int count_wc(struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc[64];
	int n = 0;

	for (int t = 0; t < ms; t += 10) {
		int r = ibv_poll_cq(cq, 64, wc);

		CHECK(r >= 0, "ibv_poll_cq");
		n += r;
		usleep(10000);
	}
	return n;
}

static void write8(struct ibv_qp *q, uint64_t id, char *to, uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;

	w.wr.rdma.remote_addr = (uintptr_t)to;
	w.wr.rdma.rkey = rkey;
	CHECK(!ibv_post_send(q, &w, &bad), "write");
}

/* Prints what destroying two QPs (done by the caller) and then their two
 * CQs answered, in that order. */
static void destroy4(int qa, int qb, struct ibv_cq *ca, struct ibv_cq *cb)
{
	int ra = ibv_destroy_cq(ca);

	printf("destroy: %d %d %d %d\n", qa, qb, ra, ibv_destroy_cq(cb));
}

static void mr_window(int retry)
{
	struct ibv_cq *cg = cq_on(16, NULL, NULL), *ch = cq_on(16, NULL, NULL);
	struct ibv_qp *qg = qp_new(IBV_QPT_RC, cg, 8);
	struct ibv_qp *qh = qp_new(IBV_QPT_RC, ch, 8);
	char *win = buf + 32768, *to = buf + 40960;
	struct ibv_mw *m1;
	int rc;

	to_rts(qg, qh->qp_num);
	to_rts(qh, qg->qp_num);
	memcpy(buf, "windowed", 8);
	m1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(m1, "ibv_alloc_mw");
	{
		struct ibv_mw_bind b = {
			.wr_id = 700,
			.send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = mr,
				       .addr = (uintptr_t)win,
				       .length = 4096,
				       .mw_access_flags =
					       IBV_ACCESS_REMOTE_WRITE },
		};

		rc = ibv_bind_mw(qh, m1, &b);
	}
	printf("mr_window: bind type 1: %d\n", rc);
	wait_wc(ch, 1, "mr_window bind");
	errno = 0;
	rc = ibv_dereg_mr(mr);
	printf("mr_window: dereg_mr with a window bound: %d\n", rc);
	CHECK(rc, "the MR was deregistered: nothing more to check");
	/* Still registered: its own rkey still reaches the memory. */
	write8(qg, 701, to, mr->rkey);
	wait_wc(cg, 1, "mr_window write through the MR's rkey");
	printf("mr_window: landed: %d\n", !memcmp(to, "windowed", 8));
	printf("mr_window: dealloc_pd under the MR: %d\n", ibv_dealloc_pd(pd));
	printf("mr_window: dealloc_mw: %d\n", ibv_dealloc_mw(m1));
	if (retry)
		printf("mr_window: dereg_mr once the window is gone: %d\n",
		       ibv_dereg_mr(mr));
	destroy4(ibv_destroy_qp(qg), ibv_destroy_qp(qh), cg, ch);
}

static void qp_mcast(void)
{
	struct ibv_cq *c = cq_on(16, NULL, NULL);
	struct ibv_qp *u = qp_new(IBV_QPT_UD, c, 4);
	union ibv_gid g = { .raw = { 0xff, 0x0e, [15] = 1 } };
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc;

	to_rts(u, 0);
	printf("qp_mcast: attach %d\n", ibv_attach_mcast(u, &g, 0));
	rc = ibv_destroy_qp(u);
	printf("qp_mcast: destroy_qp attached: %d\n", rc);
	CHECK(rc, "the QP was destroyed: nothing more to check");
	printf("qp_mcast: destroy_cq under it: %d\n", ibv_destroy_cq(c));
	rc = ibv_query_qp(u, &a, IBV_QP_STATE, &ia);
	printf("qp_mcast: the QP still answers: %d, state %d\n", rc,
	       a.qp_state);
	printf("qp_mcast: detach %d\n", ibv_detach_mcast(u, &g, 0));
	rc = ibv_destroy_qp(u);
	printf("qp_mcast: destroy_qp %d, destroy_cq %d\n", rc,
	       ibv_destroy_cq(c));
}

/* A signaled 8-byte UD send from u to itself. */
static void ud_send(struct ibv_qp *u, struct ibv_ah *ah, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;

	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = u->qp_num;
	w.wr.ud.remote_qkey = QKEY;
	CHECK(!ibv_post_send(u, &w, &bad), "ud send");
}

static struct ibv_cq *destroying;
static int destroy_rc = -2;
static volatile int destroyed;

static void *destroy_cq(void *arg)
{
	(void)arg;
	destroy_rc = ibv_destroy_cq(destroying);
	destroyed = 1;
	return NULL;
}

static void cq_events(void)
{
	static int tag;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_ah_attr aa = to_self();
	struct ibv_cq *c, *ecq;
	struct ibv_qp *u;
	struct ibv_ah *ah;
	pthread_t t;
	void *ectx;
	int rc;

	CHECK(ch, "ibv_create_comp_channel");
	c = cq_on(16, ch, &tag);
	u = qp_new(IBV_QPT_UD, c, 4);
	to_rts(u, 0);
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah");
	CHECK(!ibv_req_notify_cq(c, 0), "ibv_req_notify_cq");
	ud_send(u, ah, 1);
	rc = ibv_get_cq_event(ch, &ecq, &ectx);
	printf("cq_events: get %d, the CQ %d, its context %d\n", rc, ecq == c,
	       ectx == &tag);
	wait_wc(c, 1, "cq_events send");
	CHECK(!ibv_destroy_ah(ah) && !ibv_destroy_qp(u), "cq_events: destroy");
	destroying = c;
	CHECK(!pthread_create(&t, NULL, destroy_cq, NULL), "pthread_create");
	usleep(300000);
	printf("cq_events: destroy_cq returned before the ack: %d\n",
	       destroyed);
	ibv_ack_cq_events(c, 1);
	pthread_join(t, NULL);
	printf("cq_events: destroy_cq after the ack: %d\n", destroy_rc);
	printf("cq_events: destroy_comp_channel %d\n",
	       ibv_destroy_comp_channel(ch));
}

enum { ROUNDS = 100 };
static int tags[ROUNDS];
static struct ibv_comp_channel *race_ch;
static volatile int stop;
static int bad_events, failed_gets, events;

/* Reads and acknowledges every event until stopped. */
static void *reader(void *arg)
{
	(void)arg;
	while (!stop) {
		struct pollfd p = { .fd = race_ch->fd, .events = POLLIN };
		struct ibv_cq *ecq;
		void *ectx;

		poll(&p, 1, 5);
		if (ibv_get_cq_event(race_ch, &ecq, &ectx)) {
			if (errno != EAGAIN)
				failed_gets++;
			continue;
		}
		if (ectx != ecq->cq_context || (int *)ectx < tags ||
		    (int *)ectx >= tags + ROUNDS)
			bad_events++;
		events++;
		ibv_ack_cq_events(ecq, 1);
	}
	return NULL;
}

static void cq_race(void)
{
	struct ibv_ah_attr aa = to_self();
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	int failed_destroys = 0;
	pthread_t t;

	CHECK(ah, "ibv_create_ah");
	race_ch = ibv_create_comp_channel(ctx);
	CHECK(race_ch, "ibv_create_comp_channel");
	CHECK(!fcntl(race_ch->fd, F_SETFL,
		     fcntl(race_ch->fd, F_GETFL) | O_NONBLOCK),
	      "O_NONBLOCK");
	CHECK(!pthread_create(&t, NULL, reader, NULL), "pthread_create");
	srand(1);
	for (int i = 0; i < ROUNDS; i++) {
		struct ibv_cq *c = cq_on(4, race_ch, &tags[i]);
		struct ibv_qp *u = qp_new(IBV_QPT_UD, c, 2);

		to_rts(u, 0);
		CHECK(!ibv_req_notify_cq(c, 0), "ibv_req_notify_cq");
		ud_send(u, ah, i);
		usleep(rand() % 300);
		failed_destroys += !!ibv_destroy_qp(u);
		failed_destroys += !!ibv_destroy_cq(c);
	}
	stop = 1;
	pthread_join(t, NULL);
	printf("cq_race: %d rounds: bad events %d, failed gets %d, "
	       "failed destroys %d, at most one event a round %d\n",
	       ROUNDS, bad_events, failed_gets, failed_destroys,
	       events <= ROUNDS);
	printf("cq_race: destroy_comp_channel %d, destroy_ah %d\n",
	       ibv_destroy_comp_channel(race_ch), ibv_destroy_ah(ah));
}

/* Case wr_batch_inline: wr_batch, then an inline list at an odd address. */
static int with_inline;

/* One ibv_wr_* batch of n signaled 8-byte sends, wr_ids from `first`. */
static int batch(struct ibv_qp_ex *qx, uint64_t first, int n)
{
	ibv_wr_start(qx);
	for (int i = 0; i < n; i++) {
		qx->wr_id = first + i;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	}
	return ibv_wr_complete(qx);
}

/* Opens a batch of one signaled SEND, id `id`, whose payload the caller
 * gives, and posts its receive on `b` (every receive of b lands at
 * buf + 4096, cleared here; how many earlier ones are left depends on the
 * kernel's queue sizes: 6.1's rxe took the batch that 6.12's refuses). */
static void odd_begin(struct ibv_qp_ex *qx, struct ibv_qp *b, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)buf + 4096, 64, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = 2000 + id, .sg_list = &s,
				 .num_sge = 1 }, *bad;

	CHECK(!ibv_post_recv(b, &r, &bad), "post_recv");
	memset(buf + 4096, 0, 8);
	ibv_wr_start(qx);
	qx->wr_id = id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
}

/* Completes the batch odd_begin opened and prints what it answered, its
 * completion, and whether one receive took `bytes` (an RC send completes
 * after its receive did: 200 ms is ample). */
static void odd_end(struct ibv_qp_ex *qx, struct ibv_cq *cs,
		    struct ibv_cq *cr, const char *what, const char *bytes)
{
	printf("wr_batch: %s: %d\n", what, ibv_wr_complete(qx));
	wait_wc(cs, 1, what);
	printf("wr_batch: %s, its bytes landed: %d\n", what,
	       count_wc(cr, 200) == 1 && !memcmp(buf + 4096, bytes, 8));
}

/* An RC QP for the ibv_wr_* builders of `ops`: 8 sends of one SGE or 16
 * inline bytes, one receive; the caps granted in *cap. */
static struct ibv_qp *qp_ex_new(struct ibv_cq *scq, struct ibv_cq *rcq,
				uint64_t ops, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex ax = {
		.send_cq = scq,
		.recv_cq = rcq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 16 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = ops,
	};
	struct ibv_qp *q = ibv_create_qp_ex(ctx, &ax);

	CHECK(q, "ibv_create_qp_ex");
	*cap = ax.cap;
	return q;
}

static void wr_batch(void)
{
	struct ibv_cq *cs = cq_on(64, NULL, NULL), *cr = cq_on(64, NULL, NULL);
	struct ibv_qp_cap cap;
	struct ibv_qp *a = qp_ex_new(cs, cs, IBV_QP_EX_WITH_SEND, &cap), *b;
	struct ibv_qp_ex *qx;
	int n = cap.max_send_wr, rc;

	CHECK(n >= 8 && n <= 31, "granted max_send_wr");
	/* Before RTS (a QP of its own, left in RESET): refused, of one
	 * request or of two (rxe's doorbell refuses it in rdma-core). */
	b = qp_ex_new(cs, cs, IBV_QP_EX_WITH_SEND, &cap);
	printf("wr_batch: one send in RESET: %d\n",
	       batch(ibv_qp_to_qp_ex(b), 50, 1));
	printf("wr_batch: two sends in RESET: %d\n",
	       batch(ibv_qp_to_qp_ex(b), 60, 2));
	CHECK(!ibv_destroy_qp(b), "destroy the QP in RESET");
	b = qp_new(IBV_QPT_RC, cr, 64);
	to_rts(a, b->qp_num);
	to_rts(b, a->qp_num);
	qx = ibv_qp_to_qp_ex(a);
	CHECK(qx, "ibv_qp_to_qp_ex");
	/* No receive at b yet: these wait (RNR) and keep their slots. */
	printf("wr_batch: 4 sends: %d\n", batch(qx, 1, 4));
	usleep(200000);
	rc = batch(qx, 100, n);
	printf("wr_batch: a batch of max_send_wr behind them: %d\n", rc);
	for (int i = 0; i < 2 * n + 4; i++) {
		struct ibv_sge s = { (uintptr_t)buf + 4096, 64, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 1000 + i, .sg_list = &s,
					 .num_sge = 1 }, *bad;

		CHECK(!ibv_post_recv(b, &r, &bad), "post_recv");
	}
	wait_wc(cs, 4, "wr_batch first sends");
	printf("wr_batch: completions of the refused batch: %d\n",
	       count_wc(cs, 1000));
	printf("wr_batch: receives of it: %d\n", count_wc(cr, 100) - 4);
	printf("wr_batch: a batch that fits: %d\n", batch(qx, 200, n));
	printf("wr_batch: its completions: %d\n", count_wc(cs, 2000));
	/* An SGE list at an odd address: C forbids it, but rdma-core reads
	 * it with plain loads, so the send goes and its 8 bytes land. */
	{
		_Alignas(16) char raw[sizeof(struct ibv_sge) + 1];
		struct ibv_sge s = { (uintptr_t)buf + 8192, 8, mr->lkey };

		/* The receives of the batch that fit, all done: its sends
		 * completed (RC: after their receives). */
		count_wc(cr, 100);
		memcpy(buf + 8192, "odd list", 8);
		memcpy(raw + 1, &s, sizeof(s));
		odd_begin(qx, b, 300);
		ibv_wr_set_sge_list(qx, 1, (struct ibv_sge *)(raw + 1));
		odd_end(qx, cs, cr, "a send whose SGE list is misaligned",
			"odd list");
	}
	/* The same for an inline list (struct ibv_data_buf) at an odd
	 * address: two pieces, 8 bytes. Case wr_batch_inline only, run over
	 * ours alone: rdma-core 44's rxe builders send no inline bytes (see
	 * libibverbs_cm.rs), so there is nothing of theirs to compare. */
	if (with_inline) {
		_Alignas(16) char raw[2 * sizeof(struct ibv_data_buf) + 1];
		struct ibv_data_buf d[2] = { { "odd ", 4 }, { "data", 4 } };

		memcpy(raw + 1, d, sizeof(d));
		odd_begin(qx, b, 301);
		ibv_wr_set_inline_data_list(qx, 2,
					    (struct ibv_data_buf *)(raw + 1));
		odd_end(qx, cs, cr, "an inline send whose list is misaligned",
			"odd data");
	}
	destroy4(ibv_destroy_qp(a), ibv_destroy_qp(b), cs, cr);
}

static struct ibv_cq_ex *xcq;
static volatile int second_done;
static uint64_t second_id;

/* A second poller: its own session, once the first one ended. */
static void *second_poller(void *arg)
{
	struct ibv_poll_cq_attr pa = {};

	(void)arg;
	if (!ibv_start_poll(xcq, &pa)) {
		second_id = xcq->wr_id;
		ibv_end_poll(xcq);
	}
	second_done = 1;
	return NULL;
}

/* Extended CQs: IBV_CREATE_CQ_ATTR_SINGLE_THREADED is taken; a poll of a
 * negative count answers 0; a poll session (ibv_start_poll to
 * ibv_end_poll) holds the CQ, so a second thread's session waits for it
 * and the first thread's current completion stays its own. Over ours only
 * (rdma-core 44's rxe reads its extended CQ's completions as zeros; see
 * libibverbs_cm.rs). */
static void cq_ex(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_ah_attr aa = to_self();
	struct ibv_poll_cq_attr pa = {};
	struct ibv_wc wc[2];
	struct ibv_cq *c;
	struct ibv_qp *u;
	struct ibv_ah *ah;
	uint64_t first;
	pthread_t t;

	xcq = ibv_create_cq_ex(ctx, &ca);
	printf("cq_ex: SINGLE_THREADED: %s\n", xcq ? "created" : "refused");
	if (xcq)
		CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(xcq)), "destroy");
	ca.comp_mask = 0;
	xcq = ibv_create_cq_ex(ctx, &ca);
	CHECK(xcq, "ibv_create_cq_ex");
	c = ibv_cq_ex_to_cq(xcq);
	printf("cq_ex: ibv_poll_cq of -1: %d\n", ibv_poll_cq(c, -1, wc));
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah");
	u = qp_new(IBV_QPT_UD, c, 4);
	to_rts(u, 0);
	ud_send(u, ah, 1);
	ud_send(u, ah, 2);
	usleep(500000); /* both complete */
	CHECK(!ibv_start_poll(xcq, &pa), "ibv_start_poll");
	first = xcq->wr_id;
	CHECK(!pthread_create(&t, NULL, second_poller, NULL), "pthread_create");
	usleep(300000);
	printf("cq_ex: the second session waits for the first: %d\n",
	       !second_done);
	printf("cq_ex: the first still sees its own completion: %d\n",
	       xcq->wr_id == first && ibv_wc_read_opcode(xcq) == IBV_WC_SEND);
	ibv_end_poll(xcq);
	pthread_join(t, NULL);
	printf("cq_ex: the second got the other: %d\n",
	       first + second_id == 3 && first != second_id);
	CHECK(!ibv_destroy_qp(u) && !ibv_destroy_ah(ah), "destroy");
	printf("cq_ex: destroy_cq %d\n", ibv_destroy_cq(c));
}

static void dmabuf_case(const char *what, uint64_t off, size_t len,
			uint64_t iova, int fd)
{
	struct ibv_mr *m;

	errno = 0;
	m = ibv_reg_dmabuf_mr(pd, off, len, iova, fd, IBV_ACCESS_LOCAL_WRITE);
	printf("dmabuf %s: %s errno %d\n", what, m ? "an MR" : "NULL",
	       m ? 0 : errno);
	if (m)
		printf("dmabuf %s: dereg %d\n", what, ibv_dereg_mr(m));
}

static void dmabuf(void)
{
	int fd = memfd_create("rverbs-dmabuf", MFD_CLOEXEC);

	CHECK(fd >= 0, "memfd_create");
	CHECK(!ftruncate(fd, 1 << 16), "ftruncate");
	dmabuf_case("4 KiB", 0, 4096, 0x10000, fd);
	dmabuf_case("empty", 0, 0, 0, fd);
	dmabuf_case("closed fd", 0, 4096, 0, 1000);
	dmabuf_case("misplaced IOVA", 8, 4096, 0x10000, fd);
	CHECK(!close(fd), "close");
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	printf("dmabuf: dealloc_pd %d\n", ibv_dealloc_pd(pd));
}

static void on_alarm(int sig)
{
	(void)sig;
}

static struct ibv_qp *late_qp;
static struct ibv_ah *late_ah;

static void *late_send(void *arg)
{
	(void)arg;
	usleep(700000); /* past the timer's signal, at 200 ms */
	ud_send(late_qp, late_ah, 7);
	return NULL;
}

static void eintr(void)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { .tv_usec = 200000 } };
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_ah_attr aa = to_self();
	struct ibv_cq *c, *ev;
	struct ibv_wc wc;
	void *evctx;
	pthread_t t;
	int rc;

	CHECK(ch, "ibv_create_comp_channel");
	c = cq_on(4, ch, NULL);
	sigemptyset(&sa.sa_mask);
	CHECK(!sigaction(SIGALRM, &sa, NULL), "sigaction");
	CHECK(!ibv_req_notify_cq(c, 0), "ibv_req_notify_cq");
	CHECK(!setitimer(ITIMER_REAL, &it, NULL), "setitimer");
	errno = 0;
	rc = ibv_get_cq_event(ch, &ev, &evctx);
	printf("eintr: without SA_RESTART %d errno %d\n", rc, errno);
	sa.sa_flags = SA_RESTART;
	CHECK(!sigaction(SIGALRM, &sa, NULL), "sigaction");
	late_ah = ibv_create_ah(pd, &aa);
	CHECK(late_ah, "ibv_create_ah");
	late_qp = qp_new(IBV_QPT_UD, c, 4);
	to_rts(late_qp, 0);
	CHECK(!pthread_create(&t, NULL, late_send, NULL), "pthread_create");
	CHECK(!setitimer(ITIMER_REAL, &it, NULL), "setitimer");
	errno = 0;
	rc = ibv_get_cq_event(ch, &ev, &evctx);
	printf("eintr: with SA_RESTART %d errno %d, the CQ's event %d\n", rc,
	       rc ? errno : 0, !rc && ev == c);
	CHECK(!pthread_join(t, NULL), "pthread_join");
	if (!rc)
		ibv_ack_cq_events(c, 1);
	while (ibv_poll_cq(c, 1, &wc) == 0)
		usleep(10000);
	printf("eintr: the send completed %d\n", wc.status == IBV_WC_SUCCESS);
	CHECK(!ibv_destroy_qp(late_qp) && !ibv_destroy_ah(late_ah), "destroy");
	CHECK(!ibv_destroy_cq(c) && !ibv_destroy_comp_channel(ch), "destroy");
}

/* Case cancel. */
static struct ibv_comp_channel *cancel_ch;
static volatile int cleaned, cancel_sent, reader_got;

static void cleanup(void *arg)
{
	(void)arg;
	cleaned = 1;
}

/* Blocks for one event; acknowledges it if it gets one. */
static void *blocked_reader(void *arg)
{
	struct ibv_cq *ecq;
	void *ectx;

	(void)arg;
	pthread_cleanup_push(cleanup, NULL);
	if (!ibv_get_cq_event(cancel_ch, &ecq, &ectx)) {
		reader_got = 1;
		ibv_ack_cq_events(ecq, 1);
	}
	pthread_cleanup_pop(0);
	return NULL;
}

/* Calls ibv_get_cq_event with a cancellation already pending. */
static void *pending_reader(void *arg)
{
	struct ibv_cq *ecq;
	void *ectx;
	int old;

	(void)arg;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	while (!cancel_sent)
		usleep(1000);
	pthread_cleanup_push(cleanup, NULL);
	/* Not a cancellation point: the cancellation stays pending. */
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
	if (!ibv_get_cq_event(cancel_ch, &ecq, &ectx)) {
		reader_got = 1;
		ibv_ack_cq_events(ecq, 1);
	}
	pthread_cleanup_pop(0);
	return NULL;
}

/* Completions on cq, without printing, until n (20 s at most). */
static void drain_wc(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc[8];
	time_t until = time(NULL) + 20;

	while (n > 0) {
		int r = ibv_poll_cq(cq, 8, wc);

		CHECK(r >= 0, "ibv_poll_cq");
		n -= r;
		CHECK(time(NULL) < until, "drain_wc");
	}
}

/* The event of the send just made, if the reader did not take it. */
static int take_event(struct ibv_cq *c)
{
	struct pollfd p = { .fd = cancel_ch->fd, .events = POLLIN };
	struct ibv_cq *ecq;
	void *ectx;

	CHECK(poll(&p, 1, 20000) == 1, "the event comes");
	CHECK(!ibv_get_cq_event(cancel_ch, &ecq, &ectx) && ecq == c,
	      "ibv_get_cq_event after a cancel");
	ibv_ack_cq_events(ecq, 1);
	return 1;
}

static void cancel_case(void)
{
	struct ibv_ah_attr aa = to_self();
	struct ibv_cq *c;
	struct ibv_qp *u;
	struct ibv_ah *ah;
	pthread_t t;
	void *ret;

	alarm(240); /* a reading lock left held would hang a read */
	cancel_ch = ibv_create_comp_channel(ctx);
	CHECK(cancel_ch, "ibv_create_comp_channel");
	c = cq_on(16, cancel_ch, NULL);
	u = qp_new(IBV_QPT_UD, c, 4);
	to_rts(u, 0);
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah");

	CHECK(!ibv_req_notify_cq(c, 0), "ibv_req_notify_cq");
	cleaned = reader_got = 0;
	CHECK(!pthread_create(&t, NULL, blocked_reader, NULL), "pthread_create");
	usleep(300000);
	CHECK(!pthread_cancel(t), "pthread_cancel");
	CHECK(!pthread_join(t, &ret), "pthread_join");
	printf("cancel: a blocked reader cancelled %d, its cleanup ran %d\n",
	       ret == PTHREAD_CANCELED, cleaned);
	ud_send(u, ah, 1);
	printf("cancel: then the channel gives the next event %d\n",
	       take_event(c));
	drain_wc(c, 1);

	CHECK(!ibv_req_notify_cq(c, 0), "ibv_req_notify_cq");
	ud_send(u, ah, 2);
	drain_wc(c, 1);
	cleaned = reader_got = cancel_sent = 0;
	CHECK(!pthread_create(&t, NULL, pending_reader, NULL), "pthread_create");
	CHECK(!pthread_cancel(t), "pthread_cancel");
	cancel_sent = 1;
	CHECK(!pthread_join(t, &ret), "pthread_join");
	printf("cancel: pending on entry, with an event queued: cancelled %d, "
	       "cleanup %d, the event taken %d\n",
	       ret == PTHREAD_CANCELED, cleaned, reader_got);
	printf("cancel: the event still there %d\n", take_event(c));

	/* A blocking read from this thread: one left locked would hang. */
	CHECK(!ibv_req_notify_cq(c, 0), "ibv_req_notify_cq");
	ud_send(u, ah, 3);
	{
		struct ibv_cq *ecq;
		void *ectx;
		int rc = ibv_get_cq_event(cancel_ch, &ecq, &ectx);

		printf("cancel: a blocking read after both %d, the CQ %d\n", rc,
		       !rc && ecq == c);
		if (!rc)
			ibv_ack_cq_events(ecq, 1);
	}
	drain_wc(c, 1);
	CHECK(!ibv_destroy_qp(u) && !ibv_destroy_ah(ah), "destroy");
	printf("cancel: destroy_cq %d, destroy_comp_channel %d\n",
	       ibv_destroy_cq(c), ibv_destroy_comp_channel(cancel_ch));
	alarm(0);
}

/* ibv_query_gid_type (IBVERBS_PRIVATE_34, which ibv_devinfo calls; its
 * enum is in driver.h, which Debian does not ship). */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type);

static void answers(void)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge;
	union ibv_gid g;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_cq *c;
	struct ibv_qp *q;
	int rc, t, zero, found, last;
	unsigned int len;

	CHECK(!ibv_query_port(ctx, 1, &pa), "ibv_query_port");
	len = pa.gid_tbl_len;
	/* The last entry of rxe's table is empty. */
	memset(&g, 0xff, sizeof(g));
	errno = 0;
	rc = ibv_query_gid(ctx, 1, len - 1, &g);
	zero = 1;
	for (int i = 0; i < 16; i++)
		zero &= g.raw[i] == 0;
	printf("answers: query_gid empty %d errno %d zero %d\n", rc, rc ? errno : 0,
	       zero);
	errno = 0;
	rc = ibv_query_gid(ctx, 1, len, &g);
	printf("answers: query_gid past the table %d errno %d\n", rc,
	       rc ? errno : 0);
	errno = 0;
	rc = ibv_query_gid(ctx, 2, 0, &g);
	printf("answers: query_gid port 2 %d errno %d\n", rc, rc ? errno : 0);
	/* ibv_find_gid_index's scan: it ends, past the last entry. */
	found = 0;
	last = -1;
	for (int i = 0; !ibv_query_gid(ctx, 1, i, &g) && i <= (int)len; i++) {
		found += !memcmp(&g, &gid, sizeof(g));
		last = i;
	}
	printf("answers: scan found our GID %d, ended at the table's end %d\n",
	       found > 0, last == (int)len - 1);
	printf("answers: query_gid_ex empty %d\n",
	       ibv_query_gid_ex(ctx, 1, len - 1, &ge, 0));
	printf("answers: query_gid_ex past the table %d\n",
	       ibv_query_gid_ex(ctx, 1, len, &ge, 0));
	printf("answers: query_gid_ex port 2 %d\n",
	       ibv_query_gid_ex(ctx, 2, 0, &ge, 0));
	t = -1;
	errno = 0;
	rc = ibv_query_gid_type(ctx, 1, len - 1, &t);
	printf("answers: query_gid_type empty %d type %d\n", rc, t);
	errno = 0;
	rc = ibv_query_gid_type(ctx, 1, len, &t);
	printf("answers: query_gid_type past the table %d errno %d\n", rc,
	       rc ? errno : 0);

	errno = 0;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			  IBV_ACCESS_LOCAL_WRITE);
	printf("answers: rereg_mr access %d errno %d\n", rc, errno);
	errno = 0;
	rc = ibv_rereg_mr(mr, 0x80, NULL, NULL, 0, 0);
	printf("answers: rereg_mr unknown flag %d errno %d\n", rc, errno);
	errno = 0;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0);
	printf("answers: rereg_mr translation to nothing %d errno %d\n", rc,
	       errno);
	errno = 0;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0,
			  IBV_ACCESS_LOCAL_WRITE);
	printf("answers: rereg_mr access without its flag %d errno %d\n", rc,
	       errno);

	c = cq_on(4, NULL, NULL);
	q = qp_new(IBV_QPT_RC, c, 2);
	printf("answers: query_qp rate limit %d\n",
	       ibv_query_qp(q, &qa, IBV_QP_RATE_LIMIT, &qi));
	rc = ibv_query_qp(q, &qa, IBV_QP_STATE, &qi);
	printf("answers: query_qp state %d state %d\n", rc, qa.qp_state);
	CHECK(!ibv_destroy_qp(q) && !ibv_destroy_cq(c), "destroy");
}

/* The data path's answers where a program strays (rdma-core's rxe, v44):
 * an SRQ list posted with a NULL bad_wr or empty, an ibv_poll_cq_attr
 * with a comp_mask, ibv_req_notify_cq inside a poll session, builders
 * given too much inline data (up to SIZE_MAX) or too many SGEs, and a
 * window bind carrying an immediate. */
static void data_answers(void)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 16 };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_sge s = { (uintptr_t)buf, 8, mr->lkey }, many[64];
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &s, .num_sge = 1 };
	struct ibv_recv_wr *rbad = (void *)&rw;
	struct ibv_poll_cq_attr pa = { .comp_mask = 1 };
	struct ibv_send_wr sw = {}, *sbad;
	struct ibv_cq *c, *cr;
	struct ibv_cq_ex *x;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *qx;
	struct ibv_mw *mw;
	time_t until;
	int rc;

	/* A hang (a lock taken twice) ends the program, not the run. */
	alarm(60);
	srq = ibv_create_srq(pd, &sa);
	CHECK(srq, "ibv_create_srq");
	printf("data: srq recv with a NULL bad_wr %d\n",
	       ibv_post_srq_recv(srq, &rw, NULL));
	printf("data: srq recv of no list %d, bad_wr kept %d\n",
	       ibv_post_srq_recv(srq, NULL, &rbad), rbad == &rw);
	rc = ibv_post_srq_recv(srq, &rw, &rbad);
	printf("data: srq recv %d, bad_wr kept %d\n", rc, rbad == &rw);

	x = ibv_create_cq_ex(ctx, &ca);
	CHECK(x, "ibv_create_cq_ex");
	c = ibv_cq_ex_to_cq(x);
	cr = cq_on(16, NULL, NULL);
	printf("data: start_poll with a comp_mask, empty %d\n",
	       ibv_start_poll(x, &pa));
	{
		struct ibv_qp_cap cap;

		a = qp_ex_new(c, cr,
			      IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
			      &cap);
		b = qp_new(IBV_QPT_RC, cr, 8);
		to_rts(a, b->qp_num);
		to_rts(b, a->qp_num);
		qx = ibv_qp_to_qp_ex(a);
		CHECK(qx, "ibv_qp_to_qp_ex");

		ibv_wr_start(qx);
		qx->wr_id = 10;
		ibv_wr_send(qx);
		ibv_wr_set_inline_data(qx, buf, cap.max_inline_data + 1);
		printf("data: inline one byte too long %d\n",
		       ibv_wr_complete(qx));
		ibv_wr_start(qx);
		qx->wr_id = 11;
		ibv_wr_send(qx);
		ibv_wr_set_inline_data(qx, buf, SIZE_MAX);
		printf("data: inline of SIZE_MAX bytes %d\n",
		       ibv_wr_complete(qx));
		for (int i = 0; i < 64; i++)
			many[i] = s;
		ibv_wr_start(qx);
		qx->wr_id = 12;
		ibv_wr_send(qx);
		ibv_wr_set_sge_list(qx, cap.max_send_sge + 1, many);
		printf("data: one SGE too many %d\n", ibv_wr_complete(qx));
		ibv_wr_start(qx);
		qx->wr_id = 13;
		ibv_wr_send(qx);
		ibv_wr_set_sge_list(qx, 64, many);
		printf("data: 64 SGEs %d\n", ibv_wr_complete(qx));
	}
	printf("data: none of them posted %d\n", count_wc(c, 300) == 0);

	/* A completion, then ibv_req_notify_cq inside its poll session. */
	write8(a, 20, buf + 8192, mr->rkey);
	pa.comp_mask = 0;
	until = time(NULL) + 20;
	while ((rc = ibv_start_poll(x, &pa)) == ENOENT)
		CHECK(time(NULL) < until, "the write's completion");
	printf("data: start_poll %d wr %llu\n", rc,
	       (unsigned long long)x->wr_id);
	printf("data: req_notify_cq inside the session %d\n",
	       ibv_req_notify_cq(c, 0));
	ibv_end_poll(x);

	mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw, "ibv_alloc_mw");
	sw.wr_id = 30;
	sw.opcode = IBV_WR_BIND_MW;
	sw.imm_data = htonl(5);
	sw.bind_mw.mw = mw;
	sw.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	sw.bind_mw.bind_info.mr = mr;
	sw.bind_mw.bind_info.addr = (uintptr_t)buf;
	sw.bind_mw.bind_info.length = 4096;
	sw.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	sbad = NULL;
	rc = ibv_post_send(a, &sw, &sbad);
	printf("data: bind with an immediate %d bad_wr %d\n", rc, sbad == &sw);
	printf("data: nothing completed %d\n", count_wc(c, 300) == 0);
	alarm(0);
	CHECK(!ibv_destroy_qp(a) && !ibv_destroy_qp(b), "destroy QPs");
	CHECK(!ibv_dealloc_mw(mw), "dealloc MW");
	CHECK(!ibv_destroy_srq(srq), "destroy SRQ");
	CHECK(!ibv_destroy_cq(c) && !ibv_destroy_cq(cr), "destroy CQs");
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	const char *what;

	CHECK(argc == 4, "usage: libibverbs_sound DEV GID_INDEX CASE");
	/* Each line out as printed: a case that hangs or aborts still shows
	 * how far it got. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	gidx = atoi(argv[2]);
	what = argv[3];
	list = ibv_get_device_list(NULL);
	CHECK(list, "ibv_get_device_list");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	CHECK(ctx, "ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	CHECK(!ibv_query_gid(ctx, 1, gidx, &gid), "ibv_query_gid");
	buf = aligned_alloc(4096, BUF);
	CHECK(buf, "aligned_alloc");
	memset(buf, 0, BUF);
	mr = ibv_reg_mr(pd, buf, BUF,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	CHECK(mr, "ibv_reg_mr");
	if (!strcmp(what, "mr_window"))
		mr_window(0);
	else if (!strcmp(what, "mr_retry"))
		mr_window(1);
	else if (!strcmp(what, "qp_mcast"))
		qp_mcast();
	else if (!strcmp(what, "cq_events"))
		cq_events();
	else if (!strcmp(what, "cq_race"))
		cq_race();
	else if (!strcmp(what, "wr_batch"))
		wr_batch();
	else if (!strcmp(what, "wr_batch_inline")) {
		with_inline = 1;
		wr_batch();
	}
	else if (!strcmp(what, "dmabuf"))
		dmabuf();
	else if (!strcmp(what, "cq_ex"))
		cq_ex();
	else if (!strcmp(what, "answers"))
		answers();
	else if (!strcmp(what, "eintr"))
		eintr();
	else if (!strcmp(what, "data_answers"))
		data_answers();
	else if (!strcmp(what, "cancel"))
		cancel_case();
	else
		CHECK(0, "no such case");
	printf("done\n");
	return 0;
}
