/* bench_nss.c - the NSS module's entry point against the preload's
 * resolution and glibc's files module (issue 23, Speed), in one process,
 * interleaved:
 *
 *   bench_nss MODULE NAME ROUNDS
 *
 * Run preloaded with libreplicalb.so and a config where NAME is a virtual
 * cluster. Each round times, in a rotating order, batches of
 *   preload: getaddrinfo(NAME, "9000", AF_INET, SOCK_STREAM) (the hook)
 *            and freeaddrinfo;
 *   module:  MODULE's _nss_replicalb_gethostbyname4_r(NAME);
 *   files:   libnss_files.so.2's _nss_files_gethostbyname4_r("localhost").
 * Prints "preload NS module NS files NS": the medians over the rounds of
 * each batch's nanoseconds per call.
 *
 *   bench_nss --gai NAME ROUNDS
 *
 * Not preloaded, in a mount namespace whose nsswitch.conf says
 * "hosts: files replicalb" with the module on the library path:
 * getaddrinfo(NAME, "9000", AF_UNSPEC, SOCK_STREAM) through glibc and the
 * module (NSS, then RFC 6724's sort, a UDP connect per address) against
 * getaddrinfo("localhost") answered by files. Prints
 * "module_gai NS files_gai NS" (BENCHMARKS.md, issue 23).
 */
#include "config.h"

#include <dlfcn.h>
#include <netdb.h>
#include <nss.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bench/bench.h"

#define BATCH 2000

typedef enum nss_status (*fn4)(const char *, struct gaih_addrtuple **, char *,
			       size_t, int *, int *, int32_t *);

static char buf[8192];

static int call4(fn4 f, const char *name)
{
	struct gaih_addrtuple *pat = NULL;
	int err, herr;
	int32_t ttl;

	return f(name, &pat, buf, sizeof(buf), &err, &herr, &ttl) ==
	       NSS_STATUS_SUCCESS;
}

static int call_gai(const char *name)
{
	struct addrinfo hints = {.ai_family = AF_INET,
				 .ai_socktype = SOCK_STREAM},
			*res;

	if (getaddrinfo(name, "9000", &hints, &res) != 0)
		return 0;
	freeaddrinfo(res);
	return 1;
}

static int call_gai_any(const char *name)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;

	if (getaddrinfo(name, "9000", &hints, &res) != 0)
		return 0;
	freeaddrinfo(res);
	return 1;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* --gai: getaddrinfo through the module against files, interleaved. */
static int gai_through_nss(const char *name, int rounds)
{
	double *t[2];

	if (rounds < 1 || !call_gai_any(name) || !call_gai_any("localhost")) {
		fprintf(stderr, "bench_nss --gai: a warm-up call failed\n");
		return 1;
	}
	for (int k = 0; k < 2; k++)
		t[k] = calloc((size_t)rounds, sizeof(double));
	for (int r = 0; r < rounds; r++) {
		for (int j = 0; j < 2; j++) {
			int k = (r + j) % 2, ok = 1;
			double t0 = bench_now_ns();

			for (int i = 0; i < BATCH / 4 && ok; i++)
				ok = call_gai_any(k == 0 ? name : "localhost");
			if (!ok) {
				fprintf(stderr, "bench_nss: a call failed\n");
				return 1;
			}
			t[k][r] = (bench_now_ns() - t0) / (BATCH / 4);
		}
	}
	for (int k = 0; k < 2; k++)
		qsort(t[k], (size_t)rounds, sizeof(double), cmp_d);
	printf("module_gai %.1f files_gai %.1f\n", t[0][rounds / 2],
	       t[1][rounds / 2]);
	return 0;
}

int main(int argc, char **argv)
{
	void *mod, *files;
	fn4 f_mod, f_files;
	int rounds;
	double *t[3];

	if (argc == 4 && strcmp(argv[1], "--gai") == 0)
		return gai_through_nss(argv[2], atoi(argv[3]));
	if (argc != 4)
		return 2;
	rounds = atoi(argv[3]);
	mod = dlopen(argv[1], RTLD_NOW);
	files = dlopen("libnss_files.so.2", RTLD_NOW);
	if (!mod || !files) {
		fprintf(stderr, "bench_nss: %s\n", dlerror());
		return 1;
	}
	f_mod = (fn4)dlsym(mod, "_nss_replicalb_gethostbyname4_r");
	f_files = (fn4)dlsym(files, "_nss_files_gethostbyname4_r");
	if (!f_mod || !f_files || rounds < 1)
		return 1;
	/* Warm: the sessions start, the state is attached. */
	if (!call_gai(argv[2]) || !call4(f_mod, argv[2]) ||
	    !call4(f_files, "localhost")) {
		fprintf(stderr, "bench_nss: a warm-up call failed\n");
		return 1;
	}
	for (int k = 0; k < 3; k++)
		t[k] = calloc((size_t)rounds, sizeof(double));
	for (int r = 0; r < rounds; r++) {
		for (int j = 0; j < 3; j++) {
			int k = (r + j) % 3, ok = 1;
			double t0 = bench_now_ns();

			for (int i = 0; i < BATCH && ok; i++)
				ok = k == 0   ? call_gai(argv[2])
				     : k == 1 ? call4(f_mod, argv[2])
					      : call4(f_files, "localhost");
			if (!ok) {
				fprintf(stderr, "bench_nss: a call failed\n");
				return 1;
			}
			t[k][r] = (bench_now_ns() - t0) / BATCH;
		}
	}
	for (int k = 0; k < 3; k++)
		qsort(t[k], (size_t)rounds, sizeof(double), cmp_d);
	printf("preload %.1f module %.1f files %.1f\n", t[0][rounds / 2],
	       t[1][rounds / 2], t[2][rounds / 2]);
	return 0;
}
