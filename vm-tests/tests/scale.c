/* The C side of scale.rs: N RC QPs created on one CQ through libibverbs
 * (rdma-core's, or ours by LD_LIBRARY_PATH), timed, with the resident
 * memory they add, then destroyed. Prints one line:
 *   qps N create_ns TOTAL rss_kib BEFORE AFTER
 * Usage: scale DEVICE N */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_qp **qps;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	long before, after;
	long long t;
	int i, n;

	if (argc != 3)
		return 2;
	n = atoi(argv[2]);
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "no device %s\n", argv[1]);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 4 * n, NULL, NULL, 0) : NULL;
	qps = calloc(n, sizeof(*qps));
	if (!cq || !qps) {
		perror("pd/cq");
		return 1;
	}
	before = rss_kib();
	t = now_ns();
	for (i = 0; i < n; i++) {
		struct ibv_qp_init_attr a = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 2, .max_recv_wr = 2,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qps[i] = ibv_create_qp(pd, &a);
		if (!qps[i]) {
			perror("ibv_create_qp");
			return 1;
		}
	}
	t = now_ns() - t;
	after = rss_kib();
	printf("qps %d create_ns %lld rss_kib %ld %ld\n", n, t, before, after);
	for (i = 0; i < n; i++)
		if (ibv_destroy_qp(qps[i])) {
			perror("ibv_destroy_qp");
			return 1;
		}
	if (ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		return 1;
	ibv_free_device_list(list);
	free(qps);
	return 0;
}
