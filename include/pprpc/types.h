/*
 * pprpc/types.h — the shared vocabulary of pprpc: error codes, element types,
 * operations and their parameters.
 *
 * Why a separate header: these values are also the wire values, and every part
 * (proto, kernels, daemon, libclient) must agree on them.  It contains only
 * enums, plain structs and constants, so kernels/ and daemon/ can include it
 * without depending on the client library.  Values are pinned: never renumber.
 */
#ifndef PPRPC_TYPES_H
#define PPRPC_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: 0 is success, failures are negative.  The same numbers travel
 * in error replies (ErrorReply.code). */
enum pprpc_error {
	PPRPC_OK = 0,
	PPRPC_EINVAL = -1,      /* invalid argument */
	PPRPC_ENOMEM = -2,      /* out of memory (host side) */
	PPRPC_EPROTO = -3,      /* malformed frame or message */
	PPRPC_EVERSION = -4,    /* protocol version mismatch */
	PPRPC_EHANDLE = -5,     /* unknown, stale or foreign handle */
	PPRPC_ERANGE = -6,      /* tensor region outside its buffer */
	PPRPC_ESHAPE = -7,      /* shapes do not fit the operation */
	PPRPC_ETYPE = -8,       /* element type not supported by the operation */
	PPRPC_EGRAPH = -9,      /* graph topology invalid (cycle, use before def) */
	PPRPC_EFLOOR = -10,     /* allocation would cross the memory floor */
	PPRPC_EIO = -11,        /* I/O error on a connection */
	PPRPC_ECONN = -12,      /* cannot connect / connection lost */
	PPRPC_ETIMEDOUT = -13,  /* timed out */
	PPRPC_ETOOBIG = -14,    /* a size exceeds a configured limit */
	PPRPC_EUNSUPP = -15,    /* operation not supported here */
	PPRPC_EDEVICE = -16,    /* device failure */
	PPRPC_EAUTH = -17,      /* authentication failed */
	PPRPC_EBUSY = -18,      /* object in use */
	PPRPC_ECANCELED = -19,  /* work cancelled */
	PPRPC_ELIMIT = -20,     /* a resource limit was reached */
	PPRPC_EQUEUE = -21,     /* skipped: an earlier command on the queue failed */
	PPRPC_EINTERNAL = -22,  /* bug: please report */
	PPRPC_ECLOSED = -23,    /* the connection was closed */
	PPRPC_E_COUNT_ = 24     /* number of codes including OK (internal) */
};

/* Element types.  Block types (Q8_0) store blocks of `blck` elements in
 * `type_size` bytes; ne[0] must be a multiple of the block size. */
enum pprpc_dtype {
	PPRPC_F32 = 0,
	PPRPC_F16 = 1,
	PPRPC_BF16 = 2,
	PPRPC_I32 = 3,
	PPRPC_Q8_0 = 4,
	PPRPC_DTYPE_COUNT
};

/* Operations.  The shape rules live in kernels/ops.h and are shared by the
 * client graph builder and the daemon validator.  Parameters (f[], i[] of
 * struct pprpc_op_params) are documented per op in kernels/ops.h. */
enum pprpc_op {
	PPRPC_OP_NONE = 0,
	PPRPC_OP_ADD = 1,      /* dst = src0 + src1 (src1 broadcast) */
	PPRPC_OP_MUL = 2,      /* dst = src0 * src1 (src1 broadcast) */
	PPRPC_OP_SCALE = 3,    /* dst = src0 * f[0] + f[1] */
	PPRPC_OP_CPY = 4,      /* dst = cast(src0), any strides, same element count */
	PPRPC_OP_MUL_MAT = 5,  /* dst[n,m] = sum_k src0[k,n] * src1[k,m] */
	PPRPC_OP_GET_ROWS = 6, /* embedding lookup */
	PPRPC_OP_SET_ROWS = 7, /* write rows at i32 indices (KV-cache writes) */
	PPRPC_OP_CONCAT = 8,
	PPRPC_OP_RMS_NORM = 9,
	PPRPC_OP_L2_NORM = 10,
	PPRPC_OP_SILU = 11,
	PPRPC_OP_SIGMOID = 12,
	PPRPC_OP_SOFTPLUS = 13,
	PPRPC_OP_EXP = 14,
	PPRPC_OP_GELU = 15,
	PPRPC_OP_SWIGLU = 16,  /* silu(src0) * src1 */
	PPRPC_OP_SOFTMAX = 17,
	PPRPC_OP_ROPE = 18,
	PPRPC_OP_ATTENTION = 19,
	PPRPC_OP_ARGMAX = 20,
	PPRPC_OP_GATED_DELTA_NET = 21,
	PPRPC_OP_COUNT
};

/* ROPE modes (ROPE's i[0]), numbered as in ggml: NORMAL rotates adjacent
 * pairs (x[2i], x[2i+1]), NEOX rotates (x[i], x[i + n_dims/2]). */
enum pprpc_rope_mode {
	PPRPC_ROPE_NORMAL = 0,
	PPRPC_ROPE_NEOX = 2
};

#define PPRPC_MAX_DIMS 4
#define PPRPC_MAX_SRC 8
#define PPRPC_OP_MAX_F 8
#define PPRPC_OP_MAX_I 8

/* Operation parameters: a fixed small vector of floats and ints whose meaning
 * is given per op in kernels/ops.h.  Unused entries must be zero. */
struct pprpc_op_params {
	float f[PPRPC_OP_MAX_F];
	int32_t i[PPRPC_OP_MAX_I];
};

/* Frame and protocol limits (hard caps; configured limits may be lower). */
#define PPRPC_PROTO_VERSION 1
#define PPRPC_MAX_META (1u << 20)            /* 1 MiB */
#define PPRPC_MAX_GRAPH_NODES 65536
#define PPRPC_MAX_GRAPH_TENSORS 131072

#ifdef __cplusplus
}
#endif
#endif
