/*
 * proto/hostpage.h — the header of a client's host page: a sealed memfd
 * (memfd_create named HOSTPAGE_NAME, F_SEAL_SHRINK) a client made and a
 * daemon of the same host maps through /proc/PID/fd (HostPageMap,
 * proto/pprpc.proto), so TENSOR_GETs land in the client's memory straight
 * from the device.
 *
 * The first HOSTPAGE_HDR bytes are this header; the client's memory is the
 * rest (page-aligned).  The key is the client's secret, sent only over its
 * own connection: a daemon maps a page only for a HostPageMap naming the key
 * the header holds, so another client of the daemon that names the same
 * process and fd cannot have bytes written into it.
 */
#ifndef PPRPC_PROTO_HOSTPAGE_H
#define PPRPC_PROTO_HOSTPAGE_H

#include <stddef.h>
#include <stdint.h>

/* the memfd's name; /proc/PID/fd/FD reads "/memfd:" HOSTPAGE_NAME " (deleted)" */
#define HOSTPAGE_NAME "pprpc-host"
#define HOSTPAGE_HDR 4096u
#define HOSTPAGE_KEY 32u
/* The most a page may hold (header included): a bound on what one
 * HostPageMap makes a daemon map and page-lock. */
#define HOSTPAGE_MAX_BYTES (4ull << 30)

/* Write the header of a page of len bytes with this key. */
void hostpage_hdr_init(void *base, uint64_t len, const uint8_t key[HOSTPAGE_KEY]);
/* Does the page at base (len bytes) have this code's header, and is key
 * (keylen bytes) its key?  0, or PPRPC_EPROTO (not a header of this
 * version) / PPRPC_EAUTH (another key) with the reason.  Compares in
 * constant time.  (Fuzzed: tests/fuzz/fuzz_hostpage.c.) */
int hostpage_hdr_check(const void *base, uint64_t len, const uint8_t *key, size_t keylen, char *why,
		       size_t whylen);

#endif
