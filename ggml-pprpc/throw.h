/*
 * ggml-pprpc/throw.h — leaving a void ggml entry point after a rank fault
 * (throw.cpp says why an exception, and how it ends when nothing catches it).
 */
#ifndef PPRPC_GGML_THROW_H
#define PPRPC_GGML_THROW_H

#ifdef __cplusplus
extern "C" {
#endif

/* The exit status of a process that ends because a rank failed (the ranks'
 * state of this process is gone; a restart that waits for the ranks serves
 * again): EX_TEMPFAIL, "try again later". */
#define PG_EXIT_FAULT 75

/* Throw a std::runtime_error with msg (copied) to llama.cpp's handlers.
 * The caller holds no lock. */
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void pg_throw(const char *msg);
/* Once per process: an uncaught pg_throw exits with PG_EXIT_FAULT instead
 * of aborting; other exceptions reach the previous terminate handler. */
void pg_throw_install(void);

#ifdef __cplusplus
}
#endif
#endif
