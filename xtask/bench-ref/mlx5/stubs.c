/*
 * What providers/mlx5/qp.c and cq.c call outside themselves (other mlx5
 * files, libibverbs) on paths the reference benchmark never takes:
 * errors, ODP faults, SRQs, inline scatter to receive WQEs, buffer
 * allocation, DEVX, clock info. Each aborts, so that a run that reaches
 * one fails instead of reporting a figure for a different path.
 * Declared without their prototypes on purpose: only the symbol matters.
 * Weak, so that a build that compiles the file holding the real function
 * (the oracle compiles srq.c) gets that one.
 */
#include <stdio.h>
#include <stdlib.h>

/* mlx5.c: MLX5_FREEZE_ON_ERROR_CQE, read on error CQEs only. */
int mlx5_freeze_on_error_cqe;

#define STUB(name)                                                     \
	void name(void);                                               \
	__attribute__((weak)) void name(void)                          \
	{                                                              \
		fprintf(stderr, "reference harness: %s reached\n", #name); \
		abort();                                               \
	}

STUB(ibv_qp_to_qp_ex)
STUB(mlx5_alloc_prefered_buf)
STUB(mlx5_complete_odp_fault)
STUB(mlx5_copy_to_recv_srq)
STUB(mlx5_find_mkey)
STUB(mlx5_find_srq)
STUB(mlx5_free_actual_buf)
STUB(mlx5_free_srq_wqe)
STUB(mlx5_get_alloc_type)
STUB(mlx5_get_cmd_status_err)
STUB(mlx5dv_devx_qp_query)
STUB(mlx5dv_get_clock_info)
