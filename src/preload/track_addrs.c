/* track_addrs.c - the table of handed-out addresses (design.md §11.1):
 * which replicas an address was handed out for, and how connects to it
 * are made. Written at every resolution, read at every connect: readers
 * take no lock. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <sys/mman.h>

#include "preload/track_internal.h"

enum { SLOT_EMPTY, SLOT_WRITING, SLOT_READY };

/*
 * One handed-out address of one replica. Written once, then published by
 * `state`; never changed in a table but for the connect settings, which
 * follow the config in force at the latest handout, so readers need no
 * lock.
 */
struct addr_slot {
	_Atomic uint32_t state;
	_Atomic uint32_t epoch;	    /* table_epoch of its latest handout */
	struct dest d;		    /* port 0: any port (gethostbyname) */
	uint64_t cluster;	    /* cluster name_hash */
	uint64_t replica;	    /* replica identity */
	_Atomic int64_t timeout_ms; /* the cluster's connect_timeout_ms */
	_Atomic bool failover;	    /* the cluster's connect_failover */
	_Atomic int32_t hedge_ms;   /* its hedge time; 0: not hedged */
	_Atomic int64_t handout_ms; /* monotonic time of the latest handout */
	_Atomic int64_t failed_ms;  /* of the latest counted failure; 0 */
};

/*
 * A table: the home bits first (rlb_addr_bits()), then the slots, open
 * addressing from each address's home slot. A table is never changed
 * under its readers' feet: when it fills up (3/4 of its slots), a new
 * one takes over with the addresses handed out since the table before
 * was replaced (the others were not resolved for that long), and the old
 * one is unmapped a minute later, when no reader can be in it any more.
 */
struct addr_table {
	_Atomic uint64_t home_bits[ADDR_SLOTS / 64];
	_Atomic uint32_t used; /* slots claimed */
	struct addr_slot slots[ADDR_SLOTS];
};

#define TABLE_FULL  (ADDR_SLOTS / 4 * 3) /* slots that call for a new one */
#define RETIRE_MS   60000		 /* a replaced table's grace */
#define RETIRED_MAX 8

struct addr_table *_Atomic rlb_addr_table;
atomic_bool rlb_addr_active;
_Atomic uint64_t rlb_addr_filter4[RLB_FILTER4_BITS / 64];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
/* Set once tables_init() has run: resolutions skip pthread_once(). */
static atomic_bool tables_ready;
/* Advanced at each replacement; slots remember the latest they saw. */
static _Atomic uint32_t table_epoch = 1;
/*
 * Advanced by whatever makes the full look of a handout needed again: a
 * new epoch or table, a failure marked (a handout after it makes the
 * address not stale). A cluster view's track_stamps[i] equal to literal_stamp()
 * of replica i's literal says that the replica's hint slot holds that literal
 * with that port, up to date: a handout of it then does nothing (design.md
 * §5.3).
 */
static _Atomic uint64_t handout_gen = 1;

/* The stamp of literal k of a replica handed out with port (0: none). */
static inline uint64_t literal_stamp(uint64_t gen, uint16_t port, size_t k)
{
	return k < 255 ? gen << 24 | (uint64_t)port << 8 | (k + 1) : 0;
}

static void handout_gen_advance(void)
{
	atomic_fetch_add_explicit(&handout_gen, 1, memory_order_release);
}
/* Replacing the table; tables replaced and when. */
static pthread_mutex_t replace_lock = PTHREAD_MUTEX_INITIALIZER;
static struct retired {
	struct addr_table *t;
	int64_t at_ms;
} retired[RETIRED_MAX];
static atomic_uint replaced_count;
static int64_t last_replace_ms = -1000000; /* under replace_lock */
static bool warned_in_use;		   /* under replace_lock */
static unsigned full_in_row;		   /* under replace_lock */

static struct addr_table *table_new(void)
{
	void *t = rlb_libc()->mmap(NULL, sizeof(struct addr_table),
				   PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return t == MAP_FAILED ? NULL : t;
}

static void tables_init(void)
{
	struct addr_table *t = table_new();

	rlb_pending_setup();
	if (!t) {
		rlb_log(RLB_LOG_WARNING,
			"no memory for connect tracking: errors not counted");
		return;
	}
	atomic_store_explicit(&rlb_addr_table, t, memory_order_release);
}

void rlb_addr_fork_lock(void)
{
	pthread_mutex_lock(&replace_lock);
}

void rlb_addr_fork_unlock(void)
{
	pthread_mutex_unlock(&replace_lock);
}

unsigned rlb_addr_replaced(void)
{
	return atomic_load_explicit(&replaced_count, memory_order_relaxed);
}

bool rlb_addr_to_dest(const struct sockaddr *sa, socklen_t len, struct dest *d)
{
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		uint64_t w0 = 0;

		memcpy(&w0, &in->sin_addr, 4); /* its bytes, then zeroes */
		d->family = AF_INET;
		d->port = in->sin_port;
		d->w[0] = w0;
		d->w[1] = 0;
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const uint8_t *p =
			(const uint8_t *)&((const struct sockaddr_in6 *)sa)
				->sin6_addr;
		uint64_t w0, w1;

		memcpy(&w0, p, 8);
		memcpy(&w1, p + 8, 8);
		d->port = ((const struct sockaddr_in6 *)sa)->sin6_port;
		if (w0 == 0 && p[8] == 0 && p[9] == 0 && p[10] == 0xff &&
		    p[11] == 0xff) {
			uint64_t v4 = 0;

			memcpy(&v4, p + 12, 4);
			d->family = AF_INET; /* v4-mapped: the IPv4 address */
			d->w[0] = v4;
			d->w[1] = 0;
		} else {
			d->family = AF_INET6;
			d->w[0] = w0;
			d->w[1] = w1;
		}
		return true;
	}
	return false;
}

/* d as text for the debug log: ADDR:PORT, [ADDR6]:PORT. */
const char *rlb_addr_str(const struct dest *d, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	inet_ntop(d->family, d->addr, a, sizeof(a));
	snprintf(buf, len, d->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
		 ntohs(d->port));
	return buf;
}

static size_t addr_home(const struct dest *d)
{
	return rlb_addr_home_of(d->w[0], d->w[1], d->family);
}

bool rlb_addr_same(const struct dest *a, const struct dest *b)
{
	return a->family == b->family && a->w[0] == b->w[0] &&
	       a->w[1] == b->w[1];
}

/*
 * The sockaddr of d for socket fd: in fd's family (an IPv4 destination of
 * an AF_INET6 socket is v4-mapped). Returns its length, 0 on failure.
 */
socklen_t rlb_addr_sockaddr(int fd, const struct dest *d,
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

/* Set slot s of table t to hold d for (cluster, replica), claimed. */
static void slot_fill(struct addr_table *t, struct addr_slot *s,
		      const struct dest *d, uint64_t cluster, uint64_t replica,
		      int64_t timeout_ms, uint32_t epoch)
{
	s->d = *d;
	s->cluster = cluster;
	s->replica = replica;
	atomic_store_explicit(&s->timeout_ms, timeout_ms, memory_order_relaxed);
	atomic_store_explicit(&s->epoch, epoch, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->used, 1, memory_order_relaxed);
	atomic_store_explicit(&s->state, SLOT_READY, memory_order_release);
}

/*
 * Find or claim the slot of d for (cluster, replica) in t, its home bit
 * set; NULL when every slot is taken. *fresh: claimed (and filled) now.
 */
static struct addr_slot *table_slot(struct addr_table *t, const struct dest *d,
				    uint64_t cluster, uint64_t replica,
				    int64_t timeout_ms, uint32_t epoch,
				    bool *fresh)
{
	size_t home = addr_home(d);

	*fresh = false;
	/* The summary first, for every IPv4 address (its bit is not the
	 * home's): a connect that finds the home bit finds it too. Written
	 * only when it changes, as the home bits. */
	if (d->family == AF_INET && !rlb_addr_filter4_has((uint32_t)d->w[0])) {
		size_t f = rlb_addr_filter4_index((uint32_t)d->w[0]);

		atomic_fetch_or_explicit(&rlb_addr_filter4[f / 64],
					 1ULL << (f % 64),
					 memory_order_release);
	}
	if (!(atomic_load_explicit(&t->home_bits[home / 64],
				   memory_order_relaxed) &
	      (1ULL << (home % 64))))
		atomic_fetch_or_explicit(&t->home_bits[home / 64],
					 1ULL << (home % 64),
					 memory_order_release);
	for (size_t k = 0; k < ADDR_SLOTS; k++) {
		struct addr_slot *s = &t->slots[(home + k) % ADDR_SLOTS];
		uint32_t state =
			atomic_load_explicit(&s->state, memory_order_acquire);

		if (state == SLOT_READY) {
			if (rlb_addr_same(&s->d, d) && s->d.port == d->port &&
			    s->cluster == cluster && s->replica == replica)
				return s;
			continue;
		}
		if (state == SLOT_WRITING ||
		    !atomic_compare_exchange_strong(&s->state, &state,
						    SLOT_WRITING))
			continue;
		slot_fill(t, s, d, cluster, replica, timeout_ms, epoch);
		*fresh = true;
		return s;
	}
	return NULL;
}

/*
 * Table t has filled up: a new one takes over with the addresses handed
 * out since the last replacement (epoch), settings and failure times
 * kept. One thread does it; the others go on with t meanwhile (what
 * they add to it then is added to the new table at its next handout).
 */
static void table_replace(struct addr_table *t)
{
	uint32_t epoch =
		atomic_load_explicit(&table_epoch, memory_order_relaxed);
	int64_t now = rlb_monotonic_ms();
	struct addr_table *n;
	size_t kept = 0, k;

	if (pthread_mutex_trylock(&replace_lock) != 0)
		return;
	/* At most one a second: a table in use by as many addresses as it
	 * holds is not replaced again and again. */
	if (atomic_load_explicit(&rlb_addr_table, memory_order_acquire) != t ||
	    now - last_replace_ms < 1000 || !(n = table_new()))
		goto out_unlock;
	last_replace_ms = now;
	for (k = 0; k < ADDR_SLOTS; k++) {
		struct addr_slot *s = &t->slots[k], *c;
		bool fresh;

		if (atomic_load_explicit(&s->state, memory_order_acquire) !=
			    SLOT_READY ||
		    atomic_load_explicit(&s->epoch, memory_order_relaxed) !=
			    epoch)
			continue;
		c = table_slot(n, &s->d, s->cluster, s->replica,
			       atomic_load_explicit(&s->timeout_ms,
						    memory_order_relaxed),
			       epoch, &fresh);
		if (!c)
			break;
		atomic_store_explicit(
			&c->failover,
			atomic_load_explicit(&s->failover,
					     memory_order_relaxed),
			memory_order_relaxed);
		atomic_store_explicit(
			&c->hedge_ms,
			atomic_load_explicit(&s->hedge_ms,
					     memory_order_relaxed),
			memory_order_relaxed);
		atomic_store_explicit(
			&c->handout_ms,
			atomic_load_explicit(&s->handout_ms,
					     memory_order_relaxed),
			memory_order_relaxed);
		atomic_store_explicit(
			&c->failed_ms,
			atomic_load_explicit(&s->failed_ms,
					     memory_order_relaxed),
			memory_order_relaxed);
		kept++;
	}
	if (kept >= TABLE_FULL) {
		/*
		 * Everything was handed out in this epoch (the first one
		 * lasts until the table fills): start a new epoch, so that
		 * the next attempt keeps what is handed out again from now
		 * on. Only a second such attempt in a row means more
		 * addresses in use than a table holds.
		 */
		rlb_libc()->munmap(n, sizeof(struct addr_table));
		atomic_store_explicit(&table_epoch, epoch + 1,
				      memory_order_relaxed);
		handout_gen_advance();
		if (full_in_row++ && !warned_in_use) {
			warned_in_use = true;
			rlb_log(RLB_LOG_WARNING,
				"more than %d replica addresses in use: "
				"connects to further ones are not counted",
				TABLE_FULL);
		}
		goto out_unlock;
	}
	full_in_row = 0;
	/* Copies keep the epoch that ended: handed out again, they move to
	 * the new one; at the next replacement the others are dropped. */
	atomic_store_explicit(&table_epoch, epoch + 1, memory_order_relaxed);
	atomic_store_explicit(&rlb_addr_table, n, memory_order_release);
	handout_gen_advance();
	atomic_fetch_add_explicit(&replaced_count, 1, memory_order_relaxed);
	rlb_log(RLB_LOG_INFO,
		"table of handed-out addresses full: %zu in use kept, the "
		"others dropped",
		kept);
	/* Unmap tables replaced long enough ago; keep t for its grace. */
	for (k = 0; k < RETIRED_MAX; k++)
		if (retired[k].t && now - retired[k].at_ms >= RETIRE_MS) {
			rlb_libc()->munmap(retired[k].t,
					   sizeof(struct addr_table));
			retired[k].t = NULL;
		}
	for (k = 0; k < RETIRED_MAX && retired[k].t; k++)
		;
	if (k < RETIRED_MAX) {
		retired[k].t = t;
		retired[k].at_ms = now;
	} /* else: t is never unmapped (a table a minute is 8 in 60 s) */
out_unlock:
	pthread_mutex_unlock(&replace_lock);
}

/*
 * Record d, which the caller has just built field by field: read here
 * field by field too (a copy of the whole would load it wider than its
 * stores, a failed store forward).
 */
static inline __attribute__((always_inline)) void
handout(const struct rlb_cluster *c, size_t i, const struct dest *d,
	uint64_t stamp)
{
	struct addr_table *t;
	struct addr_slot *s, *hint;
	uint32_t epoch;
	bool fresh, ours, hinted;
	_Atomic uint64_t *stamps = c->view ? c->view->track_stamps : NULL;
	void *_Atomic *hints;
	int32_t hedge_ms = !c->s.use_hedged_requests ? 0
			   : c->s.hedged_connection_timeout_ms > INT32_MAX
				   ? INT32_MAX
				   : (int32_t)c->s.hedged_connection_timeout_ms;

	if (!atomic_load_explicit(&tables_ready, memory_order_acquire)) {
		pthread_once(&tables_once, tables_init);
		atomic_store_explicit(&tables_ready, true,
				      memory_order_release);
	}
	t = atomic_load_explicit(&rlb_addr_table, memory_order_acquire);
	if (!t)
		return;
	epoch = atomic_load_explicit(&table_epoch, memory_order_relaxed);
	/*
	 * The replica's hint first: the slot it last handed out, if that is
	 * a slot of this table holding this very address for it. Resolving
	 * the same name again (the common case) then costs no probe.
	 */
	fresh = false;
	hints = c->view ? c->view->track_hints : NULL;
	hint = hints ? atomic_load_explicit(&hints[i], memory_order_relaxed)
		     : NULL;
	ours = hint && hint >= t->slots && hint < t->slots + ADDR_SLOTS &&
	       atomic_load_explicit(&hint->state, memory_order_acquire) ==
		       SLOT_READY &&
	       hint->cluster == c->name_hash &&
	       hint->replica == c->replicas[i].identity;
	if (ours && rlb_addr_same(&hint->d, d) && hint->d.port == d->port) {
		s = hint;
		hinted = true;
	} else {
		s = table_slot(t, d, c->name_hash, c->replicas[i].identity,
			       c->s.connect_timeout_ms, epoch, &fresh);
		/* A replica with several addresses keeps the hint of its
		 * first: threads never take turns writing it. */
		hinted = s && !ours;
		if (hinted && hints)
			atomic_store_explicit(&hints[i], s,
					      memory_order_relaxed);
	}
	if (!s) {
		rlb_log(RLB_LOG_DEBUG, "address table full: not tracking");
	} else {
		/*
		 * Read-mostly: every resolution of every thread hands the
		 * same addresses out again, so a slot is written only when
		 * something changed (a reload, a new epoch), never as a
		 * matter of course (a shared cache line written per
		 * resolution would not let two threads resolve any faster
		 * than one).
		 */
		if (atomic_load_explicit(&s->epoch, memory_order_relaxed) !=
		    epoch)
			atomic_store_explicit(&s->epoch, epoch,
					      memory_order_relaxed);
		if (atomic_load_explicit(&s->timeout_ms,
					 memory_order_relaxed) !=
		    c->s.connect_timeout_ms)
			atomic_store_explicit(&s->timeout_ms,
					      c->s.connect_timeout_ms,
					      memory_order_relaxed);
		if (atomic_load_explicit(&s->hedge_ms, memory_order_relaxed) !=
		    hedge_ms)
			atomic_store_explicit(&s->hedge_ms, hedge_ms,
					      memory_order_relaxed);
		if (atomic_load_explicit(&s->failover, memory_order_relaxed) !=
		    c->s.connect_failover)
			atomic_store_explicit(&s->failover,
					      c->s.connect_failover,
					      memory_order_relaxed);
		/* Handed out again after a failure: not stale any more. */
		if (c->s.connect_failover &&
		    atomic_load_explicit(&s->failed_ms, memory_order_relaxed) >
			    atomic_load_explicit(&s->handout_ms,
						 memory_order_relaxed))
			atomic_store_explicit(&s->handout_ms,
					      rlb_monotonic_ms(),
					      memory_order_relaxed);
		/* Its hint is this very address, now up to date: the next
		 * handouts of it need nothing until the generation moves.
		 * Written only when it changes, as the slot. */
		if (stamp && hinted && stamps &&
		    atomic_load_explicit(&stamps[i], memory_order_relaxed) !=
			    stamp)
			atomic_store_explicit(&stamps[i], stamp,
					      memory_order_relaxed);
	}
	if ((fresh || !s) &&
	    atomic_load_explicit(&t->used, memory_order_relaxed) >= TABLE_FULL)
		table_replace(t);
	if (!atomic_load_explicit(&rlb_addr_active, memory_order_relaxed))
		atomic_store_explicit(&rlb_addr_active, true,
				      memory_order_release);
}

void rlb_track_handout(const struct rlb_cluster *c, size_t i,
		       const struct sockaddr *sa, socklen_t len)
{
	struct dest d;

	if (rlb_addr_to_dest(sa, len, &d))
		handout(c, i, &d, 0);
}

/* Handed out as it was the last time: nothing to do. */
static inline bool handed_out_so(const struct rlb_cluster *c, size_t i,
				 uint64_t stamp)
{
	return stamp && c->view && c->view->track_stamps &&
	       atomic_load_explicit(&c->view->track_stamps[i],
				    memory_order_relaxed) == stamp;
}

static inline uint64_t current_stamp(uint16_t port, size_t k)
{
	return literal_stamp(
		atomic_load_explicit(&handout_gen, memory_order_acquire), port,
		k);
}

/* The handout of IPv4 address addr (network order) under stamp. */
static inline __attribute__((always_inline)) void
handout_v4(const struct rlb_cluster *c, size_t i, uint32_t addr, uint16_t port,
	   uint64_t stamp)
{
	struct dest d;

	if (handed_out_so(c, i, stamp))
		return;
	d.family = AF_INET;
	d.port = port;
	d.w[0] = addr; /* its bytes, then zeroes, as rlb_addr_to_dest() */
	d.w[1] = 0;
	handout(c, i, &d, stamp);
}

void rlb_track_handout_v4(const struct rlb_cluster *c, size_t i, uint32_t addr,
			  uint16_t port)
{
	handout_v4(c, i, addr, port, current_stamp(port, 0));
}

void rlb_track_handout_literal(const struct rlb_cluster *c, size_t i,
			       const struct rlb_addr *lit, uint16_t port)
{
	const struct rlb_replica *r = &c->replicas[i];
	struct sockaddr_in6 in6;

	if (lit->family == AF_INET) {
		uint32_t addr;

		memcpy(&addr, lit->bytes, 4);
		handout_v4(c, i, addr, port,
			   current_stamp(port, (size_t)(lit - r->literal)));
		return;
	}
	/* IPv6 (rare, and v4-mapped ones are unfolded): the general way,
	 * without a stamp. */
	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_port = port;
	memcpy(&in6.sin6_addr, lit->bytes, 16);
	rlb_track_handout(c, i, (const struct sockaddr *)&in6, sizeof(in6));
}

/*
 * The replicas destination d was handed out for (deduplicated), and in
 * *pol how connects to it are made: the shortest bound of its owners,
 * failover when any owner asks for it, stale when one of them has failed
 * since it was handed out. owners NULL: mark d failed now instead.
 */
size_t rlb_addr_owners(const struct dest *d, struct rlb_owner *owners,
		       struct conn_policy *pol)
{
	size_t home = addr_home(d), n = 0;
	struct addr_table *tab =
		atomic_load_explicit(&rlb_addr_table, memory_order_acquire);

	pol->timeout_ms = 0;
	pol->hedge_ms = 0;
	pol->failover = false;
	pol->stale = false;
	if (!tab || !(atomic_load_explicit(&tab->home_bits[home / 64],
					   memory_order_acquire) &
		      (1ULL << (home % 64))))
		return 0;
	for (size_t k = 0; k < ADDR_SLOTS; k++) {
		struct addr_slot *s = &tab->slots[(home + k) % ADDR_SLOTS];
		uint32_t state =
			atomic_load_explicit(&s->state, memory_order_acquire);
		int64_t t;
		int32_t h;
		size_t j;

		if (state == SLOT_EMPTY)
			break;
		if (state != SLOT_READY || !rlb_addr_same(&s->d, d) ||
		    (s->d.port && s->d.port != d->port))
			continue;
		t = atomic_load_explicit(&s->timeout_ms, memory_order_relaxed);
		if (t > 0 && (pol->timeout_ms == 0 || t < pol->timeout_ms))
			pol->timeout_ms = t;
		pol->failover |= atomic_load_explicit(&s->failover,
						      memory_order_relaxed);
		h = atomic_load_explicit(&s->hedge_ms, memory_order_relaxed);
		if (h > 0 && (pol->hedge_ms == 0 || h < pol->hedge_ms))
			pol->hedge_ms = h;
		if (!owners) { /* mark it failed: see report_dest() */
			if (atomic_load_explicit(&s->failover,
						 memory_order_relaxed)) {
				atomic_store_explicit(&s->failed_ms,
						      rlb_monotonic_ms(),
						      memory_order_relaxed);
				handout_gen_advance();
			}
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

bool rlb_track_active(void)
{
	/* Or it holds a connection it was sent (SCM_RIGHTS), without ever
	 * having been handed a replica's address itself. */
	return atomic_load_explicit(&rlb_addr_active, memory_order_relaxed) ||
	       atomic_load_explicit(&rlb_ledger_count, memory_order_relaxed);
}

/* Whether two owner lists share a cluster but not a replica. */
bool rlb_addr_other_replica(const struct rlb_owner *a, size_t na,
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
bool rlb_addr_other_replica_of(const struct dest *a, const struct dest *b)
{
	struct rlb_owner oa[RLB_MAX_OWNERS], ob[RLB_MAX_OWNERS];
	struct conn_policy pol;
	size_t na = rlb_addr_owners(a, oa, &pol),
	       nb = rlb_addr_owners(b, ob, &pol);

	return rlb_addr_other_replica(oa, na, ob, nb);
}
