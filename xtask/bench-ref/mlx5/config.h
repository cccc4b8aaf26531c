/* The parts of rdma-core's generated config.h (buildlib/config.h.in) that
 * providers/mlx5/qp.c and cq.c read, with the values cmake gives them on
 * Debian amd64 (rdma-core 44). Bench-only: `cargo xtask bench` compiles
 * rdma-core's own qp.c and cq.c against it (see harness.c). */
#ifndef CONFIG_H_IN
#define CONFIG_H_IN
#define HAVE_STATEMENT_EXPR 1
#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1
#define HAVE_TYPEOF 1
#define HAVE_ISBLANK 1
#define HAVE_BUILTIN_CLZ 1
#define HAVE_BUILTIN_CLZL 1
#define PACKAGE_VERSION "44.0"
#define STREAM_CLOEXEC "e"
#define RDMA_CDEV_DIR "/dev/infiniband"
#define IBV_CONFIG_DIR "/etc/libibverbs.d"
#define VERBS_PROVIDER_DIR "/usr/lib/x86_64-linux-gnu/libibverbs"
#define VERBS_PROVIDER_SUFFIX "-rdmav34.so"
#define IBVERBS_PABI_VERSION 34
#define HAVE_FUNC_ATTRIBUTE_ALWAYS_INLINE 1
#define HAVE_FUNC_ATTRIBUTE_IFUNC 1
#define HAVE_FUNC_ATTRIBUTE_SYMVER 1
#define HAVE_WORKING_IF_H 1
#define HAVE_FULL_SYMBOL_VERSIONS 1
#define SIZEOF_LONG 8
/* IOCTL_MODE_NUM 3: both the write() and the ioctl() command paths. */
#define VERBS_IOCTL_ONLY 0
#define VERBS_WRITE_ONLY 0
#endif
