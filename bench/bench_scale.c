/* bench_scale.c - a virtual getaddrinfo() against the floor of building
 * its answer, over growing replica counts, side by side in one process.
 *
 * The floor is what any getaddrinfo() that returns N addresses must do at
 * least: malloc, fill and link N nodes laid out as glibc lays them out
 * (struct addrinfo and its sockaddr in one allocation, plus canonname
 * where asked), and free them as freeaddrinfo() does. No lookup, no
 * selection. A virtual lookup of N replicas divided by the floor of N
 * nodes is the factor the library spends over the unavoidable.
 *
 * Run with libreplicalb preloaded and a config with one cluster per case;
 * the policy comes from the config (scripts/bench sets it for all
 * clusters with REPLICALB_LOAD_BALANCING).
 *
 * Usage: bench_scale [-r ROUNDS] [-t MS] [-C] N:NAME...
 *   N:NAME     a case: the virtual NAME, which resolves to N addresses
 *   -r ROUNDS  rounds (default 15); each round times both, in turn order
 *              alternating, and takes their ratio
 *   -t MS      time per batch (default 4 ms)
 *   -C         ask for AI_CANONNAME (and build a canonname in the floor)
 *
 * Prints per case: "N NAME virtual_ns floor_ns ratio", medians over
 * rounds (ratio: the median of the per-round ratios). Exit 1 when a
 * lookup fails or returns other than N addresses.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

struct bench_case {
	long n;		  /* addresses NAME resolves to */
	const char *name; /* the virtual name */
	long iters[2];	  /* per batch: virtual, floor */
	double *ns[2];	  /* per round */
	double *ratio;	  /* per round: virtual / floor */
};

static struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
static bool canon;

/* Build and free n glibc-layout nodes: the floor of an answer of n. */
static __attribute__((noinline)) void floor_once(long n, const char *name)
{
	struct addrinfo *head = NULL, **tail = &head;

	for (long i = 0; i < n; i++) {
		struct addrinfo *ai =
			malloc(sizeof(*ai) + sizeof(struct sockaddr_in));
		struct sockaddr_in *sin;

		if (!ai) {
			perror("bench_scale: malloc");
			exit(1);
		}
		sin = (struct sockaddr_in *)(ai + 1);
		memset(sin, 0, sizeof(*sin));
		sin->sin_family = AF_INET;
		sin->sin_port = htons(9000);
		sin->sin_addr.s_addr = htonl(0x7f000001u + (uint32_t)i);
		ai->ai_flags = hints.ai_flags;
		ai->ai_family = AF_INET;
		ai->ai_socktype = SOCK_STREAM;
		ai->ai_protocol = IPPROTO_TCP;
		ai->ai_addrlen = sizeof(*sin);
		ai->ai_addr = (struct sockaddr *)sin;
		ai->ai_canonname = canon && i == 0 ? strdup(name) : NULL;
		ai->ai_next = NULL;
		*tail = ai;
		tail = &ai->ai_next;
	}
	/* The list escapes: the compiler may not drop the pairs. */
	__asm__ volatile("" : : "r"(head) : "memory");
	while (head) {
		struct addrinfo *next = head->ai_next;

		free(head->ai_canonname);
		free(head);
		head = next;
	}
}

static void virtual_once(const struct bench_case *c)
{
	struct addrinfo *res, *ai;
	long got = 0;
	int rc = getaddrinfo(c->name, "9000", &hints, &res);

	if (rc != 0) {
		fprintf(stderr, "bench_scale: getaddrinfo(%s): %s\n", c->name,
			gai_strerror(rc));
		exit(1);
	}
	for (ai = res; ai; ai = ai->ai_next)
		got++;
	freeaddrinfo(res);
	if (got != c->n) {
		fprintf(stderr, "bench_scale: %s gave %ld addresses, not %ld\n",
			c->name, got, c->n);
		exit(1);
	}
}

/* ns per operation of a batch of iters; which: 0 virtual, 1 floor. */
static double batch(const struct bench_case *c, int which, long iters)
{
	double t0 = bench_now_ns();

	for (long i = 0; i < iters; i++) {
		if (which == 0)
			virtual_once(c);
		else
			floor_once(c->n, c->name);
	}
	return (bench_now_ns() - t0) / iters;
}

static long calibrate(const struct bench_case *c, int which, double ns)
{
	long n = 1;
	double per;

	batch(c, which, 1);
	for (;;) {
		per = batch(c, which, n);
		if (per * n >= ns / 4 || n >= 1L << 28)
			break;
		n *= 4;
	}
	n = (long)(ns / per);
	return n < 1 ? 1 : n;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_scale [-r ROUNDS] [-t MS] [-C] "
			"N:NAME...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int rounds = 15, opt;
	double batch_ms = 4;
	struct bench_case *cases;
	size_t ncases;

	while ((opt = getopt(argc, argv, "r:t:Ch")) != -1) {
		switch (opt) {
		case 'r':
			rounds = atoi(optarg);
			break;
		case 't':
			batch_ms = atof(optarg);
			break;
		case 'C':
			canon = true;
			break;
		default:
			usage();
		}
	}
	if (optind == argc || rounds < 1 || batch_ms <= 0)
		usage();
	if (canon)
		hints.ai_flags = AI_CANONNAME;
	ncases = (size_t)(argc - optind);
	cases = calloc(ncases, sizeof(*cases));
	if (!cases)
		usage();
	for (size_t k = 0; k < ncases; k++) {
		struct bench_case *c = &cases[k];
		char *end;

		c->n = strtol(argv[optind + k], &end, 10);
		if (*end != ':' || c->n < 1)
			usage();
		c->name = end + 1;
		c->ns[0] = calloc(rounds, sizeof(double));
		c->ns[1] = calloc(rounds, sizeof(double));
		c->ratio = calloc(rounds, sizeof(double));
		if (!c->ns[0] || !c->ns[1] || !c->ratio) {
			perror("bench_scale: calloc");
			return 1;
		}
		c->iters[0] = calibrate(c, 0, batch_ms * 1e6);
		c->iters[1] = calibrate(c, 1, batch_ms * 1e6);
	}

	/* Rounds interleave the cases and alternate which of the pair runs
	 * first, so that drift of the machine hits both alike. */
	for (int r = 0; r < rounds; r++) {
		for (size_t k = 0; k < ncases; k++) {
			struct bench_case *c = &cases[k];
			int first = r % 2;

			c->ns[first][r] = batch(c, first, c->iters[first]);
			c->ns[!first][r] = batch(c, !first, c->iters[!first]);
			c->ratio[r] = c->ns[0][r] / c->ns[1][r];
		}
	}
	for (size_t k = 0; k < ncases; k++) {
		struct bench_case *c = &cases[k];

		printf("%ld %s %.1f %.1f %.3f\n", c->n, c->name,
		       bench_median(c->ns[0], rounds),
		       bench_median(c->ns[1], rounds),
		       bench_median(c->ratio, rounds));
	}
	return 0;
}
