/* track_internal.h - what the four parts of connect tracking share:
 * track_addrs.c, the table of handed-out addresses (which replica an
 * address is); track_ledger.c, the connection ledger (a row per
 * descriptor, a record per connection) and rlb_conn_change(), through
 * which every change of it passes; track_pending.c, attempts pending and
 * their fate (what is abandoned, slowdowns); track_connect.c, the connect
 * engine (bounds, signals, failover) and the hook bodies (design.md §5,
 * §11). */
#ifndef RLB_TRACK_INTERNAL_H
#define RLB_TRACK_INTERNAL_H

#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "preload/preload.h"

#define ADDR_SLOTS     16384 /* handed-out (address, replica) pairs */
#define RLB_LEDGER_FDS 65536 /* descriptor numbers the ledger follows */

/* A normalised destination: v4-mapped v6 addresses count as v4. */
struct dest {
	uint8_t family; /* AF_INET or AF_INET6 */
	uint16_t port;	/* network order */
	/* The address bytes (IPv4: 4, then zeroes), also as two words:
	 * written and read as words, so that hashing a destination just
	 * built reads whole stores (no store-forwarding stall). */
	union {
		uint8_t addr[16];
		uint64_t w[2];
	};
};

/* How connects to an address are made: the strictest of its owners'. */
struct conn_policy {
	int64_t timeout_ms; /* 0: unbounded */
	int32_t hedge_ms;   /* hedge after this long; 0: never (§5.10) */
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
	uint16_t moved;	    /* failover moved it off the program's address */
	/* The thread that started the attempt is still inside our
	 * connect() and takes the entry itself when the real call returns:
	 * a sweep leaves it alone while it is young (IN_CALL_GRACE_MS past
	 * its bound), so that threads connecting at once do not look at
	 * each other's sockets (two system calls each; issue 21). */
	uint16_t in_call;
};

#define PENDING_WORDS ((sizeof(struct pending_connect) + 7) / 8)
/* How long past its bound an attempt still marked in_call is left to its
 * own thread by the sweep: after that (a longjmp out of the call, a
 * thread cancelled in it, a connect with no bound that waits) it is swept
 * as any other. */
#define IN_CALL_GRACE_MS 1000

/*
 * The ledger's row of one descriptor number (64 bytes, one cache line:
 * threads connecting on their own descriptors share none): the
 * connection it is a descriptor of, and the connect pending on it. The
 * attempt is kept in relaxed atomic words: a row passes from one thread
 * to another when the kernel reuses an fd number, an ordering that only
 * the kernel sees (and ThreadSanitizer would otherwise flag).
 */
struct fd_slot {
	_Atomic uint32_t pending; /* the attempt's sequence number; 0: none */
	_Atomic uint32_t desc;	  /* its connection: index + 1; 0: none */
	_Atomic uint64_t words[PENDING_WORDS];
};

/* track_addrs.c */

/*
 * The table of handed-out addresses in force: its home bits (bit h set:
 * some address in it has home slot h, §11.2) come first, so a connect()
 * reads one pointer and one word. Replaced whole when it fills up
 * (track_addrs.c); NULL until the first handout.
 */
struct addr_table;
extern struct addr_table *_Atomic rlb_addr_table;
/* Fork handler hooks for the table's replacement lock (track_pending.c). */
void rlb_addr_fork_lock(void);
void rlb_addr_fork_unlock(void);
/* How many times the table was replaced (tests). */
unsigned rlb_addr_replaced(void);
/* The home bits of table t. */
static inline const _Atomic uint64_t *rlb_addr_bits(const struct addr_table *t)
{
	return (const _Atomic uint64_t *)(const void *)t;
}
/* Some address was handed out: connects must be looked at. */
extern atomic_bool rlb_addr_active;

/*
 * The IPv4 summary: bit (address >> 18 of its bytes as loaded, little
 * endian: its last 14 bits) set for every IPv4 address ever handed out,
 * in any table, never cleared (an address no longer handed out only
 * costs the exact look, rlb_addr_maybe_replica()). It costs a connect
 * a shift and a bit, where the home bit costs a hash.
 */
#define RLB_FILTER4_BITS 16384
extern _Atomic uint64_t rlb_addr_filter4[RLB_FILTER4_BITS / 64];

static inline size_t rlb_addr_filter4_index(uint32_t a)
{
	return (size_t)(a >> 18);
}

static inline bool rlb_addr_filter4_has(uint32_t a)
{
	size_t i = rlb_addr_filter4_index(a);

	return atomic_load_explicit(&rlb_addr_filter4[i / 64],
				    memory_order_acquire) &
	       (1ULL << (i % 64));
}

/* Home slot of an address given as two words: a cheap multiply-mix. */
static inline size_t rlb_addr_home_of(uint64_t a, uint64_t b, int family)
{
	uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)family) *
		     0xbf58476d1ce4e5b9ULL;

	return (h ^ (h >> 29)) % ADDR_SLOTS;
}

/*
 * Whether sa may be a handed-out address: its home bit is set. Computes
 * the same home as addr_home() straight from the sockaddr, without a
 * stack frame: this is all a connect() to any other address pays.
 */
static inline __attribute__((always_inline)) bool
rlb_addr_maybe_replica(const struct sockaddr *sa, socklen_t len)
{
	uint64_t a = 0, b = 0;
	int family = AF_INET;
	const struct addr_table *t;
	size_t home;

	if (!sa)
		return false;
	if (sa->sa_family == AF_INET) {
		if (len < sizeof(struct sockaddr_in))
			return false;
		/* Its bytes, then zeroes: the word rlb_addr_to_dest() makes. */
		memcpy(&a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
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
			a = 0; /* v4-mapped: the IPv4 address's home */
			memcpy(&a, p + 12, 4);
			b = 0;
		} else {
			family = AF_INET6;
		}
	} else {
		return false;
	}
	home = rlb_addr_home_of(a, b, family);
	t = atomic_load_explicit(&rlb_addr_table, memory_order_acquire);
	return t && (atomic_load_explicit(&rlb_addr_bits(t)[home / 64],
					  memory_order_relaxed) &
		     (1ULL << (home % 64)));
}

/* sa as a destination; false when it is no IP address. */
bool rlb_addr_to_dest(const struct sockaddr *sa, socklen_t len, struct dest *d);
/* d as text for the log: ADDR:PORT, [ADDR6]:PORT. */
const char *rlb_addr_str(const struct dest *d, char *buf, size_t len);
/* Whether a and b are the same address (ports aside). */
bool rlb_addr_same(const struct dest *a, const struct dest *b);
/* d as a sockaddr in fd's family (length), 0 when it cannot be. */
socklen_t rlb_addr_sockaddr(int fd, const struct dest *d,
			    struct sockaddr_storage *ss);
/*
 * The replicas d was handed out for, at most RLB_MAX_OWNERS, and in *pol
 * how connects to d are made; owners NULL: mark d failed now instead.
 */
size_t rlb_addr_owners(const struct dest *d, struct rlb_owner *owners,
		       struct conn_policy *pol);
/* Whether two owner lists share a cluster but not a replica. */
bool rlb_addr_other_replica(const struct rlb_owner *a, size_t na,
			    const struct rlb_owner *b, size_t nb);
/* Whether a is another replica of one of b's clusters. */
bool rlb_addr_other_replica_of(const struct dest *a, const struct dest *b);

/* track_pending.c */

/* Sockets with a pending entry; while 0, nothing needs clearing. */
extern atomic_uint rlb_pending_count;
/* The ops registered by the owner (runtime.c), or NULL. */
const struct rlb_track_ops *rlb_pending_ops(void);
/* Called once by the address table set-up: the ledger. */
void rlb_pending_setup(void);
/* The inode of socket fd, 0 when fd is not open or the kernel cannot
 * tell. Keeps errno. */
ino_t rlb_pending_ino(int fd);
/*
 * Whether fd is still the socket whose inode was ino (0: unknown). When
 * the kernel cannot tell (statx() fails but with EBADF), it is taken to
 * be: a count lost to a failed look is worse than the rare number reused
 * at that moment. Keeps errno.
 */
bool rlb_pending_is(int fd, uint64_t ino);
/* Whether fd's connect established at some time, whatever since (read
 * without consuming SO_ERROR). */
bool rlb_pending_connected_once(int fd);
/* Whether fd's connect is still under way (SYN_SENT). */
bool rlb_pending_connecting(int fd);
/* A copy of the entry in slot s. */
void rlb_pending_load(struct fd_slot *s, struct pending_connect *p);
/* Make p the pending entry of fd (set before the connect is made). */
void rlb_pending_set(int fd, const struct pending_connect *p);
/* Take fd's pending entry when it is this very socket. */
bool rlb_pending_take(int fd, struct pending_connect *copy);
/*
 * Judge attempt p, given up before its outcome was seen, its socket fd
 * still open (-1: gone); (owners, n): the replica being connected now.
 */
void rlb_pending_judge(const struct pending_connect *p, int fd,
		       const struct rlb_owner *owners, size_t n, bool at_exit);
/* Put the program's TCP_SYNCNT back, unless it set one since. */
void rlb_pending_restore_syncnt(int fd, const struct pending_connect *p);
/* An attempt to d that started at start_ms has connected: evidence
 * that attempts given up young were slow (rlb_conn_change()'s). */
void rlb_pending_note_won(const struct dest *d, int64_t start_ms);
/*
 * The attempt `mine` on fd is over (connected, failed): as
 * rlb_pending_clear(), without asking the kernel which socket fd is.
 */
void rlb_pending_done(int fd, const struct pending_connect *mine);
/* The attempt on fd is over; an earlier socket's entry is judged. */
void rlb_pending_clear(int fd);
/* Look at recent pending attempts but fd's (design.md §11.6). */
void rlb_pending_sweep(int fd, const struct rlb_owner *owners, size_t n,
		       bool at_exit);
/* A connect to (owners, n) starts: dropped attempts were slow. */
void rlb_pending_match_dropped(const struct rlb_owner *owners, size_t n);
/* The tables are this process's, if no process claimed them before (a
 * process that holds connections it was sent, handed out no address). */
void rlb_pending_claim_owner(void);
/* Whether this is a vfork() child borrowing the tables. */
bool rlb_pending_in_vfork_child(void);
/* The TCP_SYNCNT that bounds a connect to about timeout_ms. */
int rlb_pending_syncnt_for(int64_t timeout_ms);
/* Store p again as fd's entry, if fd still has one. */
void rlb_pending_update(int fd, const struct pending_connect *p);

/* track_ledger.c */

/* Descriptions in the ledger; while 0, close() looks at nothing more. */
extern atomic_uint rlb_ledger_count;

/*
 * What happens to a connect attempt or a connection. Every change of the
 * ledger goes through rlb_conn_change(), which charges what counts
 * (errors, slowdowns, connects) and takes or drops the in-flight count,
 * each take paired with exactly one drop (HAProxy's sess_change_server();
 * design.md §11.9). An attempt's outcome is settled by whoever took its
 * entry from fd's row (rlb_pending_take() and the like), exactly once.
 */
enum rlb_conn_change {
	/* A connect of fd to p->d starts: the attempt is fd's, the
	 * connection in flight for p->d's replicas (a move to another
	 * replica drops the one before). */
	RLB_CHANGE_START,
	/* It connected, seen or unseen: a connect established counted. */
	RLB_CHANGE_ESTABLISHED,
	/* It failed with err: no longer in flight; an error and a failed
	 * connect when err counts (rlb_errno_counts()). */
	RLB_CHANGE_FAILED,
	/* Given up at its bound, age_ms old: no longer in flight; an
	 * error and a failed connect. */
	RLB_CHANGE_TIMED_OUT,
	/* Given up young for another replica: a slowdown. */
	RLB_CHANGE_SLOW,
	/* Descriptor fd closed: dropped with the connection's last. */
	RLB_CHANGE_CLOSED,
};
/* Change ch of the attempt p (CLOSED: NULL) on fd (-1: a socket gone
 * unseen, which only charges). */
void rlb_conn_change(int fd, const struct pending_connect *p,
		     enum rlb_conn_change ch, int err, int64_t age_ms);
/* fd's row in the ledger, or NULL (no memory, or fd too large). */
struct fd_slot *rlb_pending_slot(int fd);
/* The program set an option on socket fd that a hedge cannot copy. */
void rlb_ledger_set_uncopyable(int fd);
/* Whether it did on socket fd of inode ino. */
bool rlb_ledger_uncopyable(int fd, uint64_t ino);
/* socket() made fd. */
void rlb_ledger_born(int fd);
/* Whether a fork() may have given another process what fd is: one has
 * happened since fd was made, or fd's making was not seen. */
bool rlb_ledger_maybe_forked(int fd);
/* Map the ledger (at the first handout; lazily otherwise). */
void rlb_ledger_setup(void);
/* newfd is now a descriptor of what oldfd is (oldfd -1: of nothing). */
void rlb_ledger_dup(int oldfd, int newfd);
/* Descriptors first..last are closed. */
void rlb_ledger_close_range(unsigned first, unsigned last);
/* Whether fd is a descriptor of a connection in the ledger. */
bool rlb_ledger_has(int fd);

/* track_connect.c, for the hedge */

/* Whether a socket is TCP: known, or to be asked (one getsockopt). */
enum rlb_tcp { RLB_TCP_ASK, RLB_TCP_YES, RLB_TCP_NO };
/* One bounded attempt of fd to replica address d (design.md §5.3),
 * paused at pause_at (monotonic ms; 0: never) for a hedge. */
int rlb_connect_bounded(int fd, const struct sockaddr *sa, socklen_t len,
			const struct dest *d, const struct conn_policy *pol,
			bool blocking, const struct pending_connect *prev,
			bool moved, bool no_eintr, int64_t pause_at,
			enum rlb_tcp tcp);

/* Give up the attempt pending on fd (no packet for one in SYN_SENT). */
void rlb_connect_abort(int fd);
/* After an EINTR: whether the program waits for it (a handler without
 * SA_RESTART could have run). */
bool rlb_connect_sees_eintr(void);
/* The attempt p on fd, left to the program to wait for, is bounded by
 * the kernel from now on (TCP_SYNCNT lowered, kept in fd's entry). */
void rlb_connect_bound_in_kernel(int fd, struct pending_connect *p);

/* track_hedge.c */

#define RLB_HEDGE_TRIED 16 /* replicas one hedged connect may try */
/* Whether socket fd, before its connect, has no local port bound (its
 * local address, perhaps none, in *local). Keeps errno. */
bool rlb_hedge_unbound(int fd, struct sockaddr_storage *local, socklen_t *len);
/* Whether socket fd (inode ino) may be hedged: nothing else refers to
 * it, nothing it carries is lost by a copy. Keeps errno. */
bool rlb_hedge_allowed(int fd, uint64_t ino);
/* A socket like fd (non-blocking, close-on-exec), its options copied,
 * bound to fd's local address when it had one; -1 when it cannot be
 * made. Keeps errno. */
int rlb_hedge_socket(int fd, const struct sockaddr_storage *local,
		     socklen_t len);
/* Close a losing socket of ours: a reset when it connected. */
void rlb_hedge_let_go(int s);
/*
 * connect() of fd (file status flags `flags`) to sa, replica d of
 * (owners, n), hedged by policy pol (design.md §5.10): same contract as
 * connect(); every attempt's outcome is settled.
 */
int rlb_hedge_connect(int fd, const struct sockaddr *sa, socklen_t len,
		      const struct dest *d, const struct conn_policy *pol,
		      int flags, struct rlb_owner *owners, size_t n);

#endif /* RLB_TRACK_INTERNAL_H */
