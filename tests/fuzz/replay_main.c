/*
 * tests/fuzz/replay_main.c — runs a libFuzzer target without libFuzzer, over
 * saved inputs, so that `make test` replays every fuzz corpus with the normal
 * compiler (and the sanitizers of the build).
 *
 *   replay_fuzz_X DIR|FILE...
 *
 * Each argument is a corpus directory (its regular files, not recursive) or a
 * single input file.  Exits non-zero when an argument is missing, unreadable,
 * or a directory without inputs: an empty corpus must not pass silently.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;
	int rc = -1;

	if (!fp) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: %s: cannot size\n", path);
		goto out;
	}
	/* an exact-size heap copy, so ASan catches reads past the input */
	buf = malloc(len ? (size_t)len : 1);
	if (!buf) {
		fprintf(stderr, "replay: %s: out of memory\n", path);
		goto out;
	}
	if (len && fread(buf, 1, (size_t)len, fp) != (size_t)len) {
		fprintf(stderr, "replay: %s: short read\n", path);
		goto out;
	}
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	rc = 0;
out:
	free(buf);
	fclose(fp);
	return rc;
}

static int only_files(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

/* Returns the number of inputs replayed, or -1. */
static long run_dir(const char *dir)
{
	struct dirent **ents;
	long count = 0;
	int n = scandir(dir, &ents, only_files, alphasort);

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		if (count >= 0) {
			snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
				count = run_file(path) < 0 ? -1 : count + 1;
		}
		free(ents[i]);
	}
	free(ents);
	return count;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		long n;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			n = run_dir(argv[i]);
		} else {
			n = run_file(argv[i]) < 0 ? -1 : 1;
		}
		if (n < 0)
			return 1;
		if (n == 0) {
			fprintf(stderr, "replay: %s: no inputs\n", argv[i]);
			return 1;
		}
		printf("replayed %ld inputs from %s\n", n, argv[i]);
	}
	return 0;
}
