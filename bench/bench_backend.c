/* bench_backend.c - a small HTTP/1.0 backend for the short-connection
 * benchmark: one thread, epoll, non-blocking sockets.
 *
 * For every connection it reads the request (it answers once it has seen
 * the blank line that ends the head), writes one small fixed response and
 * closes, so that TIME_WAIT stays on its side, as with an HTTP/1.0
 * server. It serves until LIFETIME seconds have passed (it stops by
 * itself) or its parent dies, and says "ready" on stdout once listening.
 *
 * Usage: bench_backend [-d LIFETIME] ADDR:PORT
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

#define MAX_EVENTS 64
#define MAX_FDS	   65536

static const char response[] = "HTTP/1.0 200 OK\r\n"
			       "Content-Type: text/plain\r\n"
			       "Content-Length: 3\r\n"
			       "\r\n"
			       "ok\n";

/* Per client fd: the last bytes of its request seen, to find "\r\n\r\n"
 * across reads. */
static unsigned char tail[MAX_FDS][4];

static void die(const char *what)
{
	fprintf(stderr, "bench_backend: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* True once the request on fd is complete (or the peer is gone). */
static int serve_readable(int fd)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		for (ssize_t i = 0; i < n; i++) {
			memmove(tail[fd], tail[fd] + 1, 3);
			tail[fd][3] = (unsigned char)buf[i];
			if (!memcmp(tail[fd], "\r\n\r\n", 4))
				return 1;
		}
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	int opt, lifetime = 600, lfd, ep;
	struct epoll_event ev = {.events = EPOLLIN}, evs[MAX_EVENTS];

	while ((opt = getopt(argc, argv, "d:h")) != -1) {
		if (opt != 'd') {
			fprintf(stderr, "usage: bench_backend [-d LIFETIME] "
					"ADDR:PORT\n");
			return 2;
		}
		lifetime = atoi(optarg);
	}
	if (optind + 1 != argc || bench_parse_addr(argv[optind], &sa) != 0 ||
	    lifetime < 1) {
		fprintf(stderr,
			"usage: bench_backend [-d LIFETIME] ADDR:PORT\n");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	alarm((unsigned)lifetime);
	signal(SIGPIPE, SIG_IGN);

	lfd = bench_listen(&sa, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (lfd < 0)
		die(argv[optind]);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ev.data.fd = lfd;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
		die("epoll");
	printf("ready\n");
	fflush(stdout);

	for (;;) {
		int n = epoll_wait(ep, evs, MAX_EVENTS, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd, rc;

			if (fd == lfd) {
				int c;

				while ((c = accept4(lfd, NULL, NULL,
						    SOCK_NONBLOCK |
							    SOCK_CLOEXEC)) >=
				       0) {
					if (c >= MAX_FDS) {
						close(c);
						continue;
					}
					memset(tail[c], 0, 4);
					ev.data.fd = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c,
						      &ev) != 0)
						close(c);
				}
				continue;
			}
			rc = serve_readable(fd);
			if (rc == 0)
				continue;
			/* Small enough to go out in one write. */
			if (rc > 0 &&
			    write(fd, response, sizeof(response) - 1) < 0)
				rc = -1;
			close(fd); /* also leaves the epoll set */
		}
	}
}
