/* sockopts.c - connect like a program with its own socket options, print
 * the options the library may touch once the connection is established. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

/*
 * Usage:
 *   sockopts [-m block|nonblock|nopeek] [-s SNDTIMEO_MS] [-r RCVTIMEO_MS]
 *            [-u USER_TIMEOUT_MS] [-y SYNCNT] [-k] HOST PORT
 *
 * Resolves HOST (getaddrinfo, SOCK_STREAM) and walks the list: a new
 * socket per address, the options given set before connect(), then
 *   block     a blocking connect();
 *   nonblock  O_NONBLOCK (fcntl F_SETFL), connect(), poll() for POLLOUT,
 *             getsockopt(SO_ERROR);
 *   nopeek    O_NONBLOCK, connect(), poll() for POLLOUT, then at once the
 *             request: no getsockopt() and no second connect() while the
 *             connect is pending; a failed send means the next address.
 * On the connection: an HTTP/1.0 GET, the reply read to its end.
 *
 * Prints, on stdout:
 *   connected: OPTIONS   right after the connect completed (block and
 *                        nonblock only), read with raw system calls
 *   reply: LAST-LINE     the reply's last line (replica_server.py's body)
 *   end: OPTIONS         after the reply, raw system calls
 *   end-libc: OPTIONS    after the reply, through libc (and its hooks),
 *                        with syncnt=N after user_timeout
 * OPTIONS is "user_timeout=MS sndtimeo=S.US rcvtimeo=S.US keepalive=N
 * nonblock=N". The raw reads show what the kernel holds for the
 * established connection, even if a hook were to answer getsockopt()
 * itself. They leave out TCP_SYNCNT: it only counts SYN retransmits, so a
 * value left over from the connect changes nothing once connected, and in
 * nopeek mode no hooked call comes between connect() and these reads
 * that could have restored it; the program's getsockopt() must see its
 * own value. Each failed address is reported on stderr. Exit status 0
 * when a reply came, 1 when no address
 * could be used, 2 on usage errors.
 */

enum mode { MODE_BLOCK, MODE_NONBLOCK, MODE_NOPEEK };

struct settings {
	enum mode mode;
	int sndtimeo_ms;  /* SO_SNDTIMEO to set, or -1 */
	int rcvtimeo_ms;  /* SO_RCVTIMEO to set, or -1 */
	int user_timeout; /* TCP_USER_TIMEOUT to set, or -1 */
	int syncnt;	  /* TCP_SYNCNT to set, or -1 */
	int keepalive;	  /* set SO_KEEPALIVE = 1 */
};

static const char request[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";

static int get_opt(int fd, int raw, int level, int name, void *val,
		   socklen_t len)
{
	if (raw)
		return (int)syscall(SYS_getsockopt, fd, level, name, val, &len);
	return getsockopt(fd, level, name, val, &len);
}

static void print_opts(const char *label, int fd, int raw)
{
	int user_timeout = -1, syncnt = -1, keepalive = -1, flags;
	struct timeval snd = {-1, 0}, rcv = {-1, 0};

	get_opt(fd, raw, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
		sizeof(user_timeout));
	if (!raw)
		get_opt(fd, raw, IPPROTO_TCP, TCP_SYNCNT, &syncnt,
			sizeof(syncnt));
	get_opt(fd, raw, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd));
	get_opt(fd, raw, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
	get_opt(fd, raw, SOL_SOCKET, SO_KEEPALIVE, &keepalive,
		sizeof(keepalive));
	if (raw)
		flags = (int)syscall(SYS_fcntl, fd, F_GETFL);
	else
		flags = fcntl(fd, F_GETFL);
	printf("%s: user_timeout=%d", label, user_timeout);
	if (!raw)
		printf(" syncnt=%d", syncnt);
	printf(" sndtimeo=%ld.%06ld rcvtimeo=%ld.%06ld keepalive=%d "
	       "nonblock=%d\n",
	       (long)snd.tv_sec, (long)snd.tv_usec, (long)rcv.tv_sec,
	       (long)rcv.tv_usec, keepalive,
	       flags < 0 ? -1 : !!(flags & O_NONBLOCK));
	fflush(stdout);
}

static int set_timeo(int fd, int name, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	return setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv));
}

static int set_int(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val));
}

static int apply(int fd, const struct settings *s)
{
	if (s->sndtimeo_ms >= 0 && set_timeo(fd, SO_SNDTIMEO, s->sndtimeo_ms))
		return -1;
	if (s->rcvtimeo_ms >= 0 && set_timeo(fd, SO_RCVTIMEO, s->rcvtimeo_ms))
		return -1;
	if (s->user_timeout >= 0 &&
	    set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, s->user_timeout))
		return -1;
	if (s->syncnt >= 0 && set_int(fd, IPPROTO_TCP, TCP_SYNCNT, s->syncnt))
		return -1;
	if (s->keepalive && set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1))
		return -1;
	if (s->mode != MODE_BLOCK) {
		int flags = fcntl(fd, F_GETFL);

		if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
			return -1;
	}
	return 0;
}

/* Wait (10 s at most) for events on fd; the revents, 0 on timeout. */
static int wait_for(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n;

	do
		n = poll(&p, 1, 10000);
	while (n < 0 && errno == EINTR);
	return n > 0 ? p.revents : 0;
}

/*
 * Connect fd to ai as the mode says. Returns 0 when connected (for
 * nopeek: when the request went out), else an errno value.
 */
static int do_connect(int fd, const struct addrinfo *ai,
		      const struct settings *s)
{
	int err;
	socklen_t len = sizeof(err);

	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
		/* Connected at once (loopback, or connect_failover). */
		if (s->mode == MODE_NOPEEK &&
		    send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
			return errno;
		return 0;
	}
	if (s->mode == MODE_BLOCK || errno != EINPROGRESS)
		return errno;
	if (!wait_for(fd, POLLOUT))
		return ETIMEDOUT;
	if (s->mode == MODE_NOPEEK) {
		if (send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
			return errno;
		return 0;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return errno;
	return err;
}

/* Send the request (unless nopeek sent it), print the reply's last line. */
static int exchange(int fd, const struct settings *s)
{
	char buf[4096], *line;
	size_t used = 0;
	ssize_t n;

	if (s->mode != MODE_NOPEEK &&
	    send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
		return -1;
	for (;;) {
		if (s->mode != MODE_BLOCK && !wait_for(fd, POLLIN))
			return -1;
		n = recv(fd, buf + used, sizeof(buf) - 1 - used, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -1;
		if (n == 0 || used + (size_t)n >= sizeof(buf) - 1) {
			used += (size_t)n;
			break;
		}
		used += (size_t)n;
	}
	buf[used] = '\0';
	while (used > 0 && (buf[used - 1] == '\n' || buf[used - 1] == '\r'))
		buf[--used] = '\0';
	line = strrchr(buf, '\n');
	printf("reply: %s\n", line ? line + 1 : buf);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: sockopts [-m block|nonblock|nopeek] "
			"[-s MS] [-r MS] [-u MS] [-y N] [-k] HOST PORT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct settings s = {MODE_BLOCK, -1, -1, -1, -1, 0};
	struct addrinfo hints = {0}, *res, *ai;
	char host[64];
	int c, fd = -1, rc, err;

	while ((c = getopt(argc, argv, "m:s:r:u:y:k")) != -1) {
		switch (c) {
		case 'm':
			if (!strcmp(optarg, "block"))
				s.mode = MODE_BLOCK;
			else if (!strcmp(optarg, "nonblock"))
				s.mode = MODE_NONBLOCK;
			else if (!strcmp(optarg, "nopeek"))
				s.mode = MODE_NOPEEK;
			else
				usage();
			break;
		case 's':
			s.sndtimeo_ms = atoi(optarg);
			break;
		case 'r':
			s.rcvtimeo_ms = atoi(optarg);
			break;
		case 'u':
			s.user_timeout = atoi(optarg);
			break;
		case 'y':
			s.syncnt = atoi(optarg);
			break;
		case 'k':
			s.keepalive = 1;
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2)
		usage();

	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(argv[optind], argv[optind + 1], &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "getaddrinfo: %s\n", gai_strerror(rc));
		return 1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host),
			    NULL, 0, NI_NUMERICHOST);
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0 || apply(fd, &s) < 0) {
			fprintf(stderr, "%s: setup: %s\n", host,
				strerror(errno));
			return 1;
		}
		err = do_connect(fd, ai, &s);
		if (err == 0)
			break;
		fprintf(stderr, "%s: %s\n", host, strerror(err));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return 1;

	if (s.mode != MODE_NOPEEK)
		print_opts("connected", fd, 1);
	if (exchange(fd, &s) < 0) {
		fprintf(stderr, "exchange: %s\n", strerror(errno));
		return 1;
	}
	print_opts("end", fd, 1);
	print_opts("end-libc", fd, 0);
	close(fd);
	return 0;
}
