/* track_connect.c - connects to replica addresses (design.md §5.3,
 * §5.4, §11.2): bounded by the cluster's connect_timeout_ms whatever
 * signals arrive, failover to the next replica, and the bodies of the
 * connect, getsockopt and close hooks. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "preload/track_internal.h"
#define TRIED_MAX 16 /* replicas one failover connect tries */

/* Milliseconds of a timeval; 0 stays 0 ("no timeout"). */
static int64_t tv_ms(const struct timeval *tv)
{
	return (int64_t)tv->tv_sec * 1000 + tv->tv_usec / 1000;
}

/*
 * Give up a pending attempt on fd: a connect to AF_UNSPEC takes a TCP
 * socket back to CLOSE (no packet for one in SYN_SENT), and reading
 * SO_ERROR clears the ECONNRESET that this leaves behind, so that the
 * program (or our failover) may connect the socket again.
 */
void rlb_connect_abort(int fd)
{
	struct sockaddr unspec = {.sa_family = AF_UNSPEC};
	socklen_t len = sizeof(int);
	int err;

	rlb_libc()->connect(fd, &unspec, sizeof(unspec));
	rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
}

static bool is_tcp(int fd)
{
	int proto = 0;
	socklen_t len = sizeof(proto);

	/* IPPROTO_TCP is a stream socket's only: one question. */
	return rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto,
				      &len) == 0 &&
	       proto == IPPROTO_TCP;
}

/* What is left of p's bound, at least 1 ms. */
static int64_t bound_left(const struct pending_connect *p)
{
	int64_t left = p->timeout_ms - (rlb_monotonic_ms() - p->start_ms);

	return left < 1 ? 1 : left;
}

/*
 * Bound p's attempt in the kernel: TCP_SYNCNT lowered (design.md §5.3),
 * the program's own value kept in p->syncnt. A lower value of the
 * program's own wins.
 */
static void lower_syncnt(int fd, struct pending_connect *p)
{
	int want = rlb_pending_syncnt_for(p->timeout_ms), syncnt = 0;
	socklen_t len = sizeof(syncnt);

	if (p->syncnt > 0)
		return;
	if (rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syncnt,
				   &len) == 0 &&
	    syncnt > want &&
	    rlb_libc()->setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &want,
				   sizeof(want)) == 0)
		p->syncnt = syncnt;
}

void rlb_connect_bound_in_kernel(int fd, struct pending_connect *p)
{
	if (p->timeout_ms > 0) {
		lower_syncnt(fd, p);
		rlb_pending_update(fd, p);
	}
}

/*
 * For a blocking connect: lower SO_SNDTIMEO, the kernel's limit for it,
 * to what is left of the bound, unless the program's own (kept in *orig)
 * is shorter. *set: the value set. True when lowered.
 */
static bool lower_sndtimeo(int fd, const struct pending_connect *p,
			   int64_t pause_at, struct timeval *orig,
			   struct timeval *set)
{
	int64_t left = bound_left(p);
	socklen_t len = sizeof(*orig);

	if (pause_at > 0 && pause_at - rlb_monotonic_ms() < left)
		left = pause_at - rlb_monotonic_ms() < 1
			       ? 1
			       : pause_at - rlb_monotonic_ms();

	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, orig, &len) !=
		    0 ||
	    (timerisset(orig) && tv_ms(orig) <= left))
		return false;
	set->tv_sec = left / 1000;
	set->tv_usec = left % 1000 * 1000;
	if (rlb_libc()->setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, set,
				   sizeof(*set)) != 0)
		return false;
	/*
	 * What the kernel keeps is in its ticks (4 ms at HZ=250): read it
	 * back, or restore_sndtimeo() would take the rounded value for one
	 * another thread set, leave ours, and the next round of a connect
	 * that a signal interrupted would take it for the program's own.
	 */
	len = sizeof(*set);
	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, set, &len) !=
	    0) {
		set->tv_sec = left / 1000;
		set->tv_usec = left % 1000 * 1000;
	}
	return true;
}

/*
 * Put the program's SO_SNDTIMEO back after the call. Touches nothing when
 * fd no longer is p's socket (another thread closed it during the call
 * and the number was reused), and keeps a value that another thread of
 * the program set meanwhile. False when fd is no longer p's socket.
 */
static bool restore_sndtimeo(int fd, const struct pending_connect *p,
			     const struct timeval *orig,
			     const struct timeval *set)
{
	struct timeval now;
	socklen_t len = sizeof(now);

	if (!rlb_pending_is(fd, p->ino))
		return false;
	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &now, &len) ==
		    0 &&
	    tv_ms(&now) == tv_ms(set))
		rlb_libc()->setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, orig,
				       sizeof(*orig));
	return true;
}

/*
 * Whether a signal that interrupted a blocking connect, on a socket with
 * no SO_SNDTIMEO of the program's own, would have reached the program as
 * EINTR without the library. The kernel restarts such a connect after a
 * handler with SA_RESTART, or a stop signal, and fails it with EINTR
 * after a handler without; our lowered SO_SNDTIMEO makes it fail with
 * EINTR every time (signal(7)). Which signal it was cannot be known: when
 * any signal that could have interrupted (caught, not blocked) has a
 * handler without SA_RESTART, the program may be waiting for that EINTR
 * (an alarm() bounding its connect), so it gets it. Runs only after an
 * EINTR.
 */
bool rlb_connect_sees_eintr(void)
{
	sigset_t blocked;

	if (rlb_libc()->pthread_sigmask(SIG_BLOCK, NULL, &blocked) != 0)
		return true;
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sig == SIGKILL || sig == SIGSTOP ||
		    sigismember(&blocked, sig) == 1 ||
		    rlb_libc()->sigaction(sig, NULL, &sa) != 0)
			continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return true;
	}
	return false;
}

/* The attempt p on fd stays pending after our connect() returns: stored
 * again as it is now, no longer in a call, so that the sweep looks at it
 * from now on (the program waits by itself). Touches nothing when fd's
 * entry is no longer p's. */
static void leave_call(int fd, struct pending_connect *p)
{
	struct fd_slot *s = rlb_pending_slot(fd);
	struct pending_connect now;

	p->in_call = 0;
	if (!s || !atomic_load_explicit(&s->pending, memory_order_acquire))
		return;
	rlb_pending_load(s, &now);
	if (now.ino == p->ino && now.start_ms == p->start_ms)
		rlb_pending_update(fd, p);
}

/*
 * One bounded attempt to connect fd to replica address d (design.md
 * §5.3), or (prev) the same attempt asked about again by a repeated
 * connect(). Same contract as connect(); a failure that counts is
 * reported, a success remembered. `moved`: failover chose d, not the
 * program. `no_eintr`: the call is ours, made inside a hook that cannot
 * fail with EINTR (getsockopt): a signal never ends it.
 * - Blocking sockets: SO_SNDTIMEO lowered to what is left of the bound
 *   for the call only; an attempt cut short by it (EINPROGRESS, or
 *   EALREADY when repeated) is given up with ETIMEDOUT. A signal gives
 *   EINTR exactly when the kernel would have without the library;
 *   otherwise the call goes on waiting, as the kernel's restart would.
 *   After an EINTR the program waits by itself: the attempt is then
 *   bounded as a non-blocking one.
 * - Non-blocking sockets: TCP_SYNCNT lowered until the attempt ends.
 * `pause_at` (monotonic ms, 0: none): a blocking attempt not over by then
 * returns -1 with EINPROGRESS, still pending, nothing counted: the hedge
 * takes over (design.md §5.10).
 */
int rlb_connect_bounded(int fd, const struct sockaddr *sa, socklen_t len,
			const struct dest *d, const struct conn_policy *pol,
			bool blocking, const struct pending_connect *prev,
			bool moved, bool no_eintr, int64_t pause_at,
			enum rlb_tcp tcp)
{
	struct pending_connect p = {
		.d = *d, .timeout_ms = pol->timeout_ms, .moved = moved};
	bool bounded =
		pol->timeout_ms > 0 &&
		(tcp == RLB_TCP_YES || (tcp == RLB_TCP_ASK && is_tcp(fd)));
	int rc, err;

	if (prev) {
		/* The attempt under way: its start, bound and the
		 * program's own TCP_SYNCNT stay. Left to the sweep, as
		 * before this call (after a longjmp: from now on). */
		p = *prev;
		if (p.in_call)
			leave_call(fd, &p);
	} else {
		p.ino = rlb_pending_ino(fd);
		p.start_ms = rlb_monotonic_ms();
		p.in_call = 1;
		if (bounded && !blocking)
			lower_syncnt(fd, &p);
		/* Pending from the start: a longjmp out of a blocking
		 * connect leaves the entry for the sweep to find. */
		rlb_conn_change(fd, &p, RLB_CHANGE_START, 0, -1);
	}
	for (;;) {
		struct timeval orig = {0}, set = {0};
		bool lowered = bounded && blocking &&
			       lower_sndtimeo(fd, &p, pause_at, &orig, &set);

		rc = rlb_libc()->connect(fd, sa, len);
		err = errno;
		if (lowered && !restore_sndtimeo(fd, &p, &orig, &set)) {
			errno = err; /* fd is another socket now */
			return rc;
		}
		if (rc == 0 || err == EISCONN) {
			rlb_pending_done(fd, &p);
			rlb_conn_change(fd, &p, RLB_CHANGE_ESTABLISHED, 0, -1);
			errno = err;
			return rc;
		}
		if (!blocking || (err == EALREADY && !lowered)) {
			/* Under way, or (non-blocking) failed at once. */
			if (err == EINPROGRESS || err == EALREADY ||
			    err == EINTR) {
				leave_call(fd, &p);
				errno = err;
				return rc;
			}
			break;
		}
		if (err == EINTR) {
			if (lowered &&
			    (no_eintr ||
			     (!timerisset(&orig) && !rlb_connect_sees_eintr())))
				continue; /* as the kernel's restart */
			if (bounded)
				lower_syncnt(fd, &p);
			leave_call(fd, &p);
			errno = EINTR;
			return -1;
		}
		if (lowered && (err == EINPROGRESS || err == EALREADY) &&
		    pause_at > 0 &&
		    rlb_monotonic_ms() < p.start_ms + p.timeout_ms) {
			/* The pause, not the bound: still pending. */
			leave_call(fd, &p);
			errno = EINPROGRESS;
			return -1;
		}
		if (lowered && (err == EINPROGRESS || err == EALREADY)) {
			/* Our bound fired. */
			rlb_connect_abort(fd);
			err = ETIMEDOUT;
		}
		break;
	}
	rlb_pending_done(fd, &p);
	/* EINPROGRESS of a blocking socket: cut short by the program's own
	 * SO_SNDTIMEO, which is a timeout too. */
	rlb_conn_change(fd, &p, RLB_CHANGE_FAILED,
			err == EINPROGRESS ? ETIMEDOUT : err, -1);
	errno = err;
	return rc;
}

/* Whether owner o is among the n replicas tried. */
static bool tried_has(const struct rlb_owner *tried, size_t n,
		      const struct rlb_owner *o)
{
	for (size_t i = 0; i < n; i++)
		if (tried[i].cluster == o->cluster &&
		    tried[i].replica == o->replica)
			return true;
	return false;
}

/*
 * For a non-blocking socket with connect_failover: wait for the pending
 * attempt on fd to d to end, until its bound from its start, whatever
 * signals arrive (a non-blocking connect never fails with EINTR).
 * Returns 0 when it connected, else the error (reported when it counts;
 * the attempt is over either way).
 */
static int wait_connected(int fd, const struct dest *d)
{
	struct pending_connect p;
	struct fd_slot *s = rlb_pending_slot(fd);
	int64_t deadline;
	int err = ETIMEDOUT;

	if (!s || !atomic_load_explicit(&s->pending, memory_order_acquire))
		return EINVAL;
	rlb_pending_load(s, &p);
	deadline = p.start_ms + (p.timeout_ms > 0 ? p.timeout_ms : 1000);
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int64_t left = deadline - rlb_monotonic_ms();
		socklen_t len = sizeof(int);
		int rc = rlb_libc()->poll(&pfd, 1, left > 0 ? (int)left : 0);

		if (rc == 1 && rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_ERROR,
						      &err, &len) != 0)
			err = errno;
		if (rc >= 0 || errno != EINTR)
			break;
	}
	rlb_pending_clear(fd);
	p.d = *d;
	if (err == 0) {
		rlb_conn_change(fd, &p, RLB_CHANGE_ESTABLISHED, 0, -1);
		return 0;
	}
	if (err == ETIMEDOUT)
		rlb_connect_abort(fd);
	rlb_conn_change(fd, &p, RLB_CHANGE_FAILED, err, -1);
	return err;
}

/*
 * connect_failover (design.md §5.4): after a failure `err` (already
 * reported) of a connect of fd to sa, owned by the n replicas in owners,
 * connect the same socket to the next replica of the selection, with the
 * port resolution would have given, until one does not fail or none is
 * left. Non-blocking sockets, or any socket from inside getsockopt()
 * (`in_getsockopt`): each attempt is waited for (at most its bound),
 * signals end none, and the result is an SO_ERROR value (0 or the
 * error); otherwise connect()'s (-1 with errno, or 0). Returns as `err`
 * (or -1/errno err) when no replica is left.
 */
static int fail_over(int fd, const struct sockaddr *sa, socklen_t len,
		     struct rlb_owner *owners, size_t n, int err, bool blocking,
		     bool in_getsockopt)
{
	bool so_error = !blocking || in_getsockopt;
	const struct rlb_track_ops *o = rlb_pending_ops();
	struct rlb_owner tried[TRIED_MAX];
	struct sockaddr_storage next;
	struct conn_policy pol;
	size_t ntried = 0;
	socklen_t nlen;
	struct dest d, from;
	int rc;

	if (!o || !o->next_address || !rlb_addr_to_dest(sa, len, &from))
		goto out_fail;
	for (;;) {
		for (size_t i = 0; i < n && ntried < TRIED_MAX; i++)
			if (!tried_has(tried, ntried, &owners[i]))
				tried[ntried++] = owners[i];
		nlen = sizeof(next);
		if (ntried == TRIED_MAX ||
		    !o->next_address(tried, ntried, sa, len, &next, &nlen) ||
		    !rlb_addr_to_dest((struct sockaddr *)&next, nlen, &d) ||
		    !(n = rlb_addr_owners(&d, owners, &pol)))
			goto out_fail;
		if (rlb_log_enabled(RLB_LOG_DEBUG)) {
			char b1[64], b2[64];

			rlb_log(RLB_LOG_DEBUG,
				"connect to %s failed (%s): failing over to %s",
				rlb_addr_str(&from, b1, sizeof(b1)),
				strerror(err),
				rlb_addr_str(&d, b2, sizeof(b2)));
		}
		from = d;
		/* Back to an unconnected socket, whatever the failure left. */
		rlb_connect_abort(fd);
		sa = (struct sockaddr *)&next;
		len = nlen;
		rc = rlb_connect_bounded(fd, sa, len, &d, &pol, blocking, NULL,
					 true, in_getsockopt, 0, RLB_TCP_ASK);
		if (so_error) {
			if (rc == 0)
				return 0;
			err = errno;
			if (!blocking &&
			    (err == EINPROGRESS || err == EALREADY) &&
			    (err = wait_connected(fd, &d)) == 0)
				return 0;
		} else {
			if (rc == 0 || !rlb_errno_counts(errno))
				return rc;
			err = errno;
		}
		if (!rlb_errno_counts(err))
			goto out_fail;
	}
out_fail:
	if (so_error)
		return err;
	errno = err;
	return -1;
}

/*
 * With connect_failover, a connect to a replica that has failed since it
 * was handed out (a program reusing one answer for many connections: curl
 * fetching several URLs) goes straight to the replica the selection now
 * ranks first. Replaces sa/len, d, owners and pol when it does.
 */
static void skip_stale(const struct sockaddr **sa, socklen_t *len,
		       struct sockaddr_storage *next, struct dest *d,
		       struct rlb_owner *owners, size_t *n,
		       struct conn_policy *pol)
{
	const struct rlb_track_ops *o = rlb_pending_ops();
	struct rlb_owner nowners[RLB_MAX_OWNERS];
	struct conn_policy npol;
	socklen_t nlen = sizeof(*next);
	struct dest nd;
	size_t nn;

	if (!o || !o->next_address ||
	    !o->next_address(owners, *n, *sa, *len, next, &nlen) ||
	    !rlb_addr_to_dest((struct sockaddr *)next, nlen, &nd) ||
	    !(nn = rlb_addr_owners(&nd, nowners, &npol)))
		return;
	if (rlb_log_enabled(RLB_LOG_DEBUG)) {
		char b1[64], b2[64];

		rlb_log(RLB_LOG_DEBUG,
			"%s has failed since it was handed out: connecting "
			"to %s instead",
			rlb_addr_str(d, b1, sizeof(b1)),
			rlb_addr_str(&nd, b2, sizeof(b2)));
	}
	*sa = (const struct sockaddr *)next;
	*len = nlen;
	*d = nd;
	memcpy(owners, nowners, nn * sizeof(*owners));
	*n = nn;
	*pol = npol;
}

/* connect() to an address that may be a replica's. */
static __attribute__((noinline)) int
connect_replica(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct pending_connect prev;
	struct sockaddr_storage next;
	struct conn_policy pol;
	bool blocking, repeat;
	enum rlb_tcp tcp;
	struct fd_slot *s;
	struct dest d;
	int rc, flags, err;
	size_t n;

	if (!rlb_addr_to_dest(sa, len, &d) ||
	    !(n = rlb_addr_owners(&d, owners, &pol))) {
		rlb_pending_clear(fd);
		return rlb_libc()->connect(fd, sa, len);
	}
	/* A connect() repeated on a pending socket asks how it went; after
	 * a failover, about the replica the socket was moved to. */
	s = rlb_pending_slot(fd);
	repeat = s && atomic_load_explicit(&s->pending, memory_order_acquire);
	if (repeat) {
		rlb_pending_load(s, &prev);
		repeat = (prev.moved || (rlb_addr_same(&prev.d, &d) &&
					 prev.d.port == d.port)) &&
			 rlb_pending_is(fd, prev.ino);
		if (repeat && prev.moved) {
			d = prev.d;
			n = rlb_addr_owners(&d, owners, &pol);
		}
	}
	rlb_pending_sweep(fd, owners, n, false);
	rlb_pending_match_dropped(owners, n);
	if (!repeat && pol.failover && pol.stale)
		skip_stale(&sa, &len, &next, &d, owners, &n, &pol);
	/* Only a TCP connect is bounded or hedged, and only its blocking
	 * mode matters (a datagram connect never waits): one question each. */
	tcp = RLB_TCP_ASK;
	if (pol.timeout_ms > 0 || pol.hedge_ms > 0)
		tcp = is_tcp(fd) ? RLB_TCP_YES : RLB_TCP_NO;
	flags = tcp == RLB_TCP_NO ? O_NONBLOCK
				  : rlb_libc()->fcntl(fd, F_GETFL, 0);
	blocking = flags >= 0 && !(flags & O_NONBLOCK);
	/* Hedged (design.md §5.10): a new attempt of a TCP socket, when the
	 * hedge time comes before the bound (an unbounded connect is not
	 * hedged: the race runs with cancellation off). */
	if (tcp == RLB_TCP_YES && !repeat && flags >= 0 && pol.hedge_ms > 0 &&
	    pol.timeout_ms > 0 && pol.hedge_ms < pol.timeout_ms)
		rc = rlb_hedge_connect(fd, sa, len, &d, &pol, flags, owners, n);
	else
		rc = rlb_connect_bounded(fd, sa, len, &d, &pol, blocking,
					 repeat ? &prev : NULL, false, false, 0,
					 tcp);
	if (rc == 0 || !pol.failover)
		return rc;
	err = errno;
	/*
	 * A failure that counts is not the program's to see while another
	 * replica of the selection is left. A non-blocking socket's attempt
	 * is settled here, within its bound, before the program can learn
	 * of it by other means (a poll() of its own sees POLLHUP: Java), and
	 * a repeated connect() (hiredis) gets a final answer too.
	 */
	if (!blocking && (err == EINPROGRESS || err == EALREADY)) {
		if ((err = wait_connected(fd, &d)) == 0)
			return 0;
	}
	if (!rlb_errno_counts(err)) {
		errno = err;
		return -1;
	}
	rc = fail_over(fd, sa, len, owners, n, err, blocking, false);
	if (blocking || rc == 0)
		return rc;
	errno = rc;
	return -1;
}

/*
 * Pages this thread has lately seen readable: their number + 1 (0 free),
 * page P at P % READABLE_PAGES. A process that connects from the same
 * buffers again and again (a stack frame, an addrinfo list, a static)
 * asks the kernel once per page. No page the kernel refused is ever in
 * it, so a hit also says "not NULL, not the first page, not a kernel
 * address".
 */
#define READABLE_PAGES 8
static RLB_TLS uintptr_t readable_pages[READABLE_PAGES];

/*
 * Whether the page holding p can be read, asked of the kernel: a futex
 * wait with a zero timeout reads the word at p (EFAULT when it cannot)
 * and returns at once. futex, unlike process_vm_readv(), is allowed by
 * every seccomp filter a threaded program can live under. Keeps errno.
 */
static bool page_readable(uintptr_t p)
{
	struct timespec zero = {0, 0};
	int saved = errno;
	bool ok = rlb_libc()->futex((uint32_t *)(p & ~(uintptr_t)3),
				    FUTEX_WAIT_PRIVATE, 0x5eedU, &zero) == 0 ||
		  errno != EFAULT;

	errno = saved;
	return ok;
}

/* The last byte of sa that maybe_replica() may read (len >= 16). */
static inline uintptr_t last_byte(const struct sockaddr *sa, socklen_t len)
{
	return (uintptr_t)sa +
	       (len < sizeof(struct sockaddr_in6)
			? len
			: sizeof(struct sockaddr_in6)) -
	       1;
}

/* Whether page pg is in this thread's cache. */
static inline bool page_seen(uintptr_t pg)
{
	return readable_pages[pg % READABLE_PAGES] == pg + 1;
}

/*
 * Whether all of sa that maybe_replica() may read lies in one page that
 * this thread has seen: the pass-through's test, in a handful of
 * instructions (its cost is the instructions themselves, fetched anew
 * after the system call of the connect before). A sockaddr that ends
 * within the last bytes of a page takes the careful way, which finds
 * both pages in the cache without asking the kernel again.
 */
static inline bool page_known(const struct sockaddr *sa)
{
	uintptr_t p = (uintptr_t)sa;

	return ((p & 4095) <= 4096 - sizeof(struct sockaddr_in6)) &
	       page_seen(p >> 12);
}

/*
 * Whether the bytes of sa that maybe_replica() reads can be read: a bad
 * pointer is libc's to refuse with EFAULT, never a crash of ours. Any
 * page not seen lately is asked of the kernel once and remembered. A
 * page unmapped since it was last used is the one case still read
 * without asking (design.md §9).
 */
static bool readable(const struct sockaddr *sa, socklen_t len)
{
	uintptr_t p = (uintptr_t)sa, last = last_byte(sa, len);
	uintptr_t pg = p >> 12, pg2 = last >> 12;

	if (p < 4096 || last < p)
		return false;
	if (!page_seen(pg) && !page_readable(p))
		return false;
	if (pg2 != pg && !page_seen(pg2) && !page_readable(pg2 << 12))
		return false;
	readable_pages[pg % READABLE_PAGES] = pg + 1;
	readable_pages[pg2 % READABLE_PAGES] = pg2 + 1;
	return true;
}

/* A connect that is no replica's, on a socket that may have a pending
 * attempt of a replica's: that attempt is over. */
static __attribute__((noinline)) int
connect_other(int fd, const struct sockaddr *sa, socklen_t len)
{
	rlb_pending_clear(fd);
	return rlb_libc()->connect(fd, sa, len);
}

/* No replica's: libc's connect, after any pending attempt on fd. */
static int connect_plain(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (atomic_load_explicit(&rlb_pending_count, memory_order_relaxed))
		return connect_other(fd, sa, len);
	return rlb_libc()->connect(fd, sa, len);
}

/* sa is readable; is it a replica's (the exact look)? */
static __attribute__((noinline)) int
connect_maybe(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (rlb_addr_maybe_replica(sa, len))
		return connect_replica(fd, sa, len);
	return connect_plain(fd, sa, len);
}

/* Not known at a glance: the kernel says whether sa can be read. */
static __attribute__((noinline)) int
connect_unknown(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (readable(sa, len))
		return connect_maybe(fd, sa, len);
	return connect_plain(fd, sa, len);
}

/* Before any handout: libc's connect, bound first if need be. Out of
 * line, so that the pass-through below saves no registers for it. */
static __attribute__((noinline)) int
connect_inactive(int fd, const struct sockaddr *sa, socklen_t len)
{
	return rlb_libc()->connect(fd, sa, len);
}

/*
 * The pass-through: a page this thread has seen, then (IPv4) one bit of
 * the summary of every address handed out; anything else takes the full
 * look, out of line.
 */
int rlb_track_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	uint32_t a;

	/* A process that was never handed a replica's address passes
	 * every connect() through without reading a byte of it. */
	if (!atomic_load_explicit(&rlb_addr_active, memory_order_relaxed))
		return connect_inactive(fd, sa, len);
	/* Shorter than an IPv4 address: no replica's, nothing to read. */
	if (__builtin_expect(len < sizeof(struct sockaddr_in), 0))
		goto pass;
	if (__builtin_expect(!page_known(sa), 0))
		return connect_unknown(fd, sa, len);
	if (__builtin_expect(sa->sa_family != AF_INET, 0)) {
		if (sa->sa_family == AF_INET6)
			return connect_maybe(fd, sa, len);
		goto pass;
	}
	memcpy(&a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	if (__builtin_expect(rlb_addr_filter4_has(a), 0))
		return connect_maybe(fd, sa, len);
pass:
	if (__builtin_expect(atomic_load_explicit(&rlb_pending_count,
						  memory_order_relaxed) != 0,
			     0))
		return connect_other(fd, sa, len);
	return rlb_libc_table.connect(fd, sa, len);
}

int rlb_track_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct fd_slot *s = rlb_pending_slot(fd);
	struct pending_connect copy;
	int rc, saved, err;

	if (!s ||
	    !atomic_load_explicit(&rlb_pending_count, memory_order_relaxed) ||
	    !atomic_load_explicit(&s->pending, memory_order_acquire))
		return rlb_libc()->getsockopt(fd, level, name, val, len);
	rlb_pending_load(s, &copy);
	rc = rlb_libc()->getsockopt(fd, level, name, val, len);
	saved = errno;
	/* The program reads its own TCP_SYNCNT, not the bound's - unless it
	 * set one of its own since. */
	if (rc == 0 && level == IPPROTO_TCP && name == TCP_SYNCNT &&
	    copy.syncnt > 0 && val && len && *len >= sizeof(int) &&
	    rlb_pending_is(fd, copy.ino)) {
		int v;

		memcpy(&v, val, sizeof(v));
		if (v == rlb_pending_syncnt_for(copy.timeout_ms))
			memcpy(val, &copy.syncnt, sizeof(int));
		goto out;
	}
	if (rc != 0 || level != SOL_SOCKET || name != SO_ERROR || !len ||
	    *len < sizeof(int))
		goto out;
	memcpy(&err, val, sizeof(err));
	if (err == 0 && rlb_pending_connecting(fd))
		goto out;
	if (rlb_pending_take(fd, &copy)) {
		struct rlb_owner owners[RLB_MAX_OWNERS];
		struct sockaddr_storage failed;
		struct conn_policy pol;
		socklen_t flen;
		size_t n;

		rlb_pending_restore_syncnt(fd, &copy);
		rlb_conn_change(fd, &copy,
				err == 0 ? RLB_CHANGE_ESTABLISHED
					 : RLB_CHANGE_FAILED,
				err, -1);
		if (!rlb_errno_counts(err))
			goto out;
		n = rlb_addr_owners(&copy.d, owners, &pol);
		/*
		 * A non-blocking program learns of the failure only now:
		 * with connect_failover, it is given the socket connected
		 * to the next replica instead (waiting at most a bound per
		 * replica), or the last failure.
		 */
		if (n && pol.failover &&
		    (flen = rlb_addr_sockaddr(fd, &copy.d, &failed)) > 0) {
			int flags = rlb_libc()->fcntl(fd, F_GETFL, 0);

			err = fail_over(
				fd, (struct sockaddr *)&failed, flen, owners, n,
				err, flags >= 0 && !(flags & O_NONBLOCK), true);
			memcpy(val, &err, sizeof(err));
		}
	}
out:
	errno = saved;
	return rc;
}

int rlb_track_close(int fd)
{
	struct fd_slot *s = rlb_pending_slot(fd);
	struct pending_connect copy;
	int saved = errno;

	if (s &&
	    atomic_load_explicit(&rlb_pending_count, memory_order_relaxed) &&
	    atomic_load_explicit(&s->pending, memory_order_relaxed) &&
	    !rlb_pending_in_vfork_child() && rlb_pending_take(fd, &copy)) {
		rlb_pending_judge(&copy, fd, NULL, 0, false);
		/* A dup of fd may keep the socket open: it gets the
		 * program's TCP_SYNCNT back. */
		rlb_pending_restore_syncnt(fd, &copy);
	}
	/* Before the descriptor is closed: once it is, another thread may
	 * get its number for a new connection. */
	if (atomic_load_explicit(&rlb_ledger_count, memory_order_relaxed) &&
	    rlb_ledger_has(fd) && !rlb_pending_in_vfork_child())
		rlb_conn_change(fd, NULL, RLB_CHANGE_CLOSED, 0, -1);
	errno = saved;
	return rlb_libc()->close(fd);
}
