/* track.c - connects to replica addresses (design.md §5, §11): which
 * addresses were handed out for which replica, connects bounded by the
 * cluster's connect_timeout_ms, pending attempts and their fate, failover
 * to the next replica. It reports failures and asks for the next replica
 * through the ops its owner registered; it counts nothing itself. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "rlb.h"

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
};

/* How connects to an address are made: the strictest of its owners'. */
struct conn_policy {
	int64_t timeout_ms; /* 0: unbounded */
	bool failover;
};

/* What is remembered of a pending connect. */
struct pending_connect {
	struct dest d;
	uint64_t ino;	    /* socket inode, against reused fds */
	int64_t start_ms;   /* monotonic start of the attempt */
	int64_t timeout_ms; /* its bound */
	int32_t syncnt;	    /* the program's TCP_SYNCNT, 0: not changed */
	uint32_t slowed;    /* a slowdown was counted for it (on take) */
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
	_Atomic uint32_t slowed;  /* sequence number counted as slow */
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
 * Attempts the program closed while still pending and younger than their
 * bound: if it connects to another replica of the same cluster soon
 * after, the dropped one was slow (a slowdown, design.md §5.2).
 */
#define DROPPED_MAX 8
static struct dropped {
	struct dest d;
	int64_t at_ms; /* monotonic; 0: free */
	int64_t timeout_ms;
} dropped[DROPPED_MAX];
static pthread_mutex_t dropped_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint ndropped;

void rlb_track_fork_lock(void)
{
	pthread_mutex_lock(&dropped_lock);
}

void rlb_track_fork_unlock(void)
{
	pthread_mutex_unlock(&dropped_lock);
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
	atomic_store(&ndropped, 0);
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
	}
	atomic_store_explicit(&active, true, memory_order_release);
}

/*
 * The replicas destination d was handed out for (deduplicated), and in
 * *pol how connects to it are made: the shortest bound of its owners,
 * failover when any owner asks for it.
 */
static size_t find_owners(const struct dest *d, struct rlb_owner *owners,
			  struct conn_policy *pol)
{
	size_t home = addr_home(d), n = 0;

	pol->timeout_ms = 0;
	pol->failover = false;
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

bool rlb_track_counts(int err)
{
	switch (err) {
	case ECONNREFUSED:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case ECONNRESET:
		return true;
	default:
		return false;
	}
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
	report(&f);
}

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

/* Whether a TCP socket is still in SYN_SENT: its connect is pending. */
static bool still_connecting(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return false;
	return ti.tcpi_state == TCP_SYN_SENT;
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

/*
 * Whether the socket holds a pending error, without consuming it: poll()
 * reports POLLERR while SO_ERROR is set, and reading SO_ERROR would clear
 * it for a program that still holds the socket through another fd.
 */
static bool has_error(int fd)
{
	struct pollfd p = {.fd = fd, .events = 0};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
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
	copy->slowed = atomic_load(&s->slowed) == had;
	recent_remove(fd);
	return true;
}

/* Take the pending entry of fd if it is this very socket. */
static bool take_pending(int fd, struct pending_connect *copy)
{
	return take_entry(fd, 0, copy) && copy->ino == (uint64_t)socket_ino(fd);
}

static void remember_dropped(const struct pending_connect *p)
{
	size_t victim = 0;

	pthread_mutex_lock(&dropped_lock);
	for (size_t k = 0; k < DROPPED_MAX; k++)
		if (dropped[k].at_ms < dropped[victim].at_ms)
			victim = k;
	if (dropped[victim].at_ms == 0)
		atomic_fetch_add(&ndropped, 1);
	dropped[victim].d = p->d;
	dropped[victim].at_ms = rlb_monotonic_ms();
	dropped[victim].timeout_ms = p->timeout_ms;
	pthread_mutex_unlock(&dropped_lock);
}

/* Give the program back its TCP_SYNCNT, if the bound changed it. */
static void restore_syncnt(int fd, const struct pending_connect *p)
{
	if (p->syncnt > 0)
		setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &p->syncnt,
			   sizeof(p->syncnt));
}

/* The attempt on fd is over (connected, failed, or another connect). */
static void clear_pending(int fd)
{
	struct pending_connect copy;
	int64_t age;

	if (!atomic_load_explicit(&npending, memory_order_relaxed) ||
	    !take_entry(fd, 0, &copy))
		return;
	if (copy.ino == (uint64_t)socket_ino(fd)) {
		restore_syncnt(fd, &copy);
		return;
	}
	/* The entry was an earlier socket's, dropped without our close(). */
	age = rlb_monotonic_ms() - copy.start_ms;
	if (age >= copy.timeout_ms)
		report_dest(&copy.d, ETIMEDOUT, age, false);
	else if (!copy.slowed)
		remember_dropped(&copy);
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

/*
 * Look at every recently pending attempt but the one on fd now being
 * connected (design.md §5.2):
 * - one the program dropped without our close() (raw close system call,
 *   longjmp, the fd reused) counts a timeout error once older than its
 *   bound;
 * - one still pending, or dropped sooner, while the program now connects
 *   to another replica of the same cluster (owners, n) counts a slowdown,
 *   once;
 * - at exit, every one still pending counts once older than its bound.
 * n == 0: nothing is being connected (a resolution, or exit).
 */
static void sweep(int fd, const struct rlb_owner *owners, size_t n,
		  bool at_exit)
{
	int64_t now = rlb_monotonic_ms();

	for (size_t k = 0; k < RECENT_MAX; k++) {
		int v = atomic_load_explicit(&recent[k], memory_order_relaxed);
		struct rlb_owner its[RLB_MAX_OWNERS];
		struct conn_policy pol;
		struct pending_connect p;
		struct fd_slot *s;
		uint32_t seq, slowed;
		bool gone, other;
		size_t ni;

		if (v == 0 || !(s = fd_slot(v - 1)) ||
		    !(seq = atomic_load_explicit(&s->pending,
						 memory_order_acquire)))
			continue;
		slot_load(s, &p);
		gone = p.ino != (uint64_t)socket_ino(v - 1);
		if (v - 1 == fd && !gone)
			continue; /* the socket being connected now */
		ni = find_owners(&p.d, its, &pol);
		other = n && other_replica_same_cluster(owners, n, its, ni);
		if (!gone && !at_exit && !other)
			continue;
		if (gone || at_exit) {
			if (!take_entry(v - 1, seq, &p))
				continue;
			if (gone || still_connecting(v - 1)) {
				int64_t age = now - p.start_ms;

				if (age >= p.timeout_ms)
					report_dest(&p.d, ETIMEDOUT, age,
						    false);
				else if (other && !p.slowed)
					report_dest(&p.d, ETIMEDOUT, -1, true);
			}
			continue;
		}
		/* Still pending while another replica is tried: slow. */
		slowed = atomic_load(&s->slowed);
		if (slowed != seq && still_connecting(v - 1) &&
		    atomic_load(&s->pending) == seq &&
		    atomic_compare_exchange_strong(&s->slowed, &slowed, seq))
			report_dest(&p.d, ETIMEDOUT, -1, true);
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
	struct dest slow[DROPPED_MAX];
	size_t nslow = 0;

	if (!atomic_load_explicit(&ndropped, memory_order_relaxed))
		return;
	pthread_mutex_lock(&dropped_lock);
	for (size_t k = 0; k < DROPPED_MAX; k++) {
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
	pthread_mutex_unlock(&dropped_lock);
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

/*
 * The TCP_SYNCNT that makes the kernel give up a connect after about
 * timeout_ms: SYNs go out at 0, 1, 3, 7 ... s (RTO doubling from 1 s),
 * and with n retries the kernel gives up at 2^(n+1) - 1 s. The kernel's
 * minimum, 1, gives 3 s: a non-blocking connect cannot be bounded finer
 * without an option that would outlive the connect (TCP_USER_TIMEOUT).
 */
static int syncnt_for(int64_t timeout_ms)
{
	int n = 1;

	while (n < 6 && ((int64_t)1 << (n + 1)) * 1000 - 1000 < timeout_ms)
		n++;
	return n;
}

/* Whether fd is a TCP socket (the only kind a bound applies to). */
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

/*
 * One bounded attempt to connect fd to replica address d (design.md
 * §5.3), or (prev) the same attempt asked about again by a repeated
 * connect(). Same contract as connect(); a failure that counts is
 * reported. Blocking sockets: SO_SNDTIMEO lowered to what is left of the
 * bound for the call only, and an attempt cut short by it is given up
 * with ETIMEDOUT. Non-blocking sockets: TCP_SYNCNT lowered until the
 * attempt ends.
 */
static int connect_bounded(int fd, const struct sockaddr *sa, socklen_t len,
			   const struct dest *d, const struct conn_policy *pol,
			   bool blocking, const struct pending_connect *prev)
{
	struct pending_connect p = {.d = *d, .timeout_ms = pol->timeout_ms};
	struct timeval orig = {0}, bound;
	socklen_t olen = sizeof(orig);
	bool bounded = pol->timeout_ms > 0 && is_tcp(fd), lowered = false;
	int64_t left = pol->timeout_ms;
	int rc, err, syncnt = 0;

	if (prev) {
		/* The attempt under way: its start, bound and the
		 * program's own TCP_SYNCNT stay. */
		p = *prev;
		left = p.timeout_ms - (rlb_monotonic_ms() - p.start_ms);
		if (left < 1)
			left = 1;
	} else {
		p.ino = socket_ino(fd);
		p.start_ms = rlb_monotonic_ms();
	}
	if (bounded && blocking &&
	    rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &orig, &olen) ==
		    0 &&
	    (!timerisset(&orig) || tv_ms(&orig) > left)) {
		bound.tv_sec = left / 1000;
		bound.tv_usec = left % 1000 * 1000;
		lowered = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound,
				     sizeof(bound)) == 0;
	}
	if (bounded && !blocking && !prev) {
		int want = syncnt_for(pol->timeout_ms);

		olen = sizeof(syncnt);
		if (rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syncnt,
					   &olen) == 0 &&
		    syncnt > want &&
		    setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &want,
			       sizeof(want)) == 0)
			p.syncnt = syncnt;
	}
	/* Pending from the start: a longjmp out of a blocking connect
	 * leaves the entry for the sweep to find. */
	if (!prev)
		set_pending(fd, &p);
	rc = rlb_libc()->connect(fd, sa, len);
	err = errno;
	if (lowered)
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &orig, sizeof(orig));
	if (rc == 0 || err == EISCONN) {
		clear_pending(fd);
		errno = err;
		return rc;
	}
	/* Still under way: in the background (EINTR), or not finished. */
	if (err == EINTR || err == EALREADY ||
	    (err == EINPROGRESS && !blocking)) {
		errno = err;
		return rc;
	}
	clear_pending(fd);
	if (err == EINPROGRESS) {
		/* Blocking, cut short by SO_SNDTIMEO: ours or the program's. */
		if (lowered) {
			abort_attempt(fd);
			err = ETIMEDOUT;
		}
		report_dest(d, ETIMEDOUT, -1, false);
	} else if (rlb_track_counts(err)) {
		report_dest(d, err, -1, false);
	}
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

/* connect() to an address that may be a replica's. */
/*
 * For a non-blocking socket whose failure is seen only now (SO_ERROR):
 * wait for the attempt just started on fd to end, at most its bound.
 * Returns 0 when it connected, else the error (reported, attempt over).
 */
static int wait_connected(int fd, const struct dest *d,
			  const struct conn_policy *pol)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int64_t bound = pol->timeout_ms > 0 ? pol->timeout_ms : 1000;
	socklen_t len = sizeof(int);
	int err = ETIMEDOUT;

	if (poll(&p, 1, (int)bound) == 1 &&
	    rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	clear_pending(fd);
	if (err == 0)
		return 0;
	if (err == ETIMEDOUT)
		abort_attempt(fd);
	if (rlb_track_counts(err))
		report_dest(d, err, -1, false);
	return err;
}

/*
 * connect_failover (design.md §5.4): after a failure `err` (already
 * reported) of a connect of fd to sa, owned by the n replicas in owners,
 * connect the same socket to the next replica of the selection, with the
 * port resolution would have given, until one does not fail or none is
 * left. `wait`: the failure was seen through SO_ERROR, so each attempt
 * is waited for (at most its bound) and the result is an SO_ERROR value;
 * otherwise it is connect()'s (-1 with errno, or 0). Returns as `err`
 * (or -1/errno err) when no replica is left.
 */
static int fail_over(int fd, const struct sockaddr *sa, socklen_t len,
		     struct rlb_owner *owners, size_t n, int err, bool blocking,
		     bool wait)
{
	const struct rlb_track_ops *o =
		atomic_load_explicit(&ops, memory_order_acquire);
	struct rlb_owner tried[TRIED_MAX];
	struct sockaddr_storage next;
	struct conn_policy pol;
	size_t ntried = 0;
	socklen_t nlen;
	struct dest d;
	int rc;

	if (!o || !o->next_address)
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
		rlb_log(RLB_LOG_DEBUG, "connect failed (%s): failing over",
			strerror(err));
		/* Back to an unconnected socket, whatever the failure left. */
		abort_attempt(fd);
		sa = (struct sockaddr *)&next;
		len = nlen;
		rc = connect_bounded(fd, sa, len, &d, &pol, blocking, NULL);
		if (wait) {
			if (rc == 0)
				return 0;
			err = errno;
			if (err == EINPROGRESS &&
			    (err = wait_connected(fd, &d, &pol)) == 0)
				return 0;
		} else {
			if (rc == 0 || !rlb_track_counts(errno))
				return rc;
			err = errno;
		}
		if (!rlb_track_counts(err))
			goto out_fail;
	}
out_fail:
	if (wait)
		return err;
	errno = err;
	return -1;
}

/* connect() to an address that may be a replica's. */
static __attribute__((noinline)) int
connect_replica(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct pending_connect prev;
	struct conn_policy pol;
	bool blocking, repeat;
	struct fd_slot *s;
	struct dest d;
	int rc, flags;
	size_t n;

	if (!to_dest(sa, len, &d) || !(n = find_owners(&d, owners, &pol))) {
		clear_pending(fd);
		return rlb_libc()->connect(fd, sa, len);
	}
	/* A connect() repeated on a pending socket asks how it went. */
	s = fd_slot(fd);
	repeat = s && atomic_load_explicit(&s->pending, memory_order_acquire);
	if (repeat) {
		slot_load(s, &prev);
		repeat = same_addr(&prev.d, &d) && prev.d.port == d.port &&
			 prev.ino == (uint64_t)socket_ino(fd);
	}
	sweep(fd, owners, n, false);
	match_dropped(owners, n);
	flags = fcntl(fd, F_GETFL);
	blocking = flags >= 0 && !(flags & O_NONBLOCK);
	rc = connect_bounded(fd, sa, len, &d, &pol, blocking,
			     repeat ? &prev : NULL);
	/*
	 * A failure that counts is not the program's to see while another
	 * replica of the selection is left. Asked by a repeated connect()
	 * (hiredis), the answer must be final: "connected" or the failure,
	 * never "in progress" again.
	 */
	if (rc == 0 || !rlb_track_counts(errno) || !pol.failover)
		return rc;
	if (!repeat)
		return fail_over(fd, sa, len, owners, n, errno, blocking,
				 false);
	rc = fail_over(fd, sa, len, owners, n, errno, blocking, true);
	if (rc == 0)
		return 0;
	errno = rc;
	return -1;
}

int rlb_track_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (!maybe_replica(sa, len)) {
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
	/* The program reads its own TCP_SYNCNT, not the bound's. */
	if (level == IPPROTO_TCP && name == TCP_SYNCNT && copy.syncnt > 0 &&
	    val && len && *len >= sizeof(int) &&
	    copy.ino == (uint64_t)socket_ino(fd)) {
		memcpy(val, &copy.syncnt, sizeof(int));
		*len = sizeof(int);
		return 0;
	}
	rc = rlb_libc()->getsockopt(fd, level, name, val, len);
	saved = errno;
	if (rc != 0 || level != SOL_SOCKET || name != SO_ERROR || !len ||
	    *len < sizeof(int))
		return rc;
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
		if (!rlb_track_counts(err))
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
			err = fail_over(fd, (struct sockaddr *)&failed, flen,
					owners, n, err, false, true);
			memcpy(val, &err, sizeof(err));
		}
	}
out:
	errno = saved;
	return rc;
}

int rlb_track_close(int fd)
{
	struct pending_connect copy;
	int saved = errno;

	if (atomic_load_explicit(&npending, memory_order_relaxed) &&
	    take_pending(fd, &copy)) {
		int64_t age = rlb_monotonic_ms() - copy.start_ms;

		if (still_connecting(fd)) {
			if (age >= copy.timeout_ms)
				report_dest(&copy.d, ETIMEDOUT, age, false);
			else if (!copy.slowed)
				remember_dropped(&copy);
		} else if (has_error(fd) || never_connected(fd)) {
			/* The kind of failure cannot be read without
			 * consuming it; it counts one error whatever it is. */
			report_dest(&copy.d, ECONNREFUSED, -1, false);
		}
	}
	errno = saved;
	return rlb_libc()->close(fd);
}
