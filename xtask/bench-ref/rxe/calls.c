/*
 * The rxe data path through rdma-core's libibverbs, per call: what
 * examples/bench_calls.rs does through rverbs, for `cargo xtask bench`'s
 * rows side by side. Post one signaled 64-byte RDMA WRITE (one SGE), a
 * chain of 16 such WRITEs in one ibv_post_send (one doorbell), one
 * signaled 64-byte inline SEND (IBV_SEND_INLINE), one 64-byte UD SEND
 * through an address handle, and one signaled 64-byte RDMA READ; poll a CQ holding one completion, one
 * holding four, one holding sixteen (with room for sixteen), and an
 * empty one; and the WRITE and the UD SEND again through the
 * work-request builders (ibv_wr_start, ibv_wr_rdma_write or ibv_wr_send
 * and ibv_wr_set_ud_addr, ibv_wr_set_sge, ibv_wr_complete), rdma-core's
 * way to post without an ibv_send_wr, beside rverbs' prepared sends.
 * Each measured call is its own out-of-line function (bench_*), whose
 * inclusive cost per call callgrind gives.
 *
 * One RC QP looped back to itself takes the WRITEs and the inline SEND
 * (its receive posted beforehand); a UD QP sends to itself through an
 * address handle of the port's own GID (its receive, with room for the
 * 40-byte GRH, posted beforehand). Receives are posted and the SENDs'
 * completions taken outside the measured functions.
 *
 * Completions are let arrive before the measured poll (the data's
 * landing, then a sleep), so that no measured call spins waiting for the
 * kernel; a poll that still comes back short, or a completion that
 * failed or is not the expected one, is counted and reported (short=),
 * not hidden. Bench-only code.
 *
 * usage: calls DEVICE [PORT] [ITERATIONS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#define MEASURED __attribute__((noinline, noipa))

/* The UD QP's Q_Key (its own and the one its sends carry). */
#define QKEY 0x11111111
/* Bytes of every message; a UD receive starts with a 40-byte GRH. */
#define LEN 64
#define GRH_LEN 40

/* Waits (not measured) until the last write's data landed at `at` (the
 * responder's side is done; the requester's completion follows with the
 * ACK), then gives the kernel 20 ms more. */
static void settle(volatile char *at, char stamp)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	time_t end = time(NULL) + 5;

	while (*at != stamp && time(NULL) < end)
		;
	nanosleep(&ts, NULL);
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

MEASURED void bench_post_write(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, wr, &bad))
		die("ibv_post_send");
}

MEASURED void bench_post_read(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, wr, &bad))
		die("ibv_post_send READ");
}

MEASURED int bench_poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

MEASURED int bench_poll_four(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 4, wc);
}

MEASURED int bench_poll_empty(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

/* Sixteen chained WRITEs, one call, one doorbell. */
MEASURED void bench_post_list16(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, wr, &bad))
		die("ibv_post_send of sixteen");
}

MEASURED void bench_post_inline(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, wr, &bad))
		die("ibv_post_send inline");
}

MEASURED void bench_post_ud(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, wr, &bad))
		die("ibv_post_send UD");
}

MEASURED int bench_poll_16(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 16, wc);
}

/* One signaled 64 B WRITE through the builders. */
MEASURED void bench_post_prepared(struct ibv_qp_ex *qpx, uint64_t id,
				  uint32_t rkey, uint64_t raddr,
				  uint32_t lkey, uint64_t addr)
{
	ibv_wr_start(qpx);
	qpx->wr_id = id;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, rkey, raddr);
	ibv_wr_set_sge(qpx, lkey, addr, LEN);
	if (ibv_wr_complete(qpx))
		die("ibv_wr_complete");
}

/* One signaled 64 B UD SEND through the builders. */
MEASURED void bench_post_ud_prepared(struct ibv_qp_ex *qpx, uint64_t id,
				     struct ibv_ah *ah, uint32_t qpn,
				     uint32_t lkey, uint64_t addr)
{
	ibv_wr_start(qpx);
	qpx->wr_id = id;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_ud_addr(qpx, ah, qpn, QKEY);
	ibv_wr_set_sge(qpx, lkey, addr, LEN);
	if (ibv_wr_complete(qpx))
		die("ibv_wr_complete UD");
}

/* Takes whatever a short poll left behind (not measured). */
static void drain(struct ibv_cq *cq, int want)
{
	struct ibv_wc wc[4];
	time_t end = time(NULL) + 5;
	int n;

	while (want > 0 && time(NULL) < end) {
		n = ibv_poll_cq(cq, 4, wc);
		if (n > 0)
			want -= n;
	}
}

/* Posts one receive of `len` bytes at `at` on `qp` (not measured). */
static void post_recv(struct ibv_qp *qp, uint64_t id, char *at, uint32_t len,
		      uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)at, len, lkey };
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

/* Takes (not measured, within 5 s) the two completions of a SEND to this
 * process: the send's (send_id) and the receive's (recv_id, len bytes).
 * Whether both came, successful, as expected. */
static int send_and_receive(struct ibv_cq *cq, uint64_t send_id,
			    uint64_t recv_id, uint32_t len)
{
	struct ibv_wc wc[2];
	time_t end = time(NULL) + 5;
	int got = 0, n, k, sent = 0, received = 0;

	while (got < 2 && time(NULL) < end) {
		n = ibv_poll_cq(cq, 2 - got, wc + got);
		if (n > 0)
			got += n;
	}
	for (k = 0; k < got; k++) {
		if (wc[k].status != IBV_WC_SUCCESS)
			return 0;
		sent |= wc[k].wr_id == send_id && wc[k].opcode == IBV_WC_SEND;
		received |= wc[k].wr_id == recv_id &&
			    wc[k].opcode == IBV_WC_RECV &&
			    wc[k].byte_len == len;
	}
	return got == 2 && sent && received;
}

/* The RoCE v2 IPv4-mapped GID of the port, as examples/common does. */
static int own_gid(struct ibv_context *ctx, int port, union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	int i;

	if (ibv_query_port(ctx, port, &pa))
		die("ibv_query_port");
	for (i = 0; i < pa.gid_tbl_len; i++) {
		static const unsigned char v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0,
						      0, 0, 0xff, 0xff };
		if (ibv_query_gid(ctx, port, i, gid))
			continue;
		if (!memcmp(gid->raw, v4, 12))
			return i;
	}
	fprintf(stderr, "no IPv4-mapped GID on port %d\n", port);
	exit(1);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : NULL;
	int port = argc > 2 ? atoi(argv[2]) : 1;
	int iters = argc > 3 ? atoi(argv[3]) : 100;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp, *ud;
	struct ibv_ah *ah;
	struct ibv_ah_attr ah_attr;
	struct ibv_mr *src, *dst, *rcv;
	struct ibv_qp_init_attr_ex init;
	struct ibv_qp_ex *qpx, *udx;
	struct ibv_qp_attr a;
	struct ibv_sge sge, inline_sge, read_sge;
	struct ibv_send_wr wr, four_wr[4], wr16[16], inline_wr, ud_wr, read_wr;
	struct ibv_wc wc[16];
	union ibv_gid gid;
	static char sbuf[4096], dbuf[4096], rbuf[4096], inline_data[LEN];
	uint64_t recv_id;
	int i, k, n, gidx, short_polls = 0;
	uint64_t id = 0;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name)) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd/cq");
	memset(&init, 0, sizeof(init));
	/* Extended QPs, for the builders; ibv_post_send takes them too. */
	init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	init.pd = pd;
	init.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
	init.send_cq = init.recv_cq = cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 16;
	init.cap.max_recv_wr = 4;
	init.cap.max_send_sge = init.cap.max_recv_sge = 1;
	init.cap.max_inline_data = LEN;
	qp = ibv_create_qp_ex(ctx, &init);
	if (!qp)
		die("ibv_create_qp_ex");
	qpx = ibv_qp_to_qp_ex(qp);
	/* One UD QP sending to itself through an AH of the port's GID. */
	init.qp_type = IBV_QPT_UD;
	init.cap.max_send_wr = 4;
	init.cap.max_recv_wr = 4;
	init.cap.max_inline_data = 0;
	init.send_ops_flags = IBV_QP_EX_WITH_SEND;
	ud = ibv_create_qp_ex(ctx, &init);
	if (!ud)
		die("ibv_create_qp_ex UD");
	udx = ibv_qp_to_qp_ex(ud);
	if (!qpx || !udx)
		die("ibv_qp_to_qp_ex");
	gidx = own_gid(ctx, port, &gid);

	/* One QP connected to itself: rxe answers its own GID. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = port;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qkey = QKEY;
	if (ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		die("UD INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(ud, &a, IBV_QP_STATE))
		die("UD RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD RTS");
	memset(&ah_attr, 0, sizeof(ah_attr));
	ah_attr.is_global = 1;
	ah_attr.grh.dgid = gid;
	ah_attr.grh.sgid_index = gidx;
	ah_attr.grh.hop_limit = 1;
	ah_attr.port_num = port;
	ah = ibv_create_ah(pd, &ah_attr);
	if (!ah)
		die("ibv_create_ah");

	src = ibv_reg_mr(pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	dst = ibv_reg_mr(pd, dbuf, sizeof(dbuf),
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ);
	rcv = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	if (!src || !dst || !rcv)
		die("ibv_reg_mr");
	memset(sbuf, 0x5a, 64);

	sge.addr = (uintptr_t)sbuf;
	sge.length = 64;
	sge.lkey = src->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dbuf;
	wr.wr.rdma.rkey = dst->rkey;

	/* The inline SEND: the payload is copied into the WQE, no lkey. */
	inline_sge.addr = (uintptr_t)inline_data;
	inline_sge.length = LEN;
	inline_sge.lkey = 0;
	memset(&inline_wr, 0, sizeof(inline_wr));
	inline_wr.sg_list = &inline_sge;
	inline_wr.num_sge = 1;
	inline_wr.opcode = IBV_WR_SEND;
	inline_wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;

	/* The READ: the first WRITE's 64 B back, into rbuf at 1024. */
	read_sge.addr = (uintptr_t)(rbuf + 1024);
	read_sge.length = LEN;
	read_sge.lkey = rcv->lkey;
	memset(&read_wr, 0, sizeof(read_wr));
	read_wr.sg_list = &read_sge;
	read_wr.num_sge = 1;
	read_wr.opcode = IBV_WR_RDMA_READ;
	read_wr.send_flags = IBV_SEND_SIGNALED;
	read_wr.wr.rdma.remote_addr = (uintptr_t)dbuf;
	read_wr.wr.rdma.rkey = dst->rkey;

	/* The UD SEND, from the WRITEs' source, to the UD QP itself. */
	memset(&ud_wr, 0, sizeof(ud_wr));
	ud_wr.sg_list = &sge;
	ud_wr.num_sge = 1;
	ud_wr.opcode = IBV_WR_SEND;
	ud_wr.send_flags = IBV_SEND_SIGNALED;
	ud_wr.wr.ud.ah = ah;
	ud_wr.wr.ud.remote_qpn = ud->qp_num;
	ud_wr.wr.ud.remote_qkey = QKEY;

	for (i = 0; i < iters; i++) {
		/* Each round's data carries its own stamp, so that its
		 * landing can be seen. */
		char stamp = (char)(i % 255 + 1);

		memset(sbuf, stamp, 64);
		wr.wr_id = id;
		wr.next = NULL;
		wr.wr.rdma.remote_addr = (uintptr_t)dbuf;
		bench_post_write(qp, &wr);
		settle(dbuf, stamp);
		n = bench_poll_one(cq, wc);
		if (n != 1 || wc[0].status != IBV_WC_SUCCESS ||
		    wc[0].wr_id != id) {
			short_polls++;
			drain(cq, n == 1 ? 0 : 1);
		}
		id++;
		if (bench_poll_empty(cq, wc) != 0)
			short_polls++;
		for (k = 0; k < 4; k++) {
			four_wr[k] = wr;
			four_wr[k].wr_id = id + k;
			four_wr[k].wr.rdma.remote_addr =
				(uintptr_t)(dbuf + 64 * (k + 1));
			four_wr[k].next = k < 3 ? &four_wr[k + 1] : NULL;
		}
		{
			struct ibv_send_wr *bad;

			if (ibv_post_send(qp, four_wr, &bad))
				die("ibv_post_send of four");
		}
		settle(dbuf + 64 * 4, stamp);
		n = bench_poll_four(cq, wc);
		if (n != 4) {
			short_polls++;
			drain(cq, 4 - (n > 0 ? n : 0));
		} else {
			for (k = 0; k < 4; k++)
				if (wc[k].status != IBV_WC_SUCCESS)
					short_polls++;
		}
		id += 4;

		/* Sixteen WRITEs (to 64 B blocks 8..24) in one call; then the
		 * poll that takes their sixteen completions. */
		for (k = 0; k < 16; k++) {
			wr16[k] = wr;
			wr16[k].wr_id = id + k;
			wr16[k].wr.rdma.remote_addr =
				(uintptr_t)(dbuf + 64 * (k + 8));
			wr16[k].next = k < 15 ? &wr16[k + 1] : NULL;
		}
		bench_post_list16(qp, wr16);
		settle(dbuf + 64 * 23, stamp);
		n = bench_poll_16(cq, wc);
		if (n != 16) {
			short_polls++;
			drain(cq, 16 - (n > 0 ? n : 0));
		} else {
			for (k = 0; k < 16; k++)
				if (wc[k].status != IBV_WC_SUCCESS ||
				    wc[k].wr_id != id + k) {
					short_polls++;
					break;
				}
		}
		id += 16;

		/* A 64 B inline SEND to the RC QP itself, its receive posted
		 * beforehand. */
		memset(inline_data, stamp, LEN);
		recv_id = (1ULL << 32) | id;
		post_recv(qp, recv_id, rbuf, LEN, rcv->lkey);
		inline_wr.wr_id = id;
		bench_post_inline(qp, &inline_wr);
		if (!send_and_receive(cq, id, recv_id, LEN) || rbuf[0] != stamp)
			short_polls++;
		id++;

		/* A 64 B UD SEND to the UD QP itself through the AH. */
		recv_id = (1ULL << 32) | id;
		post_recv(ud, recv_id, rbuf + 256, GRH_LEN + LEN, rcv->lkey);
		ud_wr.wr_id = id;
		bench_post_ud(ud, &ud_wr);
		if (!send_and_receive(cq, id, recv_id, GRH_LEN + LEN) ||
		    rbuf[256 + GRH_LEN] != stamp)
			short_polls++;
		id++;

		/* The WRITE through the builders, to block 30. */
		bench_post_prepared(qpx, id, dst->rkey,
				    (uintptr_t)(dbuf + 64 * 30), src->lkey,
				    (uintptr_t)sbuf);
		settle(dbuf + 64 * 30, stamp);
		n = ibv_poll_cq(cq, 1, wc);
		if (n != 1 || wc[0].status != IBV_WC_SUCCESS ||
		    wc[0].wr_id != id) {
			short_polls++;
			drain(cq, n == 1 ? 0 : 1);
		}
		id++;

		/* The READ of block 0 (this round's first WRITE). */
		read_wr.wr_id = id;
		bench_post_read(qp, &read_wr);
		settle(rbuf + 1024, stamp);
		n = ibv_poll_cq(cq, 1, wc);
		if (n != 1 || wc[0].status != IBV_WC_SUCCESS ||
		    wc[0].wr_id != id) {
			short_polls++;
			drain(cq, n == 1 ? 0 : 1);
		}
		id++;

		/* The UD SEND through the builders. */
		recv_id = (1ULL << 32) | id;
		post_recv(ud, recv_id, rbuf + 512, GRH_LEN + LEN, rcv->lkey);
		bench_post_ud_prepared(udx, id, ah, ud->qp_num, src->lkey,
				       (uintptr_t)sbuf);
		if (!send_and_receive(cq, id, recv_id, GRH_LEN + LEN) ||
		    rbuf[512 + GRH_LEN] != stamp)
			short_polls++;
		id++;
	}
	printf("BENCH-CALLS rdma-core iterations=%d short=%d\n", iters,
	       short_polls);
	ibv_destroy_qp(ud);
	ibv_destroy_ah(ah);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(src);
	ibv_dereg_mr(dst);
	ibv_dereg_mr(rcv);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
