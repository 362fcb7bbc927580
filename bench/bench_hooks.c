/* bench_hooks.c - cost of the preloaded hooks against libc's own functions,
 * measured side by side in one process.
 *
 * Linked with libc only. Every operation runs twice per round: once through
 * the ordinary symbol (libreplicalb's hook when the library is preloaded,
 * libc otherwise) and once through the function the hook itself calls
 * next, found with dlsym() on that library: libc.so.6, or with -n a stub
 * library that scripts/bench preloads after libreplicalb. Run without
 * libreplicalb the two columns agree within noise, which is the control.
 *
 * Real system calls cost a microsecond or more in some VMs and jitter by
 * tens of ns, which hides a hook's few ns; the stub's connect() makes no
 * system call (it succeeds for port 9 and refuses every other port), so
 * with -n the difference is the hook's own cost.
 *
 * With -v NAME, getaddrinfo() of the virtual name NAME is timed as well
 * (through the symbol only: libc cannot resolve it).
 *
 * Usage: bench_hooks [-v NAME] [-n LIB] [-r ROUNDS] [-t MS] [-R]
 *   -n LIB     time connect() against LIB's instead of real syscalls
 *   -r ROUNDS  rounds per operation (default 25); medians are reported
 *   -t MS      time per batch (default 4 ms)
 *   -R         raw output: "op next_ns sym_ns diff_ns ratio" per line,
 *              medians over rounds (diff and ratio: of the per-round
 *              paired difference and quotient)
 */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The functions below the hooks: libc's own (or the stub's connect). */
static struct {
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*close)(int);
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	void (*freeaddrinfo)(struct addrinfo *);
} libc;

/* The ordinary symbols, resolved through the PLT like any program's. */
static const struct {
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*close)(int);
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	void (*freeaddrinfo)(struct addrinfo *);
} sym = {connect, close, getaddrinfo, freeaddrinfo};

enum variant { VIA_LIBC, VIA_SYMBOL };

/* Shared fixtures of the operations. */
static int null_fd = -1;	      /* /dev/null: connect gives ENOTSOCK */
static int udp_fd = -1;		      /* connected again and again */
static int tcp_fd = -1;		      /* a stream socket for the stub */
static int conn_fd = -1;	      /* a TCP socket connected to lo_listen */
static struct sockaddr_in lo_listen;  /* 127.0.0.1, a port listening */
static struct sockaddr_in lo_closed;  /* 127.0.0.1, a port nobody listens on */
static struct sockaddr_in lo_discard; /* 127.0.0.1:9, for the UDP socket */
static struct addrinfo stream_hints = {.ai_socktype = SOCK_STREAM};
static const char *virtual_name;
static volatile int sink;

static void fail(const char *what, int err)
{
	fprintf(stderr, "bench_hooks: %s: %s\n", what, strerror(err));
	exit(1);
}

static void op_connect_enotsock(enum variant v, long n)
{
	typeof(libc.connect) fn = v == VIA_LIBC ? libc.connect : sym.connect;

	for (long i = 0; i < n; i++)
		sink += fn(null_fd, (struct sockaddr *)&lo_closed,
			   sizeof(lo_closed));
}

static void op_connect_udp(enum variant v, long n)
{
	typeof(libc.connect) fn = v == VIA_LIBC ? libc.connect : sym.connect;

	for (long i = 0; i < n; i++)
		if (fn(udp_fd, (struct sockaddr *)&lo_discard,
		       sizeof(lo_discard)) != 0)
			fail("connect(udp)", errno);
}

/* The cheapest connect() of a TCP socket to a non-replica address that
 * reaches the kernel: the socket is connected already (EISCONN). */
static void op_connect_eisconn(enum variant v, long n)
{
	typeof(libc.connect) fn = v == VIA_LIBC ? libc.connect : sym.connect;

	for (long i = 0; i < n; i++)
		if (fn(conn_fd, (struct sockaddr *)&lo_listen,
		       sizeof(lo_listen)) == 0 ||
		    errno != EISCONN)
			fail("connect(connected socket)", errno);
}

static void op_tcp_refused(enum variant v, long n)
{
	typeof(libc.connect) fn = v == VIA_LIBC ? libc.connect : sym.connect;
	typeof(libc.close) cl = v == VIA_LIBC ? libc.close : sym.close;

	for (long i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			fail("socket", errno);
		if (fn(fd, (struct sockaddr *)&lo_closed, sizeof(lo_closed)) ==
			    0 ||
		    errno != ECONNREFUSED)
			fail("connect(127.0.0.1:closed port)", errno);
		cl(fd);
	}
}

/* Against the stub: no system call below the hook. */
static void op_connect_ok_nosys(enum variant v, long n)
{
	typeof(libc.connect) fn = v == VIA_LIBC ? libc.connect : sym.connect;

	for (long i = 0; i < n; i++)
		if (fn(tcp_fd, (struct sockaddr *)&lo_discard,
		       sizeof(lo_discard)) != 0)
			fail("stub connect(port 9)", errno);
}

static void op_connect_refused_nosys(enum variant v, long n)
{
	typeof(libc.connect) fn = v == VIA_LIBC ? libc.connect : sym.connect;

	for (long i = 0; i < n; i++)
		if (fn(tcp_fd, (struct sockaddr *)&lo_closed,
		       sizeof(lo_closed)) == 0 ||
		    errno != ECONNREFUSED)
			fail("stub connect(closed port)", errno);
}

static void gai_loop(enum variant v, long n, const char *node)
{
	typeof(libc.getaddrinfo) gai =
		v == VIA_LIBC ? libc.getaddrinfo : sym.getaddrinfo;
	typeof(libc.freeaddrinfo) fai =
		v == VIA_LIBC ? libc.freeaddrinfo : sym.freeaddrinfo;

	for (long i = 0; i < n; i++) {
		struct addrinfo *res;
		int rc = gai(node, "9000", &stream_hints, &res);

		if (rc != 0) {
			fprintf(stderr, "bench_hooks: getaddrinfo(%s): %s\n",
				node, gai_strerror(rc));
			exit(1);
		}
		fai(res);
	}
}

static void op_gai_numeric(enum variant v, long n)
{
	gai_loop(v, n, "127.0.0.1");
}

static void op_gai_hosts(enum variant v, long n)
{
	gai_loop(v, n, "localhost");
}

static void op_gai_virtual(enum variant v, long n)
{
	gai_loop(v, n, virtual_name);
}

enum mode { REAL, STUB };

struct op {
	const char *name;
	void (*run)(enum variant v, long n);
	enum mode mode;	  /* run with real syscalls or against -n LIB */
	bool symbol_only; /* no libc variant */
	long iters;	  /* per batch, from calibration */
	double *libc_ns;  /* per round */
	double *sym_ns;
	double *diff_ns;
	double *ratio; /* per round: sym / libc */
};

static struct op ops[] = {
	{"getaddrinfo_virtual", op_gai_virtual, REAL, true, 0, 0, 0, 0, 0},
	{"getaddrinfo_numeric", op_gai_numeric, REAL, false, 0, 0, 0, 0, 0},
	{"getaddrinfo_hosts", op_gai_hosts, REAL, false, 0, 0, 0, 0, 0},
	{"connect_enotsock", op_connect_enotsock, REAL, false, 0, 0, 0, 0, 0},
	{"connect_udp", op_connect_udp, REAL, false, 0, 0, 0, 0, 0},
	{"connect_eisconn", op_connect_eisconn, REAL, false, 0, 0, 0, 0, 0},
	{"tcp_refused_cycle", op_tcp_refused, REAL, false, 0, 0, 0, 0, 0},
	{"connect_ok_nosys", op_connect_ok_nosys, STUB, false, 0, 0, 0, 0, 0},
	{"connect_refused_nosys", op_connect_refused_nosys, STUB, false, 0, 0,
	 0, 0, 0},
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per operation of one batch of n. */
static double batch(const struct op *op, enum variant v, long n)
{
	double t0 = now_ns();

	op->run(v, n);
	return (now_ns() - t0) / n;
}

/* Iterations that take about target_ns in the slower variant. */
static long calibrate(const struct op *op, double target_ns)
{
	long n = 1;
	double per;

	batch(op, VIA_SYMBOL, 1); /* warm up: config load, caches */
	for (;;) {
		per = batch(op, VIA_SYMBOL, n);
		if (!op->symbol_only) {
			double other = batch(op, VIA_LIBC, n);

			per = other > per ? other : per;
		}
		if (per * n >= target_ns / 2 || n >= 1L << 30)
			break;
		n *= 4;
	}
	n = (long)(target_ns / per);
	return n < 1 ? 1 : n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The object that defines the symbol the program calls. */
static const char *provider(void *fn)
{
	Dl_info info;

	if (!dladdr(fn, &info) || !info.dli_fname)
		return "?";
	return info.dli_fname;
}

static void setup(const char *next_lib)
{
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	void *n = next_lib ? dlopen(next_lib, RTLD_LAZY | RTLD_NOLOAD) : h;

	if (!h || !n) {
		fprintf(stderr, "bench_hooks: %s is not loaded: %s\n",
			h ? next_lib : "libc.so.6", dlerror());
		exit(1);
	}
	libc.connect = (typeof(libc.connect))dlsym(n, "connect");
	libc.close = (typeof(libc.close))dlsym(h, "close");
	libc.getaddrinfo = (typeof(libc.getaddrinfo))dlsym(h, "getaddrinfo");
	libc.freeaddrinfo = (typeof(libc.freeaddrinfo))dlsym(h, "freeaddrinfo");
	if (!libc.connect || !libc.close || !libc.getaddrinfo ||
	    !libc.freeaddrinfo) {
		fprintf(stderr, "bench_hooks: libc symbols not found\n");
		exit(1);
	}

	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0)
		fail("/dev/null", errno);
	udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (udp_fd < 0 || tcp_fd < 0)
		fail("socket", errno);

	/* A closed port: bind an ephemeral one, note it, close it. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t len = sizeof(lo_closed);

	lo_closed.sin_family = AF_INET;
	lo_closed.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&lo_closed, len) != 0 ||
	    getsockname(fd, (struct sockaddr *)&lo_closed, &len) != 0)
		fail("bind(127.0.0.1:0)", errno);
	libc.close(fd);

	/* A listener, and a socket connected to it through libc's connect,
	 * never the stub's. */
	typeof(libc.connect) real_connect =
		(typeof(libc.connect))dlsym(h, "connect");
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	len = sizeof(lo_listen);
	lo_listen.sin_family = AF_INET;
	lo_listen.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	conn_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || conn_fd < 0 ||
	    bind(lfd, (struct sockaddr *)&lo_listen, len) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&lo_listen, &len) != 0 ||
	    listen(lfd, 1) != 0 ||
	    real_connect(conn_fd, (struct sockaddr *)&lo_listen, len) != 0)
		fail("connect(127.0.0.1:listening port)", errno);

	lo_discard.sin_family = AF_INET;
	lo_discard.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lo_discard.sin_port = htons(9);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_hooks [-v NAME] [-n LIB] [-r ROUNDS] [-t MS] "
		"[-R]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int rounds = 25, opt;
	double batch_ms = 4;
	bool raw = false;
	const char *next_lib = NULL;

	while ((opt = getopt(argc, argv, "v:n:r:t:Rh")) != -1) {
		switch (opt) {
		case 'v':
			virtual_name = optarg;
			break;
		case 'n':
			next_lib = optarg;
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 't':
			batch_ms = atof(optarg);
			break;
		case 'R':
			raw = true;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || rounds < 1 || batch_ms <= 0)
		usage();

	setup(next_lib);
	enum mode mode = next_lib ? STUB : REAL;
	bool hooked = (void *)sym.getaddrinfo != (void *)libc.getaddrinfo;

	if (virtual_name && !hooked) {
		fprintf(stderr,
			"bench_hooks: getaddrinfo is libc's (%s); "
			"skipping the virtual name %s\n",
			provider((void *)sym.getaddrinfo), virtual_name);
		virtual_name = NULL;
	}

	printf("# getaddrinfo from %s\n", provider((void *)sym.getaddrinfo));
	printf("# connect from %s\n", provider((void *)sym.connect));
	printf("# next connect from %s\n", provider((void *)libc.connect));
	printf("# %d rounds, %.0f ms batches\n", rounds, batch_ms);
	fflush(stdout);

	/* Connects must meet a library that has handed out addresses (its
	 * tracking active), as in a program that uses a virtual name. */
	if (virtual_name)
		op_gai_virtual(VIA_SYMBOL, 1);

	for (size_t k = 0; k < NOPS; k++) {
		struct op *op = &ops[k];

		if (op->mode != mode ||
		    (op->run == op_gai_virtual && !virtual_name))
			continue;
		op->libc_ns = calloc(rounds, sizeof(double));
		op->sym_ns = calloc(rounds, sizeof(double));
		op->diff_ns = calloc(rounds, sizeof(double));
		op->ratio = calloc(rounds, sizeof(double));
		if (!op->libc_ns || !op->sym_ns || !op->diff_ns || !op->ratio)
			fail("calloc", ENOMEM);
		op->iters = calibrate(op, batch_ms * 1e6);
	}

	/* Rounds interleave operations and alternate which variant runs
	 * first, so that drift of the machine hits both alike. */
	for (int r = 0; r < rounds; r++) {
		for (size_t k = 0; k < NOPS; k++) {
			struct op *op = &ops[k];

			if (!op->iters)
				continue;
			if (op->symbol_only) {
				op->sym_ns[r] =
					batch(op, VIA_SYMBOL, op->iters);
				continue;
			}
			if (r % 2) {
				op->sym_ns[r] =
					batch(op, VIA_SYMBOL, op->iters);
				op->libc_ns[r] = batch(op, VIA_LIBC, op->iters);
			} else {
				op->libc_ns[r] = batch(op, VIA_LIBC, op->iters);
				op->sym_ns[r] =
					batch(op, VIA_SYMBOL, op->iters);
			}
			op->diff_ns[r] = op->sym_ns[r] - op->libc_ns[r];
			op->ratio[r] = op->sym_ns[r] / op->libc_ns[r];
		}
	}

	if (!raw)
		printf("%-22s %12s %12s %10s %10s\n", "operation", "next ns/op",
		       "symbol ns/op", "added ns", "iters");
	for (size_t k = 0; k < NOPS; k++) {
		struct op *op = &ops[k];

		if (!op->iters)
			continue;
		double s = median(op->sym_ns, rounds);

		if (op->symbol_only) {
			if (raw)
				printf("%s - %.1f - -\n", op->name, s);
			else
				printf("%-22s %12s %12.1f %10s %10ld\n",
				       op->name, "-", s, "-", op->iters);
			continue;
		}
		double l = median(op->libc_ns, rounds);
		double d = median(op->diff_ns, rounds);
		double q = median(op->ratio, rounds);

		if (raw)
			printf("%s %.1f %.1f %.1f %.4f\n", op->name, l, s, d,
			       q);
		else
			printf("%-22s %12.1f %12.1f %10.1f %10ld\n", op->name,
			       l, s, d, op->iters);
	}
	return 0;
}
