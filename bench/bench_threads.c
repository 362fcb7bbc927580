/* bench_threads.c - getaddrinfo() throughput of 1, 2, ... threads
 * resolving at once in one process, side by side.
 *
 * Each batch starts T threads that resolve and free NAME in a loop until
 * a common deadline; the figure is lookups per second over all threads.
 * Rounds interleave the thread counts (in an order that rotates), and
 * each round's throughput at T is divided by the same round's at 1
 * thread. Alongside, the same with glibc's own getaddrinfo("127.0.0.1"),
 * called below any preloaded hook, as the control: what this machine
 * allows, with its cores and whatever else runs on them.
 *
 * Usage: bench_threads [-r ROUNDS] [-t MS] [-T N,N,...] NAME
 *   -r ROUNDS  rounds (default 15)
 *   -t MS      time per batch (default 30 ms)
 *   -T LIST    thread counts (default 1,2,8); 1 is always measured
 *
 * Prints per thread count: "T which ops_per_s speedup" for which in
 * "virtual" (NAME through the ordinary symbol) and "control" (glibc
 * numeric); ops_per_s is the median over rounds, speedup the median of
 * the per-round ratios to 1 thread.
 */
#include "config.h"

#include <dlfcn.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

#define MAX_THREADS 64
#define MAX_COUNTS  16

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *,
		      struct addrinfo **);
typedef void (*fai_fn)(struct addrinfo *);

struct job {
	gai_fn gai;
	fai_fn fai;
	const char *node;
	double deadline;    /* bench_now_ns() at which to stop */
	atomic_int ready;   /* threads waiting at the start line */
	atomic_bool go;	    /* the start */
	atomic_long ops;    /* lookups done, all threads */
	atomic_bool failed; /* a lookup failed */
};

static struct addrinfo hints = {.ai_socktype = SOCK_STREAM};

static void *worker(void *arg)
{
	struct job *j = arg;
	long n = 0;

	atomic_fetch_add(&j->ready, 1);
	while (!atomic_load(&j->go))
		sched_yield();
	do {
		struct addrinfo *res;

		for (int k = 0; k < 16; k++, n++) {
			if (j->gai(j->node, "9000", &hints, &res) != 0) {
				atomic_store(&j->failed, true);
				return NULL;
			}
			j->fai(res);
		}
	} while (bench_now_ns() < j->deadline);
	atomic_fetch_add(&j->ops, n);
	return NULL;
}

/* Lookups per second of nthreads threads for about ms. */
static double batch(gai_fn gai, fai_fn fai, const char *node, int nthreads,
		    double ms)
{
	pthread_t tid[MAX_THREADS];
	struct job j = {.gai = gai, .fai = fai, .node = node};
	double t0;

	j.deadline = 1e300;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&tid[i], NULL, worker, &j) != 0) {
			perror("bench_threads: pthread_create");
			exit(1);
		}
	while (atomic_load(&j.ready) < nthreads)
		sched_yield();
	t0 = bench_now_ns();
	j.deadline = t0 + ms * 1e6;
	atomic_store(&j.go, true);
	for (int i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	if (atomic_load(&j.failed)) {
		fprintf(stderr, "bench_threads: getaddrinfo(%s) failed\n",
			node);
		exit(1);
	}
	return atomic_load(&j.ops) / ((bench_now_ns() - t0) / 1e9);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_threads [-r ROUNDS] [-t MS] [-T N,...] NAME\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int rounds = 15, opt, counts[MAX_COUNTS] = {1}, ncounts = 1;
	double ms = 30;
	const char *list = "1,2,8";

	while ((opt = getopt(argc, argv, "r:t:T:h")) != -1) {
		switch (opt) {
		case 'r':
			rounds = atoi(optarg);
			break;
		case 't':
			ms = atof(optarg);
			break;
		case 'T':
			list = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind + 1 != argc || rounds < 1 || ms <= 0)
		usage();
	for (const char *p = list; *p;) {
		char *end;
		long t = strtol(p, &end, 10);

		if (end == p || t < 1 || t > MAX_THREADS ||
		    ncounts == MAX_COUNTS)
			usage();
		if (t != 1)
			counts[ncounts++] = (int)t;
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			usage();
	}

	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	gai_fn libc_gai = libc ? (gai_fn)dlsym(libc, "getaddrinfo") : NULL;
	fai_fn libc_fai = libc ? (fai_fn)dlsym(libc, "freeaddrinfo") : NULL;

	if (!libc_gai || !libc_fai) {
		fprintf(stderr,
			"bench_threads: libc's getaddrinfo not found\n");
		return 1;
	}
	struct {
		const char *which;
		gai_fn gai;
		fai_fn fai;
		const char *node;
	} kinds[2] = {{"virtual", getaddrinfo, freeaddrinfo, argv[optind]},
		      {"control", libc_gai, libc_fai, "127.0.0.1"}};
	double *ops[2][MAX_COUNTS], *speedup[2][MAX_COUNTS];

	for (int k = 0; k < 2; k++)
		for (int c = 0; c < ncounts; c++) {
			ops[k][c] = calloc(rounds, sizeof(double));
			speedup[k][c] = calloc(rounds, sizeof(double));
			if (!ops[k][c] || !speedup[k][c]) {
				perror("bench_threads: calloc");
				return 1;
			}
		}
	/* Warm up: config load, caches, thread stacks. */
	for (int k = 0; k < 2; k++)
		batch(kinds[k].gai, kinds[k].fai, kinds[k].node, 2, ms / 4);

	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < 2 * ncounts; i++) {
			int slot = (i + r) % (2 * ncounts);
			int k = slot % 2, c = slot / 2;

			ops[k][c][r] = batch(kinds[k].gai, kinds[k].fai,
					     kinds[k].node, counts[c], ms);
		}
	/* Ratios first: bench_median() sorts what it is given. */
	for (int k = 0; k < 2; k++)
		for (int c = 0; c < ncounts; c++)
			for (int r = 0; r < rounds; r++)
				speedup[k][c][r] = ops[k][c][r] / ops[k][0][r];
	for (int k = 0; k < 2; k++)
		for (int c = 0; c < ncounts; c++)
			printf("%d %s %.0f %.3f\n", counts[c], kinds[k].which,
			       bench_median(ops[k][c], rounds),
			       bench_median(speedup[k][c], rounds));
	return 0;
}
