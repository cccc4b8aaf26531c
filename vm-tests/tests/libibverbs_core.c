/*
 * A libibverbs program (vm-tests/tests/libibverbs_core.rs compiles it in
 * the VM and runs it over rdma-core's libibverbs.so.1 and over rverbs'):
 * it prints, deterministically, what the library answers for a QP deeper
 * than its CQ, UD sends through address handles (and the reply through
 * ibv_create_ah_from_wc), post lists with a bad request in the middle,
 * lists longer than one batch, inline data over several SGEs, an SRQ and
 * memory windows of both types. No QP numbers, keys or addresses are
 * printed: the two outputs must be identical.
 */
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static struct ibv_qp_cap cap; /* of the last QP created */

enum { BUF = 1 << 16, QKEY = 0x11111111 };

static struct ibv_cq *cq_new(int n)
{
	struct ibv_cq *c = ibv_create_cq(ctx, n, NULL, NULL, 0);

	CHECK(c, "ibv_create_cq");
	return c;
}

static struct ibv_qp *qp_new(enum ibv_qp_type t, struct ibv_cq *cq,
			     struct ibv_srq *srq, int depth, int sge, int inl)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.qp_type = t,
		.cap = { .max_send_wr = depth,
			 .max_recv_wr = srq ? 0 : depth,
			 .max_send_sge = sge,
			 .max_recv_sge = srq ? 0 : sge,
			 .max_inline_data = inl },
	};
	struct ibv_qp *q = ibv_create_qp(pd, &a);

	CHECK(q, "ibv_create_qp");
	cap = a.cap;
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
	if (q->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer;
		a.ah_attr = to_self();
		m |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		     IBV_QP_RQ_PSN;
		if (q->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
			m |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
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

/* Waits for n completions on cq (10 s at most), prints them by wr_id. */
static void wait_wc(struct ibv_cq *cq, int n, const char *what,
		    struct ibv_wc *last)
{
	struct ibv_wc wc[64];
	time_t until = time(NULL) + 10;
	int got = 0;

	CHECK(n <= 64, "n <= 64");
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		CHECK(r >= 0, "ibv_poll_cq");
		got += r;
		CHECK(time(NULL) < until, what);
	}
	qsort(wc, n, sizeof(wc[0]), by_id);
	for (int i = 0; i < n; i++) {
		struct ibv_wc *w = &wc[i];
		int ok = w->status == IBV_WC_SUCCESS;

		printf("%s: wr %llu %s", what, (unsigned long long)w->wr_id,
		       ibv_wc_status_str(w->status));
		if (ok)
			printf(" opcode %d len %u flags %#x", w->opcode,
			       w->byte_len, w->wc_flags);
		printf("\n");
	}
	if (last)
		*last = wc[n - 1];
}

static int post_recv1(struct ibv_qp *q, uint64_t id, void *at, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)at, len, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = id, .sg_list = &s, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(q, &r, &bad);
}

static long idx(void *bad, void *first, size_t sz)
{
	return bad ? ((char *)bad - (char *)first) / (long)sz : -1;
}

static void deep(void)
{
	struct ibv_cq *c = cq_new(4);
	struct ibv_qp *q = qp_new(IBV_QPT_RC, c, NULL, 64, 1, 0);

	struct ibv_sge s = { (uintptr_t)buf, 8, mr->lkey }, many[64];
	struct ibv_recv_wr r = { .wr_id = 1, .sg_list = &s, .num_sge = 1 };
	struct ibv_send_wr w = { .wr_id = 2, .sg_list = &s, .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED };
	struct ibv_recv_wr *badr = &r;
	struct ibv_send_wr *bad = &w;
	int rc;

	printf("deep: a QP of 64 on a CQ of 4 is created\n");
	rc = ibv_post_recv(q, &r, &badr);
	printf("deep: post_recv in RESET: %d, bad %ld\n", rc,
	       idx(badr, &r, sizeof(r)));
	rc = ibv_post_send(q, &w, &bad);
	printf("deep: post_send in RESET: %d, bad %ld\n", rc,
	       idx(bad, &w, sizeof(w)));
	/* A request of more SGEs than the QP takes (over an array that
	 * holds them all) is refused as such before the state is. */
	CHECK(cap.max_send_sge < 64, "deep: max_send_sge below 64");
	for (int i = 0; i < 64; i++)
		many[i] = s;
	w.sg_list = many;
	w.num_sge = cap.max_send_sge + 1;
	rc = ibv_post_send(q, &w, &bad);
	printf("deep: post_send of too many SGEs in RESET: %d, bad %ld\n", rc,
	       idx(bad, &w, sizeof(w)));
	w.sg_list = &s;
	w.num_sge = 1;
	printf("deep: destroy_cq under it: %d\n", ibv_destroy_cq(c));
	CHECK(!ibv_destroy_qp(q) && !ibv_destroy_cq(c), "deep: destroy");
}

static void ud(void)
{
	struct ibv_cq *ca = cq_new(16), *cb = cq_new(16);
	struct ibv_qp *qa = qp_new(IBV_QPT_UD, ca, NULL, 8, 1, 0);
	struct ibv_qp *qb = qp_new(IBV_QPT_UD, cb, NULL, 8, 1, 0);
	struct ibv_ah_attr aa = to_self(), back;
	struct ibv_ah *ah, *ah2, *none;
	struct ibv_wc wc;
	struct ibv_send_wr *bad;
	char *in = buf + 4096, *in2 = buf + 8192;
	int rc;

	to_rts(qa, 0);
	to_rts(qb, 0);
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah");
	aa.is_global = 0;
	none = ibv_create_ah(pd, &aa);
	printf("ud: an AH without a GRH on RoCE: %s, errno %d\n",
	       none ? "created" : "NULL", none ? 0 : errno);
	CHECK(!post_recv1(qb, 1, in, 40 + 64), "ud: recv");
	strcpy(buf, "hello, ud");
	{
		struct ibv_sge s = { (uintptr_t)buf, 10, mr->lkey };
		struct ibv_send_wr w = { .wr_id = 2, .sg_list = &s,
					 .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED };

		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = qb->qp_num;
		w.wr.ud.remote_qkey = QKEY;
		CHECK(!ibv_post_send(qa, &w, &bad), "ud: send");
	}
	wait_wc(ca, 1, "ud send", NULL);
	wait_wc(cb, 1, "ud recv", &wc);
	printf("ud: from qa: %d, payload %s\n", wc.src_qp == qa->qp_num,
	       memcmp(in + 40, "hello, ud", 10) ? "wrong" : "right");
	rc = ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)in, &back);
	printf("ud: init_ah_from_wc %d: global %d sgid_index %s dgid %s hop %u "
	       "tclass %u flow %u port %u dlid %u sl %u\n",
	       rc, back.is_global, back.grh.sgid_index == gidx ? "ours" : "other",
	       memcmp(&back.grh.dgid, &gid, 16) ? "other" : "ours",
	       back.grh.hop_limit, back.grh.traffic_class, back.grh.flow_label,
	       back.port_num, back.dlid, back.sl);
	ah2 = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)in, 1);
	CHECK(ah2, "ibv_create_ah_from_wc");
	CHECK(!post_recv1(qa, 3, in2, 40 + 64), "ud: recv back");
	strcpy(buf + 64, "pong");
	{
		struct ibv_sge s = { (uintptr_t)buf + 64, 5, mr->lkey };
		struct ibv_send_wr w = { .wr_id = 4, .sg_list = &s,
					 .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED };

		w.wr.ud.ah = ah2;
		w.wr.ud.remote_qpn = wc.src_qp;
		w.wr.ud.remote_qkey = QKEY;
		CHECK(!ibv_post_send(qb, &w, &bad), "ud: reply");
	}
	wait_wc(cb, 1, "ud reply send", NULL);
	wait_wc(ca, 1, "ud reply recv", &wc);
	printf("ud: reply payload %s\n",
	       memcmp(in2 + 40, "pong", 5) ? "wrong" : "right");
	printf("ud: dealloc_pd with AHs: %d\n", ibv_dealloc_pd(pd));
	printf("ud: destroy_ah %d %d\n", ibv_destroy_ah(ah2), ibv_destroy_ah(ah));
	CHECK(!ibv_destroy_qp(qa) && !ibv_destroy_qp(qb), "ud: destroy qp");
	CHECK(!ibv_destroy_cq(ca) && !ibv_destroy_cq(cb), "ud: destroy cq");
}

static void lists(void)
{
	struct ibv_cq *cc = cq_new(64), *cd = cq_new(64);
	struct ibv_qp *qc = qp_new(IBV_QPT_RC, cc, NULL, 64, 3, 64);
	struct ibv_qp *qd = qp_new(IBV_QPT_RC, cd, NULL, 64, 3, 64);
	struct ibv_sge s[40];
	struct ibv_recv_wr r[3], *badr;
	struct ibv_send_wr w[40], *bad;
	char *land = buf + 16384, *in = buf + 20480;
	int rc, ok = 1;

	to_rts(qc, qd->qp_num);
	to_rts(qd, qc->qp_num);
	/* Receives: the middle one has more SGEs than the QP takes. */
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 3; i++) {
		s[i] = (struct ibv_sge){ (uintptr_t)in + 64 * i, 64, mr->lkey };
		r[i].wr_id = 100 + i;
		r[i].sg_list = &s[i];
		r[i].num_sge = i == 1 ? (int)cap.max_recv_sge + 1 : 1;
		r[i].next = i < 2 ? &r[i + 1] : NULL;
	}
	rc = ibv_post_recv(qd, r, &badr);
	printf("lists: recv list with a bad 2nd: %d, bad %ld\n", rc,
	       idx(badr, r, sizeof(r[0])));
	/* 40 writes in one list: more than one batch. */
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 40; i++) {
		memset(buf + 8 * i, 'a' + i % 26, 8);
		s[i] = (struct ibv_sge){ (uintptr_t)buf + 8 * i, 8, mr->lkey };
		w[i].wr_id = 200 + i;
		w[i].sg_list = &s[i];
		w[i].num_sge = 1;
		w[i].opcode = IBV_WR_RDMA_WRITE;
		w[i].send_flags = IBV_SEND_SIGNALED;
		w[i].wr.rdma.remote_addr = (uintptr_t)land + 8 * i;
		w[i].wr.rdma.rkey = mr->rkey;
		w[i].next = i < 39 ? &w[i + 1] : NULL;
	}
	rc = ibv_post_send(qc, w, &bad);
	printf("lists: 40 writes: %d, bad %ld\n", rc, idx(bad, w, sizeof(w[0])));
	wait_wc(cc, 40, "lists write", NULL);
	for (int i = 0; i < 40; i++)
		ok &= !memcmp(land + 8 * i, buf + 8 * i, 8);
	printf("lists: the writes landed: %d\n", ok);
	/* Sends: the middle one has more SGEs than the QP takes. */
	w[1].num_sge = (int)cap.max_send_sge + 1;
	w[2].next = NULL;
	rc = ibv_post_send(qc, w, &bad);
	printf("lists: send list with a bad 2nd: %d, bad %ld\n", rc,
	       idx(bad, w, sizeof(w[0])));
	wait_wc(cc, 1, "lists first of three", NULL);
	/* Inline data over three SGEs, into the receive posted first. */
	strcpy(buf + 1024, "ab");
	strcpy(buf + 1040, "cd");
	strcpy(buf + 1056, "ef");
	for (int i = 0; i < 3; i++)
		s[i] = (struct ibv_sge){ (uintptr_t)buf + 1024 + 16 * i, 2, 0 };
	memset(w, 0, sizeof(w[0]));
	w[0].wr_id = 300;
	w[0].sg_list = s;
	w[0].num_sge = 3;
	w[0].opcode = IBV_WR_SEND;
	w[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	rc = ibv_post_send(qc, w, &bad);
	printf("lists: inline send over 3 SGEs: %d\n", rc);
	wait_wc(cc, 1, "lists inline send", NULL);
	wait_wc(cd, 1, "lists inline recv", NULL);
	printf("lists: received %.6s\n", in);
	CHECK(!ibv_destroy_qp(qc) && !ibv_destroy_qp(qd), "lists: destroy qp");
	CHECK(!ibv_destroy_cq(cc) && !ibv_destroy_cq(cd), "lists: destroy cq");
}

static void srq(void)
{
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq_attr a;
	struct ibv_srq *q;
	struct ibv_cq *ce = cq_new(16), *cf = cq_new(16);
	struct ibv_qp *qe, *qf;
	struct ibv_sge s[3];
	struct ibv_recv_wr r[3], *badr;
	struct ibv_send_wr w, *bad;
	char *in = buf + 24576;
	int rc;

	q = ibv_create_srq(pd, &ia);
	CHECK(q, "ibv_create_srq");
	printf("srq: granted max_wr %s, max_sge %u\n",
	       ia.attr.max_wr >= 16 ? ">= 16" : "< 16", ia.attr.max_sge);
	rc = ibv_query_srq(q, &a);
	printf("srq: query %d: max_sge %u limit %u, max_wr as granted %d\n", rc,
	       a.max_sge, a.srq_limit, a.max_wr == ia.attr.max_wr);
	a.srq_limit = 4;
	printf("srq: modify limit %d\n", ibv_modify_srq(q, &a, IBV_SRQ_LIMIT));
	rc = ibv_query_srq(q, &a);
	printf("srq: query %d: limit %u\n", rc, a.srq_limit);
	qe = qp_new(IBV_QPT_RC, ce, NULL, 8, 1, 0);
	qf = qp_new(IBV_QPT_RC, cf, q, 8, 1, 0);
	to_rts(qe, qf->qp_num);
	to_rts(qf, qe->qp_num);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 3; i++) {
		s[i] = (struct ibv_sge){ (uintptr_t)in + 64 * i, 64, mr->lkey };
		r[i].wr_id = 400 + i;
		r[i].sg_list = &s[i];
		r[i].num_sge = i == 1 ? 2 : 1;
		r[i].next = i < 2 ? &r[i + 1] : NULL;
	}
	rc = ibv_post_srq_recv(q, r, &badr);
	printf("srq: recv list with a bad 2nd: %d, bad %ld\n", rc,
	       idx(badr, r, sizeof(r[0])));
	r[2].next = NULL;
	CHECK(!ibv_post_srq_recv(q, &r[2], &badr), "srq: recv");
	strcpy(buf + 2048, "to the srq");
	for (int i = 0; i < 2; i++) {
		struct ibv_sge m = { (uintptr_t)buf + 2048, 11, mr->lkey };

		w = (struct ibv_send_wr){ .wr_id = 500 + i, .sg_list = &m,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED };
		CHECK(!ibv_post_send(qe, &w, &bad), "srq: send");
	}
	wait_wc(ce, 2, "srq send", NULL);
	wait_wc(cf, 2, "srq recv", NULL);
	printf("srq: received %s, %s\n", in, in + 128);
	printf("srq: destroy_srq under a QP: %d\n", ibv_destroy_srq(q));
	CHECK(!ibv_destroy_qp(qe) && !ibv_destroy_qp(qf), "srq: destroy qp");
	printf("srq: destroy_srq: %d\n", ibv_destroy_srq(q));
	CHECK(!ibv_destroy_cq(ce) && !ibv_destroy_cq(cf), "srq: destroy cq");
}

static void write8(struct ibv_qp *q, uint64_t id, char *to, uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;

	w.wr.rdma.remote_addr = (uintptr_t)to;
	w.wr.rdma.rkey = rkey;
	CHECK(!ibv_post_send(q, &w, &bad), "mw: write");
}

static void mw(void)
{
	struct ibv_cq *cg = cq_new(16), *ch = cq_new(16);
	struct ibv_qp *qg = qp_new(IBV_QPT_RC, cg, NULL, 8, 1, 0);
	struct ibv_qp *qh = qp_new(IBV_QPT_RC, ch, NULL, 8, 1, 0);
	struct ibv_mw *m1, *m2;
	struct ibv_send_wr w, *bad;
	char *win1 = buf + 32768, *win2 = buf + 36864;
	uint32_t k0, k2;
	int rc;

	to_rts(qg, qh->qp_num);
	to_rts(qh, qg->qp_num);
	memcpy(buf, "windowed", 8);
	m1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(m1, "ibv_alloc_mw 1");
	printf("mw: type 1 allocated: type %d\n", m1->type);
	k0 = m1->rkey;
	{
		struct ibv_mw_bind b = {
			.wr_id = 600,
			.send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = mr,
				       .addr = (uintptr_t)win1,
				       .length = 4096,
				       .mw_access_flags =
					       IBV_ACCESS_REMOTE_WRITE },
		};

		rc = ibv_bind_mw(qh, m1, &b);
	}
	printf("mw: bind type 1: %d, rkey moved on: %d\n", rc,
	       m1->rkey == ibv_inc_rkey(k0));
	wait_wc(ch, 1, "mw bind 1", NULL);
	write8(qg, 601, win1, m1->rkey);
	wait_wc(cg, 1, "mw write through 1", NULL);
	printf("mw: landed through 1: %d\n", !memcmp(win1, "windowed", 8));
	m2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(m2, "ibv_alloc_mw 2");
	k2 = ibv_inc_rkey(m2->rkey);
	w = (struct ibv_send_wr){ .wr_id = 602, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED };
	w.bind_mw.mw = m2;
	w.bind_mw.rkey = k2;
	w.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = (uintptr_t)win2, .length = 4096,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE
	};
	rc = ibv_post_send(qh, &w, &bad);
	printf("mw: bind type 2 by a work request: %d\n", rc);
	wait_wc(ch, 1, "mw bind 2", NULL);
	write8(qg, 603, win2, k2);
	wait_wc(cg, 1, "mw write through 2", NULL);
	printf("mw: landed through 2: %d\n", !memcmp(win2, "windowed", 8));
	w = (struct ibv_send_wr){ .wr_id = 604, .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED };
	w.invalidate_rkey = k2;
	rc = ibv_post_send(qh, &w, &bad);
	printf("mw: local invalidate: %d\n", rc);
	wait_wc(ch, 1, "mw invalidate", NULL);
	write8(qg, 605, win2, k2);
	wait_wc(cg, 1, "mw write through invalidated 2", NULL);
	printf("mw: dealloc %d %d\n", ibv_dealloc_mw(m1), ibv_dealloc_mw(m2));
}

static void misc(void)
{
	struct ibv_cq *c = cq_new(16);
	struct ibv_qp *u = qp_new(IBV_QPT_UD, c, NULL, 4, 1, 0);
	struct ibv_qp *r = qp_new(IBV_QPT_RC, c, NULL, 4, 1, 0);
	union ibv_gid g = { .raw = { 0xff, 0x0e, [15] = 1 } };
	int rc;

	printf("misc: rates %d %d %d %d, unknown %d %d %d %d\n",
	       ibv_rate_to_mult(IBV_RATE_10_GBPS), mult_to_ibv_rate(4),
	       ibv_rate_to_mbps(IBV_RATE_100_GBPS), mbps_to_ibv_rate(25781),
	       ibv_rate_to_mult(IBV_RATE_100_GBPS), mult_to_ibv_rate(3),
	       ibv_rate_to_mbps(IBV_RATE_MAX), mbps_to_ibv_rate(1));
	printf("misc: pkey index of 0xffff: %d\n",
	       ibv_get_pkey_index(ctx, 1, htobe16(0xffff)));
	errno = 0;
	rc = ibv_get_pkey_index(ctx, 1, htobe16(0x1234));
	printf("misc: pkey index of 0x1234: %d\n", rc);
	rc = ibv_resize_cq(c, 64);
	printf("misc: resize_cq to 64: %d, cqe >= 64: %d\n", rc, c->cqe >= 64);
	to_rts(u, 0);
	rc = ibv_attach_mcast(u, &g, 0);
	printf("misc: attach UD %d, again %d\n", rc, ibv_attach_mcast(u, &g, 0));
	rc = ibv_detach_mcast(u, &g, 0);
	printf("misc: detach %d, again %d\n", rc, ibv_detach_mcast(u, &g, 0));
	printf("misc: attach RC %d\n", ibv_attach_mcast(r, &g, 0));
	CHECK(!ibv_destroy_qp(u) && !ibv_destroy_qp(r), "misc: destroy qp");
	CHECK(!ibv_destroy_cq(c), "misc: destroy cq");
}

int main(int argc, char **argv)
{
	struct ibv_device **list;

	CHECK(argc == 3, "usage: verbs_core DEV GID_INDEX");
	gidx = atoi(argv[2]);
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
	deep();
	ud();
	lists();
	srq();
	misc();
	mw();
	printf("done\n");
	return 0;
}
