/* bench_conn.c - a short-connection load generator: resolve, connect,
 * send a request, read the reply to the end, close; in a loop, for a
 * fixed time.
 *
 * Each connection resolves HOST first (getaddrinfo, SOCK_STREAM) and
 * connects to the first address, as a client program does: with
 * libreplicalb preloaded and HOST a virtual name, that is the balanced
 * path; with HOST an address, the direct one. HOST may be a list,
 * "A,B,C": connection k of each client then goes to the (k mod 3)th, the
 * client balancing by itself with no library (a control). Latency is timed
 * from before the lookup to after the close. CLIENTS threads each run one
 * connection at a time (closed loop).
 *
 * Usage: bench_conn [-d SECONDS] [-c CLIENTS] HOST PORT
 *
 * Prints one line:
 *   conns N errors E seconds S rate R p50_us X p99_us Y
 * Exit 1 when no connection succeeded or more than 1% failed.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

#define MAX_CLIENTS 64

static const char request[] = "GET / HTTP/1.0\r\nHost: bench\r\n\r\n";
#define MAX_HOSTS 16

static const char *hosts[MAX_HOSTS], *port;
static int nhosts;
static double deadline;

struct client {
	pthread_t tid;
	double *lat_us; /* per connection */
	size_t n, cap;
	long errors;
};

static int one_connection(const char *host)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	char buf[4096];
	int fd, rc = -1;
	ssize_t got;
	size_t len = 0;

	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto out_free;
	if (connect(fd, res->ai_addr, res->ai_addrlen) != 0)
		goto out_close;
	if (write(fd, request, sizeof(request) - 1) !=
	    (ssize_t)sizeof(request) - 1)
		goto out_close;
	while ((got = read(fd, buf, sizeof(buf))) > 0)
		len += (size_t)got;
	if (got == 0 && len > 0)
		rc = 0;
out_close:
	close(fd);
out_free:
	freeaddrinfo(res);
	return rc;
}

static void *client_loop(void *arg)
{
	struct client *c = arg;
	unsigned long k = 0;

	for (;;) {
		double t0 = bench_now_ns(), t1;

		if (t0 >= deadline)
			break;
		if (one_connection(hosts[k++ % nhosts]) != 0) {
			c->errors++;
			continue;
		}
		t1 = bench_now_ns();
		if (c->n == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 65536;
			c->lat_us = realloc(c->lat_us, c->cap * sizeof(double));
			if (!c->lat_us) {
				perror("bench_conn: realloc");
				exit(1);
			}
		}
		c->lat_us[c->n++] = (t1 - t0) / 1e3;
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_conn [-d SECONDS] [-c CLIENTS] HOST PORT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct client clients[MAX_CLIENTS] = {0};
	int opt, nclients = 1;
	double seconds = 2, t0, elapsed, *all;
	size_t total = 0;
	long errors = 0;

	while ((opt = getopt(argc, argv, "d:c:h")) != -1) {
		switch (opt) {
		case 'd':
			seconds = atof(optarg);
			break;
		case 'c':
			nclients = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind + 2 != argc || seconds <= 0 || nclients < 1 ||
	    nclients > MAX_CLIENTS)
		usage();
	for (char *h = strtok(argv[optind], ","); h; h = strtok(NULL, ",")) {
		if (nhosts == MAX_HOSTS)
			usage();
		hosts[nhosts++] = h;
	}
	if (!nhosts)
		usage();
	port = argv[optind + 1];
	signal(SIGPIPE, SIG_IGN);

	t0 = bench_now_ns();
	deadline = t0 + seconds * 1e9;
	for (int i = 0; i < nclients; i++)
		if (pthread_create(&clients[i].tid, NULL, client_loop,
				   &clients[i]) != 0) {
			perror("bench_conn: pthread_create");
			return 1;
		}
	for (int i = 0; i < nclients; i++) {
		pthread_join(clients[i].tid, NULL);
		total += clients[i].n;
		errors += clients[i].errors;
	}
	elapsed = (bench_now_ns() - t0) / 1e9;
	all = malloc((total ? total : 1) * sizeof(double));
	if (!all) {
		perror("bench_conn: malloc");
		return 1;
	}
	for (int i = 0, k = 0; i < nclients; i++) {
		if (clients[i].n)
			memcpy(all + k, clients[i].lat_us,
			       clients[i].n * sizeof(double));
		k += (int)clients[i].n;
	}
	qsort(all, total, sizeof(double), bench_cmp_double);
	printf("conns %zu errors %ld seconds %.3f rate %.1f p50_us %.1f "
	       "p99_us %.1f\n",
	       total, errors, elapsed, total / elapsed,
	       bench_quantile(all, total, 0.50),
	       bench_quantile(all, total, 0.99));
	if (total == 0 || errors * 100 > (long)total) {
		fprintf(stderr,
			"bench_conn: %ld of %zu connections to %s:%s "
			"failed\n",
			errors, total + errors, hosts[0], port);
		return 1;
	}
	return 0;
}
