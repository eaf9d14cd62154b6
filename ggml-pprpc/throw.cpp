// ggml-pprpc/throw.cpp — the one C++ file of the plugin: how a rank fault
// leaves a ggml entry point that has no error return.
//
// set_tensor, get_tensor, synchronize and the event calls return void, and
// returning from them after a rank fault would hand llama.cpp bytes the rank
// never produced (logits it would sample a token from).  llama.cpp's own
// error paths are C++ exceptions: llama-server runs llama_decode and the
// sampling in try blocks (server_queue::yield_to_queue carries an exception
// out of the decode; update_slots catches std::exception and answers every
// processing slot with the error), and the model loader turns an exception
// into "failed to load model".  So the plugin throws a std::runtime_error
// (pg_throw); ggml-backend.cpp and llama.cpp are C++ built with exceptions
// and the plugin's C files with -fexceptions, so it unwinds through them.
//
// Where nothing catches it (a tool without a try block, a destructor), the
// process would end in std::terminate's abort: a core dump for a fault that
// is not a bug.  The terminate handler installed here turns exactly that
// exception into an orderly exit with a distinct status (PG_EXIT_FAULT) and
// hands every other exception to the handler that was there before.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <unistd.h>

#include "throw.h"

namespace {

struct rank_fault : std::runtime_error {
	explicit rank_fault(const char *msg) : std::runtime_error(msg) {}
};

std::terminate_handler previous;

[[noreturn]] void on_terminate()
{
	std::exception_ptr e = std::current_exception();

	if (e) {
		try {
			std::rethrow_exception(e);
		} catch (const rank_fault &f) {
			std::fprintf(stderr, "pprpc: nothing in this program handled the rank fault (%s): exiting with "
					     "status %d\n", f.what(), PG_EXIT_FAULT);
			std::fflush(stderr);
			_exit(PG_EXIT_FAULT);
		} catch (...) {
		}
	}
	if (previous)
		previous();
	std::abort();
}

} // namespace

extern "C" void pg_throw(const char *msg)
{
	throw rank_fault(msg);
}

extern "C" void pg_throw_install(void)
{
	static bool done;

	if (!done) {
		done = true;
		previous = std::set_terminate(on_terminate);
	}
}
