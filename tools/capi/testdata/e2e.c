/* The end-to-end test of libscatterkit.so (e2e_test.go builds both): the
 * ABI exactly as docs/capi.md declares it (capi.h is that page's C block),
 * called the way the Python package calls it. Usage: e2e DIR SEED. It
 * prints "ok" and exits 0, or prints each failed check and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi.h"

static int failed;
static sk_error err;

#define CHECK(cond, ...)                                                  \
	do {                                                                  \
		if (!(cond)) {                                                    \
			fprintf(stderr, "e2e.c:%d: %s: ", __LINE__, #cond);           \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, "\n");                                        \
			failed++;                                                     \
		}                                                                 \
	} while (0)

/* EXPECT runs call (which passes &err) and checks its code; a failure
 * also fills err with the same code. */
#define EXPECT(want, call)                                                \
	do {                                                                  \
		memset(&err, 0x5A, sizeof err);                                   \
		int32_t rc_ = (call);                                             \
		CHECK(rc_ == (want), "%s: got %d, want %d (%s)", #call, rc_,      \
		      (want), rc_ ? err.msg : "");                                \
		if (rc_ != 0)                                                     \
			CHECK(err.code == rc_ && memchr(err.msg, 0, sizeof err.msg),  \
			      "%s: err.code %d", #call, err.code);                    \
	} while (0)

enum { R = 264, NA = 1000, NB = 50 };

static uint64_t rng;

static uint64_t next(void) {
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint8_t rows_a[NA * R], rows_b[NB * R];

/* check_rows compares each output row (t, k) with its table row, and a
 * -1 id's row with the poison it started as. */
static void check_rows(const uint8_t *out, int64_t t, int32_t k, const int64_t *ids,
                       const uint8_t *const *tables, const int64_t *offsets,
                       int64_t ts, int64_t ks, const char *what) {
	for (int64_t i = 0; i < t; i++) {
		for (int32_t j = 0; j < k; j++) {
			int64_t id = ids[i * k + j];
			const uint8_t *row = out + i * ts + j * ks;
			if (id == -1) {
				for (int b = 0; b < R; b++)
					CHECK(row[b] == 0xA5, "%s: row (%ld, %d) written", what, (long)i, j);
				continue;
			}
			if (offsets)
				id -= offsets[j];
			CHECK(memcmp(row, tables[j] + id * R, R) == 0, "%s: row (%ld, %d)", what, (long)i, j);
		}
	}
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: e2e DIR SEED\n");
		return 2;
	}
	rng = strtoull(argv[2], NULL, 10) | 1;
	for (size_t i = 0; i < sizeof rows_a; i++)
		rows_a[i] = (uint8_t)next();
	for (size_t i = 0; i < sizeof rows_b; i++)
		rows_b[i] = (uint8_t)next();

	CHECK(sk_abi_version() == 1, "abi %d", sk_abi_version());

	char cfg[4096];
	snprintf(cfg, sizeof cfg,
	         "{\"namespace\": \"e2e\", \"local_dir\": \"%s\", \"tables\": {"
	         "\"a\": {\"num_rows\": %d, \"row_bytes\": %d}, \"b\": {\"num_rows\": %d, \"row_bytes\": %d}}}",
	         argv[1], NA, R, NB, R);
	uint64_t store = 0;
	EXPECT(SK_OK, sk_open(cfg, &store, &err));
	CHECK(store != 0, "store handle 0");
	uint64_t bad = 0;
	EXPECT(SK_EINVAL, sk_open("{\"namespace\": \"e2e\", \"colour\": 1}", &bad, &err));
	CHECK(bad == 0, "a failed open set the handle");

	/* Populate: a at once, b streamed in odd chunks. */
	EXPECT(SK_EINVAL, sk_populate(store, "a", rows_a, sizeof rows_a - 1, &err));
	EXPECT(SK_OK, sk_populate(store, "a", rows_a, sizeof rows_a, &err));
	EXPECT(SK_EEXIST, sk_populate(store, "a", rows_a, sizeof rows_a, &err));
	CHECK(strncmp(err.msg, "engram: ", 8) == 0, "message %s", err.msg);
	uint64_t w = 0;
	EXPECT(SK_EEXIST, sk_populate_begin(store, "a", &w, &err));
	EXPECT(SK_ENOTABLE, sk_populate_begin(store, "zz", &w, &err));
	EXPECT(SK_OK, sk_populate_begin(store, "b", &w, &err));
	for (size_t at = 0; at < sizeof rows_b; at += 777) {
		size_t n = sizeof rows_b - at < 777 ? sizeof rows_b - at : 777;
		EXPECT(SK_OK, sk_populate_write(w, rows_b + at, (int64_t)n, &err));
	}
	EXPECT(SK_EINVAL, sk_populate_write(w, rows_b, 1, &err));
	EXPECT(SK_OK, sk_populate_commit(w, &err));
	EXPECT(SK_ECLOSED, sk_populate_commit(w, &err));
	CHECK(sk_populate_abort(w) == SK_ECLOSED, "abort of a committed writer");

	int64_t num_rows = 0, row_bytes = 0;
	int32_t populated = -1;
	EXPECT(SK_OK, sk_table_spec(store, "b", &num_rows, &row_bytes, &populated, &err));
	CHECK(num_rows == NB && row_bytes == R && populated == 1, "spec %ld %ld %d", (long)num_rows, (long)row_bytes, populated);
	EXPECT(SK_ENOTABLE, sk_table_spec(store, "zz", &num_rows, &row_bytes, &populated, &err));

	/* Columns: a, a, b. */
	uint64_t cols = 0, nocols = 0;
	EXPECT(SK_OK, sk_columns(store, "a\0a\0b", 3, &cols, &err));
	EXPECT(SK_ENOTABLE, sk_columns(store, "a\0zz", 2, &nocols, &err));
	const uint8_t *tables[3] = {rows_a, rows_a, rows_b};
	const int64_t nrows[3] = {NA, NA, NB};

	/* Token-major int32 ids. */
	enum { T = 5, K = 3 };
	static uint8_t out[T * K * R], saved[T * K * R];
	int32_t ids32[T * K];
	int64_t ids[T * K];
	for (int i = 0; i < T * K; i++)
		ids[i] = ids32[i] = (int32_t)(next() % (uint64_t)nrows[i % K]);
	ids[1] = ids32[1] = -1;
	memset(out, 0xA5, sizeof out);
	EXPECT(SK_OK, sk_lookup(store, cols, T, K, ids32, 32, out, sizeof out, 0, K * R, R, NULL, &err));
	check_rows(out, T, K, ids, tables, NULL, K * R, R, "token-major");

	/* Head-major int64 ids with offsets (global ids). */
	const int64_t offsets[K] = {0, 1000, 5000};
	int64_t gids[T * K];
	for (int i = 0; i < T * K; i++)
		gids[i] = ids[i] == -1 ? -1 : ids[i] + offsets[i % K];
	memset(out, 0xA5, sizeof out);
	EXPECT(SK_OK, sk_lookup(store, cols, T, K, gids, 64, out, sizeof out, 0, R, T * R, offsets, &err));
	check_rows(out, T, K, gids, tables, offsets, R, T * R, "head-major");

	/* The same through sk_lookupv (one struct of arguments). */
	memset(out, 0xA5, sizeof out);
	sk_lookup_args la = {.store = store, .cols = cols, .t = T, .k = K, .id_bits = 64, .ids = gids,
	                     .out_base = out, .out_len = sizeof out, .off = 0, .tstride = R, .kstride = T * R,
	                     .offsets = offsets};
	EXPECT(SK_OK, sk_lookupv(&la, &err));
	check_rows(out, T, K, gids, tables, offsets, R, T * R, "head-major, sk_lookupv");
	la.out_len = sizeof out - 1;
	EXPECT(SK_EINVAL, sk_lookupv(&la, &err));
	EXPECT(SK_EINVAL, sk_lookupv(NULL, &err));

	/* A bad id: SK_EID at its position, nothing written. */
	memcpy(saved, out, sizeof out);
	gids[2 * K + 2] = 5000 + NB;
	EXPECT(SK_EID, sk_lookup(store, cols, T, K, gids, 64, out, sizeof out, 0, R, T * R, offsets, &err));
	CHECK(err.t == 2 && err.k == 2 && err.id == 5000 + NB, "at (%ld, %ld) id %ld", (long)err.t, (long)err.k, (long)err.id);
	CHECK(memcmp(saved, out, sizeof out) == 0, "a failed lookup wrote");
	CHECK(sk_lookup(store, cols, T, K, gids, 64, out, sizeof out, 0, R, T * R, offsets, NULL) == SK_EID, "NULL err");
	/* An output one byte short, overlapping rows, a wrong K. */
	EXPECT(SK_EINVAL, sk_lookup(store, cols, T, K, ids32, 32, out, sizeof out - 1, 0, K * R, R, NULL, &err));
	EXPECT(SK_EINVAL, sk_lookup(store, cols, T, K, ids32, 32, out, sizeof out, 0, K * R, R - 1, NULL, &err));
	EXPECT(SK_EINVAL, sk_lookup(store, cols, T, 2, ids32, 32, out, sizeof out, 0, K * R, R, NULL, &err));
	EXPECT(SK_EINVAL, sk_lookup(store, cols, T, K, ids32, 16, out, sizeof out, 0, K * R, R, NULL, &err));
	CHECK(memcmp(saved, out, sizeof out) == 0, "a failed lookup wrote");

	/* The Go-side ceiling. */
	int64_t ns = 0;
	EXPECT(SK_OK, sk_bench_lookup(store, cols, T, K, ids32, 32, out, sizeof out, 0, K * R, R, NULL, 10, &ns, &err));
	CHECK(ns > 0, "bench %ld ns", (long)ns);

	/* A local buffer: zeroed, ours to write, a lookup's output. */
	uint64_t buf = 0;
	void *p = NULL;
	EXPECT(SK_OK, sk_buffer_new(store, sizeof out, &buf, &p, &err));
	CHECK(p != NULL && ((uint8_t *)p)[0] == 0, "buffer");
	memset(p, 0xA5, sizeof out);
	EXPECT(SK_OK, sk_lookup(store, cols, T, K, ids32, 32, p, sizeof out, 0, K * R, R, NULL, &err));
	check_rows(p, T, K, ids, tables, NULL, K * R, R, "local buffer");
	CHECK(sk_buffer_free(buf) == SK_OK, "free");
	CHECK(sk_buffer_free(buf) == SK_ECLOSED, "second free");

	/* Served over tcp, read by a remote store into its registered buffer. */
	char bound[128];
	uint64_t srv = 0;
	EXPECT(SK_EINVAL, sk_serve(store, "tcp", "", bound, 4, &srv, &err));
	EXPECT(SK_OK, sk_serve(store, "tcp", "", bound, sizeof bound, &srv, &err));
	snprintf(cfg, sizeof cfg,
	         "{\"namespace\": \"e2e\", \"remote\": {\"transport\": \"tcp\", \"addr\": \"%s\", \"buffer_bytes\": 1048576},"
	         " \"tables\": {\"a\": {\"num_rows\": %d, \"row_bytes\": %d}, \"b\": {\"num_rows\": %d, \"row_bytes\": %d}}}",
	         bound, NA, R, NB, R);
	uint64_t rs = 0, rcols = 0, rbuf = 0;
	EXPECT(SK_OK, sk_open(cfg, &rs, &err));
	EXPECT(SK_OK, sk_columns(rs, "a\0a\0b", 3, &rcols, &err));
	EXPECT(SK_OK, sk_buffer_new(rs, sizeof out, &rbuf, &p, &err));
	memset(p, 0xA5, sizeof out);
	EXPECT(SK_OK, sk_lookup(rs, rcols, T, K, ids32, 32, p, sizeof out, 0, K * R, R, NULL, &err));
	check_rows(p, T, K, ids, tables, NULL, K * R, R, "remote");
	EXPECT(SK_EINVAL, sk_lookup(rs, rcols, T, K, ids32, 32, out, sizeof out, 0, K * R, R, NULL, &err));
	EXPECT(SK_ENOTSUP, sk_populate(rs, "a", rows_a, sizeof rows_a, &err));
	EXPECT(SK_EINVAL, sk_lookup(store, rcols, T, K, ids32, 32, out, sizeof out, 0, K * R, R, NULL, &err));
	EXPECT(SK_OK, sk_close(rs, &err)); /* frees rbuf and rcols */
	CHECK(sk_buffer_free(rbuf) == SK_ECLOSED, "buffer after its store's close");
	CHECK(sk_columns_free(rcols) == SK_ECLOSED, "columns after their store's close");
	EXPECT(SK_EIO, sk_remove(store, "a", &err)); /* served */
	EXPECT(SK_OK, sk_server_close(srv, &err));
	EXPECT(SK_ECLOSED, sk_server_close(srv, &err));

	/* The CUDA calls of a library without CUDA: 0 devices, SK_ENOTSUP. */
	int32_t devices = -1;
	uint64_t dev = 0;
	EXPECT(SK_OK, sk_cuda_available(&devices, &err));
	CHECK(devices == 0, "sk_cuda_available: %d devices", devices);
	EXPECT(SK_ENOTSUP, sk_cuda_attach(store, 0, SK_CUDA_HOST | SK_CUDA_STRICT, &dev, &err));
	CHECK(dev == 0, "sk_cuda_attach wrote a handle");
	EXPECT(SK_ENOTSUP, sk_cuda_lookup(dev, cols, 0, T, K, 0, 32, 0, 0, 0, K * R, R, NULL, &err));
	EXPECT(SK_ENOTSUP, sk_cuda_warmup(dev, 0, &err));
	EXPECT(SK_ENOTSUP, sk_cuda_status(dev, 0, K, &err));
	EXPECT(SK_ENOTSUP, sk_cuda_bench_graph(dev, cols, 1, T, K, 0, 32, 0, 0, 0, K * R, R, NULL, 1, &ns, &err));
	EXPECT(SK_ENOTSUP, sk_cuda_detach(dev, &err));

	/* Remove, stale handles, close. */
	EXPECT(SK_OK, sk_remove(store, "a", &err));
	EXPECT(SK_EIO, sk_lookup(store, cols, T, K, ids32, 32, out, sizeof out, 0, K * R, R, NULL, &err));
	CHECK(sk_columns_free(cols) == SK_OK, "columns free");
	CHECK(sk_columns_free(cols) == SK_ECLOSED, "second columns free");
	EXPECT(SK_ECLOSED, sk_lookup(store, cols, T, K, ids32, 32, out, sizeof out, 0, K * R, R, NULL, &err));
	EXPECT(SK_ECLOSED, sk_lookup(cols, cols, T, K, ids32, 32, out, sizeof out, 0, K * R, R, NULL, &err));
	EXPECT(SK_OK, sk_close(store, &err));
	EXPECT(SK_ECLOSED, sk_close(store, &err));
	EXPECT(SK_ECLOSED, sk_table_spec(store, "a", &num_rows, &row_bytes, &populated, &err));

	if (failed) {
		fprintf(stderr, "%d checks failed\n", failed);
		return 1;
	}
	printf("ok\n");
	return 0;
}
