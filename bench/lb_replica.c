/* lb_replica.c - a replica for the load-balancing benchmark: it serves at
 * most K requests at once, each taking S ms.
 *
 * K worker threads each accept one connection, read the request (up to
 * the blank line that ends an HTTP/1.0 head), sleep S ms (the service
 * time), write a small reply that names the replica and close, so that
 * TIME_WAIT stays on the server's side. Connections beyond K wait in the
 * listen queue, already established: a client (and HAProxy, and the
 * library) sees them connected, as with a real server whose workers are
 * all busy. A slow replica is one with a smaller K, or a larger S.
 *
 * The reply's body is ID and a newline, so that a client behind a proxy
 * can tell which replica answered.
 *
 * It serves until LIFETIME seconds have passed (it stops by itself) or
 * its parent dies, and says "ready" on stdout once listening.
 *
 * Usage: lb_replica [-d LIFETIME] -k K -s MS -i ID ADDR:PORT
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

#define MAX_WORKERS 256

static int lfd = -1;
static long service_us;
static char reply[160];
static size_t reply_len;

static void die(const char *what)
{
	fprintf(stderr, "lb_replica: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Read the request head; 0 once "\r\n\r\n" was seen, -1 otherwise. The
 * peer gets 5 s to send it. */
static int read_request(int fd)
{
	unsigned char tail[4] = {0};
	char buf[1024];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 5000) <= 0)
			return -1;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			return -1;
		for (ssize_t i = 0; i < n; i++) {
			memmove(tail, tail + 1, 3);
			tail[3] = (unsigned char)buf[i];
			if (!memcmp(tail, "\r\n\r\n", 4))
				return 0;
		}
	}
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE)
				continue;
			die("accept");
		}
		if (read_request(fd) == 0) {
			struct timespec ts = {service_us / 1000000,
					      service_us % 1000000 * 1000};

			while (service_us > 0 && nanosleep(&ts, &ts) != 0 &&
			       errno == EINTR)
				;
			if (write(fd, reply, reply_len) < 0) {
				/* The client went away: nothing to do. */
			}
		}
		close(fd);
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: lb_replica [-d LIFETIME] -k K -s MS -i ID "
			"ADDR:PORT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	int opt, lifetime = 600, workers = 0;
	double ms = -1;
	const char *id = NULL;
	pthread_t tid;
	int body;

	while ((opt = getopt(argc, argv, "d:k:s:i:h")) != -1) {
		switch (opt) {
		case 'd':
			lifetime = atoi(optarg);
			break;
		case 'k':
			workers = atoi(optarg);
			break;
		case 's':
			ms = atof(optarg);
			break;
		case 'i':
			id = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind + 1 != argc || bench_parse_addr(argv[optind], &sa) != 0 ||
	    lifetime < 1 || workers < 1 || workers > MAX_WORKERS || ms < 0 ||
	    !id || strlen(id) > 32)
		usage();
	service_us = (long)(ms * 1000 + 0.5);
	body = (int)strlen(id) + 1;
	reply_len = (size_t)snprintf(reply, sizeof(reply),
				     "HTTP/1.0 200 OK\r\n"
				     "Content-Type: text/plain\r\n"
				     "Content-Length: %d\r\n"
				     "\r\n"
				     "%s\n",
				     body, id);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	alarm((unsigned)lifetime);
	signal(SIGPIPE, SIG_IGN);

	lfd = bench_listen(&sa, SOCK_CLOEXEC);
	if (lfd < 0)
		die(argv[optind]);
	for (int i = 0; i < workers; i++)
		if (pthread_create(&tid, NULL, worker, NULL) != 0)
			die("pthread_create");
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
