/* track.c - error attribution: which addresses were handed out for which
 * replica, which sockets have a connect to one pending, and which failures
 * (design.md §5) belong to which replicas. It reports failures; the
 * snapshot's owner counts them. */
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

#include "rlb.h"

#define ADDR_SLOTS 16384 /* handed-out (address, replica) pairs */
#define FD_SLOTS   65536 /* sockets tracked while connecting */

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
 * replicas and their addresses), so readers need no lock.
 */
struct addr_slot {
	_Atomic uint32_t state;
	struct dest d;	  /* port 0: any port (gethostbyname) */
	uint64_t cluster; /* cluster name_hash */
	uint64_t replica; /* replica identity */
};

/* What is remembered of a pending connect. */
struct pending_connect {
	struct dest d;
	uint64_t ino;	  /* socket inode, against reused fds */
	int64_t start_ms; /* monotonic start of the attempt */
};

#define PENDING_WORDS ((sizeof(struct pending_connect) + 7) / 8)

/*
 * A socket whose connect to a replica address is pending. The payload is
 * kept in relaxed atomic words: a slot passes from one thread to another
 * when the kernel reuses an fd number, an ordering that only the kernel
 * sees (and ThreadSanitizer would otherwise flag).
 */
struct fd_slot {
	_Atomic uint32_t pending;
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
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

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

void rlb_track_handout(const struct rlb_cluster *c, size_t i,
		       const struct sockaddr *sa, socklen_t len)
{
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
		struct addr_slot *s = &addr_table[(home + k) % ADDR_SLOTS];
		uint32_t state =
			atomic_load_explicit(&s->state, memory_order_acquire);

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
		atomic_store_explicit(&s->state, SLOT_READY,
				      memory_order_release);
		break;
	}
	if (k == ADDR_SLOTS)
		rlb_log(RLB_LOG_DEBUG, "address table full: not tracking");
	atomic_store_explicit(&active, true, memory_order_release);
}

/* The replicas destination d was handed out for (deduplicated). */
static size_t find_owners(const struct dest *d, struct rlb_owner *owners)
{
	size_t home = addr_home(d), n = 0;

	if (!addr_table || !(atomic_load_explicit(&home_bits[home / 64],
						  memory_order_acquire) &
			     (1ULL << (home % 64))))
		return 0;
	for (size_t k = 0; k < ADDR_SLOTS; k++) {
		struct addr_slot *s = &addr_table[(home + k) % ADDR_SLOTS];
		uint32_t state =
			atomic_load_explicit(&s->state, memory_order_acquire);
		size_t j;

		if (state == SLOT_EMPTY)
			break;
		if (state != SLOT_READY || !same_addr(&s->d, d) ||
		    (s->d.port && s->d.port != d->port))
			continue;
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
 * Report error err of a connect to d in f: the replicas d belongs to.
 * age_ms >= 0: a pending attempt abandoned after that long.
 */
static void report(const struct dest *d, int err, int64_t age_ms,
		   struct rlb_failure *f)
{
	f->n = find_owners(d, f->owners);
	f->err = err;
	f->age_ms = age_ms;
}

static struct fd_slot *fd_slot(int fd)
{
	if (!fd_table || fd < 0 || fd >= FD_SLOTS)
		return NULL;
	return &fd_table[fd];
}

static ino_t socket_ino(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? st.st_ino : 0;
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

static void set_pending(int fd, const struct dest *d)
{
	struct fd_slot *s = fd_slot(fd);
	struct pending_connect p = {0};

	if (!s)
		return;
	if (atomic_exchange(&s->pending, 0))
		atomic_fetch_sub(&npending, 1);
	p.d = *d;
	p.ino = socket_ino(fd);
	p.start_ms = rlb_monotonic_ms();
	slot_store(s, &p);
	atomic_fetch_add(&npending, 1);
	atomic_store_explicit(&s->pending, 1, memory_order_release);
}

/* Take the pending entry of fd if it is this very socket. */
static bool take_pending(int fd, struct pending_connect *copy)
{
	struct fd_slot *s = fd_slot(fd);

	if (!s || !atomic_load_explicit(&s->pending, memory_order_relaxed) ||
	    !atomic_exchange_explicit(&s->pending, 0, memory_order_acq_rel))
		return false;
	/* Ours now: the exchange saw set_pending()'s release. */
	atomic_fetch_sub(&npending, 1);
	slot_load(s, copy);
	return copy->ino == (uint64_t)socket_ino(fd);
}

static void clear_pending(int fd)
{
	struct fd_slot *s;

	if (!atomic_load_explicit(&npending, memory_order_relaxed))
		return;
	s = fd_slot(fd);
	if (s && atomic_exchange(&s->pending, 0))
		atomic_fetch_sub(&npending, 1);
}

bool rlb_track_active(void)
{
	return atomic_load_explicit(&active, memory_order_relaxed);
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

/* connect() to an address that may be a replica's: count its failure. */
static __attribute__((noinline)) int connect_replica(int fd,
						     const struct sockaddr *sa,
						     socklen_t len,
						     struct rlb_failure *f)
{
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct dest d;
	int rc, err, flags;

	if (!to_dest(sa, len, &d) || !find_owners(&d, owners)) {
		clear_pending(fd);
		return rlb_libc()->connect(fd, sa, len);
	}
	rc = rlb_libc()->connect(fd, sa, len);
	if (rc == 0) {
		clear_pending(fd);
		return 0;
	}
	err = errno;
	if (err == EINPROGRESS) {
		flags = fcntl(fd, F_GETFL);
		if (flags >= 0 && !(flags & O_NONBLOCK)) {
			/* A blocking connect cut short by SO_SNDTIMEO. */
			report(&d, ETIMEDOUT, -1, f);
		} else {
			set_pending(fd, &d);
		}
	} else if (err == EINTR) {
		/* The attempt goes on in the background. */
		set_pending(fd, &d);
	} else if (err != EALREADY) {
		clear_pending(fd);
		if (rlb_track_counts(err))
			report(&d, err, -1, f);
	}
	errno = err;
	return rc;
}

int rlb_track_connect(int fd, const struct sockaddr *sa, socklen_t len,
		      struct rlb_failure *f)
{
	f->n = 0;
	if (!maybe_replica(sa, len)) {
		if (atomic_load_explicit(&npending, memory_order_relaxed))
			clear_pending(fd);
		return rlb_libc()->connect(fd, sa, len);
	}
	return connect_replica(fd, sa, len, f);
}

int rlb_track_getsockopt(int fd, int level, int name, void *val, socklen_t *len,
			 struct rlb_failure *f)
{
	struct fd_slot *s = fd_slot(fd);
	struct pending_connect copy;
	int rc = rlb_libc()->getsockopt(fd, level, name, val, len);
	int saved = errno, err;

	f->n = 0;
	if (rc != 0 || level != SOL_SOCKET || name != SO_ERROR || !s ||
	    !atomic_load_explicit(&npending, memory_order_relaxed) ||
	    !atomic_load_explicit(&s->pending, memory_order_acquire) || !len ||
	    *len < sizeof(int))
		return rc;
	memcpy(&err, val, sizeof(err));
	if (err == 0 && still_connecting(fd))
		goto out;
	if (take_pending(fd, &copy) && rlb_track_counts(err))
		report(&copy.d, err, -1, f);
out:
	errno = saved;
	return rc;
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

int rlb_track_close(int fd, struct rlb_failure *f)
{
	struct pending_connect copy;
	int saved = errno;

	f->n = 0;
	if (atomic_load_explicit(&npending, memory_order_relaxed) &&
	    take_pending(fd, &copy)) {
		if (still_connecting(fd))
			report(&copy.d, ETIMEDOUT,
			       rlb_monotonic_ms() - copy.start_ms, f);
		else if (has_error(fd))
			report(&copy.d, ECONNREFUSED, -1, f);
	}
	errno = saved;
	return rlb_libc()->close(fd);
}
