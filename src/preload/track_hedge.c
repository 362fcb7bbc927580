/* track_hedge.c - hedged connects (design.md §5.10), as ClickHouse's
 * hedged requests: a connect to a replica that has not connected within
 * hedged_connection_timeout_ms races the next replica of the selection on
 * a socket of ours made like the program's; the first to connect becomes
 * the program's descriptor (dup3), the one hedged away from counts a
 * slowdown, a failed attempt an error, and the losers go without a FIN.
 * Only while the program is inside connect(), and only for a socket
 * nothing else refers to: no other descriptor of it, no epoll set, no
 * local port bound, nothing set on it that cannot be copied. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload/track_internal.h"

#define HEDGE_MAX 3 /* attempts one connect races, the program's included */

/* ------------------------------------------------------------------ */
/* Whether a socket may be hedged */

/* Whether the text at p, after "tfd:" and blanks, is the number fd. */
static bool tfd_is(const char *p, int fd)
{
	long v;
	char *end;

	while (*p == ' ' || *p == '\t')
		p++;
	v = strtol(p, &end, 10);
	return end != p && v == fd;
}

/* Whether epoll instance epfd has fd in its set: its fdinfo lists it. */
static bool epoll_has(int epfd, int fd)
{
	char path[64], buf[4096];
	bool found = false;
	ssize_t got;
	size_t have = 0;
	int f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	f = rlb_libc()->open(path, O_RDONLY | O_CLOEXEC, 0);
	if (f < 0)
		return true; /* cannot tell: in doubt, it is */
	while (!found && (got = rlb_libc()->read(f, buf + have,
						 sizeof(buf) - 1 - have)) > 0) {
		char *line, *nl;

		have += (size_t)got;
		buf[have] = '\0';
		line = buf;
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			if (strncmp(line, "tfd:", 4) == 0 &&
			    tfd_is(line + 4, fd))
				found = true;
			line = nl + 1;
		}
		/* Keep the part line of the buffer for the next read. */
		have = strlen(line);
		memmove(buf, line, have);
	}
	rlb_libc()->close(f);
	return found;
}

/*
 * Whether socket fd (inode ino) is referred to by anything but fd in
 * this process: another descriptor (dup, SCM_RIGHTS to itself), an epoll
 * set. Read from /proc/self/fd, whatever made them (raw system calls,
 * before the library loaded); true when /proc cannot tell. A fork()
 * child's copy is not seen: such a socket is rarely connected by the
 * parent (design.md §5.10).
 */
static bool referred_elsewhere(int fd, uint64_t ino)
{
	char want[40], link[64];
	struct dirent *de;
	bool other = false;
	DIR *dir;

	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	if (!(dir = rlb_libc()->opendir("/proc/self/fd")))
		return true;
	while (!other && (de = rlb_libc()->readdir(dir))) {
		char *end;
		long n = strtol(de->d_name, &end, 10);
		ssize_t len;

		if (*end || end == de->d_name || n == fd)
			continue;
		len = rlb_libc()->readlinkat(dirfd(dir), de->d_name, link,
					     sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (strcmp(link, want) == 0)
			other = true;
		else if (strcmp(link, "anon_inode:[eventpoll]") == 0)
			other = epoll_has((int)n, fd);
	}
	rlb_libc()->closedir(dir);
	return other;
}

/* Whether option (level, name) of fd reads as a non-empty value: a BPF
 * filter (its length), an upper layer protocol (its name). */
static bool has_value(int fd, int level, int name)
{
	char buf[64] = {0};
	socklen_t len = sizeof(buf);

	if (name == SO_GET_FILTER) {
		len = 0; /* asks for the filter's length, in blocks */
		return rlb_libc()->getsockopt(fd, level, name, NULL, &len) !=
			       0 ||
		       len != 0;
	}
	return rlb_libc()->getsockopt(fd, level, name, buf, &len) == 0 &&
	       len > 0 && buf[0] != '\0';
}

bool rlb_hedge_unbound(int fd, struct sockaddr_storage *local, socklen_t *len)
{
	int saved = errno;
	bool ok;

	*len = sizeof(*local);
	if (rlb_libc()->getsockname(fd, (struct sockaddr *)local, len) != 0)
		ok = false;
	else if (local->ss_family == AF_INET)
		ok = ((struct sockaddr_in *)local)->sin_port == 0;
	else if (local->ss_family == AF_INET6)
		ok = ((struct sockaddr_in6 *)local)->sin6_port == 0;
	else
		ok = false;
	errno = saved;
	return ok;
}

bool rlb_hedge_allowed(int fd, uint64_t ino)
{
	int saved = errno;
	bool ok = !rlb_ledger_uncopyable(fd, ino) &&
		  !rlb_ledger_maybe_forked(fd) &&
		  !has_value(fd, SOL_SOCKET, SO_GET_FILTER) &&
		  !has_value(fd, IPPROTO_TCP, TCP_ULP) &&
		  !referred_elsewhere(fd, ino);

	errno = saved;
	return ok;
}

/* ------------------------------------------------------------------ */
/* A socket like the program's */

/* The options a hedge copies, when the program's reads otherwise than a
 * fresh socket's (design.md §5.10). */
static const struct copied_option {
	int level, name;
	bool doubled; /* the kernel doubles what is set (socket(7)) */
} copied[] = {
	{SOL_SOCKET, SO_KEEPALIVE, false},
	{SOL_SOCKET, SO_RCVBUF, true},
	{SOL_SOCKET, SO_SNDBUF, true},
	{SOL_SOCKET, SO_RCVTIMEO, false},
	{SOL_SOCKET, SO_SNDTIMEO, false},
	{SOL_SOCKET, SO_LINGER, false},
	{SOL_SOCKET, SO_REUSEADDR, false},
	{SOL_SOCKET, SO_REUSEPORT, false},
	{SOL_SOCKET, SO_OOBINLINE, false},
	{SOL_SOCKET, SO_MARK, false},
	{SOL_SOCKET, SO_BINDTODEVICE, false},
	{IPPROTO_TCP, TCP_NODELAY, false},
	{IPPROTO_TCP, TCP_KEEPIDLE, false},
	{IPPROTO_TCP, TCP_KEEPINTVL, false},
	{IPPROTO_TCP, TCP_KEEPCNT, false},
	{IPPROTO_TCP, TCP_USER_TIMEOUT, false},
	{IPPROTO_TCP, TCP_SYNCNT, false},
	{IPPROTO_TCP, TCP_WINDOW_CLAMP, false},
	{IPPROTO_TCP, TCP_CONGESTION, false},
	{IPPROTO_TCP, TCP_NOTSENT_LOWAT, false},
	{IPPROTO_TCP, TCP_FASTOPEN_CONNECT, false},
	{IPPROTO_IP, IP_TOS, false},
	{IPPROTO_IP, IP_TTL, false},
	{IPPROTO_IP, IP_MTU_DISCOVER, false},
	{IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, false},
	{IPPROTO_IP, IP_FREEBIND, false},
	{IPPROTO_IPV6, IPV6_V6ONLY, false},
	{IPPROTO_IPV6, IPV6_TCLASS, false},
	{IPPROTO_IPV6, IPV6_UNICAST_HOPS, false},
	/* After IP_TOS, which sets the priority too. */
	{SOL_SOCKET, SO_PRIORITY, false},
};

/* Whether a hedge copies option (level, name), or need not (TCP_QUICKACK:
 * a transient the kernel itself resets). */
static bool copyable(int level, int name)
{
	if (level == IPPROTO_TCP && name == TCP_QUICKACK)
		return true;
	for (size_t k = 0; k < sizeof(copied) / sizeof(*copied); k++)
		if (copied[k].level == level && copied[k].name == name)
			return true;
	return false;
}

int rlb_track_socket(int domain, int type, int protocol)
{
	int fd = rlb_libc()->socket(domain, type, protocol);

	/* Made since the latest fork: a hedge may replace it. (A vfork()
	 * child's note is for a number free in the parent: harmless.) */
	if (fd >= 0)
		rlb_ledger_born(fd);
	return fd;
}

int rlb_track_setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	int rc = rlb_libc()->setsockopt(fd, level, name, val, len);
	int saved = errno;

	/* Anything else the program sets (TCP_MD5SIG, an option this
	 * list does not know) keeps its socket from being hedged. */
	if (rc == 0 && !copyable(level, name) &&
	    !rlb_pending_in_vfork_child()) {
		rlb_ledger_set_uncopyable(fd);
		errno = saved;
	}
	return rc;
}

/* Copy option o from fd to s when it differs; false when it cannot be. */
static bool copy_option(int fd, int s, const struct copied_option *o)
{
	char want[64], have[64];
	socklen_t wlen = sizeof(want), hlen = sizeof(have);

	if (rlb_libc()->getsockopt(fd, o->level, o->name, want, &wlen) != 0)
		return true; /* not an option of this socket's family */
	if (rlb_libc()->getsockopt(s, o->level, o->name, have, &hlen) == 0 &&
	    hlen == wlen && memcmp(want, have, wlen) == 0)
		return true;
	if (o->doubled && wlen == sizeof(int)) {
		int v;

		memcpy(&v, want, sizeof(v));
		v /= 2;
		memcpy(want, &v, sizeof(v));
	}
	return rlb_libc()->setsockopt(s, o->level, o->name, want, wlen) == 0;
}

int rlb_hedge_socket(int fd, const struct sockaddr_storage *ss, socklen_t sslen)
{
	int domain = 0, type = 0, proto = 0, s, saved = errno;
	socklen_t len = sizeof(int);

	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) !=
		    0 ||
	    (len = sizeof(int), rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_TYPE,
						       &type, &len)) != 0 ||
	    (len = sizeof(int),
	     rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto,
				    &len)) != 0 ||
	    (s = rlb_libc()->socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC,
				    proto)) < 0) {
		errno = saved;
		return -1;
	}
	for (size_t k = 0; k < sizeof(copied) / sizeof(*copied); k++)
		if (!copy_option(fd, s, &copied[k]))
			goto fail;
	/* A local address without a port (IP_BIND_ADDRESS_NO_PORT), as
	 * the program's was before its connect: the copy's too. */
	if (((ss->ss_family == AF_INET &&
	      ((const struct sockaddr_in *)ss)->sin_addr.s_addr != 0) ||
	     (ss->ss_family == AF_INET6 &&
	      !IN6_IS_ADDR_UNSPECIFIED(
		      &((const struct sockaddr_in6 *)ss)->sin6_addr))) &&
	    rlb_libc()->bind(s, (const struct sockaddr *)ss, sslen) != 0)
		goto fail;
	errno = saved;
	return s;
fail:
	rlb_libc()->close(s);
	errno = saved;
	return -1;
}

void rlb_hedge_let_go(int s)
{
	struct linger reset = {.l_onoff = 1, .l_linger = 0};

	/* Connected: a reset, not a FIN (no empty accepted connection
	 * left at the server, no TIME_WAIT here). Still connecting: the
	 * close sends nothing. */
	if (!rlb_pending_connecting(s))
		rlb_libc()->setsockopt(s, SOL_SOCKET, SO_LINGER, &reset,
				       sizeof(reset));
	rlb_libc()->close(s);
}

/* ------------------------------------------------------------------ */
/* The race */

/* One attempt of a hedged connect. */
struct hedge_try {
	int fd; /* the program's descriptor (the first), or a socket of ours */
	struct pending_connect p;
	bool live; /* still connecting */
	int err;   /* its failure, once over */
};

/* The error of a finished attempt: SO_ERROR, read once (ours, or the
 * program's inside its own connect(), whose answer it is). */
static int so_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	return err;
}

/*
 * The outcome of the program's own attempt, once poll() says it is over,
 * as the kernel's blocking connect() would give it: a connect() again
 * answers with the error the attempt ended in (or EISCONN), where a failed
 * SO_ERROR read would lose it. 0: connected.
 */
static int own_outcome(int fd, const struct sockaddr *sa, socklen_t len)
{
	int err;

	if (rlb_libc()->connect(fd, sa, len) == 0)
		return 0;
	err = errno;
	return err == EISCONN ? 0 : err;
}

/* Log a hedge, or its outcome, at debug level. */
static void log_hedge(const char *what, const struct dest *a,
		      const struct dest *b, int32_t hedge_ms)
{
	char b1[64], b2[64];

	if (!rlb_log_enabled(RLB_LOG_DEBUG))
		return;
	if (b && hedge_ms)
		rlb_log(RLB_LOG_DEBUG,
			"connect to %s: no answer in %d ms: hedging to %s",
			rlb_addr_str(a, b1, sizeof(b1)), (int)hedge_ms,
			rlb_addr_str(b, b2, sizeof(b2)));
	else
		rlb_log(RLB_LOG_DEBUG, "hedged connect: %s %s",
			rlb_addr_str(a, b1, sizeof(b1)), what);
}

/* Start the next attempt of the race: the next replica of the selection
 * not tried yet, on a socket like the program's. False when there is
 * none, or it cannot be made. */
static bool hedge_start(struct hedge_try *t, int fd, const struct dest *from,
			struct rlb_owner *tried, size_t *ntried,
			const struct sockaddr *sa, socklen_t len,
			int32_t hedge_ms, const struct sockaddr_storage *local,
			socklen_t llen)
{
	const struct rlb_track_ops *o = rlb_pending_ops();
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct sockaddr_storage next;
	socklen_t nlen = sizeof(next);
	struct conn_policy pol;
	size_t n;
	int s, rc;

	if (!o || !o->next_address ||
	    !o->next_address(tried, *ntried, sa, len, &next, &nlen) ||
	    !rlb_addr_to_dest((struct sockaddr *)&next, nlen, &t->p.d) ||
	    !(n = rlb_addr_owners(&t->p.d, owners, &pol)) ||
	    (s = rlb_hedge_socket(fd, local, llen)) < 0)
		return false;
	for (size_t i = 0; i < n && *ntried < RLB_HEDGE_TRIED; i++)
		tried[(*ntried)++] = owners[i];
	log_hedge(NULL, from, &t->p.d, hedge_ms);
	t->fd = s;
	t->p.ino = rlb_pending_ino(s);
	t->p.start_ms = rlb_monotonic_ms();
	t->p.timeout_ms = pol.timeout_ms;
	t->p.syncnt = 0;
	t->p.moved = 1;
	t->p.in_call = 0; /* the race looks at it, and so may a sweep */
	t->live = true;
	t->err = 0;
	rlb_conn_change(s, &t->p, RLB_CHANGE_START, 0, -1);
	rc = rlb_libc()->connect(s, (struct sockaddr *)&next, nlen);
	if (rc != 0 && errno != EINPROGRESS) {
		t->err = errno;
		t->live = false;
	} else if (rc == 0) {
		t->err = -1; /* connected at once */
	}
	return true;
}

/* Our socket of attempt t goes: its attempt settled as lost (err 0,
 * live: nothing counts; failed: counted already). */
static void hedge_drop(struct hedge_try *t)
{
	rlb_pending_done(t->fd, &t->p);
	rlb_conn_change(t->fd, NULL, RLB_CHANGE_CLOSED, 0, -1);
	rlb_hedge_let_go(t->fd);
	t->fd = -1;
}

/*
 * Attempt w (ours) becomes the program's descriptor fd, with fd's
 * close-on-exec and file status flags. The program's own attempt, there
 * before, goes with the description it was (it was hedged away from or
 * failed: counted already). False when the swap could not be made.
 */
static bool hedge_swap(int fd, int flags, struct hedge_try *own,
		       struct hedge_try *w)
{
	struct linger reset = {.l_onoff = 1, .l_linger = 0};
	int fdflags = rlb_libc()->fcntl(fd, F_GETFD, 0);

	if (fdflags < 0)
		return false;
	if (own->live && !rlb_pending_connecting(fd))
		rlb_libc()->setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset,
				       sizeof(reset));
	if (rlb_libc()->fcntl(w->fd, F_SETFL, flags) != 0 ||
	    rlb_libc()->dup3(w->fd, fd,
			     (fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		return false;
	rlb_pending_done(fd, &own->p);
	rlb_ledger_dup(w->fd, fd);
	rlb_pending_done(w->fd, &w->p);
	rlb_conn_change(w->fd, NULL, RLB_CHANGE_CLOSED, 0, -1);
	rlb_libc()->close(w->fd);
	w->fd = fd;
	own->live = false;
	return true;
}

int rlb_hedge_connect(int fd, const struct sockaddr *sa, socklen_t len,
		      const struct dest *d, const struct conn_policy *pol,
		      int flags, struct rlb_owner *owners, size_t n)
{
	bool blocking = !(flags & O_NONBLOCK), can_hedge = true,
	     checked = false, own_failed = false;
	struct hedge_try t[HEDGE_MAX];
	struct rlb_owner tried[RLB_HEDGE_TRIED];
	struct sockaddr_storage local;
	socklen_t llen;
	size_t ntried = 0, nt = 1, last = 0;
	int64_t end, race_end;
	int rc, err, perr, cs, winner = -1;

	for (size_t i = 0; i < n && ntried < RLB_HEDGE_TRIED; i++)
		tried[ntried++] = owners[i];
	memset(&t[0], 0, sizeof(t[0]));
	t[0].fd = fd;
	t[0].live = true;
	/* Bound to a port of its own, it cannot be copied; a connect binds
	 * one, so it is asked now. */
	can_hedge = rlb_hedge_unbound(fd, &local, &llen);
	if (blocking) {
		/* The kernel's own wait, paused at the hedge time: a connect
		 * that is over by then (connected, refused, a signal the
		 * program sees) is answered as an unhedged one. */
		struct fd_slot *slot;

		rc = rlb_connect_bounded(
			fd, sa, len, d, pol, true, NULL, false, false,
			rlb_monotonic_ms() + pol->hedge_ms, RLB_TCP_YES);
		err = errno;
		if (rc == 0 || err != EINPROGRESS ||
		    !(slot = rlb_pending_slot(fd)) ||
		    !atomic_load_explicit(&slot->pending,
					  memory_order_acquire)) {
			errno = err;
			return rc;
		}
		rlb_pending_load(slot, &t[0].p);
	} else {
		t[0].p.d = *d;
		t[0].p.ino = rlb_pending_ino(fd);
		t[0].p.start_ms = rlb_monotonic_ms();
		t[0].p.timeout_ms = pol->timeout_ms;
		rlb_conn_change(fd, &t[0].p, RLB_CHANGE_START, 0, -1);
		rc = rlb_libc()->connect(fd, sa, len);
		err = errno;
		if (rc == 0 || err == EISCONN) {
			rlb_pending_done(fd, &t[0].p);
			rlb_conn_change(fd, &t[0].p, RLB_CHANGE_ESTABLISHED, 0,
					-1);
			errno = err;
			return rc;
		}
		if (err != EINPROGRESS) {
			rlb_pending_done(fd, &t[0].p);
			rlb_conn_change(fd, &t[0].p, RLB_CHANGE_FAILED, err,
					-1);
			errno = err;
			return -1;
		}
	}
	end = pol->timeout_ms > 0 ? t[0].p.start_ms + pol->timeout_ms
				  : INT64_MAX;
	/* A blocking connect waits to its bound; a non-blocking one at most
	 * a hedge time per attempt (design.md §5.10). */
	race_end = end;
	if (flags & O_NONBLOCK) {
		int64_t wait = (int64_t)pol->hedge_ms * HEDGE_MAX;

		if (t[0].p.start_ms + wait < race_end)
			race_end = t[0].p.start_ms + wait;
	} else {
		/* The program's own SO_SNDTIMEO ends its wait as the
		 * kernel's would: EINPROGRESS, the attempt under way. */
		struct timeval tv = {0};
		socklen_t tl = sizeof(tv);
		int64_t own;

		if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
					   &tl) == 0 &&
		    (own = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000) > 0 &&
		    t[0].p.start_ms + own < race_end)
			race_end = t[0].p.start_ms + own;
	}
	/* No cancellation inside the race (bounded by connect_timeout_ms,
	 * which a hedge needs): a pthread_cancel() acts at the program's
	 * next cancellation point, and none of our sockets is left behind. */
	cs = rlb_cancel_off();
	for (;;) {
		struct pollfd pfd[HEDGE_MAX];
		size_t at[HEDGE_MAX], np = 0;
		int64_t now = rlb_monotonic_ms(), wake = race_end;
		int prc;

		if (can_hedge && nt < HEDGE_MAX &&
		    t[last].p.start_ms + pol->hedge_ms < wake)
			wake = t[last].p.start_ms + pol->hedge_ms;
		for (size_t k = 0; k < nt; k++)
			if (t[k].live) {
				pfd[np] = (struct pollfd){.fd = t[k].fd,
							  .events = POLLOUT};
				at[np++] = k;
			}
		if (np == 0 && !(can_hedge && nt < HEDGE_MAX))
			break; /* every attempt failed */
		prc = rlb_libc()->poll(pfd, np,
				       wake > now ? (int)(wake - now) : 0);
		if (prc < 0 && errno == EINTR && blocking &&
		    rlb_connect_sees_eintr()) {
			err = EINTR;
			break;
		}
		if (prc < 0 && errno != EINTR)
			break; /* cannot wait here: the program waits */
		for (size_t k = 0; prc > 0 && k < np; k++) {
			struct hedge_try *h = &t[at[k]];
			bool others = false;

			if (!pfd[k].revents)
				continue;
			for (size_t j = 1; j < nt; j++)
				others |= t[j].live;
			/* The program's own non-blocking attempt failed,
			 * nothing else racing: its SO_ERROR is left for it
			 * to read, as without the library. */
			if (at[k] == 0 && (flags & O_NONBLOCK) && !others) {
				if (rlb_pending_connecting(fd))
					continue;
				if (rlb_pending_connected_once(fd)) {
					winner = 0;
					break;
				}
				own_failed = true;
				break;
			}
			h->err = at[k] == 0 ? own_outcome(fd, sa, len)
					    : so_error(h->fd);
			if (h->err == EINPROGRESS || h->err == EALREADY)
				continue; /* not over after all */
			if (h->err == 0) {
				winner = (int)at[k];
				break;
			}
			h->live = false;
			rlb_conn_change(h->fd, &h->p, RLB_CHANGE_FAILED, h->err,
					-1);
			/* The program's own failed, nothing else racing:
			 * its error is connect()'s answer now. */
			if (at[k] == 0 && !others) {
				own_failed = true;
				break;
			}
		}
		if (own_failed)
			break;
		for (size_t k = 1; winner < 0 && k < nt; k++)
			if (t[k].err == -1)
				winner = (int)k; /* connected at once */
		if (winner >= 0)
			break;
		now = rlb_monotonic_ms();
		if (now >= race_end)
			break;
		if (!can_hedge || nt >= HEDGE_MAX ||
		    now < t[last].p.start_ms + pol->hedge_ms)
			continue;
		if (!checked) {
			checked = true;
			can_hedge = rlb_hedge_allowed(fd, t[0].p.ino);
			if (!can_hedge)
				rlb_log(RLB_LOG_DEBUG,
					"connect not hedged: the socket is "
					"shared, bound or carries what a copy "
					"would lose");
			if (!can_hedge && (flags & O_NONBLOCK))
				break; /* the program's poll waits */
			if (!can_hedge)
				continue;
		}
		if (!hedge_start(&t[nt], fd, &t[last].p.d, tried, &ntried, sa,
				 len, pol->hedge_ms, &local, llen)) {
			rlb_log(RLB_LOG_DEBUG, "connect not hedged: no other "
					       "replica, or no socket for it");
			can_hedge = false;
			if (flags & O_NONBLOCK)
				break; /* the program's poll waits */
			continue;
		}
		/* The one hedged away from is slow: ClickHouse's
		 * ++slowdown_count when the hedge timeout fires. */
		if (t[last].live)
			rlb_conn_change(t[last].fd, &t[last].p, RLB_CHANGE_SLOW,
					ETIMEDOUT, -1);
		last = nt++;
	}
	if (own_failed) {
		/* Nothing else raced: answered as an unhedged connect. */
		if (flags & O_NONBLOCK) {
			rlb_connect_bound_in_kernel(fd, &t[0].p);
			errno = EINPROGRESS;
			rc = -1;
			goto out;
		}
		rlb_pending_done(fd, &t[0].p);
		errno = t[0].err;
		rc = -1;
		goto out;
	}
	if (winner > 0 && !hedge_swap(fd, flags, &t[0], &t[winner]))
		winner = t[0].live ? -1 : winner; /* keep racing: no */
	if (winner >= 0 && t[winner].fd == fd) {
		for (size_t k = 1; k < nt; k++)
			if (t[k].fd >= 0 && t[k].fd != fd)
				hedge_drop(&t[k]);
		if (winner == 0)
			rlb_pending_done(fd, &t[0].p);
		rlb_conn_change(fd, &t[winner].p, RLB_CHANGE_ESTABLISHED, 0,
				-1);
		if (winner > 0)
			log_hedge("won", &t[winner].p.d, NULL, 0);
		rc = 0;
		goto out;
	}
	/* No winner: the race is over (every attempt failed, the bound, the
	 * wait of a non-blocking connect, a signal the program sees). */
	for (size_t k = 1; k < nt; k++)
		if (t[k].fd >= 0 && t[k].fd != fd && !t[k].live)
			hedge_drop(&t[k]);
	if (err == EINTR || (flags & O_NONBLOCK) || rlb_monotonic_ms() < end) {
		/* Still connecting, the program's to wait for: the newest
		 * attempt alive goes on fd, bounded in the kernel. */
		size_t keep = 0;

		for (size_t k = nt; k-- > 0;)
			if (t[k].live) {
				keep = k;
				break;
			}
		if (t[keep].live) {
			if (keep > 0 && !hedge_swap(fd, flags, &t[0], &t[keep]))
				keep = 0;
			for (size_t k = 1; k < nt; k++)
				if (k != keep && t[k].live && t[k].fd >= 0 &&
				    t[k].fd != fd)
					hedge_drop(&t[k]);
			if (keep > 0)
				rlb_pending_set(fd, &t[keep].p);
			rlb_connect_bound_in_kernel(fd, &t[keep].p);
			errno = err == EINTR ? EINTR : EINPROGRESS;
			rc = -1;
			goto out;
		}
		/* Every attempt failed: the program's own error, as its
		 * connect() would have given it. */
		rlb_pending_done(fd, &t[0].p);
		errno = t[0].err > 0 ? t[0].err : ECONNREFUSED;
		rc = -1;
		goto out;
	}
	/* A blocking connect at its bound: each attempt still connecting
	 * timed out. */
	for (size_t k = 0; k < nt; k++)
		if (t[k].live) {
			rlb_conn_change(t[k].fd, &t[k].p, RLB_CHANGE_TIMED_OUT,
					ETIMEDOUT,
					rlb_monotonic_ms() - t[k].p.start_ms);
			t[k].live = false;
			if (k > 0)
				hedge_drop(&t[k]);
		}
	rlb_pending_done(fd, &t[0].p);
	rlb_connect_abort(fd);
	errno = ETIMEDOUT;
	rc = -1;
out:
	perr = errno;
	rlb_cancel_restore(cs);
	errno = perr;
	return rc;
}
