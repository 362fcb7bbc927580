/* track_pending.c - connect attempts under way and their fate
 * (design.md §5.2, §11.3-§11.6): the attempt in each descriptor's ledger
 * row, attempts given up before their outcome was seen (close, a raw
 * close, exit), slowdowns. Whoever takes an attempt's entry settles it,
 * once, through rlb_conn_change() (track_ledger.c); it counts nothing
 * itself. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/track_internal.h"
#define RECENT_MAX 64 /* pending sockets swept for abandonment */
/* Sockets with a pending entry; while 0, nothing needs clearing. */
atomic_uint rlb_pending_count;
/* Sequence numbers of pending entries: a sweep takes exactly the entry
 * it looked at, never one set since by another thread. */
static atomic_uint pending_seq;
/* fd + 1 of recently pending sockets (0: free), swept for attempts the
 * program abandoned without our close(): a raw close, longjmp, exit. */
static _Atomic int recent[RECENT_MAX];
static const struct rlb_track_ops *_Atomic ops;

/*
 * What tells a slowdown (design.md §5.2): attempts the program gave up
 * young without their outcome (`dropped`), kept for one bound, under
 * moves_lock, and the attempts seen to connect (`won`), the latest few.
 */
#define MOVES_MAX 8
static struct dropped {
	struct dest d;
	int64_t at_ms; /* monotonic; 0: free */
	int64_t timeout_ms;
} dropped[MOVES_MAX];
static pthread_mutex_t moves_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint ndropped;
/*
 * `won` is written by every connect of the process that establishes, so
 * it takes no lock: a lock there serialised all of them, and threads
 * outnumbering the cores stalled for a time slice behind a holder that
 * was preempted (issue 21: 8 threads connecting and closing on 2 cores).
 * A ring, written in turn (the oldest entry goes, as before), each entry
 * a seqlock: seq is odd while it is written, and a reader takes an entry
 * only when seq was even and the same before and after its read.
 */
#define WON_WORDS ((sizeof(struct dest) + 7) / 8)
static struct won {
	_Atomic uint32_t seq;
	_Atomic int64_t start_ms; /* when its attempt started */
	_Atomic int64_t at_ms;	  /* when it was seen connected; 0: free */
	_Atomic uint64_t d[WON_WORDS];
} won[MOVES_MAX];
static atomic_uint won_next; /* entries written (the next one's turn) */
/* The process the tables belong to: a vfork child, which shares them,
 * must not take its parent's entries. */
static _Atomic pid_t owner_pid;

void rlb_track_fork_lock(void)
{
	rlb_addr_fork_lock();
	pthread_mutex_lock(&moves_lock);
}

void rlb_track_fork_unlock(void)
{
	pthread_mutex_unlock(&moves_lock);
	rlb_addr_fork_unlock();
}

void rlb_track_after_fork_child(void)
{
	/* The attempts are the parent's: a child that closes its copies
	 * (pre-exec fd cleanup) or exits must not count them again. */
	if (atomic_load(&rlb_pending_count))
		for (int fd = 0; fd < RLB_LEDGER_FDS; fd++) {
			struct fd_slot *s = rlb_pending_slot(fd);

			if (s && atomic_load_explicit(&s->pending,
						      memory_order_relaxed))
				atomic_store(&s->pending, 0);
		}
	atomic_store(&rlb_pending_count, 0);
	for (size_t k = 0; k < RECENT_MAX; k++)
		atomic_store(&recent[k], 0);
	memset(dropped, 0, sizeof(dropped));
	memset(won, 0, sizeof(won));
	atomic_store(&ndropped, 0);
	atomic_store(&won_next, 0);
	atomic_store(&owner_pid, rlb_libc()->getpid());
}

/* Whether this is a vfork() child borrowing its parent's memory (the
 * system call, not a cached pid: glibc caches none). */
bool rlb_pending_in_vfork_child(void)
{
	return rlb_libc()->getpid() !=
	       atomic_load_explicit(&owner_pid, memory_order_relaxed);
}

void rlb_pending_claim_owner(void)
{
	pid_t zero = 0;

	atomic_compare_exchange_strong(&owner_pid, &zero, rlb_libc()->getpid());
}

void rlb_pending_setup(void)
{
	atomic_store(&owner_pid, rlb_libc()->getpid());
	rlb_ledger_setup();
}

const struct rlb_track_ops *rlb_pending_ops(void)
{
	return atomic_load_explicit(&ops, memory_order_acquire);
}

void rlb_track_set_ops(const struct rlb_track_ops *o)
{
	atomic_store_explicit(&ops, o, memory_order_release);
}

/*
 * The socket's inode, 0 when fd is not open. The sweep asks this of
 * descriptors that other threads may be closing at that moment: the
 * kernel answers that race well (EBADF, or the next file's inode, which
 * the comparison rejects), and statx() leaves ThreadSanitizer's model of
 * descriptor lifetimes alone, where fstat() would report a race.
 */
ino_t rlb_pending_ino(int fd)
{
	struct statx stx;
	int saved = errno;
	ino_t ino =
		rlb_libc()->statx(fd, "", AT_EMPTY_PATH, STATX_INO, &stx) == 0
			? stx.stx_ino
			: 0;

	errno = saved;
	return ino;
}

bool rlb_pending_is(int fd, uint64_t ino)
{
	struct statx stx;
	int saved = errno;
	bool same;

	if (rlb_libc()->statx(fd, "", AT_EMPTY_PATH, STATX_INO, &stx) == 0)
		same = ino == 0 || stx.stx_ino == ino;
	else
		same = errno != EBADF;
	errno = saved;
	return same;
}

/*
 * The TCP state of fd (TCP_SYN_SENT: its connect is pending), or -1; in
 * *never, whether it is closed and never connected: no SYN-ACK ever came,
 * so no RTT sample and no negotiated option was recorded (its connect has
 * not started yet, or it failed). State and evidence come from one look:
 * the entry is set before the owner's connect() (§11.2), and a socket seen
 * closed at a first look and connecting at a second would pass for one
 * that connected unseen, so a sweep would take a failing attempt from its
 * owner and it would count nothing (design.md §11.6). Reads nothing the
 * program could observe (SO_ERROR is for the program).
 */
static int tcp_state(int fd, bool *never)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	*never = false;
	if (rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return -1;
	/* TCPI_OPT_ECN is set when the SYN asks for ECN (tcp_ecn = 1),
	 * before any answer: it is no evidence of a SYN-ACK. */
	*never = ti.tcpi_state == TCP_CLOSE && ti.tcpi_rtt == 0 &&
		 (ti.tcpi_options & ~TCPI_OPT_ECN) == 0;
	return ti.tcpi_state;
}

bool rlb_pending_connecting(int fd)
{
	bool never;

	return tcp_state(fd, &never) == TCP_SYN_SENT;
}

/* Whether fd's connect established at some time, whatever since. */
bool rlb_pending_connected_once(int fd)
{
	bool never;
	int state = tcp_state(fd, &never);

	return state >= 0 && state != TCP_SYN_SENT && !never;
}

static void slot_store(struct fd_slot *s, const struct pending_connect *p)
{
	uint64_t w[PENDING_WORDS] = {0};

	memcpy(w, p, sizeof(*p));
	for (size_t k = 0; k < PENDING_WORDS; k++)
		atomic_store_explicit(&s->words[k], w[k], memory_order_relaxed);
}

void rlb_pending_load(struct fd_slot *s, struct pending_connect *p)
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

void rlb_pending_set(int fd, const struct pending_connect *p)
{
	struct fd_slot *s = rlb_pending_slot(fd);
	uint32_t seq;

	if (!s)
		return;
	if (atomic_exchange(&s->pending, 0))
		atomic_fetch_sub(&rlb_pending_count, 1);
	slot_store(s, p);
	do
		seq = atomic_fetch_add(&pending_seq, 1) + 1;
	while (seq == 0);
	atomic_fetch_add(&rlb_pending_count, 1);
	atomic_store_explicit(&s->pending, seq, memory_order_release);
	recent_add(fd);
}

/*
 * Take the pending entry of fd: the one numbered seq, or (seq == 0)
 * whichever is there. True and a copy when it was taken.
 */
static bool take_entry(int fd, uint32_t seq, struct pending_connect *copy)
{
	struct fd_slot *s = rlb_pending_slot(fd);
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
	atomic_fetch_sub(&rlb_pending_count, 1);
	rlb_pending_load(s, copy);
	recent_remove(fd);
	return true;
}

/* Take the pending entry of fd if it is this very socket. */
bool rlb_pending_take(int fd, struct pending_connect *copy)
{
	return take_entry(fd, 0, copy) && rlb_pending_is(fd, copy->ino);
}

/*
 * Give the program back its TCP_SYNCNT, if the bound changed it and the
 * program has set none of its own since.
 */
void rlb_pending_restore_syncnt(int fd, const struct pending_connect *p)
{
	int now = 0;
	socklen_t len = sizeof(now);

	if (p->syncnt > 0 &&
	    rlb_libc()->getsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &now, &len) ==
		    0 &&
	    now == rlb_pending_syncnt_for(p->timeout_ms))
		rlb_libc()->setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &p->syncnt,
				       sizeof(p->syncnt));
}

/* An attempt that connected: the evidence that another was abandoned. */
void rlb_pending_note_won(const struct dest *d, int64_t start_ms)
{
	struct won *w = &won[atomic_fetch_add(&won_next, 1) % MOVES_MAX];
	uint32_t seq = atomic_load_explicit(&w->seq, memory_order_relaxed);
	uint64_t words[WON_WORDS] = {0};

	/* Taken by a writer whose turn came MOVES_MAX notes ago: its note
	 * is as recent as this one, which is dropped. */
	if ((seq & 1) || !atomic_compare_exchange_strong_explicit(
				 &w->seq, &seq, seq + 1, memory_order_relaxed,
				 memory_order_relaxed))
		return;
	atomic_thread_fence(memory_order_release);
	memcpy(words, d, sizeof(*d));
	for (size_t k = 0; k < WON_WORDS; k++)
		atomic_store_explicit(&w->d[k], words[k], memory_order_relaxed);
	atomic_store_explicit(&w->start_ms, start_ms, memory_order_relaxed);
	atomic_store_explicit(&w->at_ms, rlb_monotonic_ms(),
			      memory_order_relaxed);
	atomic_store_explicit(&w->seq, seq + 2, memory_order_release);
}

/* Entry w as written whole, or false (free, or being written). */
static bool won_load(struct won *w, struct dest *d, int64_t *start_ms)
{
	uint32_t seq = atomic_load_explicit(&w->seq, memory_order_acquire);
	uint64_t words[WON_WORDS];
	int64_t at;

	if (seq & 1)
		return false;
	for (size_t k = 0; k < WON_WORDS; k++)
		words[k] = atomic_load_explicit(&w->d[k], memory_order_relaxed);
	*start_ms = atomic_load_explicit(&w->start_ms, memory_order_relaxed);
	at = atomic_load_explicit(&w->at_ms, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&w->seq, memory_order_relaxed) != seq || !at)
		return false;
	memcpy(d, words, sizeof(*d));
	return true;
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

	if (atomic_load_explicit(&won_next, memory_order_relaxed))
		for (size_t k = 0; k < MOVES_MAX && !found; k++) {
			struct dest d;
			int64_t start_ms;

			found = won_load(&won[k], &d, &start_ms) &&
				start_ms >= p->start_ms &&
				rlb_addr_other_replica_of(&d, &p->d);
		}
	for (size_t k = 0; k < RECENT_MAX && !found; k++) {
		int v = atomic_load_explicit(&recent[k], memory_order_relaxed);
		struct pending_connect q;
		struct fd_slot *s;

		if (v == 0 || v - 1 == fd || !(s = rlb_pending_slot(v - 1)) ||
		    !atomic_load_explicit(&s->pending, memory_order_acquire))
			continue;
		rlb_pending_load(s, &q);
		found = q.start_ms >= p->start_ms &&
			rlb_pending_is(v - 1, q.ino) &&
			rlb_pending_connected_once(v - 1) &&
			rlb_addr_other_replica_of(&q.d, &p->d);
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

	ni = rlb_addr_owners(&p->d, its, &pol);
	if ((n && rlb_addr_other_replica(owners, n, its, ni)) ||
	    won_since(p, fd)) {
		rlb_conn_change(fd, p, RLB_CHANGE_SLOW, ETIMEDOUT, -1);
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
void rlb_pending_judge(const struct pending_connect *p, int fd,
		       const struct rlb_owner *owners, size_t n, bool at_exit)
{
	int64_t age = rlb_monotonic_ms() - p->start_ms;
	bool never = false;
	int state = fd >= 0 ? tcp_state(fd, &never) : TCP_SYN_SENT;

	if (state == TCP_SYN_SENT) {
		if (age >= p->timeout_ms)
			rlb_conn_change(fd, p, RLB_CHANGE_TIMED_OUT, ETIMEDOUT,
					age);
		else if (!at_exit)
			dropped_young(p, fd, owners, n);
	} else if (never) {
		/* The kind of failure cannot be read without consuming it;
		 * it counts one error whatever it is. */
		rlb_conn_change(fd, p, RLB_CHANGE_FAILED, ECONNREFUSED, -1);
	} else if (state >= 0) {
		/* It connected, unseen: a connect established. */
		rlb_conn_change(fd, p, RLB_CHANGE_ESTABLISHED, 0, -1);
	}
}

/* The attempt on fd is over (connected, failed, or another connect). */
void rlb_pending_clear(int fd)
{
	struct pending_connect copy;

	if (!atomic_load_explicit(&rlb_pending_count, memory_order_relaxed) ||
	    !take_entry(fd, 0, &copy))
		return;
	if (rlb_pending_is(fd, copy.ino))
		rlb_pending_restore_syncnt(fd, &copy);
	else /* an earlier socket's, dropped without our close() */
		rlb_pending_judge(&copy, -1, NULL, 0, false);
}

void rlb_pending_done(int fd, const struct pending_connect *mine)
{
	struct pending_connect copy;

	if (!atomic_load_explicit(&rlb_pending_count, memory_order_relaxed) ||
	    !take_entry(fd, 0, &copy))
		return;
	if (copy.ino == mine->ino && copy.start_ms == mine->start_ms)
		rlb_pending_restore_syncnt(fd, &copy);
	else /* an earlier socket's, dropped without our close() */
		rlb_pending_judge(&copy, -1, NULL, 0, false);
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
void rlb_pending_sweep(int fd, const struct rlb_owner *owners, size_t n,
		       bool at_exit)
{
	int64_t now_ms = 0;

	for (size_t k = 0; k < RECENT_MAX; k++) {
		int v = atomic_load_explicit(&recent[k], memory_order_relaxed);
		struct pending_connect p;
		struct fd_slot *s;
		uint32_t seq;
		bool gone;

		if (v == 0 || !(s = rlb_pending_slot(v - 1)) ||
		    !(seq = atomic_load_explicit(&s->pending,
						 memory_order_acquire)))
			continue;
		rlb_pending_load(s, &p);
		if (p.in_call && !at_exit && v - 1 != fd) {
			/* Its thread is in connect() and judges it itself. */
			if (!now_ms)
				now_ms = rlb_monotonic_ms();
			if (now_ms - p.start_ms <
			    p.timeout_ms + IN_CALL_GRACE_MS)
				continue;
		}
		gone = !rlb_pending_is(v - 1, p.ino);
		if (v - 1 == fd && !gone)
			continue; /* the socket being connected now */
		if (!gone && !at_exit && !rlb_pending_connected_once(v - 1))
			continue;
		if (!take_entry(v - 1, seq, &p))
			continue;
		if (gone) {
			rlb_pending_judge(&p, -1, owners, n, at_exit);
		} else if (at_exit) {
			rlb_pending_judge(&p, v - 1, NULL, 0, true);
		} else {
			rlb_pending_restore_syncnt(v - 1, &p);
			rlb_conn_change(v - 1, &p, RLB_CHANGE_ESTABLISHED, 0,
					-1);
		}
	}
}

/*
 * A connect to a replica (owners, n) starts: attempts dropped young in
 * the last bound's time that were for another replica of one of the same
 * clusters were slow; count each once.
 */
void rlb_pending_match_dropped(const struct rlb_owner *owners, size_t n)
{
	int64_t now = rlb_monotonic_ms();
	struct pending_connect slow[MOVES_MAX];
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
		ni = rlb_addr_owners(&dropped[k].d, its, &pol);
		if (!rlb_addr_other_replica(owners, n, its, ni))
			continue;
		slow[nslow++] = (struct pending_connect){.d = dropped[k].d};
		dropped[k].at_ms = 0;
		atomic_fetch_sub(&ndropped, 1);
	}
	pthread_mutex_unlock(&moves_lock);
	for (size_t k = 0; k < nslow; k++)
		rlb_conn_change(-1, &slow[k], RLB_CHANGE_SLOW, ETIMEDOUT, -1);
}

void rlb_track_sweep(void)
{
	int saved;

	/* errno is read only when there is work: a resolution with nothing
	 * pending (the common case) makes no call at all. */
	if (!atomic_load_explicit(&rlb_pending_count, memory_order_relaxed))
		return;
	saved = errno;
	rlb_pending_sweep(-1, NULL, 0, false);
	errno = saved;
}

/* At exit: attempts still pending (or dropped) past their bound count. */
static void __attribute__((destructor)) sweep_at_exit(void)
{
	const struct rlb_track_ops *o = rlb_pending_ops();
	int saved = errno;

	if (atomic_load_explicit(&rlb_pending_count, memory_order_relaxed))
		rlb_pending_sweep(-1, NULL, 0, true);
	/* After the sweep's charges: memfd counts for the next process. */
	if (o && o->save_state)
		o->save_state();
	errno = saved;
}

int rlb_pending_syncnt_for(int64_t timeout_ms)
{
	int n = 1;

	while (n < 6 && ((int64_t)1 << (n + 1)) * 1000 - 1000 < timeout_ms)
		n++;
	return n;
}

/* Store p again as fd's pending entry, if fd still has one. */
void rlb_pending_update(int fd, const struct pending_connect *p)
{
	struct fd_slot *s = rlb_pending_slot(fd);

	if (s && atomic_load_explicit(&s->pending, memory_order_acquire))
		slot_store(s, p);
}
