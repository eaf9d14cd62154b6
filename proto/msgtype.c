/* proto/msgtype.c — names of message types, for logs and errors. */
#include "proto/msgtype.h"

static const char *const names[MSG_TYPE_COUNT] = {
	[MSG_NONE] = "NONE",
	[MSG_HELLO] = "HELLO",
	[MSG_BUFFER_ALLOC] = "BUFFER_ALLOC",
	[MSG_BUFFER_FREE] = "BUFFER_FREE",
	[MSG_BUFFER_CLEAR] = "BUFFER_CLEAR",
	[MSG_TENSOR_SET] = "TENSOR_SET",
	[MSG_TENSOR_GET] = "TENSOR_GET",
	[MSG_TENSOR_COPY] = "TENSOR_COPY",
	[MSG_GRAPH_CREATE] = "GRAPH_CREATE",
	[MSG_GRAPH_RUN] = "GRAPH_RUN",
	[MSG_GRAPH_FREE] = "GRAPH_FREE",
	[MSG_FENCE] = "FENCE",
	[MSG_STATS] = "STATS",
	[MSG_TIMELINE_CREATE] = "TIMELINE_CREATE",
	[MSG_TIMELINE_DESTROY] = "TIMELINE_DESTROY",
	[MSG_SIGNAL] = "SIGNAL",
	[MSG_WAIT] = "WAIT",
	[MSG_TIMELINE_QUERY] = "TIMELINE_QUERY",
	[MSG_HOST_WAIT] = "HOST_WAIT",
	[MSG_SEND] = "SEND",
	[MSG_RECV] = "RECV",
	[MSG_SUBSCRIBE] = "SUBSCRIBE",
	[MSG_PULL] = "PULL",
	[MSG_PING] = "PING",
	[MSG_PROBE] = "PROBE",
	[MSG_PULL_RELEASE] = "PULL_RELEASE",
};

const char *msg_type_name(unsigned type)
{
	return type < MSG_TYPE_COUNT && names[type] ? names[type] : "?";
}
