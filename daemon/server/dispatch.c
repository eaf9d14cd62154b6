/* daemon/server/dispatch.c — the handler table, indexed by message type. */
#include "daemon/server/dispatch.h"

#include "daemon/pprpcd.h"
#include "proto/msgtype.h"
#include "proto/pprpc.pb-c.h"

/* The tensor bytes a request names (STATS request_counts). */
static uint64_t alloc_bytes(const ProtobufCMessage *m)
{
	return ((const Pprpc__BufferAlloc *)m)->size;
}

static uint64_t set_bytes(const ProtobufCMessage *m)
{
	return ((const Pprpc__TensorSet *)m)->size;
}

static uint64_t get_bytes(const ProtobufCMessage *m)
{
	return ((const Pprpc__TensorGet *)m)->size;
}

static uint64_t copy_bytes(const ProtobufCMessage *m)
{
	return ((const Pprpc__TensorCopy *)m)->size;
}

static uint64_t fill_bytes(const ProtobufCMessage *m)
{
	return ((const Pprpc__TensorFill *)m)->size;
}

static const struct handler table[MSG_TYPE_COUNT] = {
	[MSG_HELLO] = { &pprpc__hello__descriptor, NULL, h_hello },
	[MSG_BUFFER_ALLOC] = { &pprpc__buffer_alloc__descriptor, NULL, h_buffer_alloc, .bytes = alloc_bytes },
	[MSG_BUFFER_FREE] = { &pprpc__buffer_free__descriptor, NULL, h_buffer_free },
	[MSG_BUFFER_CLEAR] = { &pprpc__buffer_clear__descriptor, NULL, h_buffer_clear },
	[MSG_TENSOR_SET] = { &pprpc__tensor_set__descriptor, h_tensor_set_bulk, h_tensor_set, .bytes = set_bytes },
	[MSG_TENSOR_GET] = { &pprpc__tensor_get__descriptor, NULL, h_tensor_get, .bytes = get_bytes },
	[MSG_TENSOR_COPY] = { &pprpc__tensor_copy__descriptor, NULL, h_tensor_copy, .bytes = copy_bytes },
	[MSG_GRAPH_CREATE] = { &pprpc__graph_create__descriptor, NULL, h_graph_create, .ends_load = 1 },
	[MSG_GRAPH_RUN] = { &pprpc__graph_run__descriptor, NULL, h_graph_run, .ends_load = 1 },
	[MSG_GRAPH_FREE] = { &pprpc__graph_free__descriptor, NULL, h_graph_free },
	[MSG_FENCE] = { &pprpc__fence__descriptor, NULL, h_fence },
	[MSG_STATS] = { &pprpc__stats__descriptor, NULL, h_stats },
	[MSG_TIMELINE_CREATE] = { &pprpc__timeline_create__descriptor, NULL, h_timeline_create },
	[MSG_TIMELINE_DESTROY] = { &pprpc__timeline_destroy__descriptor, NULL, h_timeline_destroy },
	[MSG_SIGNAL] = { &pprpc__signal__descriptor, NULL, h_signal },
	[MSG_WAIT] = { &pprpc__wait__descriptor, NULL, h_wait },
	[MSG_TIMELINE_QUERY] = { &pprpc__timeline_query__descriptor, NULL, h_timeline_query },
	[MSG_HOST_WAIT] = { &pprpc__host_wait__descriptor, NULL, h_host_wait },
	[MSG_SUBSCRIBE] = { &pprpc__subscribe__descriptor, NULL, h_subscribe },
	[MSG_SEND] = { &pprpc__send__descriptor, NULL, h_send, .ends_load = 1 },
	[MSG_RECV] = { &pprpc__recv__descriptor, NULL, h_recv, .ends_load = 1 },
	[MSG_PULL] = { &pprpc__pull__descriptor, NULL, h_pull },
	[MSG_PING] = { &pprpc__empty__descriptor, NULL, h_ping },
	[MSG_PROBE] = { &pprpc__probe__descriptor, NULL, h_probe },
	[MSG_PULL_RELEASE] = { &pprpc__pull_release__descriptor, NULL, h_pull_release },
	[MSG_PULL_CHECK] = { &pprpc__pull_check__descriptor, NULL, h_pull_check },
	[MSG_TENSOR_FILL] = { &pprpc__tensor_fill__descriptor, NULL, h_tensor_fill, .bytes = fill_bytes },
	[MSG_HOST_PAGE_MAP] = { &pprpc__host_page_map__descriptor, NULL, h_host_page_map },
	[MSG_HOST_PAGE_UNMAP] = { &pprpc__host_page_unmap__descriptor, NULL, h_host_page_unmap },
	[MSG_GGML_GRAPH_CREATE] = { &pprpc__ggml_graph_create__descriptor, NULL, h_ggml_graph_create,
				    .ends_load = 1 },
	[MSG_GGML_SUPPORTS] = { &pprpc__ggml_supports__descriptor, NULL, h_ggml_supports },
	[MSG_GGML_ALLOC_SIZE] = { &pprpc__ggml_alloc_size__descriptor, NULL, h_ggml_alloc_size },
};

const struct handler *dispatch_lookup(unsigned type)
{
	if (type >= MSG_TYPE_COUNT || !table[type].run)
		return NULL;
	return &table[type];
}

int dispatch_start(struct pprpcd *d)
{
	return h_timeline_start(d);
}
