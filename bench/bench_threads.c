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
 * With -u, each operation is a connection instead (issue 21): a UDP
 * socket connected to NAME's first replica address (handed out by one
 * resolution first, so the connect tracking takes it) and closed, which
 * is all a connect and a close cost the library: the connection ledger
 * takes it in flight, counts it established and drops it, host-wide.
 * The control is the same through libc's connect and close, below the
 * hooks.
 *
 * Usage: bench_threads [-u] [-r ROUNDS] [-t MS] [-T N,N,...] NAME
 *   -u         connect and close (UDP) instead of resolving
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
#include <stdlib.h>
#include <string.h>
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
typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*close_fn)(int);

/* One kind of operation, and how to do it. */
struct kind {
	const char *which;
	gai_fn gai;
	fai_fn fai;
	const char *node;
	/* -u: connect to sa and close instead. */
	connect_fn conn;
	close_fn cls;
	const struct sockaddr_in *sa;
};

struct job {
	struct kind k;
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

		for (int k = 0; k < 16 && j->k.sa; k++, n++) {
			int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

			if (fd < 0 ||
			    j->k.conn(fd, (const struct sockaddr *)j->k.sa,
				      sizeof(*j->k.sa)) != 0 ||
			    j->k.cls(fd) != 0) {
				atomic_store(&j->failed, true);
				return NULL;
			}
		}
		for (int k = 0; k < 16 && !j->k.sa; k++, n++) {
			if (j->k.gai(j->k.node, "9000", &hints, &res) != 0) {
				atomic_store(&j->failed, true);
				return NULL;
			}
			j->k.fai(res);
		}
	} while (bench_now_ns() < j->deadline);
	atomic_fetch_add(&j->ops, n);
	return NULL;
}

/* Operations per second of nthreads threads for about ms. */
static double batch(const struct kind *kd, int nthreads, double ms)
{
	pthread_t tid[MAX_THREADS];
	struct job j = {.k = *kd};
	const char *node = kd->node;
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
		fprintf(stderr, "bench_threads: %s(%s) failed\n",
			kd->sa ? "connect" : "getaddrinfo", node);
		exit(1);
	}
	return atomic_load(&j.ops) / ((bench_now_ns() - t0) / 1e9);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_threads [-u] [-r ROUNDS] [-t MS] [-T N,...] "
		"NAME\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int rounds = 15, opt, counts[MAX_COUNTS] = {1}, ncounts = 1;
	double ms = 30;
	const char *list = "1,2,8";
	bool udp = false;

	while ((opt = getopt(argc, argv, "ur:t:T:h")) != -1) {
		switch (opt) {
		case 'u':
			udp = true;
			break;
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
	struct kind kinds[2] = {
		{"virtual", getaddrinfo, freeaddrinfo, argv[optind], NULL, NULL,
		 NULL},
		{"control", libc_gai, libc_fai, "127.0.0.1", NULL, NULL, NULL}};
	static struct sockaddr_in replica;

	if (udp) {
		connect_fn libc_connect = (connect_fn)dlsym(libc, "connect");
		close_fn libc_close = (close_fn)dlsym(libc, "close");
		struct addrinfo *res;

		/* One resolution hands the replica's address out. */
		if (!libc_connect || !libc_close ||
		    getaddrinfo(argv[optind], "9000", &hints, &res) != 0 ||
		    res->ai_family != AF_INET) {
			fprintf(stderr,
				"bench_threads: no IPv4 replica of %s\n",
				argv[optind]);
			return 1;
		}
		memcpy(&replica, res->ai_addr, sizeof(replica));
		freeaddrinfo(res);
		kinds[0] =
			(struct kind){"virtual", NULL,	NULL,	 argv[optind],
				      connect,	 close, &replica};
		kinds[1] = (struct kind){"control",    NULL,	     NULL,
					 argv[optind], libc_connect, libc_close,
					 &replica};
	}
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
		batch(&kinds[k], 2, ms / 4);

	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < 2 * ncounts; i++) {
			int slot = (i + r) % (2 * ncounts);
			int k = slot % 2, c = slot / 2;

			ops[k][c][r] = batch(&kinds[k], counts[c], ms);
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
