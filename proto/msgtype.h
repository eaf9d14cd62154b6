/*
 * proto/msgtype.h — frame header message types and flags (wire values).
 */
#ifndef PPRPC_PROTO_MSGTYPE_H
#define PPRPC_PROTO_MSGTYPE_H

enum msg_type {
	MSG_NONE = 0,
	MSG_HELLO = 1,
	MSG_BUFFER_ALLOC = 2,
	MSG_BUFFER_FREE = 3,
	MSG_BUFFER_CLEAR = 4,
	MSG_TENSOR_SET = 5,
	MSG_TENSOR_GET = 6,
	MSG_TENSOR_COPY = 7,
	MSG_GRAPH_CREATE = 8,
	MSG_GRAPH_RUN = 9,
	MSG_GRAPH_FREE = 10,
	MSG_FENCE = 11,
	MSG_STATS = 12,
	MSG_TIMELINE_CREATE = 13,
	MSG_TIMELINE_DESTROY = 14,
	MSG_SIGNAL = 15,
	MSG_WAIT = 16,
	MSG_TIMELINE_QUERY = 17,
	MSG_HOST_WAIT = 18,
	MSG_SEND = 19,
	MSG_RECV = 20,
	MSG_SUBSCRIBE = 21,      /* peer: reply when a timeline reaches a value */
	MSG_PULL = 22,           /* peer: stream a SEND's bytes (replies with MORE) */
	MSG_PING = 23,           /* answered at once (link check) */
	MSG_PROBE = 24,          /* client: can this daemon reach rank X? */
	MSG_PULL_RELEASE = 25,   /* peer: GPU staging of an IPC transfer may be reused */
	MSG_GGML_GRAPH_CREATE = 26, /* a ggml graph for a ggml device (doc/ggml.md) */
	MSG_GGML_SUPPORTS = 27,  /* would the device's ggml backend run this op? */
	MSG_GGML_ALLOC_SIZE = 28, /* ggml buffer type's allocation size of a tensor */
	MSG_PULL_CHECK = 29,     /* peer: is this PULL (id, nonce) yours? (the source asks the SEND's rank) */
	MSG_TENSOR_FILL = 30,    /* fill a tensor from the rank's model file or weights cache */
	MSG_HOST_PAGE_MAP = 31,  /* client, same host: memory of its own for GETs to land in */
	MSG_HOST_PAGE_UNMAP = 32,
	MSG_TYPE_COUNT
};

enum frame_flag {
	FRAME_F_REPLY = 1u << 0,
	FRAME_F_ERROR = 1u << 1,
	FRAME_F_BULK = 1u << 2,
	/* A queued command: it executes in order on its device queue and gets
	 * no success reply (TENSOR_GET still replies, with the bytes as the
	 * queue saw them); a failure becomes the queue's sticky error. */
	FRAME_F_QUEUED = 1u << 3,
	/* A reply that is not the last one for its request (PULL streams a
	 * transfer as several chunk replies). */
	FRAME_F_MORE = 1u << 4,
};
#define FRAME_F_KNOWN (FRAME_F_REPLY | FRAME_F_ERROR | FRAME_F_BULK | FRAME_F_QUEUED | FRAME_F_MORE)

/* Name for logs ("TENSOR_SET"), "?" when unknown. */
const char *msg_type_name(unsigned type);

#endif
