/* state/health_traffic.c - traffic counts and the connection ledger of a
 * cluster's segment (design.md §12.13): connects established and failed,
 * and the connections open now, host-wide, with lease rows that let a
 * survivor give back what a dead process held. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/health_internal.h"

/* ------------------------------------------------------------------ */
/* This process, as a lease row names it */

/* A row's owner word of this process, 0 until computed. */
static _Atomic uint64_t me_owner;
static _Atomic pid_t me_pid;
static _Atomic uint64_t me_pidns;
/* A random word of this program image: an exec() starts another. */
static _Atomic uint64_t me_image;

/*
 * The start time (clock ticks since boot) and state of process pid from
 * /proc/PID/stat: 0 when it is gone or cannot be read. A zombie reads as
 * gone: its descriptors are closed already.
 */
static uint64_t proc_start(pid_t pid)
{
	char path[48], buf[512];
	const char *p;
	ssize_t n;
	int fd, field;
	uint64_t start = 0;
	/* open() and read() are cancellation points: a thread cancelled
	 * between them would leave the descriptor open. */
	int cancel = rlb_cancel_off();

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = rlb_libc()->open(path, O_RDONLY | O_CLOEXEC, 0);
	n = fd < 0 ? -1 : rlb_libc()->read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		rlb_libc()->close(fd);
	rlb_cancel_restore(cancel);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command may hold spaces and parentheses: after the last ')'
	 * come field 3 (the state) and on; the start time is field 22. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0;
	p += 2;
	for (field = 3; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	while (*p >= '0' && *p <= '9')
		start = start * 10 + (uint64_t)(*p++ - '0');
	return start ? start : 1;
}

/* The owner word of this process, whose pid the caller has just asked
 * (computed again in a forked child). */
static uint64_t owner_word_of(pid_t pid)
{
	uint64_t start;

	if (atomic_load_explicit(&me_pid, memory_order_acquire) == pid)
		return atomic_load_explicit(&me_owner, memory_order_relaxed);
	start = proc_start(pid);
	if (!start)
		return 0; /* no /proc: no lease can be checked, none taken */
	atomic_store(&me_owner,
		     ((uint64_t)(uint32_t)pid << 32) | (start & 0xffffffffu));
	if (!atomic_load(&me_pidns))
		atomic_store(&me_pidns, rlb_dir_ns("pid") | 1);
	while (!atomic_load(&me_image)) {
		uint64_t r = 0;

		if (rlb_libc()->getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = ((uint64_t)rlb_random_u32() << 32) |
			    rlb_random_u32();
		r |= 1;
		uint64_t zero = 0;
		atomic_compare_exchange_strong(&me_image, &zero, r);
	}
	atomic_store_explicit(&me_pid, pid, memory_order_release);
	return atomic_load(&me_owner);
}

/* This process's owner word. */
static uint64_t owner_word(void)
{
	return owner_word_of(rlb_libc()->getpid());
}

/*
 * Whether row w (owner word o) may belong to a live process: only a row
 * of this PID namespace can be checked; another's is taken to be alive.
 */
static bool row_alive(const struct health_row *w, uint64_t o)
{
	uint64_t ns = atomic_load_explicit(&w->pidns, memory_order_relaxed);
	uint64_t start;

	if (o <= 1)
		return o == 1; /* 1: being reclaimed */
	if (ns == 0 || ns != atomic_load(&me_pidns))
		return true;
	start = proc_start((pid_t)(o >> 32));
	return start && (start & 0xffffffffu) == (o & 0xffffffffu);
}

/* ------------------------------------------------------------------ */
/* Entries */

/* The entries of segment m of nslots slots, and their number. */
struct conns {
	struct health_conn *e;
	size_t n;
};

static struct conns conns_of(struct health_map *m, uint32_t nslots)
{
	return (struct conns){rlb_ledger_conns(m, nslots),
			      HEALTH_CONNS_OF(nslots)};
}

static size_t conn_home(uint64_t ino, size_t n)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ULL;

	return (size_t)((h ^ (h >> 31)) % n);
}

/* The entry holding ino along its probe window, or NULL. */
static struct health_conn *conn_find(struct conns t, uint64_t ino)
{
	size_t home = conn_home(ino, t.n);

	for (size_t k = 0; k < HEALTH_CONN_PROBE; k++) {
		struct health_conn *e = &t.e[(home + k) % t.n];

		if (atomic_load_explicit(&e->ino, memory_order_acquire) == ino)
			return e;
	}
	return NULL;
}

/* An entry for ino: the one holding it, else a free one claimed; *made
 * when it was claimed now. NULL when the window is full. */
static struct health_conn *conn_claim(struct conns t, uint64_t ino, bool *made)
{
	size_t home = conn_home(ino, t.n);
	struct health_conn *e = conn_find(t, ino);

	*made = false;
	if (e)
		return e;
	for (size_t k = 0; k < HEALTH_CONN_PROBE; k++) {
		uint64_t zero = 0;

		e = &t.e[(home + k) % t.n];
		if (atomic_compare_exchange_strong(&e->ino, &zero, ino)) {
			*made = true;
			return e;
		}
		if (zero == ino)
			return e; /* another thread claimed it just now */
	}
	return NULL;
}

/* Subtract one from v, never below zero. */
static void counter_down(_Atomic uint64_t *v)
{
	uint64_t x = atomic_load(v);

	while (x && !atomic_compare_exchange_weak(v, &x, x - 1))
		;
}

/* The last holder let go of e: its replica's in_flight drops, e is free. */
static void conn_release(struct health_map *m, uint32_t nslots,
			 struct health_conn *e)
{
	long idx = rlb_table_find(m, nslots, atomic_load(&e->replica));

	if (idx >= 0)
		counter_down(&m->slots[idx].in_flight);
	atomic_store(&e->replica, 0);
	atomic_store_explicit(&e->ino, 0, memory_order_release);
}

/* Bit r of one of e's row masks (mask or transit) goes: true when it
 * was set, and then its hold is let go. */
static bool conn_clear(struct health_map *m, uint32_t nslots,
		       struct health_conn *e, _Atomic uint64_t *words,
		       unsigned r)
{
	uint64_t bit = 1ULL << (r % 64);

	if (!(atomic_fetch_and(&words[r / 64], ~bit) & bit))
		return false;
	if (atomic_fetch_sub(&e->holders, 1) == 1)
		conn_release(m, nslots, e);
	return true;
}

/* Row r lets go of e: true when it held it. */
static bool conn_let_go(struct health_map *m, uint32_t nslots,
			struct health_conn *e, unsigned r)
{
	return conn_clear(m, nslots, e, e->mask, r);
}

/* Bit r of words set: true when it was not, and then a hold is added. */
static bool conn_hold(struct health_conn *e, _Atomic uint64_t *words,
		      unsigned r)
{
	uint64_t bit = 1ULL << (r % 64);

	if (atomic_fetch_or(&words[r / 64], bit) & bit)
		return false;
	atomic_fetch_add(&e->holders, 1);
	return true;
}

/* Sends of e not received within HEALTH_TRANSIT_MS are given up. */
static void conn_transit_expire(struct health_map *m, uint32_t nslots,
				struct health_conn *e, int64_t now)
{
	int64_t at = atomic_load_explicit(&e->sent_ms, memory_order_relaxed);

	if (!at || now - at < HEALTH_TRANSIT_MS)
		return;
	for (unsigned r = 0; r < HEALTH_ROWS; r++)
		if (atomic_load_explicit(&e->transit[r / 64],
					 memory_order_relaxed) &
		    (1ULL << (r % 64)))
			conn_clear(m, nslots, e, e->transit, r);
}

/* ------------------------------------------------------------------ */
/* Rows */

/*
 * Give back everything row r held and free it, once: the caller moved
 * its owner word from o to 1 (being reclaimed).
 */
static void row_free(struct health_map *m, uint32_t nslots, unsigned r)
{
	struct health_row *w = &rlb_ledger_rows(m, nslots)[r];
	struct conns t = conns_of(m, nslots);

	for (size_t k = 0; k < t.n; k++)
		if (atomic_load_explicit(&t.e[k].ino, memory_order_relaxed)) {
			conn_let_go(m, nslots, &t.e[k], r);
			conn_clear(m, nslots, &t.e[k], t.e[k].transit, r);
		}
	atomic_store(&w->pidns, 0);
	atomic_store(&w->image, 0);
	atomic_store_explicit(&w->owner, 0, memory_order_release);
}

/* Reclaim row r whose owner word is o, if no other process does. */
static bool row_reclaim(struct health_map *m, uint32_t nslots, unsigned r,
			uint64_t o)
{
	struct health_row *w = &rlb_ledger_rows(m, nslots)[r];

	if (!atomic_compare_exchange_strong(&w->owner, &o, 1))
		return false;
	row_free(m, nslots, r);
	return true;
}

/* A free row claimed in this process's name with image `image`: its
 * number, or -1. */
static int row_claim(struct store *s, uint64_t o, uint64_t image)
{
	struct health_row *rows = rlb_ledger_rows(s->map, s->nslots);

	for (unsigned r = 0; r < HEALTH_ROWS; r++) {
		uint64_t zero = 0;

		if (atomic_compare_exchange_strong(&rows[r].owner, &zero, o)) {
			atomic_store(&rows[r].image, image);
			atomic_store(&rows[r].pidns, atomic_load(&me_pidns));
			return (int)r;
		}
	}
	return -1;
}

/*
 * This process's row in s: the one it claimed before (kept in the store,
 * or moved with the segment), else a free one. A row of this very
 * process from before an exec() is reclaimed on the way. -1 when none is
 * free or the process cannot be named.
 */
static int row_of(struct store *s)
{
	pid_t pid = rlb_libc()->getpid(); /* one system call for both uses */
	uint64_t o = owner_word_of(pid);
	struct health_row *rows;
	uint64_t image;
	int mine = -1;

	if (!o || !s->map || s->readonly)
		return -1;
	if (atomic_load_explicit(&s->row_pid, memory_order_acquire) == pid)
		return atomic_load_explicit(&s->row, memory_order_relaxed);
	rows = rlb_ledger_rows(s->map, s->nslots);
	image = atomic_load(&me_image);
	for (unsigned r = 0; r < HEALTH_ROWS; r++) {
		uint64_t w = atomic_load(&rows[r].owner);

		if (w != o)
			continue;
		if (atomic_load(&rows[r].image) == image)
			mine = (int)r;
		else /* this process before an exec(): its image is gone */
			row_reclaim(s->map, s->nslots, r, w);
	}
	if (mine < 0)
		mine = row_claim(s, o, image);
	if (mine < 0)
		return -1;
	atomic_store(&s->row, mine);
	atomic_store_explicit(&s->row_pid, pid, memory_order_release);
	return mine;
}

/* ------------------------------------------------------------------ */
/* What the rest of the library calls */

/* c's store to write traffic into, and replica i's slot there. */
static struct health_slot *traffic_slot(struct rlb_cluster *c, size_t i,
					struct store **sp)
{
	struct store *s = rlb_attach_check(c);
	uint32_t idx;

	*sp = s;
	if (!s || s->readonly || !rlb_health_counting(c) || i >= s->nreplicas ||
	    i >= c->nreplicas)
		return NULL;
	idx = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
	if (idx >= s->nslots ||
	    atomic_load(&s->map->slots[idx].key) != c->replicas[i].identity) {
		long found = rlb_table_claim(s->map, s->nslots,
					     c->replicas[i].identity);

		if (found < 0)
			return NULL;
		idx = (uint32_t)found;
		atomic_store(&s->slot[i], idx);
	}
	return &s->map->slots[idx];
}

void rlb_health_count_connect(struct rlb_cluster *c, size_t i, bool ok)
{
	struct store *s;
	struct health_slot *slot;
	int saved = errno;

	slot = traffic_slot(c, i, &s);
	if (slot)
		atomic_fetch_add_explicit(ok ? &slot->connects
					     : &slot->failures,
					  1, memory_order_relaxed);
	errno = saved;
}

bool rlb_health_conn_take(struct rlb_cluster *c, size_t i, uint64_t ino)
{
	struct store *s;
	struct health_slot *slot;
	struct health_conn *e;
	bool made, took = false;
	int saved = errno, r;

	if (!ino || !(slot = traffic_slot(c, i, &s)) || (r = row_of(s)) < 0)
		goto out;
	rlb_ledger_reclaim_due(s);
	e = conn_claim(conns_of(s->map, s->nslots), ino, &made);
	if (!e)
		goto out;
	if (made) {
		atomic_store(&e->replica, c->replicas[i].identity);
		atomic_fetch_add(&slot->in_flight, 1);
	}
	conn_hold(e, e->mask, (unsigned)r);
	took = true;
out:
	errno = saved;
	return took;
}

void rlb_health_conn_fork(struct rlb_cluster *c, uint64_t ino, int step)
{
	struct store *s = rlb_attach_check(c);
	struct health_row *rows;
	struct health_conn *e;
	int saved = errno, r;
	uint64_t o;

	if (!s || !s->map || s->readonly || !rlb_health_counting(c))
		goto out;
	rows = rlb_ledger_rows(s->map, s->nslots);
	if (step == 1) { /* the parent: the row is the child's now */
		atomic_store(&s->fork_row, -1);
		goto out;
	}
	if (step == 2) { /* the child: its own name on the row */
		r = atomic_exchange(&s->fork_row, -1);
		if (r < 0)
			goto out;
		o = atomic_load(&rows[r].owner);
		atomic_store(&s->row_pid, 0); /* the parent's row is not ours */
		if (!(owner_word()) ||
		    !atomic_compare_exchange_strong(&rows[r].owner, &o,
						    owner_word()))
			goto out;
		atomic_store(&rows[r].image, atomic_load(&me_image));
		atomic_store(&rows[r].pidns, atomic_load(&me_pidns));
		atomic_store(&s->row, r);
		atomic_store_explicit(&s->row_pid, rlb_libc()->getpid(),
				      memory_order_release);
		goto out;
	}
	/* Before the fork: a row for the child, in the parent's name but
	 * with another image, so that the parent never takes it for its
	 * own; then the child holds ino from this moment. */
	r = atomic_load(&s->fork_row);
	if (r < 0 && (o = owner_word()) &&
	    (r = row_claim(s, o, atomic_load(&me_image) ^ 2)) >= 0)
		atomic_store(&s->fork_row, r);
	if (r < 0 || !(e = conn_find(conns_of(s->map, s->nslots), ino)) ||
	    !atomic_load(&e->holders))
		goto out;
	conn_hold(e, e->mask, (unsigned)r);
out:
	errno = saved;
}

void rlb_health_conn_send(struct rlb_cluster *c, uint64_t ino)
{
	struct store *s = rlb_attach_check(c);
	struct health_conn *e;
	int saved = errno, r;

	if (!ino || !s || s->readonly || !rlb_health_counting(c) ||
	    (r = row_of(s)) < 0 ||
	    !(e = conn_find(conns_of(s->map, s->nslots), ino)))
		goto out;
	if (atomic_load(&e->holders)) {
		atomic_store(&e->sent_ms, rlb_monotonic_ms());
		conn_hold(e, e->transit, (unsigned)r);
	}
out:
	errno = saved;
}

bool rlb_health_conn_receive(struct rlb_cluster *c, uint64_t ino,
			     uint64_t *replica)
{
	struct store *s;
	struct health_conn *e;
	bool took = false;
	int saved = errno, r;

	if (!ino || !rlb_health_counting(c) || !rlb_health_has_state(c) ||
	    !(s = rlb_attach_check(c)) || s->readonly ||
	    !(e = conn_find(conns_of(s->map, s->nslots), ino)) ||
	    !atomic_load(&e->holders) || (r = row_of(s)) < 0)
		goto out;
	*replica = atomic_load(&e->replica);
	conn_hold(e, e->mask, (unsigned)r);
	/* One hold of a sender is ours now: the first in transit. */
	for (unsigned w = 0; w < HEALTH_ROW_WORDS; w++) {
		uint64_t t = atomic_load(&e->transit[w]);

		if (t) {
			conn_clear(s->map, s->nslots, e, e->transit,
				   w * 64 + (unsigned)__builtin_ctzll(t));
			break;
		}
	}
	took = true;
out:
	errno = saved;
	return took;
}

void rlb_health_conn_drop(struct rlb_cluster *c, uint64_t ino)
{
	struct store *s = rlb_attach_check(c);
	struct health_conn *e;
	int saved = errno, r;

	/* A segment replaced meanwhile moved the entry: the store in force
	 * is looked at once more. */
	for (int tries = 0;
	     tries < 2 && s && !s->readonly && rlb_health_counting(c);
	     tries++) {
		if ((r = row_of(s)) < 0)
			break;
		e = conn_find(conns_of(s->map, s->nslots), ino);
		if (e) {
			conn_let_go(s->map, s->nslots, e, (unsigned)r);
			break;
		}
		s = rlb_attach_now(c);
	}
	errno = saved;
}

/*
 * Reclaim, if no process of the host did in the last second: what a
 * short-lived process (a curl) does at its connect, where the follow of
 * the state, once a second per process, would never come. A deadline
 * further ahead than that (a process in another time namespace) is
 * taken as due.
 */
void rlb_ledger_reclaim_due(struct store *s)
{
	int64_t now = rlb_monotonic_ms();
	int64_t at = atomic_load_explicit(&s->map->hdr.reclaim_ms,
					  memory_order_relaxed);

	if (!s || !s->map || s->readonly ||
	    (now < at && at - now <= 2 * HEALTH_FOLLOW_MS) ||
	    !atomic_compare_exchange_strong(&s->map->hdr.reclaim_ms, &at,
					    now + HEALTH_FOLLOW_MS))
		return;
	rlb_ledger_reclaim(s);
}

int rlb_ledger_reclaim(struct store *s)
{
	struct health_row *rows;
	struct conns t;
	uint64_t mine;
	int64_t now;
	int n = 0;

	if (!s || !s->map || s->readonly)
		return 0;
	mine = owner_word();
	rows = rlb_ledger_rows(s->map, s->nslots);
	for (unsigned r = 0; r < HEALTH_ROWS; r++) {
		uint64_t o = atomic_load(&rows[r].owner);

		if (o > 1 && o != mine && !row_alive(&rows[r], o) &&
		    row_reclaim(s->map, s->nslots, r, o))
			n++;
	}
	t = conns_of(s->map, s->nslots);
	now = rlb_monotonic_ms();
	for (size_t k = 0; k < t.n; k++)
		if (atomic_load_explicit(&t.e[k].ino, memory_order_relaxed))
			conn_transit_expire(s->map, s->nslots, &t.e[k], now);
	return n;
}

int rlb_health_reclaim(struct rlb_cluster *c)
{
	int saved = errno;
	int n = rlb_ledger_reclaim(rlb_attach_check(c));

	errno = saved;
	return n;
}

void rlb_health_in_flight(const struct rlb_cluster *c, size_t n, uint64_t *out)
{
	struct store *s = c->health ? rlb_attach_now(c) : NULL;

	for (size_t i = 0; i < n; i++) {
		long idx = -1;
		uint32_t at;

		out[i] = 0;
		if (!s || i >= s->nreplicas)
			continue;
		at = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
		if (at < s->nslots &&
		    atomic_load_explicit(&s->map->slots[at].key,
					 memory_order_relaxed) ==
			    c->replicas[i].identity)
			idx = (long)at;
		else
			idx = rlb_table_find(s->map, s->nslots,
					     c->replicas[i].identity);
		if (idx >= 0)
			out[i] = atomic_load_explicit(
				&s->map->slots[idx].in_flight,
				memory_order_relaxed);
	}
}

void rlb_health_traffic(const struct rlb_cluster *c, size_t i,
			struct rlb_traffic *t)
{
	struct store *s = c->health ? rlb_attach_now(c) : NULL;
	struct conns conns;
	struct health_row *rows;
	uint64_t alive[HEALTH_ROW_WORDS] = {0}, id;
	long idx;
	int saved = errno;

	memset(t, 0, sizeof(*t));
	if (!s || !s->map || i >= c->nreplicas)
		goto out;
	id = c->replicas[i].identity;
	idx = rlb_table_find(s->map, s->nslots, id);
	if (idx < 0)
		goto out;
	t->connects = atomic_load(&s->map->slots[idx].connects);
	t->failures = atomic_load(&s->map->slots[idx].failures);
	/* Connections open now: the entries that a live row still holds,
	 * whatever a dead process left in the counter (reading changes
	 * nothing: status is a look, design.md §6). */
	owner_word();
	rows = rlb_ledger_rows(s->map, s->nslots);
	for (unsigned r = 0; r < HEALTH_ROWS; r++) {
		uint64_t o = atomic_load(&rows[r].owner);

		if (o > 1 && row_alive(&rows[r], o))
			alive[r / 64] |= 1ULL << (r % 64);
	}
	conns = conns_of(s->map, s->nslots);
	for (size_t k = 0; k < conns.n; k++) {
		struct health_conn *e = &conns.e[k];
		bool held = false;

		if (!atomic_load_explicit(&e->ino, memory_order_acquire) ||
		    atomic_load(&e->replica) != id)
			continue;
		for (unsigned w = 0; w < HEALTH_ROW_WORDS; w++)
			held |= (atomic_load(&e->mask[w]) & alive[w]) != 0;
		t->in_flight += held;
	}
out:
	errno = saved;
}

/* ------------------------------------------------------------------ */
/* A segment replaced by a larger one */

void rlb_ledger_move(struct health_map *from, uint32_t from_slots,
		     struct health_map *to, uint32_t to_slots)
{
	struct health_row *fr = rlb_ledger_rows(from, from_slots);
	struct health_row *tr = rlb_ledger_rows(to, to_slots);
	struct conns fc = conns_of(from, from_slots);
	struct conns tc = conns_of(to, to_slots);

	/* Rows keep their numbers, which the entries' masks name. */
	for (unsigned r = 0; r < HEALTH_ROWS; r++) {
		uint64_t o = atomic_load(&fr[r].owner), zero = 0;

		if (o > 1 &&
		    atomic_compare_exchange_strong(&tr[r].owner, &zero, o)) {
			atomic_store(&tr[r].image, atomic_load(&fr[r].image));
			atomic_store(&tr[r].pidns, atomic_load(&fr[r].pidns));
		}
	}
	for (size_t k = 0; k < fc.n; k++) {
		struct health_conn *e = &fc.e[k], *n;
		uint64_t ino = atomic_exchange(&e->ino, 0), holders;
		bool made;

		if (!ino)
			continue;
		n = conn_claim(tc, ino, &made);
		if (!n) { /* no room: it stays, and counts, where it was */
			atomic_store(&e->ino, ino);
			continue;
		}
		atomic_store(&n->replica, atomic_exchange(&e->replica, 0));
		for (unsigned w = 0; w < HEALTH_ROW_WORDS; w++)
			atomic_fetch_or(&n->mask[w],
					atomic_exchange(&e->mask[w], 0));
		holders = atomic_exchange(&e->holders, 0);
		atomic_fetch_add(&n->holders, holders);
	}
}
