/* lb_client.c - the client processes of the load-balancing benchmark.
 *
 * Starts PROCS client processes (fork, then exec of this program: each is
 * a program of its own, with the preloaded library loaded and initialised
 * in it as in any client), which start together and, for a fixed time,
 * each make one request after another, each on a NEW connection:
 * getaddrinfo(HOST, PORT, SOCK_STREAM), connect to the addresses in the
 * order of the answer until one connect succeeds, send an HTTP/1.0
 * request, read the reply to its end, close. With libreplicalb preloaded
 * and HOST a virtual name, each lookup is the library's choice of
 * replica; with HOST an address (HAProxy's frontend), the proxy's.
 *
 * Each process resolves HOST once before the common start (so that the
 * config load is not timed), then times each request from before the
 * lookup to after the close. Requests started within the first WARMUP
 * seconds are not recorded; requests started before the deadline are
 * recorded (a request in flight at the deadline is waited for, and its
 * latency counts, but not in the rate). The replica that answered is the
 * reply's body (lb_replica writes its ID there).
 *
 * Usage: lb_client [-P PROCS] [-d SECONDS] [-w WARMUP] [-o RAW] HOST PORT
 *   -o RAW  every recorded request as a line "LATENCY_US REPLICA_ID"
 *
 * Prints one line:
 *   reqs N errors E seconds S rate R p50_us X p99_us Y ids ID:COUNT,...
 * Exit 1 when a process failed, no request succeeded, or more than 1%
 * failed.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAX_PROCS 128
#define MAX_IDS	  16

static const char request[] = "GET / HTTP/1.0\r\nHost: lb\r\n\r\n";

/* One request on a new connection: 0 and the replica's ID (the reply's
 * body, up to its newline), or -1. */
static int one_request(const char *host, const char *port, char *id,
		       size_t idlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	struct timeval tv = {10, 0};
	char buf[1024];
	size_t len = 0;
	ssize_t got;
	int fd = -1, rc = -1;
	char *body, *nl;

	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (write(fd, request, sizeof(request) - 1) !=
	    (ssize_t)sizeof(request) - 1)
		goto out;
	while (len < sizeof(buf) - 1 &&
	       (got = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)got;
	buf[len] = '\0';
	body = strstr(buf, "\r\n\r\n");
	if (!body || !(nl = strchr(body + 4, '\n')))
		goto out;
	body += 4;
	if ((size_t)(nl - body) >= idlen || nl == body)
		goto out;
	memcpy(id, body, (size_t)(nl - body));
	id[nl - body] = '\0';
	rc = 0;
out:
	close(fd);
	return rc;
}

/* A client process: waits for START, then requests until the deadline;
 * then writes "LATENCY_US ID LATE" per recorded request and "E" per failed
 * one to stdout. */
static int child(const char *host, const char *port, double start_ns,
		 double warmup, double seconds)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	double rec_from = start_ns + warmup * 1e9,
	       deadline = rec_from + seconds * 1e9;
	struct timespec ts = {(time_t)(start_ns / 1e9),
			      (long)((long long)start_ns % 1000000000LL)};
	char id[40], *buf = NULL;
	size_t len = 0;
	/* In memory until the end: a full pipe must not stall the run. */
	FILE *out = open_memstream(&buf, &len);

	if (!out)
		return 1;

	if (getaddrinfo(host, port, &hints, &res) == 0)
		freeaddrinfo(res);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
	for (;;) {
		double t0 = bench_now_ns(), t1;
		int rc;

		if (t0 >= deadline)
			break;
		rc = one_request(host, port, id, sizeof(id));
		t1 = bench_now_ns();
		if (t0 < rec_from)
			continue;
		if (rc != 0)
			fputs("E\n", out);
		else
			fprintf(out, "%.1f %s %d\n", (t1 - t0) / 1e3, id,
				t1 > deadline);
	}
	if (fclose(out) != 0)
		return 1;
	return fwrite(buf, 1, len, stdout) == len && fflush(stdout) == 0 ? 0
									 : 1;
}

struct rec {
	double lat_us;
	int id;
};

static void usage(void)
{
	fprintf(stderr, "usage: lb_client [-P PROCS] [-d SECONDS] [-w WARMUP] "
			"[-o RAW] HOST PORT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, procs = 8, nids = 0, failed = 0;
	double seconds = 2, warmup = 0.2, start_ns = 0, *lat;
	const char *raw = NULL;
	char ids[MAX_IDS][40];
	long counts[MAX_IDS] = {0}, errors = 0, in_window = 0;
	struct rec *recs = NULL;
	size_t n = 0, cap = 0;
	pid_t pids[MAX_PROCS];
	FILE *pipes[MAX_PROCS];

	while ((opt = getopt(argc, argv, "P:d:w:o:X:h")) != -1) {
		switch (opt) {
		case 'P':
			procs = atoi(optarg);
			break;
		case 'd':
			seconds = atof(optarg);
			break;
		case 'w':
			warmup = atof(optarg);
			break;
		case 'o':
			raw = optarg;
			break;
		case 'X': /* a client process: the common start, in ns */
			start_ns = atof(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind + 2 != argc || seconds <= 0 || warmup < 0 || procs < 1 ||
	    procs > MAX_PROCS)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if (start_ns > 0)
		return child(argv[optind], argv[optind + 1], start_ns, warmup,
			     seconds);

	/* Time enough for every process to exec and load the library. */
	start_ns = bench_now_ns() + 0.05e9 + procs * 0.004e9;
	for (int i = 0; i < procs; i++) {
		char s_start[32], s_secs[32], s_warm[32];
		int p[2];

		snprintf(s_start, sizeof(s_start), "%.0f", start_ns);
		snprintf(s_secs, sizeof(s_secs), "%g", seconds);
		snprintf(s_warm, sizeof(s_warm), "%g", warmup);
		if (pipe(p) != 0) {
			perror("lb_client: pipe");
			return 1;
		}
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("lb_client: fork");
			return 1;
		}
		if (pids[i] == 0) {
			char *args[] = {argv[0], "-X",	       s_start,
					"-d",	 s_secs,       "-w",
					s_warm,	 argv[optind], argv[optind + 1],
					NULL};

			close(p[0]);
			if (dup2(p[1], 1) < 0)
				_exit(1);
			close(p[1]);
			execv("/proc/self/exe", args);
			perror("lb_client: exec");
			_exit(1);
		}
		close(p[1]);
		pipes[i] = fdopen(p[0], "r");
		if (!pipes[i]) {
			perror("lb_client: fdopen");
			return 1;
		}
	}
	for (int i = 0; i < procs; i++) {
		char line[128], id[40];
		double us;
		int late, status, k;

		while (fgets(line, sizeof(line), pipes[i])) {
			if (line[0] == 'E') {
				errors++;
				continue;
			}
			if (sscanf(line, "%lf %39s %d", &us, id, &late) != 3)
				continue;
			for (k = 0; k < nids && strcmp(ids[k], id); k++)
				;
			if (k == nids) {
				if (nids == MAX_IDS)
					continue;
				snprintf(ids[nids++], sizeof(ids[0]), "%s", id);
			}
			if (n == cap) {
				cap = cap ? 2 * cap : 16384;
				recs = realloc(recs, cap * sizeof(*recs));
				if (!recs) {
					perror("lb_client: realloc");
					return 1;
				}
			}
			recs[n].lat_us = us;
			recs[n++].id = k;
			counts[k]++;
			in_window += !late;
		}
		fclose(pipes[i]);
		if (waitpid(pids[i], &status, 0) != pids[i] ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed++;
	}
	if (raw) {
		FILE *f = fopen(raw, "w");

		if (!f) {
			perror(raw);
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%.1f %s\n", recs[i].lat_us,
				ids[recs[i].id]);
		if (fclose(f) != 0) {
			perror(raw);
			return 1;
		}
	}
	lat = malloc((n ? n : 1) * sizeof(double));
	if (!lat) {
		perror("lb_client: malloc");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		lat[i] = recs[i].lat_us;
	qsort(lat, n, sizeof(double), bench_cmp_double);
	printf("reqs %zu errors %ld seconds %.3f rate %.1f p50_us %.1f "
	       "p99_us %.1f ids ",
	       n, errors, seconds, in_window / seconds,
	       bench_quantile(lat, n, 0.50), bench_quantile(lat, n, 0.99));
	for (int k = 0; k < nids; k++)
		printf("%s%s:%ld", k ? "," : "", ids[k], counts[k]);
	printf("%s\n", nids ? "" : "-");
	if (failed || n == 0 || errors * 100 > (long)n) {
		fprintf(stderr,
			"lb_client: %d process(es) failed, %ld of %zu "
			"requests to %s:%s failed\n",
			failed, errors, n + errors, argv[optind],
			argv[optind + 1]);
		return 1;
	}
	return 0;
}
