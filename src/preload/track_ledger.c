/* preload/track_ledger.c - the process's side of the connection ledger
 * (design.md §11.8, §11.9): one row per descriptor number, with the
 * connect under way on it (track_pending.c), and one record per
 * connection to a replica, as an open file description, from its connect
 * to the last close in this process; and rlb_conn_change(), the one
 * function through which every change of either passes: it charges what
 * counts and takes or drops the in-flight count that the host-wide
 * counts (state/health_traffic.c) hear of through the owner's ops.
 *
 * Lock-free, so that a close() in a signal handler never waits: a
 * description is claimed by a compare-and-swap of its inode, shared by
 * the descriptors that dup() made with an atomic reference count, and
 * let go by the one that drops the count to zero. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "preload/track_internal.h"

#define LEDGER_FDS   RLB_LEDGER_FDS
#define LEDGER_DESCS 4096 /* connections one process holds, counted */

/* A connection to a replica, as this process holds it. */
struct ledger_desc {
	_Atomic uint64_t ino;  /* its socket's inode; 0: free */
	_Atomic uint32_t refs; /* descriptors of this process on it */
	_Atomic bool counted;  /* in flight, host-wide, for owners */
	_Atomic uint32_t n;    /* owners */
	struct rlb_owner owners[RLB_MAX_OWNERS];
};

_Static_assert(sizeof(struct fd_slot) == 64, "a ledger row is a cache line");

struct ledger {
	struct fd_slot rows[LEDGER_FDS];
	struct ledger_desc descs[LEDGER_DESCS];
	/* Per descriptor number, the inode of the socket on which the
	 * program set an option a hedge cannot copy, or that it sent to
	 * another process (0: none). */
	_Atomic uint64_t uncopyable[LEDGER_FDS];
	/* Per descriptor number, fork_gen + 1 when socket() made it since
	 * the latest fork (or dup copied one that was); else 0. */
	_Atomic uint32_t born[LEDGER_FDS];
};

/* Forks this process has been through, as parent or child. */
static _Atomic uint32_t fork_gen;

static struct ledger *_Atomic ledger;
/* Descriptions claimed; while 0, a close() looks at nothing. */
atomic_uint rlb_ledger_count;

/* The table, mapped when the first address is handed out (or the first
 * connection received); NULL: no memory. */
static struct ledger *ledger_get(bool make)
{
	struct ledger *l = atomic_load_explicit(&ledger, memory_order_acquire);
	struct ledger *expected = NULL;
	void *m;

	if (l || !make)
		return l;
	rlb_pending_claim_owner();
	m = rlb_libc()->mmap(NULL, sizeof(struct ledger),
			     PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (!atomic_compare_exchange_strong(&ledger, &expected, m)) {
		rlb_libc()->munmap(m, sizeof(struct ledger));
		return expected;
	}
	return m;
}

/* Hand the event to the owner (nothing when none is registered). */
static void tell(const struct rlb_owner *owners, size_t n, uint64_t ino,
		 enum rlb_conn_event ev)
{
	const struct rlb_track_ops *o = rlb_pending_ops();

	if (n && o && o->traffic)
		o->traffic(owners, n, ino, ev);
}

/* d's owners into out: their number. */
static size_t desc_owners(struct ledger_desc *d, struct rlb_owner *out)
{
	size_t n = atomic_load_explicit(&d->n, memory_order_acquire);

	if (n > RLB_MAX_OWNERS)
		n = RLB_MAX_OWNERS;
	memcpy(out, d->owners, n * sizeof(*out));
	return n;
}

/* The connection of d is no longer in flight for its owners. */
static void desc_uncount(struct ledger_desc *d)
{
	struct rlb_owner owners[RLB_MAX_OWNERS];
	size_t n;

	if (!atomic_exchange(&d->counted, false))
		return;
	n = desc_owners(d, owners);
	tell(owners, n, atomic_load(&d->ino), RLB_CONN_DROP);
}

/* One descriptor less on description idx (index + 1). */
static void desc_unref(struct ledger *l, uint32_t idx)
{
	struct ledger_desc *d;

	if (!idx || idx > LEDGER_DESCS)
		return;
	d = &l->descs[idx - 1];
	if (atomic_fetch_sub(&d->refs, 1) != 1)
		return;
	desc_uncount(d);
	atomic_store(&d->n, 0);
	atomic_store_explicit(&d->ino, 0, memory_order_release);
	atomic_fetch_sub(&rlb_ledger_count, 1);
}

/* A free description claimed for ino: its index + 1, or 0. */
static uint32_t desc_claim(struct ledger *l, uint64_t ino)
{
	size_t home = (size_t)((ino * 0x9e3779b97f4a7c15ULL) >> 52);

	for (size_t k = 0; k < LEDGER_DESCS; k++) {
		size_t i = (home + k) % LEDGER_DESCS;
		uint64_t zero = 0;

		if (atomic_load_explicit(&l->descs[i].ino,
					 memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&l->descs[i].ino, &zero,
						   ino)) {
			atomic_store(&l->descs[i].refs, 1);
			atomic_fetch_add(&rlb_ledger_count, 1);
			return (uint32_t)i + 1;
		}
	}
	return 0;
}

/* Socket fd (inode ino) starts a connect to dst: in flight for dst's
 * replicas from now until its connect fails or the last descriptor of it
 * in this process closes. The same socket moved to another replica (a
 * failover) drops the replica before. */
static void conn_take(int fd, uint64_t ino, const struct dest *dst)
{
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct conn_policy pol;
	struct ledger *l;
	struct ledger_desc *d;
	uint32_t idx, prev;
	size_t n;

	if (fd < 0 || fd >= LEDGER_FDS || !ino || !(l = ledger_get(true)) ||
	    !(n = rlb_addr_owners(dst, owners, &pol)))
		return;
	idx = atomic_load(&l->rows[fd].desc);
	if (idx && atomic_load(&l->descs[idx - 1].ino) == ino) {
		/* The same socket again: a failover moved it to another
		 * replica, or it connects again after a failure. */
		d = &l->descs[idx - 1];
		desc_uncount(d);
	} else {
		if (!(idx = desc_claim(l, ino)))
			return; /* full: this connection is not counted */
		d = &l->descs[idx - 1];
		prev = atomic_exchange(&l->rows[fd].desc, idx);
		desc_unref(l, prev); /* closed behind our back, fd reused */
	}
	memcpy(d->owners, owners, n * sizeof(owners[0]));
	atomic_store_explicit(&d->n, (uint32_t)n, memory_order_release);
	atomic_store(&d->counted, true);
	tell(owners, n, ino, RLB_CONN_TAKE);
}

/* fd's connect failed: no longer in flight (it stays in the ledger until
 * closed, so that a dup of it is followed). */
static void conn_drop_attempt(int fd)
{
	struct ledger *l = ledger_get(false);
	uint32_t idx;

	if (!l || fd < 0 || fd >= LEDGER_FDS ||
	    !(idx = atomic_load(&l->rows[fd].desc)))
		return;
	desc_uncount(&l->descs[idx - 1]);
}

/* fd is closed (its number free again). */
static void conn_close(int fd)
{
	struct ledger *l = ledger_get(false);

	if (!l || fd < 0 || fd >= LEDGER_FDS ||
	    !atomic_load_explicit(&l->rows[fd].desc, memory_order_relaxed))
		return;
	desc_unref(l, atomic_exchange(&l->rows[fd].desc, 0));
}

/*
 * Charge a failure of a connect to d (design.md §5.2): an error (err,
 * age_ms -1), an attempt given up at its bound after age_ms, or a
 * slowdown; counted as a failed connect unless a slowdown. An error
 * marks the address failed for connect_failover's skip (§5.4).
 */
static void charge(const struct dest *d, int err, int64_t age_ms, bool slowdown)
{
	const struct rlb_track_ops *o = rlb_pending_ops();
	struct rlb_failure f = {
		.err = err, .age_ms = age_ms, .slowdown = slowdown};
	struct conn_policy pol;

	f.n = rlb_addr_owners(d, f.owners, &pol);
	if (!f.n)
		return;
	if (!slowdown && pol.failover)
		rlb_addr_owners(d, NULL, &pol);
	if (o && o->charge)
		o->charge(&f);
	if (!slowdown)
		tell(f.owners, f.n, 0, RLB_CONN_FAILED);
}

void rlb_conn_change(int fd, const struct pending_connect *p,
		     enum rlb_conn_change ch, int err, int64_t age_ms)
{
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct conn_policy pol;
	size_t n;

	switch (ch) {
	case RLB_CHANGE_START:
		rlb_pending_set(fd, p);
		conn_take(fd, p->ino, &p->d);
		break;
	case RLB_CHANGE_ESTABLISHED:
		n = rlb_addr_owners(&p->d, owners, &pol);
		tell(owners, n, 0, RLB_CONN_ESTABLISHED);
		rlb_pending_note_won(&p->d, p->start_ms);
		break;
	case RLB_CHANGE_FAILED:
		conn_drop_attempt(fd);
		if (rlb_errno_counts(err))
			charge(&p->d, err, -1, false);
		break;
	case RLB_CHANGE_TIMED_OUT:
		conn_drop_attempt(fd);
		charge(&p->d, ETIMEDOUT, age_ms, false);
		break;
	case RLB_CHANGE_SLOW:
		charge(&p->d, ETIMEDOUT, -1, true);
		break;
	case RLB_CHANGE_CLOSED:
		conn_close(fd);
		break;
	}
}

struct fd_slot *rlb_pending_slot(int fd)
{
	struct ledger *l = atomic_load_explicit(&ledger, memory_order_acquire);

	if (!l || fd < 0 || fd >= LEDGER_FDS)
		return NULL;
	return &l->rows[fd];
}

void rlb_ledger_set_uncopyable(int fd)
{
	struct ledger *l = ledger_get(false);
	uint64_t ino;

	if (l && fd >= 0 && fd < LEDGER_FDS && (ino = rlb_pending_ino(fd)))
		atomic_store_explicit(&l->uncopyable[fd], ino,
				      memory_order_relaxed);
}

bool rlb_ledger_uncopyable(int fd, uint64_t ino)
{
	struct ledger *l = ledger_get(false);

	return l && fd >= 0 && fd < LEDGER_FDS &&
	       atomic_load_explicit(&l->uncopyable[fd], memory_order_relaxed) ==
		       ino;
}

void rlb_ledger_born(int fd)
{
	struct ledger *l = ledger_get(false);

	if (l && fd >= 0 && fd < LEDGER_FDS)
		atomic_store_explicit(&l->born[fd], atomic_load(&fork_gen) + 1,
				      memory_order_relaxed);
}

/* newfd is a copy of oldfd (-1: of something unknown). */
static void born_copy(int oldfd, int newfd)
{
	struct ledger *l = ledger_get(false);

	if (!l || newfd < 0 || newfd >= LEDGER_FDS || oldfd == newfd)
		return;
	atomic_store_explicit(
		&l->born[newfd],
		oldfd >= 0 && oldfd < LEDGER_FDS
			? atomic_load_explicit(&l->born[oldfd],
					       memory_order_relaxed)
			: 0,
		memory_order_relaxed);
}

bool rlb_ledger_maybe_forked(int fd)
{
	struct ledger *l = ledger_get(false);
	uint32_t gen = atomic_load(&fork_gen);

	if (gen == 0)
		return false;
	return !l || fd < 0 || fd >= LEDGER_FDS ||
	       atomic_load_explicit(&l->born[fd], memory_order_relaxed) !=
		       gen + 1;
}

void rlb_ledger_setup(void)
{
	if (!ledger_get(true))
		rlb_log(RLB_LOG_WARNING, "no memory for the connection "
					 "ledger: connects not followed");
}

/* Each descriptor an SCM_RIGHTS message of msg carries, to fn. */
static void each_passed_fd(const struct msghdr *msg, void (*fn)(int fd))
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR((struct msghdr *)msg); cm;
	     cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
		size_t n;

		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0))
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t k = 0; k < n; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int),
			       sizeof(fd));
			fn(fd);
		}
	}
}

/* fd leaves in a message: a hold in transit for its connection. */
static void sent_one(int fd)
{
	struct ledger *l = ledger_get(false);
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct ledger_desc *d;
	uint32_t idx;
	size_t n;

	if (!l || fd < 0 || fd >= LEDGER_FDS ||
	    !(idx = atomic_load(&l->rows[fd].desc)))
		return;
	d = &l->descs[idx - 1];
	if (!atomic_load(&d->counted))
		return;
	n = desc_owners(d, owners);
	tell(owners, n, atomic_load(&d->ino), RLB_CONN_SENT);
}

/* fd arrived in a message: ours too, if it is a connection counted. */
static void received_one(int fd)
{
	const struct rlb_track_ops *o = rlb_pending_ops();
	struct rlb_owner owners[RLB_MAX_OWNERS];
	struct ledger *l;
	struct ledger_desc *d;
	uint64_t ino;
	uint32_t idx, prev;
	size_t n;

	born_copy(-1, fd); /* another process's, maybe since a fork */
	if (fd < 0 || fd >= LEDGER_FDS || !o || !o->receive ||
	    !(ino = rlb_pending_ino(fd)) || !(n = o->receive(ino, owners)) ||
	    !(l = ledger_get(true)) || !(idx = desc_claim(l, ino)))
		return;
	d = &l->descs[idx - 1];
	memcpy(d->owners, owners, n * sizeof(owners[0]));
	atomic_store_explicit(&d->n, (uint32_t)n, memory_order_release);
	atomic_store(&d->counted, true);
	prev = atomic_exchange(&l->rows[fd].desc, idx);
	desc_unref(l, prev);
}

ssize_t rlb_track_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t rc = rlb_libc()->sendmsg(fd, msg, flags);
	int saved = errno;

	/* After the send: the kernel has read msg, so it can be read. A
	 * receiver quicker than this keeps its own hold, and the one in
	 * transit is given up later (design.md §11.8). */
	if (rc >= 0 && msg && msg->msg_controllen >= CMSG_LEN(sizeof(int)) &&
	    ledger_get(false) && !rlb_pending_in_vfork_child()) {
		/* Another process holds it too now: never hedged. */
		each_passed_fd(msg, rlb_ledger_set_uncopyable);
		if (atomic_load_explicit(&rlb_ledger_count,
					 memory_order_relaxed))
			each_passed_fd(msg, sent_one);
		errno = saved;
	}
	return rc;
}

void rlb_track_recvmsg_done(const struct msghdr *msg)
{
	int saved = errno;

	/* Cut short (MSG_CTRUNC), the descriptors that fit are ours all
	 * the same. */
	each_passed_fd(msg, received_one);
	errno = saved;
}

void rlb_ledger_dup(int oldfd, int newfd)
{
	struct ledger *l = ledger_get(false);
	uint32_t idx = 0;

	if (!l || newfd < 0 || newfd >= LEDGER_FDS || oldfd == newfd)
		return;
	if (oldfd >= 0 && oldfd < LEDGER_FDS &&
	    (idx = atomic_load(&l->rows[oldfd].desc)))
		atomic_fetch_add(&l->descs[idx - 1].refs, 1);
	/* dup2() over a descriptor closes it first. */
	desc_unref(l, atomic_exchange(&l->rows[newfd].desc, idx));
}

void rlb_ledger_close_range(unsigned first, unsigned last)
{
	struct ledger *l = ledger_get(false);

	if (!l)
		return;
	for (unsigned fd = first; fd <= last && fd < LEDGER_FDS; fd++)
		if (atomic_load_explicit(&l->rows[fd].desc,
					 memory_order_relaxed))
			desc_unref(l, atomic_exchange(&l->rows[fd].desc, 0));
}

bool rlb_ledger_has(int fd)
{
	struct ledger *l = ledger_get(false);

	return l && fd >= 0 && fd < LEDGER_FDS &&
	       atomic_load_explicit(&l->rows[fd].desc, memory_order_relaxed);
}

void rlb_track_ledger_fork(int step)
{
	static const enum rlb_conn_event ev[] = {RLB_CONN_FORK, RLB_CONN_FORKED,
						 RLB_CONN_CHILD};
	struct ledger *l = ledger_get(false);

	/* After the fork, both hold every descriptor open before it. */
	if (step == 1 || step == 2)
		atomic_fetch_add(&fork_gen, 1);
	if (!l || !atomic_load(&rlb_ledger_count) || step < 0 || step > 2)
		return;
	for (size_t i = 0; i < LEDGER_DESCS; i++) {
		struct ledger_desc *d = &l->descs[i];
		struct rlb_owner owners[RLB_MAX_OWNERS];
		uint64_t ino = atomic_load(&d->ino);
		size_t n;

		if (!ino || !atomic_load(&d->counted))
			continue;
		n = desc_owners(d, owners);
		tell(owners, n, ino, ev[step]);
	}
}

void rlb_track_before_exec(void)
{
	const struct rlb_track_ops *o = rlb_pending_ops();
	struct ledger *l = ledger_get(false);
	bool open_after[LEDGER_DESCS];
	int saved = errno;

	/* The new image holds no memfd of ours: its counts are saved (not
	 * by a vfork() child, which shares its parent's memory). */
	if (o && o->save_state && !rlb_pending_in_vfork_child())
		o->save_state();

	/* A vfork() child's exec closes nothing of its parent's. */
	if (!l || !atomic_load(&rlb_ledger_count) ||
	    rlb_pending_in_vfork_child())
		return;
	/* A connection survives the exec if one descriptor of it is not
	 * close-on-exec; the others are gone with this image. */
	memset(open_after, 0, sizeof(open_after));
	for (int fd = 0; fd < LEDGER_FDS; fd++) {
		uint32_t idx = atomic_load_explicit(&l->rows[fd].desc,
						    memory_order_relaxed);
		int flags;

		if (!idx || idx > LEDGER_DESCS)
			continue;
		flags = rlb_libc()->fcntl(fd, F_GETFD, 0);
		if (flags >= 0 && !(flags & FD_CLOEXEC))
			open_after[idx - 1] = true;
	}
	for (size_t i = 0; i < LEDGER_DESCS; i++)
		if (!open_after[i] && atomic_load(&l->descs[i].ino))
			desc_uncount(&l->descs[i]);
	errno = saved;
}

/* ------------------------------------------------------------------ */
/* Hook bodies */

int rlb_track_dup(int fd)
{
	int rc = rlb_libc()->dup(fd), saved = errno;

	if (rc >= 0 && !rlb_pending_in_vfork_child()) {
		born_copy(fd, rc);
		if (rlb_ledger_has(fd))
			rlb_ledger_dup(fd, rc);
		errno = saved;
	}
	return rc;
}

int rlb_track_dup3(int fd, int newfd, int flags, bool two)
{
	int rc = two ? rlb_libc()->dup2(fd, newfd)
		     : rlb_libc()->dup3(fd, newfd, flags);
	int saved = errno;

	if (rc >= 0 && !rlb_pending_in_vfork_child()) {
		born_copy(fd, rc);
		if (rlb_ledger_has(fd) || rlb_ledger_has(rc))
			rlb_ledger_dup(fd, rc);
		errno = saved;
	}
	return rc;
}

int rlb_track_fcntl(int fd, int cmd, long arg)
{
	int rc = rlb_libc()->fcntl(fd, cmd, arg);
	int saved = errno;

	if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&
	    !rlb_pending_in_vfork_child()) {
		born_copy(fd, rc);
		if (rlb_ledger_has(fd))
			rlb_ledger_dup(fd, rc);
		errno = saved;
	}
	return rc;
}

int rlb_track_close_range(unsigned first, unsigned last, int flags)
{
	int rc = rlb_libc()->close_range(first, last, flags), saved = errno;

	if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC) &&
	    atomic_load_explicit(&rlb_ledger_count, memory_order_relaxed) &&
	    !rlb_pending_in_vfork_child()) {
		rlb_ledger_close_range(first, last);
		errno = saved;
	}
	return rc;
}
