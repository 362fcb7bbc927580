/* track.c - connects to replica addresses (design.md §5, §11): which
 * addresses were handed out for which replica, connects bounded by the
 * cluster's connect_timeout_ms, pending attempts and their fate, failover
 * to the next replica. It reports failures and asks for the next replica
 * through the ops its owner registered; it counts nothing itself. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include "preload/preload.h"

#define ADDR_SLOTS 16384 /* handed-out (address, replica) pairs */
#define FD_SLOTS   65536 /* sockets tracked while connecting */
#define RECENT_MAX 64	 /* pending sockets swept for abandonment */
#define TRIED_MAX  16	 /* replicas one failover connect tries */

/* A normalised destination: v4-mapped v6 addresses count as v4. */
struct dest {
	uint8_t family; /* AF_INET or AF_INET6 */
	uint16_t port;	/* network order */
	uint8_t addr[16];
};

enum { SLOT_EMPTY, SLOT_WRITING, SLOT_READY };

/*
 * One handed-out address of one replica. Written once, then published by
 * `state`; never removed (the table is bounded by the config's
 * replicas and their addresses), so readers need no lock. The connect
 * settings follow the config in force at the latest handout.
 */
struct addr_slot {
	_Atomic uint32_t state;
	struct dest d;		    /* port 0: any port (gethostbyname) */
	uint64_t cluster;	    /* cluster name_hash */
	uint64_t replica;	    /* replica identity */
	_Atomic int64_t timeout_ms; /* the cluster's connect_timeout_ms */
	_Atomic bool failover;	    /* the cluster's connect_failover */
	_Atomic int64_t handout_ms; /* monotonic time of the latest handout */
	_Atomic int64_t failed_ms;  /* of the latest counted failure; 0 */
};

/* How connects to an address are made: the strictest of its owners'. */
struct conn_policy {
	int64_t timeout_ms; /* 0: unbounded */
	bool failover;
	bool stale; /* it failed since it was last handed out */
};

/* What is remembered of a pending connect. */
struct pending_connect {
	struct dest d;
	uint64_t ino;	    /* socket inode, against reused fds */
	int64_t start_ms;   /* monotonic start of the attempt */
	int64_t timeout_ms; /* its bound */
	int32_t syncnt;	    /* the program's TCP_SYNCNT, 0: not changed */
	uint32_t moved;	    /* failover moved it off the program's address */
};

#define PENDING_WORDS ((sizeof(struct pending_connect) + 7) / 8)

/*
 * A socket whose connect to a replica address is pending. The payload is
 * kept in relaxed atomic words: a slot passes from one thread to another
 * when the kernel reuses an fd number, an ordering that only the kernel
 * sees (and ThreadSanitizer would otherwise flag).
 */
struct fd_slot {
	_Atomic uint32_t pending; /* the entry's sequence number; 0: none */
	_Atomic uint64_t words[PENDING_WORDS];
};

static struct addr_slot *addr_table;
static struct fd_slot *fd_table;
static atomic_bool active;
/* Bit h set: some handed-out address has home slot h. A connect() to an
 * address whose home bit is clear is no replica's: one load decides. */
static _Atomic uint64_t home_bits[ADDR_SLOTS / 64];
/* Sockets with a pending entry; while 0, nothing needs clearing. */
static atomic_uint npending;
/* Sequence numbers of pending entries: a sweep takes exactly the entry
 * it looked at, never one set since by another thread. */
static atomic_uint pending_seq;
/* fd + 1 of recently pending sockets (0: free), swept for attempts the
 * program abandoned without our close(): a raw close, longjmp, exit. */
static _Atomic int recent[RECENT_MAX];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static const struct rlb_track_ops *_Atomic ops;

/*
 * What tells a slowdown (design.md §5.2): attempts the program gave up
 * young without their outcome (`dropped`), kept for one bound, and the
 * attempts seen to connect (`won`), the latest few.
 */
#define MOVES_MAX 8
static struct dropped {
	struct dest d;
	int64_t at_ms; /* monotonic; 0: free */
	int64_t timeout_ms;
} dropped[MOVES_MAX];
static struct won {
	struct dest d;
	int64_t start_ms; /* when its attempt started */
	int64_t at_ms;	  /* when it was seen connected; 0: free */
} won[MOVES_MAX];
static pthread_mutex_t moves_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint ndropped, nwon;
/* The process the tables belong to: a vfork child, which shares them,
 * must not take its parent's entries. */
static _Atomic pid_t owner_pid;

void rlb_track_fork_lock(void)
{
	pthread_mutex_lock(&moves_lock);
}

void rlb_track_fork_unlock(void)
{
	pthread_mutex_unlock(&moves_lock);
}

void rlb_track_after_fork_child(void)
{
	/* The attempts are the parent's: a child that closes its copies
	 * (pre-exec fd cleanup) or exits must not count them again. */
	if (fd_table && atomic_load(&npending))
		for (size_t fd = 0; fd < FD_SLOTS; fd++)
			if (atomic_load_explicit(&fd_table[fd].pending,
						 memory_order_relaxed))
				atomic_store(&fd_table[fd].pending, 0);
	atomic_store(&npending, 0);
	for (size_t k = 0; k < RECENT_MAX; k++)
		atomic_store(&recent[k], 0);
	memset(dropped, 0, sizeof(dropped));
	memset(won, 0, sizeof(won));
	atomic_store(&ndropped, 0);
	atomic_store(&nwon, 0);
	atomic_store(&owner_pid, getpid());
}

/* Whether this is a vfork() child borrowing its parent's memory (the
 * system call, not a cached pid: glibc caches none). */
static bool in_vfork_child(void)
{
	return getpid() !=
	       atomic_load_explicit(&owner_pid, memory_order_relaxed);
}

void rlb_track_set_ops(const struct rlb_track_ops *o)
{
	atomic_store_explicit(&ops, o, memory_order_release);
}

/* Hand f to the owner to count (nothing when no owner registered). */
static void report(const struct rlb_failure *f)
{
	const struct rlb_track_ops *o =
		atomic_load_explicit(&ops, memory_order_acquire);

	if (f->n && o && o->charge)
		o->charge(f);
}

static void tables_init(void)
{
	void *a = mmap(NULL, ADDR_SLOTS * sizeof(struct addr_slot),
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);
	void *f = mmap(NULL, FD_SLOTS * sizeof(struct fd_slot),
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);

	if (a == MAP_FAILED || f == MAP_FAILED) {
		if (a != MAP_FAILED)
			munmap(a, ADDR_SLOTS * sizeof(struct addr_slot));
		if (f != MAP_FAILED)
			munmap(f, FD_SLOTS * sizeof(struct fd_slot));
		rlb_log(RLB_LOG_WARNING,
			"no memory for connect tracking: errors not counted");
		return;
	}
	addr_table = a;
	fd_table = f;
	atomic_store(&owner_pid, getpid());
}

static bool to_dest(const struct sockaddr *sa, socklen_t len, struct dest *d)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0,    0,
					     0, 0, 0, 0, 0xff, 0xff};

	if (!sa)
		return false;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;

		d->family = AF_INET;
		d->port = in->sin_port;
		memcpy(d->addr, &in->sin_addr, 4);
		memset(d->addr + 4, 0, sizeof(d->addr) - 4);
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		d->port = in6->sin6_port;
		if (memcmp(&in6->sin6_addr, v4mapped, 12) == 0) {
			d->family = AF_INET;
			memcpy(d->addr, (const uint8_t *)&in6->sin6_addr + 12,
			       4);
			memset(d->addr + 4, 0, sizeof(d->addr) - 4);
		} else {
			d->family = AF_INET6;
			memcpy(d->addr, &in6->sin6_addr, 16);
		}
		return true;
	}
	return false;
}

/* d as text for the debug log: ADDR:PORT, [ADDR6]:PORT. */
static const char *dest_str(const struct dest *d, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	inet_ntop(d->family, d->addr, a, sizeof(a));
	snprintf(buf, len, d->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
		 ntohs(d->port));
	return buf;
}

/* Home slot of an address given as two words: a cheap multiply-mix. */
static inline size_t home_of(uint64_t a, uint64_t b, int family)
{
	uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)family) *
		     0xbf58476d1ce4e5b9ULL;

	return (h ^ (h >> 29)) % ADDR_SLOTS;
}

static size_t addr_home(const struct dest *d)
{
	uint64_t a, b;

	memcpy(&a, d->addr, 8);
	memcpy(&b, d->addr + 8, 8);
	return home_of(a, b, d->family);
}

static bool same_addr(const struct dest *a, const struct dest *b)
{
	return a->family == b->family &&
	       memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/*
 * The sockaddr of d for socket fd: in fd's family (an IPv4 destination of
 * an AF_INET6 socket is v4-mapped). Returns its length, 0 on failure.
 */
static socklen_t dest_sockaddr(int fd, const struct dest *d,
			       struct sockaddr_storage *ss)
{
	int domain = 0;
	socklen_t len = sizeof(domain);

	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len))
		return 0;
	memset(ss, 0, sizeof(*ss));
	if (domain == AF_INET && d->family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		in->sin_port = d->port;
		memcpy(&in->sin_addr, d->addr, 4);
		return sizeof(*in);
	}
	if (domain == AF_INET6) {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = d->port;
		if (d->family == AF_INET6) {
			memcpy(&in6->sin6_addr, d->addr, 16);
		} else {
			in6->sin6_addr.s6_addr[10] = 0xff;
			in6->sin6_addr.s6_addr[11] = 0xff;
			memcpy(&in6->sin6_addr.s6_addr[12], d->addr, 4);
		}
		return sizeof(*in6);
	}
	return 0;
}

void rlb_track_handout(const struct rlb_cluster *c, size_t i,
		       const struct sockaddr *sa, socklen_t len)
{
	struct addr_slot *s = NULL;
	struct dest d;
	size_t home, k;

	if (!to_dest(sa, len, &d))
		return;
	pthread_once(&tables_once, tables_init);
	if (!addr_table)
		return;
	home = addr_home(&d);
	if (!(atomic_load_explicit(&home_bits[home / 64],
				   memory_order_relaxed) &
	      (1ULL << (home % 64))))
		atomic_fetch_or_explicit(&home_bits[home / 64],
					 1ULL << (home % 64),
					 memory_order_release);
	for (k = 0; k < ADDR_SLOTS; k++) {
		uint32_t state;

		s = &addr_table[(home + k) % ADDR_SLOTS];
		state = atomic_load_explicit(&s->state, memory_order_acquire);
		if (state == SLOT_READY) {
			if (same_addr(&s->d, &d) && s->d.port == d.port &&
			    s->cluster == c->name_hash &&
			    s->replica == c->replicas[i].identity)
				break;
			continue;
		}
		if (state == SLOT_WRITING)
			continue;
		if (!atomic_compare_exchange_strong(&s->state, &state,
						    SLOT_WRITING))
			continue;
		s->d = d;
		s->cluster = c->name_hash;
		s->replica = c->replicas[i].identity;
		atomic_store_explicit(&s->timeout_ms, c->s.connect_timeout_ms,
				      memory_order_relaxed);
		atomic_store_explicit(&s->state, SLOT_READY,
				      memory_order_release);
		break;
	}
	if (k == ADDR_SLOTS) {
		rlb_log(RLB_LOG_DEBUG, "address table full: not tracking");
	} else {
		atomic_store_explicit(&s->timeout_ms, c->s.connect_timeout_ms,
				      memory_order_relaxed);
		atomic_store_explicit(&s->failover, c->s.connect_failover,
				      memory_order_relaxed);
		if (c->s.connect_failover)
			atomic_store_explicit(&s->handout_ms,
					      rlb_monotonic_ms(),
					      memory_order_relaxed);
	}
	atomic_store_explicit(&active, true, memory_order_release);
}

/*
 * The replicas destination d was handed out for (deduplicated), and in
 * *pol how connects to it are made: the shortest bound of its owners,
 * failover when any owner asks for it, stale when one of them has failed
 * since it was handed out. owners NULL: mark d failed now instead.
 */
static size_t find_owners(const struct dest *d, struct rlb_owner *owners,
			  struct conn_policy *pol)
{
	size_t home = addr_home(d), n = 0;

	pol->timeout_ms = 0;
	pol->failover = false;
	pol->stale = false;
	if (!addr_table || !(atomic_load_explicit(&home_bits[home / 64],
						  memory_order_acquire) &
			     (1ULL << (home % 64))))
		return 0;
	for (size_t k = 0; k < ADDR_SLOTS; k++) {
		struct addr_slot *s = &addr_table[(home + k) % ADDR_SLOTS];
		uint32_t state =
			atomic_load_explicit(&s->state, memory_order_acquire);
		int64_t t;
		size_t j;

		if (state == SLOT_EMPTY)
			break;
		if (state != SLOT_READY || !same_addr(&s->d, d) ||
		    (s->d.port && s->d.port != d->port))
			continue;
		t = atomic_load_explicit(&s->timeout_ms, memory_order_relaxed);
		if (t > 0 && (pol->timeout_ms == 0 || t < pol->timeout_ms))
			pol->timeout_ms = t;
		pol->failover |= atomic_load_explicit(&s->failover,
						      memory_order_relaxed);
		if (!owners) { /* mark it failed: see report_dest() */
			if (atomic_load_explicit(&s->failover,
						 memory_order_relaxed))
				atomic_store_explicit(&s->failed_ms,
						      rlb_monotonic_ms(),
						      memory_order_relaxed);
			continue;
		}
		pol->stale |= atomic_load_explicit(&s->failed_ms,
						   memory_order_relaxed) >
			      atomic_load_explicit(&s->handout_ms,
						   memory_order_relaxed);
		for (j = 0; j < n; j++)
			if (owners[j].cluster == s->cluster &&
			    owners[j].replica == s->replica)
				break;
		if (j == n && n < RLB_MAX_OWNERS) {
			owners[n].cluster = s->cluster;
			owners[n].replica = s->replica;
			n++;
		}
	}
	return n;
}

/*
 * Report a failure of a connect to d: an error (age_ms < 0), an attempt
 * abandoned after age_ms, or a slowdown.
 */
static void report_dest(const struct dest *d, int err, int64_t age_ms,
			bool slowdown)
{
	struct rlb_failure f = {
		.err = err, .age_ms = age_ms, .slowdown = slowdown};
	struct conn_policy pol;

	f.n = find_owners(d, f.owners, &pol);
	if (f.n && !slowdown && pol.failover)
		find_owners(d, NULL, &pol);
	report(&f);
}

static int syncnt_for(int64_t timeout_ms);

static struct fd_slot *fd_slot(int fd)
{
	if (!fd_table || fd < 0 || fd >= FD_SLOTS)
		return NULL;
	return &fd_table[fd];
}

/*
 * The socket's inode, 0 when fd is not open. The sweep asks this of
 * descriptors that other threads may be closing at that moment: the
 * kernel answers that race well (EBADF, or the next file's inode, which
 * the comparison rejects), and statx() leaves ThreadSanitizer's model of
 * descriptor lifetimes alone, where fstat() would report a race.
 */
static ino_t socket_ino(int fd)
{
	struct statx stx;

	return statx(fd, "", AT_EMPTY_PATH, STATX_INO, &stx) == 0 ? stx.stx_ino
								  : 0;
}

/* The TCP state of fd (TCP_SYN_SENT: its connect is pending), or -1. */
static int tcp_state(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return -1;
	return ti.tcpi_state;
}

static bool still_connecting(int fd)
{
	return tcp_state(fd) == TCP_SYN_SENT;
}

/*
 * Whether a closed-state TCP socket failed to connect: it never got a
 * SYN-ACK, so no RTT sample and no negotiated option was ever recorded.
 * Reads nothing the program could observe (SO_ERROR is for the program).
 */
static bool never_connected(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return false;
	return ti.tcpi_state == TCP_CLOSE && ti.tcpi_rtt == 0 &&
	       ti.tcpi_options == 0;
}

/* Whether fd's connect established at some time, whatever since. */
static bool connected_once(int fd)
{
	int state = tcp_state(fd);

	return state >= 0 && state != TCP_SYN_SENT &&
	       !(state == TCP_CLOSE && never_connected(fd));
}

static void slot_store(struct fd_slot *s, const struct pending_connect *p)
{
	uint64_t w[PENDING_WORDS] = {0};

	memcpy(w, p, sizeof(*p));
	for (size_t k = 0; k < PENDING_WORDS; k++)
		atomic_store_explicit(&s->words[k], w[k], memory_order_relaxed);
}

static void slot_load(struct fd_slot *s, struct pending_connect *p)
{
	uint64_t w[PENDING_WORDS];

	for (size_t k = 0; k < PENDING_WORDS; k++)
		w[k] = atomic_load_explicit(&s->words[k], memory_order_relaxed);
	memcpy(p, w, sizeof(*p));
}

/* Remember fd among the recently pending sockets, if there is room. */
static void recent_add(int fd)
{
	for (size_t k = 0; k < RECENT_MAX; k++) {
		int v = atomic_load_explicit(&recent[k], memory_order_relaxed);

		if (v == fd + 1)
			return;
	}
	for (size_t k = 0; k < RECENT_MAX; k++) {
		int zero = 0;

		if (atomic_compare_exchange_strong(&recent[k], &zero, fd + 1))
			return;
	}
}

static void recent_remove(int fd)
{
	for (size_t k = 0; k < RECENT_MAX; k++) {
		int v = fd + 1;

		if (atomic_compare_exchange_strong(&recent[k], &v, 0))
			return;
	}
}

static void set_pending(int fd, const struct pending_connect *p)
{
	struct fd_slot *s = fd_slot(fd);
	uint32_t seq;

	if (!s)
		return;
	if (atomic_exchange(&s->pending, 0))
		atomic_fetch_sub(&npending, 1);
	slot_store(s, p);
	do
		seq = atomic_fetch_add(&pending_seq, 1) + 1;
	while (seq == 0);
	atomic_fetch_add(&npending, 1);
	atomic_store_explicit(&s->pending, seq, memory_order_release);
	recent_add(fd);
}

/*
 * Take the pending entry of fd: the one numbered seq, or (seq == 0)
 * whichever is there. True and a copy when it was taken.
 */
static bool take_entry(int fd, uint32_t seq, struct pending_connect *copy)
{
	struct fd_slot *s = fd_slot(fd);
	uint32_t had;

	if (!s ||
	    !(had = atomic_load_explicit(&s->pending, memory_order_relaxed)))
		return false;
	if (seq == 0)
		had = atomic_exchange_explicit(&s->pending, 0,
					       memory_order_acq_rel);
	else if (seq != had ||
		 !atomic_compare_exchange_strong_explicit(&s->pending, &had, 0,
							  memory_order_acq_rel,
							  memory_order_relaxed))
		return false;
	if (!had)
		return false;
	/* Ours now: the exchange saw set_pending()'s release. */
	atomic_fetch_sub(&npending, 1);
	slot_load(s, copy);
	recent_remove(fd);
	return true;
}

/* Take the pending entry of fd if it is this very socket. */
static bool take_pending(int fd, struct pending_connect *copy)
{
	return take_entry(fd, 0, copy) && copy->ino == (uint64_t)socket_ino(fd);
}

/*
 * Give the program back its TCP_SYNCNT, if the bound changed it and the
 * program has set none of its own since.
 */
static void restore_syncnt(int fd, const struct pending_connect *p)
{
	int now = 0;
	socklen_t len = sizeof(now);

	if (p->syncnt > 0 &&
	    rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &now, &len) ==
		    0 &&
	    now == syncnt_for(p->timeout_ms))
		setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &p->syncnt,
			   sizeof(p->syncnt));
}

bool rlb_track_active(void)
{
	return atomic_load_explicit(&active, memory_order_relaxed);
}

/* Whether two owner lists share a cluster but not a replica. */
static bool other_replica_same_cluster(const struct rlb_owner *a, size_t na,
				       const struct rlb_owner *b, size_t nb)
{
	bool cluster = false;

	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++) {
			if (a[i].cluster != b[j].cluster)
				continue;
			if (a[i].replica == b[j].replica)
				return false;
			cluster = true;
		}
	return cluster;
}

/* Whether destination a is another replica of a cluster of b's. */
static bool other_replica_of(const struct dest *a, const struct dest *b)
{
	struct rlb_owner oa[RLB_MAX_OWNERS], ob[RLB_MAX_OWNERS];
	struct conn_policy pol;
	size_t na = find_owners(a, oa, &pol), nb = find_owners(b, ob, &pol);

	return other_replica_same_cluster(oa, na, ob, nb);
}

/* An attempt that connected: the evidence that another was abandoned. */
static void remember_won(const struct dest *d, int64_t start_ms)
{
	size_t victim = 0;

	pthread_mutex_lock(&moves_lock);
	for (size_t k = 0; k < MOVES_MAX; k++)
		if (won[k].at_ms < won[victim].at_ms)
			victim = k;
	if (won[victim].at_ms == 0)
		atomic_fetch_add(&nwon, 1);
	won[victim].d = *d;
	won[victim].start_ms = start_ms;
	won[victim].at_ms = rlb_monotonic_ms();
	pthread_mutex_unlock(&moves_lock);
}

/*
 * Whether the program has connected to another replica of one of p's
 * clusters by an attempt started after p's: then p, closed while still
 * connecting, was given up for it. Looks at the attempts seen to connect
 * and at those still pending, whose sockets may have connected unseen.
 */
static bool won_since(const struct pending_connect *p, int fd)
{
	bool found = false;

	if (atomic_load_explicit(&nwon, memory_order_relaxed)) {
		pthread_mutex_lock(&moves_lock);
		for (size_t k = 0; k < MOVES_MAX && !found; k++)
			found = won[k].at_ms &&
				won[k].start_ms >= p->start_ms &&
				other_replica_of(&won[k].d, &p->d);
		pthread_mutex_unlock(&moves_lock);
	}
	for (size_t k = 0; k < RECENT_MAX && !found; k++) {
		int v = atomic_load_explicit(&recent[k], memory_order_relaxed);
		struct pending_connect q;
		struct fd_slot *s;

		if (v == 0 || v - 1 == fd || !(s = fd_slot(v - 1)) ||
		    !atomic_load_explicit(&s->pending, memory_order_acquire))
			continue;
		slot_load(s, &q);
		found = q.start_ms >= p->start_ms &&
			q.ino == (uint64_t)socket_ino(v - 1) &&
			connected_once(v - 1) && other_replica_of(&q.d, &p->d);
	}
	return found;
}

/*
 * An attempt the program gave up younger than its bound, without the
 * outcome: it was slow (a slowdown, design.md §5.2) if the program went
 * to another replica of the same cluster for it - one that has connected
 * (`fd`: the socket of p, if still open, or -1), or (owners, n: n > 0)
 * one being connected now. Otherwise it is remembered: a connect to
 * another replica that starts within one bound makes it a slowdown then
 * (match_dropped()); a happy-eyeballs loser is followed by none.
 */
static void dropped_young(const struct pending_connect *p, int fd,
			  const struct rlb_owner *owners, size_t n)
{
	struct rlb_owner its[RLB_MAX_OWNERS];
	struct conn_policy pol;
	size_t victim = 0, ni;

	ni = find_owners(&p->d, its, &pol);
	if ((n && other_replica_same_cluster(owners, n, its, ni)) ||
	    won_since(p, fd)) {
		report_dest(&p->d, ETIMEDOUT, -1, true);
		return;
	}
	pthread_mutex_lock(&moves_lock);
	for (size_t k = 0; k < MOVES_MAX; k++)
		if (dropped[k].at_ms < dropped[victim].at_ms)
			victim = k;
	if (dropped[victim].at_ms == 0)
		atomic_fetch_add(&ndropped, 1);
	dropped[victim].d = p->d;
	dropped[victim].at_ms = rlb_monotonic_ms();
	dropped[victim].timeout_ms = p->timeout_ms;
	pthread_mutex_unlock(&moves_lock);
}

/*
 * Judge attempt p, given up before its outcome was seen: its socket `fd`
 * is still open (close, exit) or gone (-1: a raw close, a reused fd).
 * Only a connect that did not establish counts (design.md §5.2):
 * - still connecting (or gone) and at least its bound old: one timeout;
 * - younger: maybe a slowdown (dropped_young()), never at exit;
 * - failed, its error unread: one error, whatever its age;
 * - connected at any time: nothing, whatever happened to it since.
 */
static void judge_abandoned(const struct pending_connect *p, int fd,
			    const struct rlb_owner *owners, size_t n,
			    bool at_exit)
{
	int64_t age = rlb_monotonic_ms() - p->start_ms;
	int state = fd >= 0 ? tcp_state(fd) : TCP_SYN_SENT;

	if (state == TCP_SYN_SENT) {
		if (age >= p->timeout_ms)
			report_dest(&p->d, ETIMEDOUT, age, false);
		else if (!at_exit)
			dropped_young(p, fd, owners, n);
	} else if (state == TCP_CLOSE && never_connected(fd)) {
		/* The kind of failure cannot be read without consuming it;
		 * it counts one error whatever it is. */
		report_dest(&p->d, ECONNREFUSED, -1, false);
	}
}

/* The attempt on fd is over (connected, failed, or another connect). */
static void clear_pending(int fd)
{
	struct pending_connect copy;

	if (!atomic_load_explicit(&npending, memory_order_relaxed) ||
	    !take_entry(fd, 0, &copy))
		return;
	if (copy.ino == (uint64_t)socket_ino(fd))
		restore_syncnt(fd, &copy);
	else /* an earlier socket's, dropped without our close() */
		judge_abandoned(&copy, -1, NULL, 0, false);
}

/*
 * Look at every recently pending attempt but the one on fd now being
 * connected (design.md §5.2, §11.6):
 * - one the program dropped without our close() (a raw close system
 *   call, longjmp, the fd reused) is judged as abandoned;
 * - one whose socket has connected unseen (the program never read
 *   SO_ERROR) is over: the program's TCP_SYNCNT is put back;
 * - at exit, every one still pending is judged;
 * - one still connecting is left alone: attempts made in parallel are
 *   not slow.
 * (owners, n): the replica now being connected; n == 0: none (a
 * resolution, or exit).
 */
static void sweep(int fd, const struct rlb_owner *owners, size_t n,
		  bool at_exit)
{
	for (size_t k = 0; k < RECENT_MAX; k++) {
		int v = atomic_load_explicit(&recent[k], memory_order_relaxed);
		struct pending_connect p;
		struct fd_slot *s;
		uint32_t seq;
		bool gone;

		if (v == 0 || !(s = fd_slot(v - 1)) ||
		    !(seq = atomic_load_explicit(&s->pending,
						 memory_order_acquire)))
			continue;
		slot_load(s, &p);
		gone = p.ino != (uint64_t)socket_ino(v - 1);
		if (v - 1 == fd && !gone)
			continue; /* the socket being connected now */
		if (!gone && !at_exit && !connected_once(v - 1))
			continue;
		if (!take_entry(v - 1, seq, &p))
			continue;
		if (gone) {
			judge_abandoned(&p, -1, owners, n, at_exit);
		} else if (at_exit) {
			judge_abandoned(&p, v - 1, NULL, 0, true);
		} else {
			restore_syncnt(v - 1, &p);
			remember_won(&p.d, p.start_ms);
		}
	}
}

/*
 * A connect to a replica (owners, n) starts: attempts dropped young in
 * the last bound's time that were for another replica of one of the same
 * clusters were slow; count each once.
 */
static void match_dropped(const struct rlb_owner *owners, size_t n)
{
	int64_t now = rlb_monotonic_ms();
	struct dest slow[MOVES_MAX];
	size_t nslow = 0;

	if (!atomic_load_explicit(&ndropped, memory_order_relaxed))
		return;
	pthread_mutex_lock(&moves_lock);
	for (size_t k = 0; k < MOVES_MAX; k++) {
		struct rlb_owner its[RLB_MAX_OWNERS];
		struct conn_policy pol;
		size_t ni;

		if (dropped[k].at_ms == 0)
			continue;
		if (now - dropped[k].at_ms > dropped[k].timeout_ms) {
			dropped[k].at_ms = 0; /* too long ago to be a move */
			atomic_fetch_sub(&ndropped, 1);
			continue;
		}
		ni = find_owners(&dropped[k].d, its, &pol);
		if (!other_replica_same_cluster(owners, n, its, ni))
			continue;
		slow[nslow++] = dropped[k].d;
		dropped[k].at_ms = 0;
		atomic_fetch_sub(&ndropped, 1);
	}
	pthread_mutex_unlock(&moves_lock);
	for (size_t k = 0; k < nslow; k++)
		report_dest(&slow[k], ETIMEDOUT, -1, true);
}

void rlb_track_sweep(void)
{
	int saved = errno;

	if (atomic_load_explicit(&npending, memory_order_relaxed))
		sweep(-1, NULL, 0, false);
	errno = saved;
}

/* At exit: attempts still pending (or dropped) past their bound count. */
static void __attribute__((destructor)) sweep_at_exit(void)
{
	int saved = errno;

	if (atomic_load_explicit(&npending, memory_order_relaxed))
		sweep(-1, NULL, 0, true);
	errno = saved;
}

/*
 * Whether sa may be a handed-out address: its home bit is set. Computes
 * the same home as addr_home() straight from the sockaddr, without a
 * stack frame: this is all a connect() to any other address pays.
 */
static inline __attribute__((always_inline)) bool
maybe_replica(const struct sockaddr *sa, socklen_t len)
{
	uint64_t a = 0, b = 0;
	int family = AF_INET;
	size_t home;

	if (!sa)
		return false;
	if (sa->sa_family == AF_INET) {
		uint32_t v4;

		if (len < sizeof(struct sockaddr_in))
			return false;
		memcpy(&v4, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		a = v4;
	} else if (sa->sa_family == AF_INET6) {
		const uint8_t *p;

		if (len < sizeof(struct sockaddr_in6))
			return false;
		p = (const uint8_t *)&((const struct sockaddr_in6 *)sa)
			    ->sin6_addr;
		memcpy(&a, p, 8);
		memcpy(&b, p + 8, 8);
		if (a == 0 && p[8] == 0 && p[9] == 0 && p[10] == 0xff &&
		    p[11] == 0xff) {
			uint32_t v4;

			memcpy(&v4, p + 12, 4);
			a = v4; /* v4-mapped: the IPv4 address's home */
			b = 0;
		} else {
			family = AF_INET6;
		}
	} else {
		return false;
	}
	home = home_of(a, b, family);
	return atomic_load_explicit(&home_bits[home / 64],
				    memory_order_relaxed) &
	       (1ULL << (home % 64));
}

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
static void abort_attempt(int fd)
{
	struct sockaddr unspec = {.sa_family = AF_UNSPEC};
	socklen_t len = sizeof(int);
	int err;

	rlb_libc()->connect(fd, &unspec, sizeof(unspec));
	rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
}

static int syncnt_for(int64_t timeout_ms)
{
	int n = 1;

	while (n < 6 && ((int64_t)1 << (n + 1)) * 1000 - 1000 < timeout_ms)
		n++;
	return n;
}
static bool is_tcp(int fd)
{
	int type = 0, proto = 0;
	socklen_t l1 = sizeof(type), l2 = sizeof(proto);

	return rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) ==
		       0 &&
	       type == SOCK_STREAM &&
	       rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto,
				      &l2) == 0 &&
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
	int want = syncnt_for(p->timeout_ms), syncnt = 0;
	socklen_t len = sizeof(syncnt);

	if (p->syncnt > 0)
		return;
	if (rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syncnt,
				   &len) == 0 &&
	    syncnt > want &&
	    setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &want, sizeof(want)) == 0)
		p->syncnt = syncnt;
}

/* Store p again as fd's pending entry, if fd still has one. */
static void update_pending(int fd, const struct pending_connect *p)
{
	struct fd_slot *s = fd_slot(fd);

	if (s && atomic_load_explicit(&s->pending, memory_order_acquire))
		slot_store(s, p);
}

/*
 * For a blocking connect: lower SO_SNDTIMEO, the kernel's limit for it,
 * to what is left of the bound, unless the program's own (kept in *orig)
 * is shorter. *set: the value set. True when lowered.
 */
static bool lower_sndtimeo(int fd, const struct pending_connect *p,
			   struct timeval *orig, struct timeval *set)
{
	int64_t left = bound_left(p);
	socklen_t len = sizeof(*orig);

	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, orig, &len) !=
		    0 ||
	    (timerisset(orig) && tv_ms(orig) <= left))
		return false;
	set->tv_sec = left / 1000;
	set->tv_usec = left % 1000 * 1000;
	return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, set, sizeof(*set)) == 0;
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

	if (p->ino != (uint64_t)socket_ino(fd))
		return false;
	if (rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &now, &len) ==
		    0 &&
	    tv_ms(&now) == tv_ms(set))
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, orig, sizeof(*orig));
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
static bool program_sees_eintr(void)
{
	sigset_t blocked;

	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked) != 0)
		return true;
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sig == SIGKILL || sig == SIGSTOP ||
		    sigismember(&blocked, sig) == 1 ||
		    sigaction(sig, NULL, &sa) != 0)
			continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return true;
	}
	return false;
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
 */
static int connect_bounded(int fd, const struct sockaddr *sa, socklen_t len,
			   const struct dest *d, const struct conn_policy *pol,
			   bool blocking, const struct pending_connect *prev,
			   bool moved, bool no_eintr)
{
	struct pending_connect p = {
		.d = *d, .timeout_ms = pol->timeout_ms, .moved = moved};
	bool bounded = pol->timeout_ms > 0 && is_tcp(fd);
	int rc, err;

	if (prev) {
		/* The attempt under way: its start, bound and the
		 * program's own TCP_SYNCNT stay. */
		p = *prev;
	} else {
		p.ino = socket_ino(fd);
		p.start_ms = rlb_monotonic_ms();
		if (bounded && !blocking)
			lower_syncnt(fd, &p);
		/* Pending from the start: a longjmp out of a blocking
		 * connect leaves the entry for the sweep to find. */
		set_pending(fd, &p);
	}
	for (;;) {
		struct timeval orig = {0}, set = {0};
		bool lowered = bounded && blocking &&
			       lower_sndtimeo(fd, &p, &orig, &set);

		rc = rlb_libc()->connect(fd, sa, len);
		err = errno;
		if (lowered && !restore_sndtimeo(fd, &p, &orig, &set)) {
			errno = err; /* fd is another socket now */
			return rc;
		}
		if (rc == 0 || err == EISCONN) {
			clear_pending(fd);
			remember_won(d, p.start_ms);
			errno = err;
			return rc;
		}
		if (!blocking || (err == EALREADY && !lowered)) {
			/* Under way, or (non-blocking) failed at once. */
			if (err == EINPROGRESS || err == EALREADY ||
			    err == EINTR) {
				errno = err;
				return rc;
			}
			break;
		}
		if (err == EINTR) {
			if (lowered && (no_eintr || (!timerisset(&orig) &&
						     !program_sees_eintr())))
				continue; /* as the kernel's restart */
			if (bounded) {
				lower_syncnt(fd, &p);
				update_pending(fd, &p);
			}
			errno = EINTR;
			return -1;
		}
		if (lowered && (err == EINPROGRESS || err == EALREADY)) {
			/* Our bound fired. */
			abort_attempt(fd);
			err = ETIMEDOUT;
		}
		break;
	}
	clear_pending(fd);
	/* EINPROGRESS of a blocking socket: cut short by the program's own
	 * SO_SNDTIMEO, which is a timeout too. */
	if (err == EINPROGRESS || rlb_errno_counts(err))
		report_dest(d, err == EINPROGRESS ? ETIMEDOUT : err, -1, false);
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
	struct fd_slot *s = fd_slot(fd);
	int64_t deadline;
	int err = ETIMEDOUT;

	if (!s || !atomic_load_explicit(&s->pending, memory_order_acquire))
		return EINVAL;
	slot_load(s, &p);
	deadline = p.start_ms + (p.timeout_ms > 0 ? p.timeout_ms : 1000);
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int64_t left = deadline - rlb_monotonic_ms();
		socklen_t len = sizeof(int);
		int rc = poll(&pfd, 1, left > 0 ? (int)left : 0);

		if (rc == 1 && rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_ERROR,
						      &err, &len) != 0)
			err = errno;
		if (rc >= 0 || errno != EINTR)
			break;
	}
	clear_pending(fd);
	if (err == 0) {
		remember_won(d, p.start_ms);
		return 0;
	}
	if (err == ETIMEDOUT)
		abort_attempt(fd);
	if (rlb_errno_counts(err))
		report_dest(d, err, -1, false);
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
	const struct rlb_track_ops *o =
		atomic_load_explicit(&ops, memory_order_acquire);
	struct rlb_owner tried[TRIED_MAX];
	struct sockaddr_storage next;
	struct conn_policy pol;
	size_t ntried = 0;
	socklen_t nlen;
	struct dest d, from;
	int rc;

	if (!o || !o->next_address || !to_dest(sa, len, &from))
		goto out_fail;
	for (;;) {
		for (size_t i = 0; i < n && ntried < TRIED_MAX; i++)
			if (!tried_has(tried, ntried, &owners[i]))
				tried[ntried++] = owners[i];
		nlen = sizeof(next);
		if (ntried == TRIED_MAX ||
		    !o->next_address(tried, ntried, sa, len, &next, &nlen) ||
		    !to_dest((struct sockaddr *)&next, nlen, &d) ||
		    !(n = find_owners(&d, owners, &pol)))
			goto out_fail;
		if (rlb_log_enabled(RLB_LOG_DEBUG)) {
			char b1[64], b2[64];

			rlb_log(RLB_LOG_DEBUG,
				"connect to %s failed (%s): failing over to %s",
				dest_str(&from, b1, sizeof(b1)), strerror(err),
				dest_str(&d, b2, sizeof(b2)));
		}
		from = d;
		/* Back to an unconnected socket, whatever the failure left. */
		abort_attempt(fd);
		sa = (struct sockaddr *)&next;
		len = nlen;
		rc = connect_bounded(fd, sa, len, &d, &pol, blocking, NULL,
				     true, in_getsockopt);
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
	const struct rlb_track_ops *o =
		atomic_load_explicit(&ops, memory_order_acquire);
	struct rlb_owner nowners[RLB_MAX_OWNERS];
	struct conn_policy npol;
	socklen_t nlen = sizeof(*next);
	struct dest nd;
	size_t nn;

	if (!o || !o->next_address ||
	    !o->next_address(owners, *n, *sa, *len, next, &nlen) ||
	    !to_dest((struct sockaddr *)next, nlen, &nd) ||
	    !(nn = find_owners(&nd, nowners, &npol)))
		return;
	if (rlb_log_enabled(RLB_LOG_DEBUG)) {
		char b1[64], b2[64];

		rlb_log(RLB_LOG_DEBUG,
			"%s has failed since it was handed out: connecting "
			"to %s instead",
			dest_str(d, b1, sizeof(b1)),
			dest_str(&nd, b2, sizeof(b2)));
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
	struct fd_slot *s;
	struct dest d;
	int rc, flags, err;
	size_t n;

	if (!to_dest(sa, len, &d) || !(n = find_owners(&d, owners, &pol)) ||
	    in_vfork_child()) {
		clear_pending(fd);
		return rlb_libc()->connect(fd, sa, len);
	}
	/* A connect() repeated on a pending socket asks how it went; after
	 * a failover, about the replica the socket was moved to. */
	s = fd_slot(fd);
	repeat = s && atomic_load_explicit(&s->pending, memory_order_acquire);
	if (repeat) {
		slot_load(s, &prev);
		repeat = (prev.moved ||
			  (same_addr(&prev.d, &d) && prev.d.port == d.port)) &&
			 prev.ino == (uint64_t)socket_ino(fd);
		if (repeat && prev.moved) {
			d = prev.d;
			n = find_owners(&d, owners, &pol);
		}
	}
	sweep(fd, owners, n, false);
	match_dropped(owners, n);
	if (!repeat && pol.failover && pol.stale)
		skip_stale(&sa, &len, &next, &d, owners, &n, &pol);
	flags = fcntl(fd, F_GETFL);
	blocking = flags >= 0 && !(flags & O_NONBLOCK);
	rc = connect_bounded(fd, sa, len, &d, &pol, blocking,
			     repeat ? &prev : NULL, false, false);
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
 * Pages this thread has lately seen readable: their number + 1, 0 free.
 * A process that connects from the same buffers again and again (a stack
 * frame, an addrinfo list, a static) asks the kernel once per page.
 */
#define READABLE_PAGES 4
static RLB_TLS uintptr_t readable_pages[READABLE_PAGES];
static RLB_TLS unsigned readable_next;

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
	bool ok = syscall(SYS_futex, (void *)(p & ~(uintptr_t)3),
			  FUTEX_WAIT_PRIVATE, 0x5eedU, &zero, NULL, 0) == 0 ||
		  errno != EFAULT;

	errno = saved;
	return ok;
}

/*
 * Whether the bytes of sa that maybe_replica() reads can be read: a bad
 * pointer is libc's to refuse with EFAULT, never a crash of ours. Null,
 * the first page and addresses outside the user half are refused at
 * once, any other page is asked of the kernel once and remembered. A
 * page unmapped since it was last used is the one case still read
 * without asking (design.md §9).
 */
static inline bool readable(const struct sockaddr *sa, socklen_t len)
{
	size_t n = len < sizeof(struct sockaddr_in6)
			   ? len
			   : sizeof(struct sockaddr_in6);
	uintptr_t p = (uintptr_t)sa, page = p >> 12, end;

	/* Shorter than an IPv4 address: no replica's, nothing to read. */
	if (len < sizeof(struct sockaddr_in) || p < 4096 || p + n < p ||
	    (p + n - 1) >> 56)
		return false;
	end = (p + n - 1) >> 12;
	if (page == end)
		for (size_t k = 0; k < READABLE_PAGES; k++)
			if (readable_pages[k] == page + 1)
				return true;
	if (!page_readable(p) || (end != page && !page_readable(end << 12)))
		return false;
	if (page == end)
		readable_pages[readable_next++ % READABLE_PAGES] = page + 1;
	return true;
}

int rlb_track_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	/* A process that was never handed a replica's address passes
	 * every connect() through without reading a byte of it. */
	if (!atomic_load_explicit(&active, memory_order_relaxed) ||
	    !readable(sa, len) || !maybe_replica(sa, len)) {
		if (atomic_load_explicit(&npending, memory_order_relaxed))
			clear_pending(fd);
		return rlb_libc()->connect(fd, sa, len);
	}
	return connect_replica(fd, sa, len);
}

int rlb_track_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct fd_slot *s = fd_slot(fd);
	struct pending_connect copy;
	int rc, saved, err;

	if (!s || !atomic_load_explicit(&npending, memory_order_relaxed) ||
	    !atomic_load_explicit(&s->pending, memory_order_acquire))
		return rlb_libc()->getsockopt(fd, level, name, val, len);
	slot_load(s, &copy);
	rc = rlb_libc()->getsockopt(fd, level, name, val, len);
	saved = errno;
	/* The program reads its own TCP_SYNCNT, not the bound's - unless it
	 * set one of its own since. */
	if (rc == 0 && level == IPPROTO_TCP && name == TCP_SYNCNT &&
	    copy.syncnt > 0 && val && len && *len >= sizeof(int) &&
	    copy.ino == (uint64_t)socket_ino(fd)) {
		int v;

		memcpy(&v, val, sizeof(v));
		if (v == syncnt_for(copy.timeout_ms))
			memcpy(val, &copy.syncnt, sizeof(int));
		goto out;
	}
	if (rc != 0 || level != SOL_SOCKET || name != SO_ERROR || !len ||
	    *len < sizeof(int))
		goto out;
	memcpy(&err, val, sizeof(err));
	if (err == 0 && still_connecting(fd))
		goto out;
	if (take_pending(fd, &copy)) {
		struct rlb_owner owners[RLB_MAX_OWNERS];
		struct sockaddr_storage failed;
		struct conn_policy pol;
		socklen_t flen;
		size_t n;

		restore_syncnt(fd, &copy);
		if (err == 0)
			remember_won(&copy.d, copy.start_ms);
		if (!rlb_errno_counts(err))
			goto out;
		report_dest(&copy.d, err, -1, false);
		n = find_owners(&copy.d, owners, &pol);
		/*
		 * A non-blocking program learns of the failure only now:
		 * with connect_failover, it is given the socket connected
		 * to the next replica instead (waiting at most a bound per
		 * replica), or the last failure.
		 */
		if (n && pol.failover &&
		    (flen = dest_sockaddr(fd, &copy.d, &failed)) > 0) {
			int flags = fcntl(fd, F_GETFL);

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
	struct fd_slot *s = fd_slot(fd);
	struct pending_connect copy;
	int saved = errno;

	if (s && atomic_load_explicit(&npending, memory_order_relaxed) &&
	    atomic_load_explicit(&s->pending, memory_order_relaxed) &&
	    !in_vfork_child() && take_pending(fd, &copy)) {
		judge_abandoned(&copy, fd, NULL, 0, false);
		/* A dup of fd may keep the socket open: it gets the
		 * program's TCP_SYNCNT back. */
		restore_syncnt(fd, &copy);
	}
	errno = saved;
	return rlb_libc()->close(fd);
}
