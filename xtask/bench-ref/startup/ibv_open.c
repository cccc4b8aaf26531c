/*
 * Start-up cost, whole process, through rdma-core: exec, open a device
 * context, exit — what examples/bench_open.rs does through rverbs. Built
 * by `cargo xtask bench` against the host's libibverbs (rdma-core 44) and
 * counted under callgrind in the VM. Bench-only code.
 *
 * usage: ibv_open [DEVICE]     (the first device if none is named)
 */
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n; i++)
		if (argc < 2 || !strcmp(ibv_get_device_name(list[i]), argv[1]))
			break;
	if (i == n) {
		fprintf(stderr, "ibv_open: no such device\n");
		return 1;
	}
	ctx = ibv_open_device(list[i]);
	if (!ctx) {
		perror("ibv_open_device");
		return 1;
	}
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
