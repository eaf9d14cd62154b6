/* libclient/buffer.c — buffers and raw tensor data. */
#include <stddef.h>

#include "libclient/client.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

PPRPC_API int pprpc_buffer_alloc(pprpc_client *c, uint32_t device, uint64_t size, pprpc_buffer *out)
{
	Pprpc__BufferAlloc req = PPRPC__BUFFER_ALLOC__INIT;

	req.device = device;
	req.size = size;
	return rpc_call_u64(c, MSG_BUFFER_ALLOC, &req.base, &pprpc__buffer_alloc_reply__descriptor,
			    offsetof(Pprpc__BufferAllocReply, buffer), &out->id);
}

PPRPC_API int pprpc_buffer_free(pprpc_client *c, pprpc_buffer buf)
{
	Pprpc__BufferFree req = PPRPC__BUFFER_FREE__INIT;

	req.buffer = buf.id;
	return rpc_call(c, MSG_BUFFER_FREE, &req.base, NULL, 0, NULL, NULL, NULL, 0);
}

PPRPC_API int pprpc_buffer_clear(pprpc_client *c, pprpc_buffer buf, uint8_t value)
{
	Pprpc__BufferClear req = PPRPC__BUFFER_CLEAR__INIT;

	req.buffer = buf.id;
	req.value = value;
	return rpc_call(c, MSG_BUFFER_CLEAR, &req.base, NULL, 0, NULL, NULL, NULL, 0);
}

PPRPC_API int pprpc_tensor_set(pprpc_client *c, pprpc_buffer buf, uint64_t offset, const void *data,
			       uint64_t size)
{
	Pprpc__TensorSet req = PPRPC__TENSOR_SET__INIT;

	if (size && !data)
		return client_fail(c, PPRPC_EINVAL, "tensor_set: NULL data");
	if (c->max_bulk && size > c->max_bulk)
		return client_fail(c, PPRPC_ETOOBIG, "tensor_set of %llu bytes exceeds the daemon's limit %llu",
				   (unsigned long long)size, (unsigned long long)c->max_bulk);
	req.buffer = buf.id;
	req.offset = offset;
	req.size = size;
	return rpc_call(c, MSG_TENSOR_SET, &req.base, data, size, NULL, NULL, NULL, 0);
}

PPRPC_API int pprpc_tensor_get(pprpc_client *c, pprpc_buffer buf, uint64_t offset, void *data,
			       uint64_t size)
{
	Pprpc__TensorGet req = PPRPC__TENSOR_GET__INIT;

	if (size && !data)
		return client_fail(c, PPRPC_EINVAL, "tensor_get: NULL data");
	req.buffer = buf.id;
	req.offset = offset;
	req.size = size;
	if (host_page_target(c, data, size, &req.host_page, &req.host_page_offset) == 1)
		return rpc_call(c, MSG_TENSOR_GET, &req.base, NULL, 0, NULL, NULL, NULL, 0);
	req.host_page = 0;
	req.host_page_offset = 0;
	return rpc_call(c, MSG_TENSOR_GET, &req.base, NULL, 0, NULL, NULL, data, size);
}

PPRPC_API int pprpc_tensor_copy(pprpc_client *c, pprpc_buffer src, uint64_t src_offset,
				pprpc_buffer dst, uint64_t dst_offset, uint64_t size)
{
	Pprpc__TensorCopy req = PPRPC__TENSOR_COPY__INIT;

	req.src_buffer = src.id;
	req.src_offset = src_offset;
	req.dst_buffer = dst.id;
	req.dst_offset = dst_offset;
	req.size = size;
	return rpc_call(c, MSG_TENSOR_COPY, &req.base, NULL, 0, NULL, NULL, NULL, 0);
}

PPRPC_API int pprpc_fence(pprpc_client *c, uint32_t device)
{
	return pprpc_synchronize(c, device);
}
