/* test_track.c - failed connects counted against the replica whose
 * address was handed out, exactly as design.md §5 lists, and nothing else. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "preload/preload.h"
#include "preload/track_internal.h" /* rlb_addr_replaced() */
#include "clock.h"

#define TIMEOUT_MS 150

static char tmpdir[] = "/tmp/rlb-test-track-XXXXXX";
static int port_closed, port_full, port_ok, port_other;
static int listen_full = -1, listen_ok = -1;
static int bound_closed = -1, bound_other = -1;
static int fillers[4] = {-1, -1, -1, -1};
/* h.cluster, hedged: its own silent and good listeners. */
static int hport_full, hport_ok, hlisten_full = -1, hlisten_ok = -1;
static int hfillers[4] = {-1, -1, -1, -1};
static struct rlb_snapshot *snap;
static struct rlb_cluster *cluster, *hcluster;

enum { R_REFUSER, R_BLACKHOLE, R_GOOD };

static int bound_socket(int *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (void *)&sin, sizeof(sin)) != 0 ||
	    getsockname(fd, (void *)&sin, &len) != 0)
		return -1;
	*port = ntohs(sin.sin_port);
	return fd;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	return sin;
}

/* A listener whose accept queue is full: further SYNs are dropped, so
 * a connect to it stays pending. */
static int fill_backlog_of(int port, int *fill)
{
	struct sockaddr_in sin = loopback(port);

	for (int i = 0; i < 4; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fill[i] < 0)
			return -1;
		connect(fill[i], (void *)&sin, sizeof(sin));
	}
	usleep(50000);
	return 0;
}

static int fill_backlog(void)
{
	return fill_backlog_of(port_full, fillers);
}

static int setup(void **state)
{
	char path[256], text[2048];
	FILE *f;

	if (!mkdtemp(tmpdir))
		return -1;
	/* Bound and never listening: connects are refused, and the ports
	 * stay ours (closed at once, two could come back as one). */
	bound_closed = bound_socket(&port_closed);
	bound_other = bound_socket(&port_other);
	if (bound_closed < 0 || bound_other < 0)
		return -1;
	listen_full = bound_socket(&port_full);
	listen_ok = bound_socket(&port_ok);
	if (listen_full < 0 || listen_ok < 0 || listen(listen_full, 0) ||
	    listen(listen_ok, 16) || fill_backlog())
		return -1;
	hlisten_full = bound_socket(&hport_full);
	hlisten_ok = bound_socket(&hport_ok);
	if (hlisten_full < 0 || hlisten_ok < 0 || listen(hlisten_full, 0) ||
	    listen(hlisten_ok, 16) || fill_backlog_of(hport_full, hfillers))
		return -1;
	snprintf(
		text, sizeof(text),
		"connect_timeout_ms = %d;\n"
		/* The bounded engine, unhedged (design.md §5.3, §11);
		 * hedged connects: tests/integration/hedged*.sh. */
		"use_hedged_requests = false;\n"
		"distributed_replica_error_half_life = 100000;\n"
		"clusters = ( { name = \"t.cluster\"; load_balancing = "
		"\"in_order\"; replicas = (\n"
		" { host = \"refuser\"; address = \"127.0.0.1\"; port = %d; "
		"},\n"
		" { host = \"blackhole\"; address = \"127.0.0.1\"; port = %d; "
		"},\n"
		" { host = \"good\"; address = \"127.0.0.1\"; port = %d; } ); "
		"},\n"
		/* Hedged (design.md §5.10): a silent first replica. */
		" { name = \"h.cluster\"; load_balancing = \"in_order\";\n"
		"   use_hedged_requests = true; connect_timeout_ms = 2000;\n"
		"   hedged_connection_timeout_ms = 30; replicas = (\n"
		" { host = \"hsilent\"; address = \"127.0.0.1\"; port = %d; "
		"},\n"
		" { host = \"hgood\"; address = \"127.0.0.1\"; port = %d; } ); "
		"} );\n",
		TIMEOUT_MS, port_closed, port_full, port_ok, hport_full,
		hport_ok);
	snprintf(path, sizeof(path), "%s/replicalb.conf", tmpdir);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		return -1;
	setenv("REPLICALB_CONFIG", path, 1);
	setenv("REPLICALB_STATE_DIR", tmpdir, 1);
	snap = rlb_session_acquire();
	if (!snap)
		return -1;
	cluster = rlb_config_find(snap->cfg, "t.cluster");
	hcluster = rlb_config_find(snap->cfg, "h.cluster");
	return cluster && hcluster ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	for (int i = 0; i < 4; i++) {
		if (fillers[i] >= 0)
			close(fillers[i]);
		if (hfillers[i] >= 0)
			close(hfillers[i]);
	}
	close(hlisten_full);
	close(hlisten_ok);
	close(listen_full);
	close(listen_ok);
	close(bound_closed);
	close(bound_other);
	rlb_session_release(snap);
	/* Segments outlive the directory that names them. */
	rlb_health_remove_state(&(struct rlb_config){.state_dir = tmpdir}, true,
				NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Hand out the cluster's addresses, as a getaddrinfo of it would. */
static int handout(void **state)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;

	rlb_health_reset(cluster, SIZE_MAX);
	if (rlb_resolve_getaddrinfo(cluster, NULL, &hints, &res) != 0)
		return -1;
	rlb_libc()->freeaddrinfo(res);
	return rlb_track_active() ? 0 : -1;
}

static uint64_t errors(int replica)
{
	return rlb_health_errors(cluster, replica, 0, false);
}

static int tcp_socket(bool nonblocking)
{
	return socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0),
		      0);
}

static int track_connect(int fd, int port)
{
	struct sockaddr_in sin = loopback(port);

	return rlb_track_connect(fd, (void *)&sin, sizeof(sin));
}

static void test_track_blocking_refused_counts(void **state)
{
	int fd = tcp_socket(false);

	assert_int_equal(track_connect(fd, port_closed), -1);
	assert_int_equal(errno, ECONNREFUSED);
	assert_int_equal(errors(R_REFUSER), 1);
	errno = EBADMSG;
	assert_int_equal(rlb_track_close(fd), 0);
	assert_int_equal(errno, EBADMSG);
	assert_int_equal(errors(R_REFUSER), 1);
	assert_int_equal(errors(R_GOOD), 0);
}

static void test_track_other_address_not_counted(void **state)
{
	int fd = tcp_socket(false);

	assert_int_equal(track_connect(fd, port_other), -1);
	assert_int_equal(errno, ECONNREFUSED);
	rlb_track_close(fd);
	for (int r = 0; r < 3; r++)
		assert_int_equal(errors(r), 0);
}

/*
 * The pass-through's shortcuts decide nothing on their own: an address
 * whose bit in the IPv4 summary a replica set (127.0.1.1 shares
 * 127.0.0.1's last 14 bits) is not counted, and a replica's address in
 * the last bytes of a page (the careful way) is.
 */
static void test_track_shortcuts_are_exact(void **state)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct sockaddr_in sin = loopback(port_closed), *edge;
	int fd;

	assert_true(mem != MAP_FAILED);
	/* The page after is gone: nothing past the sockaddr is readable. */
	assert_int_equal(munmap(mem + page, page), 0);
	sin.sin_addr.s_addr = htonl(0x7f000101); /* 127.0.1.1 */
	assert_true(rlb_addr_filter4_has(sin.sin_addr.s_addr));
	fd = tcp_socket(false);
	rlb_track_connect(fd, (void *)&sin, sizeof(sin));
	rlb_track_close(fd);
	assert_int_equal(errors(R_REFUSER), 0);
	edge = (struct sockaddr_in *)(mem + page - sizeof(*edge));
	*edge = loopback(port_closed);
	fd = tcp_socket(false);
	assert_int_equal(rlb_track_connect(fd, (void *)edge, sizeof(*edge)),
			 -1);
	assert_int_equal(errno, ECONNREFUSED);
	rlb_track_close(fd);
	assert_int_equal(errors(R_REFUSER), 1);
	munmap(mem, page);
}

static void test_track_success_not_counted(void **state)
{
	int fd = tcp_socket(false);
	int afd;

	assert_int_equal(track_connect(fd, port_ok), 0);
	afd = accept(listen_ok, NULL, NULL);
	assert_true(afd >= 0);
	close(afd);
	assert_int_equal(rlb_track_close(fd), 0);
	assert_int_equal(errors(R_GOOD), 0);
}

/* Wait until fd is writable or failed (bounded). */
static void wait_writable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	assert_int_equal(poll(&p, 1, 2000), 1);
}

static void test_track_nonblocking_refused_counts_once(void **state)
{
	int fd = tcp_socket(true), err = 0, rc;
	socklen_t len = sizeof(err);

	rc = track_connect(fd, port_closed);
	if (rc == -1 && errno == EINPROGRESS) {
		wait_writable(fd);
		assert_int_equal(errors(R_REFUSER), 0);
		assert_int_equal(rlb_track_getsockopt(fd, SOL_SOCKET, SO_ERROR,
						      &err, &len),
				 0);
		assert_int_equal(err, ECONNREFUSED);
	} else {
		assert_int_equal(errno, ECONNREFUSED);
	}
	assert_int_equal(errors(R_REFUSER), 1);
	rlb_track_close(fd);
	assert_int_equal(errors(R_REFUSER), 1);
}

static void test_track_nonblocking_refused_seen_at_close(void **state)
{
	int fd = tcp_socket(true);

	if (track_connect(fd, port_closed) == -1 && errno == EINPROGRESS)
		wait_writable(fd);
	/* The program never asked SO_ERROR; close still finds it. */
	rlb_track_close(fd);
	assert_int_equal(errors(R_REFUSER), 1);
}

/*
 * A close of one descriptor of a refused socket leaves SO_ERROR to the
 * program's other descriptor, as without the library: the close hook
 * looks at the error without reading it. The refusal counts once.
 */
static void test_track_close_leaves_so_error_to_dup(void **state)
{
	int fd = tcp_socket(true), fd2, err = 0;
	socklen_t len = sizeof(err);

	assert_int_equal(track_connect(fd, port_closed), -1);
	assert_int_equal(errno, EINPROGRESS);
	wait_writable(fd);
	fd2 = dup(fd);
	assert_true(fd2 >= 0);
	assert_int_equal(rlb_track_close(fd), 0);
	assert_int_equal(errors(R_REFUSER), 1);
	assert_int_equal(
		rlb_track_getsockopt(fd2, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	assert_int_equal(err, ECONNREFUSED);
	assert_int_equal(rlb_track_close(fd2), 0);
	assert_int_equal(errors(R_REFUSER), 1);
}

static void test_track_pending_closed_early_not_counted(void **state)
{
	int fd = tcp_socket(true), err = -1;
	socklen_t len = sizeof(err);

	assert_int_equal(track_connect(fd, port_full), -1);
	assert_int_equal(errno, EINPROGRESS);
	/* Still pending: SO_ERROR 0 changes nothing; a repeated connect
	 * says EALREADY, which does not count either. */
	assert_int_equal(
		rlb_track_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	assert_int_equal(err, 0);
	assert_int_equal(track_connect(fd, port_full), -1);
	assert_int_equal(errno, EALREADY);
	/* A happy-eyeballs loser, abandoned quickly. */
	rlb_track_close(fd);
	assert_int_equal(errors(R_BLACKHOLE), 0);
}

static void test_track_pending_abandoned_late_counts(void **state)
{
	int fd = tcp_socket(true);

	assert_int_equal(track_connect(fd, port_full), -1);
	assert_int_equal(errno, EINPROGRESS);
	test_clock_advance(TIMEOUT_MS + 50);
	rlb_track_close(fd);
	assert_int_equal(errors(R_BLACKHOLE), 1);
}

/*
 * The sweep of another thread looking at an attempt just as its connect()
 * starts: the entry is set before the call (design.md §11.2), so the
 * sweep may find the socket unconnected (TCP_CLOSE) and, a moment later,
 * connecting. Here the connect is made from inside the sweep's first
 * look at TCP_INFO, so a second look would see SYN_SENT, take the
 * attempt for one that connected unseen, and the attempt would count
 * nothing. Judged on one look, it stays pending and counts its timeout.
 */
static int (*real_getsockopt)(int, int, int, void *, socklen_t *);
static int race_fd = -1;

static int getsockopt_connects(int fd, int level, int name, void *val,
			       socklen_t *len)
{
	int rc = real_getsockopt(fd, level, name, val, len);

	if (fd == race_fd && level == IPPROTO_TCP && name == TCP_INFO) {
		struct sockaddr_in sin = loopback(port_full);

		race_fd = -1;
		rlb_libc()->connect(fd, (void *)&sin, sizeof(sin));
	}
	return rc;
}

static void test_track_sweep_during_connect_keeps_attempt(void **state)
{
	struct sockaddr_in sin = loopback(port_full);
	struct pending_connect p = {.timeout_ms = TIMEOUT_MS};
	int fd = tcp_socket(true);
	struct fd_slot *s;

	assert_true(rlb_addr_to_dest((void *)&sin, sizeof(sin), &p.d));
	p.ino = rlb_pending_ino(fd);
	p.start_ms = rlb_monotonic_ms();
	rlb_pending_set(fd, &p);
	real_getsockopt = rlb_libc()->getsockopt;
	rlb_libc()->getsockopt = getsockopt_connects;
	race_fd = fd;
	rlb_track_sweep();
	rlb_libc()->getsockopt = real_getsockopt;
	assert_int_equal(race_fd, -1); /* the connect was made */
	s = rlb_pending_slot(fd);
	assert_non_null(s);
	assert_int_not_equal(atomic_load(&s->pending), 0);
	test_clock_advance(TIMEOUT_MS + 50);
	rlb_track_close(fd);
	assert_int_equal(errors(R_BLACKHOLE), 1);
}

/*
 * Threads connecting at once: a sweep leaves alone the attempt another
 * thread is still inside connect() for, without a system call on its
 * socket (issue 21), and looks at it again once it is IN_CALL_GRACE_MS
 * past its bound (a longjmp out of the call, a thread cancelled in it):
 * closed behind our back meanwhile, it counts its timeout then.
 */
static int statx_calls;
static int (*real_statx)(int, const char *, int, unsigned, struct statx *);

static int statx_counts(int fd, const char *path, int flags, unsigned mask,
			struct statx *st)
{
	statx_calls++;
	return real_statx(fd, path, flags, mask, st);
}

static void test_track_sweep_leaves_attempt_in_call(void **state)
{
	struct sockaddr_in sin = loopback(port_full);
	struct pending_connect p = {.timeout_ms = TIMEOUT_MS, .in_call = 1};
	int fd = tcp_socket(true);
	struct fd_slot *s = rlb_pending_slot(fd);

	assert_non_null(s);
	assert_true(rlb_addr_to_dest((void *)&sin, sizeof(sin), &p.d));
	p.ino = rlb_pending_ino(fd);
	p.start_ms = rlb_monotonic_ms();
	rlb_pending_set(fd, &p);
	assert_int_equal(rlb_libc()->connect(fd, (void *)&sin, sizeof(sin)),
			 -1);
	real_statx = rlb_libc()->statx;
	rlb_libc()->statx = statx_counts;
	statx_calls = 0;
	rlb_track_sweep();
	assert_int_equal(statx_calls, 0);
	assert_int_not_equal(atomic_load(&s->pending), 0);
	/* Its thread longjmp()s out and the socket goes by a raw close. */
	syscall(SYS_close, fd);
	test_clock_advance(TIMEOUT_MS + IN_CALL_GRACE_MS - 50);
	rlb_track_sweep();
	assert_int_equal(statx_calls, 0);
	assert_int_equal(errors(R_BLACKHOLE), 0);
	test_clock_advance(100);
	rlb_track_sweep();
	rlb_libc()->statx = real_statx;
	assert_int_equal(statx_calls, 1);
	assert_int_equal(atomic_load(&s->pending), 0);
	assert_int_equal(errors(R_BLACKHOLE), 1);
}

/* A non-blocking connect returns with its attempt under way: from then on
 * the program waits by itself, and the sweep looks at it. */
static void test_track_nonblocking_attempt_left_to_sweep(void **state)
{
	int fd = tcp_socket(true);
	struct fd_slot *s = rlb_pending_slot(fd);
	struct pending_connect p;

	assert_int_equal(track_connect(fd, port_full), -1);
	assert_int_equal(errno, EINPROGRESS);
	assert_non_null(s);
	assert_int_not_equal(atomic_load(&s->pending), 0);
	rlb_pending_load(s, &p);
	assert_int_equal(p.in_call, 0);
	assert_true(p.ino != 0);
	rlb_track_close(fd);
}

static void test_track_blocking_sndtimeo_counts(void **state)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
	int fd = tcp_socket(false);

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	assert_int_equal(track_connect(fd, port_full), -1);
	assert_int_equal(errno, EINPROGRESS);
	assert_int_equal(errors(R_BLACKHOLE), 1);
	rlb_track_close(fd);
	assert_int_equal(errors(R_BLACKHOLE), 1);
}

static void test_track_v4_mapped_counts_as_v4(void **state)
{
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sin6.sin6_port = htons(port_closed);
	assert_int_equal(
		inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6.sin6_addr), 1);
	assert_int_equal(rlb_track_connect(fd, (void *)&sin6, sizeof(sin6)),
			 -1);
	assert_int_equal(errno, ECONNREFUSED);
	assert_int_equal(errors(R_REFUSER), 1);
	rlb_track_close(fd);
}

static void test_track_counted_errnos(void **state)
{
	assert_true(rlb_errno_counts(ECONNREFUSED));
	assert_true(rlb_errno_counts(ETIMEDOUT));
	assert_true(rlb_errno_counts(EHOSTUNREACH));
	assert_true(rlb_errno_counts(ENETUNREACH));
	assert_true(rlb_errno_counts(EHOSTDOWN));
	assert_true(rlb_errno_counts(ENETDOWN));
	assert_true(rlb_errno_counts(ECONNRESET));
	assert_false(rlb_errno_counts(EINTR));
	assert_false(rlb_errno_counts(EALREADY));
	assert_false(rlb_errno_counts(EINPROGRESS));
	assert_false(rlb_errno_counts(EADDRNOTAVAIL));
	assert_false(rlb_errno_counts(EACCES));
}

static void test_track_reused_fd_not_blamed(void **state)
{
	int fd = tcp_socket(true), fd2;

	assert_int_equal(track_connect(fd, port_full), -1);
	/* Closed behind our back (say by close_range), number reused. */
	rlb_libc()->close(fd);
	fd2 = tcp_socket(false);
	assert_int_equal(fd2, fd);
	test_clock_advance(TIMEOUT_MS + 50);
	rlb_track_close(fd2);
	assert_int_equal(errors(R_BLACKHOLE), 0);
}

static uint64_t slowdowns(int replica)
{
	return rlb_health_slowdowns(cluster, replica, 0, false);
}

/* Accept and close whatever earlier tests left queued on listen_ok. */
static void drain_ok(void)
{
	struct pollfd p = {.fd = listen_ok, .events = POLLIN};

	while (poll(&p, 1, 0) == 1) {
		int c = accept(listen_ok, NULL, NULL);

		if (c < 0)
			break;
		close(c);
	}
}

/*
 * Attempts in parallel (a pool warming up) are not slowdowns: one still
 * pending while another replica connects counts nothing. Given up young
 * after that replica won, it was slow: one slowdown.
 */
static void test_track_parallel_attempts_not_slow(void **state)
{
	int a = tcp_socket(true), b = tcp_socket(false);

	assert_int_equal(track_connect(a, port_full), -1);
	assert_int_equal(errno, EINPROGRESS);
	assert_int_equal(track_connect(b, port_ok), 0);
	rlb_track_sweep();
	assert_int_equal(slowdowns(R_BLACKHOLE), 0);
	assert_int_equal(slowdowns(R_GOOD), 0);
	rlb_track_close(a);
	assert_int_equal(slowdowns(R_BLACKHOLE), 1);
	assert_int_equal(errors(R_BLACKHOLE), 0);
	assert_int_equal(slowdowns(R_GOOD), 0);
	rlb_track_close(b);
	drain_ok();
}

/*
 * An established connection reset by the server, its pending error never
 * read, counts nothing at close: only a connect that did not establish
 * counts.
 */
static void test_track_established_reset_not_counted(void **state)
{
	struct linger hard = {.l_onoff = 1, .l_linger = 0};
	struct pollfd p;
	int fd = tcp_socket(true), c;

	drain_ok();
	track_connect(fd, port_ok);
	p = (struct pollfd){.fd = fd, .events = POLLOUT};
	assert_int_equal(poll(&p, 1, 1000), 1);
	c = accept(listen_ok, NULL, NULL);
	assert_true(c >= 0);
	setsockopt(c, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
	close(c);
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 1000), 1);
	assert_true(p.revents & POLLERR); /* the reset, unread */
	rlb_track_close(fd);
	assert_int_equal(errors(R_GOOD), 0);
}

/*
 * A non-blocking attempt asked about again once the socket is blocking
 * (or after EINTR) waits for what is left of its bound and is then given
 * up with ETIMEDOUT, counted once - never EALREADY at the bound.
 */
/*
 * A bounded blocking connect leaves the program's SO_SNDTIMEO as it was,
 * whatever the bound: the kernel keeps the lowered value in its ticks
 * (1234 ms reads back as 1236 at HZ=250), and a restore that compared
 * against the value set left the lowered one on the socket (and a
 * second signal in one connect then passed for the program's own
 * SO_SNDTIMEO: EINTR under SA_RESTART).
 */
static void test_track_blocking_bound_restores_sndtimeo(void **state)
{
	for (int round = 0; round < 4; round++) {
		int fd = tcp_socket(false);
		struct timeval tv = {1, 1}; /* marks it as not ours */
		socklen_t len = sizeof(tv);

		assert_int_equal(track_connect(fd, port_full), -1);
		assert_int_equal(errno, ETIMEDOUT);
		assert_int_equal(
			getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len), 0);
		assert_int_equal(tv.tv_sec, 0);
		assert_int_equal(tv.tv_usec, 0);
		rlb_track_close(fd);
		/* Another bound left over each round: 150 ms - a few. */
		usleep(1000);
	}
}

static void test_track_repeat_blocking_times_out(void **state)
{
	int fd = tcp_socket(true), err = -1;
	socklen_t len = sizeof(err);
	int64_t t0 = rlb_monotonic_ms();

	assert_int_equal(track_connect(fd, port_full), -1);
	assert_int_equal(errno, EINPROGRESS);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	assert_int_equal(track_connect(fd, port_full), -1);
	assert_int_equal(errno, ETIMEDOUT);
	assert_true(rlb_monotonic_ms() - t0 >= TIMEOUT_MS - 10);
	assert_int_equal(errors(R_BLACKHOLE), 1);
	/* Given up: the socket holds no leftover error, nothing counts at
	 * close. */
	assert_int_equal(
		rlb_track_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	assert_int_equal(err, 0);
	rlb_track_close(fd);
	assert_int_equal(errors(R_BLACKHOLE), 1);
}

/*
 * Replica churn: a long-lived process handed out far more addresses than
 * the table holds, over time, still attributes a failure to an address
 * handed out last. Each round hands out 6,000 addresses never used
 * again (127.200.x.y, nothing connects to them), a second apart: 60,000
 * in all, more than three tables' worth.
 */
/*
 * Fill the table of handed-out addresses again and again (60,000 other
 * addresses from base, ten seconds): it is replaced at least three times.
 */
static void churn_tables(uint32_t base)
{
	for (int round = 0; round < 10; round++) {
		for (int k = 0; k < 6000; k++) {
			struct sockaddr_in fake = {.sin_family = AF_INET};

			fake.sin_addr.s_addr =
				htonl(base | (uint32_t)(round << 14 | k));
			fake.sin_port = htons(9);
			rlb_track_handout(cluster, R_GOOD, (void *)&fake,
					  sizeof(fake));
		}
		test_clock_advance(1100);
	}
}

static void test_track_table_lives_with_churn(void **state)
{
	unsigned before = rlb_addr_replaced();
	struct sockaddr_in sin = loopback(port_closed);
	int fd;

	churn_tables(0x7fc80000u);
	assert_true(rlb_addr_replaced() - before >= 3);
	/* A new address of the refusing replica, handed out now. */
	sin.sin_addr.s_addr = htonl(0x7f000009);
	rlb_track_handout(cluster, R_REFUSER, (void *)&sin, sizeof(sin));
	fd = tcp_socket(false);
	assert_int_equal(rlb_track_connect(fd, (void *)&sin, sizeof(sin)), -1);
	assert_int_equal(errno, ECONNREFUSED);
	rlb_track_close(fd);
	assert_int_equal(errors(R_REFUSER), 1);
}

/*
 * A literal handed out again after its table was replaced is tracked in
 * the new one: a replacement makes the next handout look again (its
 * stamp is of an older generation), though the replica's literal and
 * port are the same as the last time.
 */
static void test_track_literal_handed_out_again_after_replacement(void **state)
{
	unsigned before = rlb_addr_replaced();
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	int fd;

	churn_tables(0x7fc90000u);
	assert_true(rlb_addr_replaced() - before >= 3);
	/* The literals as the first time (handout() did it). */
	assert_int_equal(rlb_resolve_getaddrinfo(cluster, NULL, &hints, &res),
			 0);
	rlb_libc()->freeaddrinfo(res);
	fd = tcp_socket(false);
	assert_int_equal(track_connect(fd, port_closed), -1);
	assert_int_equal(errno, ECONNREFUSED);
	rlb_track_close(fd);
	assert_int_equal(errors(R_REFUSER), 1);
}

/* Hand out h.cluster's addresses, its health zeroed. */
static int handout_hedged(void **state)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;

	rlb_health_reset(hcluster, SIZE_MAX);
	if (rlb_resolve_getaddrinfo(hcluster, NULL, &hints, &res) != 0)
		return -1;
	rlb_libc()->freeaddrinfo(res);
	return 0;
}

/* The port fd is connected to. */
static int peer_port(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (getpeername(fd, (void *)&sin, &len) != 0)
		return -1;
	return ntohs(sin.sin_port);
}

/*
 * A connect to a silent first replica is hedged after 30 ms: the program
 * gets the good replica's connection on its own descriptor, with its
 * options and flags; the silent one counts one slowdown, no error; the
 * good one is accepted once (blocking and non-blocking sockets).
 */
static void hedged_case(bool nonblocking)
{
	int fd = tcp_socket(nonblocking), one = 1, got = 0, a;
	socklen_t len = sizeof(got);
	int64_t t0 = rlb_monotonic_ms();

	assert_int_equal(
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
	assert_int_equal(track_connect(fd, hport_full), 0);
	assert_true(rlb_monotonic_ms() - t0 < 1000);
	assert_int_equal(peer_port(fd), hport_ok);
	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &got, &len),
			 0);
	assert_int_equal(got, 1);
	assert_int_equal(!!(fcntl(fd, F_GETFL) & O_NONBLOCK), nonblocking);
	assert_int_equal(rlb_health_slowdowns(hcluster, 0, 0, false), 1);
	assert_int_equal(rlb_health_errors(hcluster, 0, 0, false), 0);
	assert_int_equal(rlb_health_errors(hcluster, 1, 0, false), 0);
	a = accept(hlisten_ok, NULL, NULL);
	assert_true(a >= 0);
	close(a);
	assert_int_equal(rlb_track_close(fd), 0);
}

static void test_track_hedged_blocking(void **state)
{
	hedged_case(false);
	(void)state;
}

static void test_track_hedged_nonblocking(void **state)
{
	hedged_case(true);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_track_blocking_refused_counts,
				       handout),
		cmocka_unit_test_setup(test_track_other_address_not_counted,
				       handout),
		cmocka_unit_test_setup(test_track_success_not_counted, handout),
		cmocka_unit_test_setup(test_track_shortcuts_are_exact, handout),
		cmocka_unit_test_setup(
			test_track_nonblocking_refused_counts_once, handout),
		cmocka_unit_test_setup(
			test_track_nonblocking_refused_seen_at_close, handout),
		cmocka_unit_test_setup(test_track_close_leaves_so_error_to_dup,
				       handout),
		cmocka_unit_test_setup(
			test_track_pending_closed_early_not_counted, handout),
		cmocka_unit_test_setup(test_track_pending_abandoned_late_counts,
				       handout),
		cmocka_unit_test_setup(
			test_track_sweep_during_connect_keeps_attempt, handout),
		cmocka_unit_test_setup(test_track_sweep_leaves_attempt_in_call,
				       handout),
		cmocka_unit_test_setup(
			test_track_nonblocking_attempt_left_to_sweep, handout),
		cmocka_unit_test_setup(test_track_blocking_sndtimeo_counts,
				       handout),
		cmocka_unit_test_setup(test_track_v4_mapped_counts_as_v4,
				       handout),
		cmocka_unit_test(test_track_counted_errnos),
		cmocka_unit_test_setup(test_track_reused_fd_not_blamed,
				       handout),
		cmocka_unit_test_setup(test_track_parallel_attempts_not_slow,
				       handout),
		cmocka_unit_test_setup(test_track_established_reset_not_counted,
				       handout),
		cmocka_unit_test_setup(test_track_repeat_blocking_times_out,
				       handout),
		cmocka_unit_test_setup(
			test_track_blocking_bound_restores_sndtimeo, handout),
		cmocka_unit_test_setup(test_track_table_lives_with_churn,
				       handout),
		cmocka_unit_test_setup(
			test_track_literal_handed_out_again_after_replacement,
			handout),
		cmocka_unit_test_setup(test_track_hedged_blocking,
				       handout_hedged),
		cmocka_unit_test_setup(test_track_hedged_nonblocking,
				       handout_hedged),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
