/*
 * tests/llama/gguf-add-vocab.c — give a random test model a tokenizer.
 *
 *   gguf-add-vocab IN.gguf OUT.gguf
 *
 * test-llama-archs -o DIR saves random-weight models with the "no_vocab"
 * tokenizer, which llama.cpp's tools cannot tokenize a prompt with.  This
 * copies IN to OUT with a small SentencePiece ("llama") vocabulary of the
 * model's vocab_size tokens instead: <unk> <s> </s>, the space marker, single
 * characters, "▁x" word starts, and numbered filler tokens, every one a
 * distinct piece, so generated text maps one to one to token ids.  Weights
 * and every other key are unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"

int main(int argc, char **argv)
{
	struct ggml_context *ctx = NULL;
	struct gguf_init_params ip = { .no_alloc = false, .ctx = &ctx };
	struct gguf_context *g, *out;
	const char *chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?;:'-()";
	char key[256], **tok;
	float *score;
	int32_t *type;
	int64_t k;
	uint32_t n;

	if (argc != 3) {
		fprintf(stderr, "usage: %s IN.gguf OUT.gguf\n", argv[0]);
		return 2;
	}
	g = gguf_init_from_file(argv[1], ip);
	if (!g) {
		fprintf(stderr, "gguf-add-vocab: cannot read %s\n", argv[1]);
		return 1;
	}
	k = gguf_find_key(g, "general.architecture");
	if (k < 0) {
		fprintf(stderr, "gguf-add-vocab: %s has no general.architecture\n", argv[1]);
		return 1;
	}
	snprintf(key, sizeof(key), "%s.vocab_size", gguf_get_val_str(g, k));
	k = gguf_find_key(g, key);
	if (k < 0 || (n = gguf_get_val_u32(g, k)) < 8) {
		fprintf(stderr, "gguf-add-vocab: %s: no usable %s\n", argv[1], key);
		return 1;
	}
	tok = calloc(n, sizeof(*tok));
	score = calloc(n, sizeof(*score));
	type = calloc(n, sizeof(*type));
	if (!tok || !score || !type)
		return 1;
	for (uint32_t i = 0; i < n; i++) {
		char buf[32];
		uint32_t c = i - 4, nc = (uint32_t)strlen(chars);

		type[i] = 1; /* normal */
		if (i == 0)
			snprintf(buf, sizeof(buf), "<unk>");
		else if (i == 1)
			snprintf(buf, sizeof(buf), "<s>");
		else if (i == 2)
			snprintf(buf, sizeof(buf), "</s>");
		else if (i == 3)
			snprintf(buf, sizeof(buf), "\xe2\x96\x81"); /* U+2581, SentencePiece's space */
		else if (c < nc)
			snprintf(buf, sizeof(buf), "%c", chars[c]);
		else if (c < nc + 26)
			snprintf(buf, sizeof(buf), "\xe2\x96\x81%c", 'a' + (c - nc));
		else
			snprintf(buf, sizeof(buf), "<t%u>", i);
		type[i] = i == 0 ? 2 : i < 3 ? 3 : 1; /* unknown, control, normal */
		score[i] = c >= nc && c < nc + 26 ? 1.0f : 0.0f; /* word starts merge first */
		tok[i] = strdup(buf);
	}
	/* a fresh context with the same keys and the loaded tensors (a context
	 * read from a file does not write its tensors back) */
	out = gguf_init_empty();
	gguf_set_kv(out, g);
	for (struct ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
		if (gguf_find_tensor(g, ggml_get_name(t)) >= 0) /* not the loader's data blob */
			gguf_add_tensor(out, t);
	gguf_free(g);
	g = out;
	gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
	gguf_set_arr_str(g, "tokenizer.ggml.tokens", (const char **)tok, n);
	gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, score, n);
	gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, n);
	gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 0);
	gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 1);
	gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 2);
	gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true);
	if (!gguf_write_to_file(g, argv[2], false)) {
		fprintf(stderr, "gguf-add-vocab: cannot write %s\n", argv[2]);
		return 1;
	}
	for (uint32_t i = 0; i < n; i++)
		free(tok[i]);
	free(tok);
	free(score);
	free(type);
	gguf_free(g);
	ggml_free(ctx);
	return 0;
}
