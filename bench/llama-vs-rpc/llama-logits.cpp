/*
 * bench/llama-vs-rpc/llama-logits.cpp — teacher-forced logits of a fixed
 * token sequence, every position, to a file (doc/llama-vs-rpc.md, "Logits
 * against local").
 *
 *   llama-logits [llama-completion's arguments] (--tokens FILE | -p TEXT | -f FILE) --logits-out OUT
 *
 * The sequence is decoded in batches of -b tokens (llama.cpp splits each
 * into ubatches of -ub) with the logits of every position requested, and
 * every row written as it is, float32.  Greedy tokens part ways on GPUs as
 * soon as two candidates are close; logits of the same sequence on two
 * sides compare position by position instead (bench/llama-vs-rpc/logits.py).
 *
 * C++ against llama.cpp's `common` (libllama-common, built with
 * llama-completion in both pinned releases) rather than C with a hand-made
 * parser: common_params_parse + common_init_from_params are what
 * llama-completion runs, so -dev, --rpc, -ts, -sm, -ngl, -fa, -c, -b, -ub,
 * -t, -fit and the rest mean exactly what they mean there, and every side
 * of the benchmark passes its llama-completion arguments unchanged.
 *
 * OUT (little-endian; written to OUT.tmp, renamed when complete):
 *   char     magic[4] = "LLGT"
 *   uint32   version  = 1
 *   uint32   n_pos
 *   uint32   n_vocab
 *   int32    ids[n_pos]                     the tokens decoded
 *   float32  logits[n_pos][n_vocab]         row i: after ids[0..i] (predicts ids[i + 1])
 *
 * --tokens FILE: decimal token ids separated by white space or commas.
 * -p/-f: the text, tokenized as llama-completion does (special tokens
 * parsed, BOS added where the vocabulary wants one).
 * Exit status: 0 written, 1 a run-time failure, 2 bad usage; the reason
 * always on stderr.
 */
#include "arg.h"
#include "common.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"
#include "util/ggml_release.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <exception>
#include <string>
#include <vector>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the logits file is written in host order: little-endian");

namespace {

const char *const PROG = "llama-logits";
const uint32_t FILE_VERSION = 1;
// a sequence longer than any context llama.cpp is given here; keeps a
// runaway --tokens file from filling memory before anything is checked
const size_t MAX_TOKENS = 1u << 20;

struct opts {
	std::string tokens_file;
	std::string out;
};

void usage_extra(int, char **)
{
	// stdout, after llama.cpp's usage text (printed there)
	printf("\n%s: teacher-forced logits of every position (bench/llama-vs-rpc/llama-logits.cpp)\n"
	       "  --tokens FILE       token ids to decode (decimal, white space or commas between)\n"
	       "  -p TEXT / -f FILE   or a text, tokenized by the model's vocabulary\n"
	       "  --logits-out FILE   where the ids and every position's logits (float32) go\n",
	       PROG);
}

/* Takes this tool's own options out of argv (common_params_parse refuses
 * what it does not know); what is left goes to llama.cpp's parser. */
int split_args(int argc, char **argv, opts &o, std::vector<char *> &rest)
{
	rest.push_back(argv[0]);
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		std::string *dst = a == "--tokens" ? &o.tokens_file : a == "--logits-out" ? &o.out : nullptr;
		if (!dst) {
			rest.push_back(argv[i]);
			continue;
		}
		if (i + 1 >= argc || !argv[i + 1][0]) {
			fprintf(stderr, "%s: error: %s needs a file name\n", PROG, a.c_str());
			return -1;
		}
		*dst = argv[++i];
	}
	rest.push_back(nullptr);
	return 0;
}

/* ggml's loader looks for its backend modules (GGML_BACKEND_DL: one CPU
 * module per instruction set, ggml-cuda, ggml-rpc) beside the executable,
 * and this one lives in pprpc's build/bin: the modules are beside the
 * libggml this process runs (the build it was linked with, or the one
 * LD_LIBRARY_PATH names), found with dladdr as pprpcd does
 * (daemon/backend/ggml/ggml_load.c).  Loading them first also makes -dev
 * and --rpc find their devices when common_params_parse resolves them. */
int load_backends()
{
	if (ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU))
		return 0; // a ggml with its CPU backend linked in
	Dl_info info;
	if (!dladdr((void *)ggml_backend_load_all_from_path, &info) || !info.dli_fname) {
		fprintf(stderr, "%s: error: cannot tell where libggml is (dladdr), so ggml's backends cannot be found\n",
			PROG);
		return -1;
	}
	std::string dir = info.dli_fname;
	size_t slash = dir.rfind('/');
	dir = slash == std::string::npos ? "." : dir.substr(0, slash);
	ggml_backend_load_all_from_path(dir.c_str());
	if (!ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) {
		fprintf(stderr, "%s: error: no ggml CPU backend in %s (libggml-cpu-*.so: none there, or none runs on this CPU)\n",
			PROG, dir.c_str());
		return -1;
	}
	return 0;
}

int read_tokens(const std::string &path, std::vector<llama_token> &ids)
{
	FILE *f = fopen(path.c_str(), "r");
	if (!f) {
		fprintf(stderr, "%s: error: --tokens %s: %s\n", PROG, path.c_str(), strerror(errno));
		return -1;
	}
	std::string text;
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		text.append(buf, n);
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		fprintf(stderr, "%s: error: --tokens %s: read error\n", PROG, path.c_str());
		return -1;
	}
	const char *p = text.c_str();
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',')
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || v < 0 || v > INT32_MAX ||
		    (*end && !strchr(" \t\n\r,", *end))) {
			fprintf(stderr, "%s: error: --tokens %s: not a token id at byte %zu: \"%.20s\"\n", PROG,
				path.c_str(), (size_t)(p - text.c_str()), p);
			return -1;
		}
		if (ids.size() >= MAX_TOKENS) {
			fprintf(stderr, "%s: error: --tokens %s: more than %zu ids\n", PROG, path.c_str(), MAX_TOKENS);
			return -1;
		}
		ids.push_back((llama_token)v);
		p = end;
	}
	if (ids.empty()) {
		fprintf(stderr, "%s: error: --tokens %s: no token ids in it\n", PROG, path.c_str());
		return -1;
	}
	return 0;
}

bool put(FILE *f, const void *p, size_t size)
{
	return fwrite(p, 1, size, f) == size;
}

/* Decodes ids in batches of llama_n_batch with every position's logits and
 * writes OUT.tmp, renamed to OUT once all is written. */
int write_logits(llama_context *ctx, const llama_vocab *vocab, const std::vector<llama_token> &ids,
		 const std::string &out)
{
	const uint32_t n_vocab = (uint32_t)llama_vocab_n_tokens(vocab);
	const uint32_t n_pos = (uint32_t)ids.size();
	const uint32_t n_batch = llama_n_batch(ctx);
	const std::string tmp = out + ".tmp";
	int rc = -1;

	FILE *f = fopen(tmp.c_str(), "wb");
	if (!f) {
		fprintf(stderr, "%s: error: --logits-out %s: %s\n", PROG, tmp.c_str(), strerror(errno));
		return -1;
	}
	llama_batch batch = llama_batch_init((int32_t)n_batch, 0, 1);
	const int64_t t0 = ggml_time_us();
	bool ok = put(f, "LLGT", 4) && put(f, &FILE_VERSION, 4) && put(f, &n_pos, 4) && put(f, &n_vocab, 4) &&
		  put(f, ids.data(), sizeof(llama_token) * ids.size());
	for (uint32_t start = 0; ok && start < n_pos; start += n_batch) {
		const uint32_t nb = n_pos - start < n_batch ? n_pos - start : n_batch;
		common_batch_clear(batch);
		for (uint32_t i = 0; i < nb; i++)
			common_batch_add(batch, ids[start + i], (llama_pos)(start + i), {0}, true);
		int32_t r = llama_decode(ctx, batch);
		if (r != 0) {
			fprintf(stderr, "%s: error: llama_decode of positions %u..%u returned %d\n", PROG, start,
				start + nb - 1, r);
			goto done;
		}
		for (uint32_t i = 0; ok && i < nb; i++) {
			const float *row = llama_get_logits_ith(ctx, (int32_t)i);
			if (!row) {
				fprintf(stderr, "%s: error: no logits for position %u\n", PROG, start + i);
				goto done;
			}
			ok = put(f, row, sizeof(float) * n_vocab);
		}
	}
	if (!ok) {
		fprintf(stderr, "%s: error: writing %s: %s\n", PROG, tmp.c_str(), strerror(errno));
		goto done;
	}
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		fprintf(stderr, "%s: error: writing %s: %s\n", PROG, tmp.c_str(), strerror(errno));
		goto done;
	}
	rc = 0;
	fprintf(stderr, "%s: %u positions x %u logits in %.3f s (batches of %u, ubatch %u) -> %s\n", PROG, n_pos,
		n_vocab, (ggml_time_us() - t0) / 1e6, n_batch, llama_n_ubatch(ctx), out.c_str());
done:
	llama_batch_free(batch);
	if (fclose(f) != 0 && rc == 0) {
		fprintf(stderr, "%s: error: closing %s: %s\n", PROG, tmp.c_str(), strerror(errno));
		rc = -1;
	}
	if (rc == 0 && rename(tmp.c_str(), out.c_str()) != 0) {
		fprintf(stderr, "%s: error: rename %s to %s: %s\n", PROG, tmp.c_str(), out.c_str(), strerror(errno));
		rc = -1;
	}
	if (rc != 0)
		unlink(tmp.c_str());
	return rc;
}

int run(int argc, char **argv)
{
	char err[400];
	// another release's libllama-common lays out common_params otherwise:
	// refuse before touching it (LD_LIBRARY_PATH may name any build)
	if (pprpc_ggml_release_check(ggml_version(), ggml_commit(), err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: error: %s\n", PROG, err);
		return 1;
	}
	opts o;
	std::vector<char *> rest;
	if (split_args(argc, argv, o, rest) < 0)
		return 2;
	if (load_backends() < 0)
		return 1;

	common_params params;
	common_init();
	if (!common_params_parse((int)rest.size() - 1, rest.data(), params, LLAMA_EXAMPLE_COMPLETION, usage_extra)) {
		// llama.cpp's parser said which argument, before its usage text
		fprintf(stderr, "%s: error: bad arguments (see \"error ...\" above)\n", PROG);
		return 2;
	}
	if (o.out.empty()) {
		fprintf(stderr, "%s: error: --logits-out FILE is required\n", PROG);
		return 2;
	}
	if (o.tokens_file.empty() == params.prompt.empty()) {
		fprintf(stderr, "%s: error: give the sequence as --tokens FILE or as a prompt (-p TEXT, -f FILE), one of them\n",
			PROG);
		return 2;
	}
	if (params.model.hf_repo.empty() && params.model.url.empty() && params.model.docker_repo.empty()) {
		if (params.model.path.empty()) {
			fprintf(stderr, "%s: error: no model: -m FILE\n", PROG);
			return 2;
		}
		// llama.cpp's loader says little when the file is not there
		if (access(params.model.path.c_str(), R_OK) != 0) {
			fprintf(stderr, "%s: error: model %s: %s\n", PROG, params.model.path.c_str(), strerror(errno));
			return 1;
		}
	}
	std::vector<llama_token> ids;
	if (!o.tokens_file.empty() && read_tokens(o.tokens_file, ids) < 0)
		return 1;

	llama_backend_init();
	llama_numa_init(params.numa);
	common_init_result_ptr init = common_init_from_params(params);
	llama_model *model = init ? init->model() : nullptr;
	llama_context *ctx = init ? init->context() : nullptr;
	if (!model) {
		fprintf(stderr, "%s: error: cannot load the model %s (llama.cpp's log above says why)\n", PROG,
			params.model.path.c_str());
		return 1;
	}
	if (!ctx) {
		fprintf(stderr, "%s: error: cannot create the context (llama.cpp's log above says why)\n", PROG);
		return 1;
	}
	const llama_vocab *vocab = llama_model_get_vocab(model);
	if (ids.empty())
		ids = common_tokenize(ctx, params.prompt, true, true);
	if (ids.empty()) {
		fprintf(stderr, "%s: error: the prompt tokenizes to nothing\n", PROG);
		return 2;
	}
	const int32_t n_vocab = llama_vocab_n_tokens(vocab);
	for (size_t i = 0; i < ids.size(); i++) {
		if (ids[i] >= n_vocab) {
			fprintf(stderr, "%s: error: token %zu is %d, the vocabulary has %d\n", PROG, i, ids[i], n_vocab);
			return 2;
		}
	}
	if (ids.size() > llama_n_ctx(ctx)) {
		fprintf(stderr, "%s: error: %zu tokens do not fit the context of %u (-c)\n", PROG, ids.size(),
			llama_n_ctx(ctx));
		return 2;
	}
	return write_logits(ctx, vocab, ids, o.out) < 0 ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	// a rank lost under the pprpc plugin reaches here as an exception
	// (ggml-pprpc/throw.cpp), as may anything of llama.cpp's: say it and exit
	try {
		return run(argc, argv);
	} catch (const std::exception &e) {
		fprintf(stderr, "%s: error: %s\n", PROG, e.what());
	} catch (...) {
		fprintf(stderr, "%s: error: an unknown exception\n", PROG);
	}
	return 1;
}
