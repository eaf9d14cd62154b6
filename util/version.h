/*
 * util/version.h — the release of pprpc: what pprpcd reports (HELLO,
 * STATS, --version, its log), what pprpc_version_string() returns, and the
 * Version of pprpc.pc and of the installed man pages (the Makefile reads
 * it from here).  The library's soname follows its ABI, not this number
 * (Makefile: LIB_SOVERSION).
 */
#ifndef PPRPC_UTIL_VERSION_H
#define PPRPC_UTIL_VERSION_H

#define PPRPC_VERSION "0.2.0"

#endif
