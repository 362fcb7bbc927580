/* health.c - shared health state (design.md §5): per-cluster memory-mapped
 * files of error counts, decay time and round-robin counter, updated
 * atomically; never waiting on another process, and surviving files that
 * are locked, truncated or replaced while in use (§12.9). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/state.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

#define HEALTH_MAGIC	   "RLBSTATE"
#define HEALTH_VERSION	   2
#define HEALTH_NSLOTS	   (2 * RLB_MAX_REPLICAS)
#define HEALTH_SIZE	   sizeof(struct health_map)
#define HEALTH_KEY_EMPTY   0 /* never claimed since the last rebuild */
#define HEALTH_KEY_DROPPED 1 /* pruned: skipped by probes, never reused */
#define HEALTH_NO_SLOT	   UINT32_MAX
/* Longest wait for other processes' flocks, per attach of a whole config. */
#define HEALTH_LOCK_WAIT_NS 1000000
#define HEALTH_RETRY_MS	    250 /* a cluster waiting for its file tries again */
#define HEALTH_FOLLOW_MS    1000 /* how often the path is checked */
#define HEALTH_RECLAIM_MS   100	 /* after a failed reclaim, none before this */
#define HEALTH_STEM_MAX	    200	 /* longer cluster names are cut and hashed */
#define HEALTH_CHECK_SEED   0x524c4253u

/*
 * Counters live in memory shared between processes, so their atomics must
 * be real instructions, not libatomic's process-local locks.
 */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_LONG_LOCK_FREE == 2,
	       "64-bit atomics must be lock-free");

/* First 64 bytes of a state file; native byte order. */
struct health_header {
	char magic[8];		     /* HEALTH_MAGIC, not NUL-terminated */
	uint32_t version;	     /* HEALTH_VERSION */
	uint32_t nslots;	     /* HEALTH_NSLOTS */
	_Atomic int64_t decay_time;  /* T of design.md §5, 0 while unset */
	_Atomic uint64_t rr_counter; /* round-robin selections so far */
	uint64_t check; /* header_check(): magic, version, nslots */
	char pad[24];
};

/* One replica's counts, keyed by its identity. */
struct health_slot {
	_Atomic uint64_t key;	    /* identity, or HEALTH_KEY_* */
	_Atomic uint64_t errors;    /* capped at error_cap */
	_Atomic uint64_t slowdowns; /* attempts abandoned early; uncapped */
	uint64_t reserved;
};

/* The whole file: header, then an open-addressing table of slots. */
struct health_map {
	struct health_header hdr;
	struct health_slot slots[HEALTH_NSLOTS];
};

_Static_assert(sizeof(struct health_header) == 64, "header is 64 bytes");
_Static_assert(sizeof(struct health_map) == 64 + HEALTH_NSLOTS * 32,
	       "state file layout v2");

/* What backs a cluster's counters (rlb_health.mode). */
enum health_mode {
	HEALTH_SHARED,	 /* the state file dev/ino */
	HEALTH_DEFERRED, /* private memory for now; the file is tried again */
	HEALTH_PRIVATE,	 /* private memory until the next attach */
};

/*
 * One cluster's view of its state (opaque outside this file). map never
 * moves: when what backs it changes (file, anonymous memory, another
 * file), one mmap or mremap replaces the pages in place, so a thread
 * still using it never finds it unmapped (design.md §12.9).
 */
struct rlb_health {
	struct health_map *map;	    /* the counters */
	bool heap;		    /* map came from calloc: mmap failed */
	bool readonly;		    /* a look that writes nothing (§6) */
	char *dir;		    /* state directory, or NULL */
	char *path;		    /* state file in dir, or NULL */
	char *label;		    /* readonly: rlb_health_path() */
	_Atomic int mode;	    /* enum health_mode */
	_Atomic bool prune_owed;    /* attached without the lock: prune later */
	_Atomic uint64_t dev;	    /* the mapped file, to recognise it */
	_Atomic uint64_t ino;	    /* (while mode is HEALTH_SHARED) */
	_Atomic int64_t checked_ms; /* coarse tick of the last check */
	_Atomic int64_t retry_ms;   /* next attach attempt or path check */
	_Atomic int64_t reclaim_ms; /* no reclaim before this */
	_Atomic pid_t busy;	    /* process in a slow path, 0 if none */
	size_t nreplicas;	    /* entries of slot[] */
	_Atomic uint32_t slot[];    /* per replica: index of its slot */
};

/* ------------------------------------------------------------------ */
/* Decay arithmetic (clickhouse.md §5.3) */

/* Shift k that a selection at `now` applies when T is t; 64 means zero. */
static unsigned decay_shift(const struct rlb_cluster *c, int64_t t, int64_t now)
{
	int64_t hl = c->s.half_life;
	uint64_t delta, k;

	if (t == 0 || now < t)
		return 0;
	if (hl <= 0)
		return 64;
	/* Unsigned: T read from a file may be anything. */
	delta = (uint64_t)now - (uint64_t)t;
	k = delta / (uint64_t)hl;
	return k >= 64 ? 64 : (unsigned)k;
}

static uint64_t shift_errors(uint64_t e, unsigned k)
{
	return k >= 64 ? 0 : e >> k;
}

/* ------------------------------------------------------------------ */
/* The slot table */

static uint64_t header_check(const struct health_header *hdr)
{
	unsigned char buf[16];

	memcpy(buf, hdr->magic, 8);
	memcpy(buf + 8, &hdr->version, 4);
	memcpy(buf + 12, &hdr->nslots, 4);
	return rlb_hash64(buf, sizeof(buf), HEALTH_CHECK_SEED);
}

static void header_init(struct health_map *m)
{
	struct health_header *hdr = &m->hdr;

	memcpy(hdr->magic, HEALTH_MAGIC, sizeof(hdr->magic));
	hdr->version = HEALTH_VERSION;
	hdr->nslots = HEALTH_NSLOTS;
	atomic_store(&hdr->decay_time, 0);
	atomic_store(&hdr->rr_counter, 0);
	hdr->check = header_check(hdr);
}

/*
 * 0 if the header is valid, 1 if it is all zero (a creator died before
 * writing it), -1 with the reason in why otherwise.
 */
static int header_validate(const struct health_header *hdr, char *why,
			   size_t whylen)
{
	static const char zero[sizeof(struct health_header)];

	if (memcmp(hdr, zero, sizeof(zero)) == 0)
		return 1;
	if (memcmp(hdr->magic, HEALTH_MAGIC, sizeof(hdr->magic)) != 0)
		snprintf(why, whylen, "bad magic");
	else if (hdr->version != HEALTH_VERSION)
		snprintf(why, whylen, "version %u, expected %u", hdr->version,
			 HEALTH_VERSION);
	else if (hdr->nslots != HEALTH_NSLOTS)
		snprintf(why, whylen, "%u slots, expected %u", hdr->nslots,
			 HEALTH_NSLOTS);
	else if (hdr->check != header_check(hdr))
		snprintf(why, whylen, "bad header checksum");
	else
		return 0;
	return -1;
}

/*
 * Slot of id: the one holding it, else the first empty one on its probe
 * path, claimed. `locked`: the caller holds the file lock, so nobody else
 * claims and the count can be cleared before the key is published.
 * Returns the index, or -1 when the table has no room.
 */
static long table_claim(struct health_slot *slots, uint64_t id, bool locked)
{
	size_t home = id % HEALTH_NSLOTS;

	for (size_t n = 0; n < HEALTH_NSLOTS; n++) {
		size_t idx = (home + n) % HEALTH_NSLOTS;
		struct health_slot *s = &slots[idx];
		uint64_t key = atomic_load(&s->key);

		if (key == HEALTH_KEY_EMPTY) {
			if (locked) {
				atomic_store(&s->errors, 0);
				atomic_store(&s->slowdowns, 0);
			}
			if (atomic_compare_exchange_strong(&s->key, &key, id))
				return (long)idx;
		}
		if (key == id)
			return (long)idx;
	}
	return -1;
}

/*
 * Slot holding id, found along its probe path without claiming anything,
 * or -1: an absent id reads as zero counts.
 */
static long table_find(const struct health_slot *slots, uint64_t id)
{
	size_t home = id % HEALTH_NSLOTS;

	for (size_t n = 0; n < HEALTH_NSLOTS; n++) {
		size_t idx = (home + n) % HEALTH_NSLOTS;
		uint64_t key = atomic_load(&slots[idx].key);

		if (key == id)
			return (long)idx;
		if (key == HEALTH_KEY_EMPTY)
			return -1;
	}
	return -1;
}

/* Under the file lock: empty every slot. */
static void table_clear(struct health_slot *slots)
{
	for (size_t i = 0; i < HEALTH_NSLOTS; i++) {
		atomic_store(&slots[i].key, HEALTH_KEY_EMPTY);
		atomic_store(&slots[i].errors, 0);
		atomic_store(&slots[i].slowdowns, 0);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorted identities of c's replicas (malloc'd), or NULL on ENOMEM. */
static uint64_t *sorted_identities(const struct rlb_cluster *c)
{
	uint64_t *ids =
		malloc((c->nreplicas ? c->nreplicas : 1) * sizeof(*ids));

	if (!ids)
		return NULL;
	for (size_t i = 0; i < c->nreplicas; i++)
		ids[i] = c->replicas[i].identity;
	qsort(ids, c->nreplicas, sizeof(*ids), cmp_u64);
	return ids;
}

static bool has_identity(const uint64_t *ids, size_t n, uint64_t key)
{
	return bsearch(&key, ids, n, sizeof(*ids), cmp_u64) != NULL;
}

/* Under the file lock: drop every entry whose key is not in ids. */
static void table_prune(struct health_slot *slots, const uint64_t *ids,
			size_t nids)
{
	for (size_t i = 0; i < HEALTH_NSLOTS; i++) {
		uint64_t key = atomic_load(&slots[i].key);

		if (key <= HEALTH_KEY_DROPPED || has_identity(ids, nids, key))
			continue;
		atomic_store(&slots[i].key, HEALTH_KEY_DROPPED);
		atomic_store(&slots[i].errors, 0);
		atomic_store(&slots[i].slowdowns, 0);
	}
}

/*
 * Under the file lock: rebuild the table in place without tombstones,
 * keeping every live entry, or with ids only those in ids. Other
 * processes notice moved entries through the key check of slot_of().
 * Returns 0 or -ENOMEM.
 */
static int table_rebuild(struct health_slot *slots, const uint64_t *ids,
			 size_t nids)
{
	struct {
		uint64_t key;
		uint64_t errors;
		uint64_t slowdowns;
	} * live;
	size_t n = 0;

	live = malloc(HEALTH_NSLOTS * sizeof(*live));
	if (!live)
		return -ENOMEM;
	for (size_t i = 0; i < HEALTH_NSLOTS; i++) {
		uint64_t key = atomic_load(&slots[i].key);

		if (key <= HEALTH_KEY_DROPPED ||
		    (ids && !has_identity(ids, nids, key)))
			continue;
		live[n].key = key;
		live[n].errors = atomic_load(&slots[i].errors);
		live[n].slowdowns = atomic_load(&slots[i].slowdowns);
		n++;
	}
	table_clear(slots);
	for (size_t j = 0; j < n; j++) {
		long idx = table_claim(slots, live[j].key, true);

		/* A duplicate (from an unlocked claim) keeps the larger. */
		if (idx < 0)
			continue;
		if (atomic_load(&slots[idx].errors) < live[j].errors)
			atomic_store(&slots[idx].errors, live[j].errors);
		if (atomic_load(&slots[idx].slowdowns) < live[j].slowdowns)
			atomic_store(&slots[idx].slowdowns, live[j].slowdowns);
	}
	free(live);
	return 0;
}

/* Claim slots of replicas [first, first + n) of c; -ENOSPC if full. */
static int claim_replicas(struct rlb_health *h, const struct rlb_cluster *c,
			  size_t first, size_t n, bool locked)
{
	if (h->readonly)
		return -EROFS;
	for (size_t i = first; i < first + n; i++) {
		long idx = table_claim(h->map->slots, c->replicas[i].identity,
				       locked);

		if (idx < 0)
			return -ENOSPC;
		atomic_store(&h->slot[i], (uint32_t)idx);
	}
	return 0;
}

/*
 * Under the file lock: claim as claim_replicas(), making room when the
 * table is full, first by dropping tombstones, then by dropping every
 * entry that is not a replica of c.
 */
static int claim_locked(struct rlb_health *h, const struct rlb_cluster *c,
			size_t first, size_t n)
{
	uint64_t *ids;
	int rc;

	if (h->readonly)
		return -EROFS;
	if (claim_replicas(h, c, first, n, true) == 0)
		return 0;
	if (table_rebuild(h->map->slots, NULL, 0) == 0 &&
	    claim_replicas(h, c, first, n, true) == 0)
		return 0;
	ids = sorted_identities(c);
	if (!ids)
		return -ENOMEM;
	rc = table_rebuild(h->map->slots, ids, c->nreplicas);
	if (rc == 0)
		rc = claim_replicas(h, c, first, n, true);
	free(ids);
	if (rc == 0)
		rlb_log(RLB_LOG_INFO,
			"state file %s was full: dropped state "
			"of replicas not in cluster %s",
			h->path, c->name);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Files */

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * flock(LOCK_EX) without blocking, tried again until deadline (mono_ns();
 * 0: once). 0, or -1 with errno (EWOULDBLOCK: another process holds it).
 */
static int lock_file(int fd, int64_t deadline)
{
	const struct timespec pause = {0, 50000};

	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK || mono_ns() >= deadline)
			return -1;
		nanosleep(&pause, NULL);
	}
}

/*
 * Release the lock explicitly: a mapping of the file keeps the open file
 * description, and with it the flock, alive past close().
 */
static void unlock_close(int fd)
{
	flock(fd, LOCK_UN);
	rlb_libc()->close(fd);
}

/* Hashes of the messages log_once() has logged (0: free entry). */
static _Atomic uint64_t logged[64];

/*
 * Log a message once per process at level: the same text again (at a
 * reload, a retry, another attach) goes out at debug level only.
 */
static RLB_PRINTF(2, 3) void log_once(enum rlb_log_level level, const char *fmt,
				      ...)
{
	char msg[900];
	uint64_t hash;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hash = rlb_hash64(msg, strlen(msg), 0);
	for (size_t i = 0; i < sizeof(logged) / sizeof(logged[0]); i++) {
		uint64_t cur = atomic_load(&logged[i]);

		if (cur == 0 &&
		    atomic_compare_exchange_strong(&logged[i], &cur, hash))
			break;
		if (cur == hash) {
			level = RLB_LOG_DEBUG;
			break;
		}
	}
	rlb_log(level, "%s", msg);
}

/* Why st (of a state file or directory) must not be used, or NULL. */
static const char *owner_problem(const struct stat *st, char *why,
				 size_t whylen)
{
	if (st->st_uid != geteuid()) {
		snprintf(why, whylen, "owned by uid %lu, not %lu",
			 (unsigned long)st->st_uid, (unsigned long)geteuid());
		return why;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, whylen, "mode %04o is writable by others",
			 (unsigned)(st->st_mode & 07777));
		return why;
	}
	return NULL;
}

/* mkdir 0700; 1 if created, 0 if it existed, -1/errno otherwise. */
static int make_dir(const char *path)
{
	if (mkdir(path, 0700) == 0) {
		/* The umask may have taken bits we need. */
		chmod(path, 0700);
		return 1;
	}
	return errno == EEXIST ? 0 : -1;
}

/* mkdir -p with mode 0700; returns as make_dir() for the last one. */
static int make_dirs(const char *dir)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/' || p[-1] == '/')
			continue;
		*p = '\0';
		/* Failures show up when the last one is made. */
		make_dir(path);
		*p = '/';
	}
	return make_dir(path);
}

/*
 * The state directory cfg asks for, into buf (design.md §5.8): state_dir
 * (REPLICALB_STATE_DIR applied), else $XDG_RUNTIME_DIR/replicalb, else
 * the default /tmp/replicalb-EUID; then *fb is the fallback for a default
 * that another user took first, $HOME/.cache/replicalb, or "" when HOME
 * is unknown (unset, relative, or ignored in secure mode). False when a
 * path does not fit.
 */
static bool state_dir_paths(const struct rlb_config *cfg, char *buf, size_t len,
			    char *fb, size_t fblen)
{
	const char *xdg = rlb_env(RLB_ENV_XDG_RUNTIME_DIR);
	const char *home = rlb_env(RLB_ENV_HOME);
	int n;

	fb[0] = '\0';
	if (cfg && cfg->state_dir && cfg->state_dir[0])
		n = snprintf(buf, len, "%s", cfg->state_dir);
	else if (xdg && xdg[0] == '/') /* XDG: relative paths are invalid */
		n = snprintf(buf, len, "%s/replicalb", xdg);
	else {
		n = snprintf(buf, len, "/tmp/replicalb-%lu",
			     (unsigned long)geteuid());
		if (home && home[0] == '/' &&
		    (size_t)snprintf(fb, fblen, "%s/.cache/replicalb", home) >=
			    fblen)
			fb[0] = '\0';
	}
	return n >= 0 && (size_t)n < len;
}

/* Whether dir is ours to use or to create (without opening it). */
static bool dir_usable(const char *dir)
{
	char why[160];
	struct stat st;

	if (lstat(dir, &st) != 0)
		return errno == ENOENT;
	return S_ISDIR(st.st_mode) && !owner_problem(&st, why, sizeof(why));
}

const char *rlb_health_state_dir(const struct rlb_config *cfg, char *buf,
				 size_t len)
{
	char fb[PATH_MAX];
	int saved = errno;

	if (state_dir_paths(cfg, buf, len, fb, sizeof(fb)) && fb[0] &&
	    !dir_usable(buf))
		snprintf(buf, len, "%s", fb);
	errno = saved;
	return buf;
}

/*
 * Open the state directory dir (created if missing) as a directory fd
 * that passed the ownership checks, or -1 with the reason in why.
 */
static int state_dir_open(const char *dir, char *why, size_t whylen)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int created = 0;
	struct stat st;
	int fd;

	fd = open(dir, flags);
	if (fd < 0 && errno == ENOENT) {
		created = make_dirs(dir);
		fd = open(dir, flags);
	}
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			snprintf(why, whylen, "not a directory or a symlink");
		else
			snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	if (created == 1)
		fchmod(fd, 0700);
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		goto out_close;
	}
	if (owner_problem(&st, why, whylen))
		goto out_close;
	return fd;

out_close:
	rlb_libc()->close(fd);
	return -1;
}

/*
 * The default directory dflt is not usable (why), typically because
 * another user made it first, and fb (open as dirfd) is used instead. Say
 * so once per squat, not at every program start: the first process to
 * see it leaves a note in fb, named after the squatting entry.
 */
static void fallback_notice(int dirfd, const char *dflt, const char *why,
			    const char *fb)
{
	enum rlb_log_level level = RLB_LOG_WARNING;
	struct stat st = {0};
	char note[64];
	int fd;

	lstat(dflt, &st);
	snprintf(note, sizeof(note), ".squatted-%llx-%llx",
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	fd = openat(dirfd, note,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		rlb_libc()->close(fd);
	else if (errno == EEXIST)
		level = RLB_LOG_INFO;
	rlb_log(level, "state directory %s not used (%s): using %s instead",
		dflt, why, fb);
}

/*
 * Open the state directory of cfg (state_dir_paths(), with the fallback
 * for a squatted default) into dir, or -1 after one warning (none when
 * quiet).
 */
static int state_dir_resolve(const struct rlb_config *cfg, char *dir,
			     size_t len, bool quiet)
{
	char fb[PATH_MAX], why[160], why2[160];
	int fd = -1;

	if (!state_dir_paths(cfg, dir, len, fb, sizeof(fb)))
		snprintf(why, sizeof(why), "path too long");
	else
		fd = state_dir_open(dir, why, sizeof(why));
	if (fd >= 0)
		return fd;
	if (fb[0])
		fd = state_dir_open(fb, why2, sizeof(why2));
	if (fd >= 0) {
		if (!quiet)
			fallback_notice(fd, dir, why, fb);
		snprintf(dir, len, "%s", fb);
		return fd;
	}
	if (quiet)
		return -1;
	if (fb[0])
		log_once(RLB_LOG_WARNING,
			 "state directory %s not used (%s), nor %s (%s): "
			 "health state is private to this process",
			 dir, why, fb, why2);
	else
		log_once(RLB_LOG_WARNING,
			 "state directory %s not used (%s): "
			 "health state is private to this process",
			 dir, why);
	return -1;
}

/*
 * File name of cluster `name`: NAME.state with bytes outside [a-z0-9._-]
 * replaced by '_'; overlong names are cut and made unique by a hash, so
 * that "NAME.state.corrupt-..." still fits NAME_MAX.
 */
static void state_file_name(const char *name, char *out, size_t outlen)
{
	size_t len = strlen(name);
	size_t keep = len > HEALTH_STEM_MAX ? HEALTH_STEM_MAX - 17 : len;
	size_t i;

	for (i = 0; i < keep && i + 1 < outlen; i++) {
		char ch = name[i];
		bool ok = (ch >= 'a' && ch <= 'z') ||
			  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
			  ch == '-';

		out[i] = ok ? ch : '_';
	}
	if (keep < len)
		snprintf(out + i, outlen - i, "-%016llx.state",
			 (unsigned long long)rlb_hash64(name, len, 0));
	else
		snprintf(out + i, outlen - i, ".state");
}

/*
 * Open (creating it 0600 if needed) the state file fname in dirfd and
 * flock it, trying until deadline (lock_file()). Fills *st for the file,
 * which is still the one at fname, and *locked: false when another
 * process holds the lock. Returns the fd or -1 with the reason in why.
 */
static int state_file_open(int dirfd, const char *fname, int64_t deadline,
			   struct stat *st, bool *locked, char *why,
			   size_t whylen)
{
	const int flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd;

	for (int tries = 0; tries < 8; tries++) {
		struct stat cur;
		bool created = true;

		fd = openat(dirfd, fname, flags | O_CREAT | O_EXCL, 0600);
		if (fd < 0 && errno == EEXIST) {
			created = false;
			fd = openat(dirfd, fname, flags);
			if (fd < 0 && errno == ENOENT)
				continue; /* set aside meanwhile */
		}
		if (fd < 0) {
			snprintf(why, whylen, "%s",
				 errno == ELOOP ? "it is a symlink"
						: strerror(errno));
			return -1;
		}
		if (created)
			fchmod(fd, 0600);
		if (fstat(fd, st) != 0) {
			snprintf(why, whylen, "%s", strerror(errno));
			goto out_close;
		}
		if (!S_ISREG(st->st_mode)) {
			snprintf(why, whylen, "not a regular file");
			goto out_close;
		}
		if (owner_problem(st, why, whylen))
			goto out_close;
		*locked = lock_file(fd, deadline) == 0;
		if (!*locked && errno != EWOULDBLOCK) {
			snprintf(why, whylen, "cannot lock it: %s",
				 strerror(errno));
			goto out_close;
		}
		/* Whoever locked it before us may have set it aside. */
		if (fstat(fd, st) == 0 &&
		    fstatat(dirfd, fname, &cur, AT_SYMLINK_NOFOLLOW) == 0 &&
		    cur.st_dev == st->st_dev && cur.st_ino == st->st_ino)
			return fd;
		rlb_libc()->close(fd);
	}
	snprintf(why, whylen, "it keeps being replaced");
	return -1;

out_close:
	rlb_libc()->close(fd);
	return -1;
}

/*
 * Under the lock: 0 if the state file fd (stat st) is valid, 1 if it is
 * blank (empty, or a header of zeroes: its creator died before writing
 * it), -1 if it must be set aside, with *problem and the reason in why.
 * The header is read, not mapped: a file cut short meanwhile cannot
 * SIGBUS here.
 */
static int file_validate(int fd, const struct stat *st, const char **problem,
			 char *why, size_t whylen)
{
	struct health_header hdr;

	*problem = "is corrupt";
	if (st->st_nlink != 1) {
		/* Written through the other name too: refuse it. */
		*problem = "is linked elsewhere";
		snprintf(why, whylen, "%lu links", (unsigned long)st->st_nlink);
		return -1;
	}
	if (st->st_size == 0)
		return 1;
	if (st->st_size != (off_t)HEALTH_SIZE) {
		snprintf(why, whylen, "size %lld, expected %zu",
			 (long long)st->st_size, HEALTH_SIZE);
		return -1;
	}
	if (pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		snprintf(why, whylen, "cannot read its header");
		return -1;
	}
	return header_validate(&hdr, why, whylen);
}

static struct rlb_health *health_new(size_t nreplicas)
{
	struct rlb_health *h;

	h = calloc(1, sizeof(*h) + nreplicas * sizeof(h->slot[0]));
	if (!h)
		return NULL;
	h->nreplicas = nreplicas;
	for (size_t i = 0; i < nreplicas; i++)
		atomic_init(&h->slot[i], HEALTH_NO_SLOT);
	return h;
}

/* How an attach went. */
enum attach_result {
	ATTACH_OK,	/* attached to the file */
	ATTACH_LATER,	/* another process holds the lock: try again later */
	ATTACH_REFUSED, /* the file cannot be used (warned) */
};

/*
 * Another process holds the lock: attach only to a file that is whole
 * and valid and has room for the replicas, with lock-free claims; the
 * prune, which needs the lock, is owed (design.md §12.4).
 */
static enum attach_result attach_unlocked(int fd, const struct stat *st,
					  struct rlb_health *h,
					  const struct rlb_cluster *c,
					  bool prune, char *why, size_t whylen)
{
	struct health_header hdr;
	char ignored[160];
	void *map;

	snprintf(why, whylen, "locked by another process");
	if (st->st_size != (off_t)HEALTH_SIZE || st->st_nlink != 1 ||
	    pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
	    header_validate(&hdr, ignored, sizeof(ignored)) != 0)
		return ATTACH_LATER;
	map = mmap(NULL, HEALTH_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (map == MAP_FAILED) {
		snprintf(why, whylen, "mmap: %s", strerror(errno));
		return ATTACH_REFUSED;
	}
	h->map = map;
	if (claim_replicas(h, c, 0, c->nreplicas, false) != 0) {
		snprintf(why, whylen, "locked by another process, and full");
		return ATTACH_LATER;
	}
	atomic_store(&h->prune_owed, prune);
	return ATTACH_OK;
}

/*
 * Attach c to its state file in dirfd (path dir): validate or create it,
 * claim the replicas' slots and prune, all under the file lock, which is
 * waited for until deadline (lock_file()); when another process holds it
 * longer, attach_unlocked(). The file's path goes into path (PATH_MAX).
 * Logs why the file is not used (a warning once when refused, info when
 * it is only busy).
 */
static enum attach_result attach_file(int dirfd, const char *dir,
				      const struct rlb_cluster *c, bool prune,
				      int64_t deadline, struct rlb_health **out,
				      char *path)
{
	enum attach_result res = ATTACH_REFUSED;
	char fname[NAME_MAX + 1], why[160];
	struct rlb_health *h = NULL;
	struct health_map *map;
	struct stat st;
	bool locked;
	int valid;
	int fd;

	*out = NULL;
	state_file_name(c->name ? c->name : "", fname, sizeof(fname));
	if ((size_t)snprintf(path, PATH_MAX, "%s/%s", dir, fname) >= PATH_MAX) {
		snprintf(why, sizeof(why), "path too long");
		goto out_log;
	}
	h = health_new(c->nreplicas);
	if (!h || !(h->path = strdup(path)) || !(h->dir = strdup(dir))) {
		snprintf(why, sizeof(why), "%s", strerror(ENOMEM));
		goto out_free;
	}
	for (int tries = 0;; tries++) {
		char aside[NAME_MAX + 64];
		const char *problem;

		if (tries == 4) {
			snprintf(why, sizeof(why), "it keeps being corrupted");
			goto out_free;
		}
		fd = state_file_open(dirfd, fname, deadline, &st, &locked, why,
				     sizeof(why));
		if (fd < 0)
			goto out_free;
		if (!locked) {
			res = attach_unlocked(fd, &st, h, c, prune, why,
					      sizeof(why));
			rlb_libc()->close(fd);
			if (res != ATTACH_OK)
				goto out_free;
			goto out_ok;
		}
		valid = file_validate(fd, &st, &problem, why, sizeof(why));
		if (valid >= 0)
			break;
		snprintf(aside, sizeof(aside), "%s.corrupt-%lld-%ld", fname,
			 (long long)rlb_now(), (long)getpid());
		if (renameat(dirfd, fname, dirfd, aside) != 0) {
			rlb_log(RLB_LOG_WARNING,
				"state file %s %s (%s) and cannot be set "
				"aside: %s",
				path, problem, why, strerror(errno));
			snprintf(why, sizeof(why), "unusable");
			goto out_unlock;
		}
		rlb_log(RLB_LOG_WARNING,
			"state file %s %s (%s): "
			"set aside as %s/%s and recreated",
			path, problem, why, dir, aside);
		unlock_close(fd);
	}

	/* Allocate now: a full tmpfs would SIGBUS a write. */
	if (fallocate(fd, 0, 0, (off_t)HEALTH_SIZE) != 0 &&
	    (errno != EOPNOTSUPP || ftruncate(fd, (off_t)HEALTH_SIZE) != 0)) {
		snprintf(why, sizeof(why), "cannot size it: %s",
			 strerror(errno));
		goto out_unlock;
	}
	map = mmap(NULL, HEALTH_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (map == MAP_FAILED) {
		snprintf(why, sizeof(why), "mmap: %s", strerror(errno));
		goto out_unlock;
	}
	h->map = map;
	if (valid == 1) {
		table_clear(map->slots);
		header_init(map);
	}
	if (claim_locked(h, c, 0, c->nreplicas) != 0) {
		snprintf(why, sizeof(why), "no room for the replicas");
		goto out_unlock;
	}
	if (prune) {
		uint64_t *ids = sorted_identities(c);

		if (ids)
			table_prune(map->slots, ids, c->nreplicas);
		free(ids);
	}
	unlock_close(fd);
out_ok:
	atomic_store(&h->dev, (uint64_t)st.st_dev);
	atomic_store(&h->ino, (uint64_t)st.st_ino);
	atomic_store(&h->mode, HEALTH_SHARED);
	*out = h;
	return ATTACH_OK;

out_unlock:
	unlock_close(fd);
out_free:
	rlb_health_detach(h);
out_log:
	if (res == ATTACH_LATER)
		log_once(RLB_LOG_INFO,
			 "state file %s not used yet (%s): health of cluster "
			 "%s is private until it can be attached",
			 path, why, c->name ? c->name : "");
	else
		log_once(RLB_LOG_WARNING,
			 "state file %s not used (%s): health of "
			 "cluster %s is private to this process",
			 path, why, c->name ? c->name : "");
	return res;
}

/*
 * Private state of c: an anonymous shared mapping (shared with forked
 * children), else heap memory. With dir and path (the file was busy), the
 * file is tried again later, prune owed; else it stays private. NULL only
 * when even that fails.
 */
static struct rlb_health *attach_private(const struct rlb_cluster *c,
					 const char *dir, const char *path,
					 bool prune)
{
	struct rlb_health *h = health_new(c->nreplicas);

	if (!h)
		return NULL;
	h->map = mmap(NULL, HEALTH_SIZE, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (h->map == MAP_FAILED) {
		h->map = calloc(1, HEALTH_SIZE);
		h->heap = true;
	}
	if (!h->map) {
		free(h);
		return NULL;
	}
	header_init(h->map);
	/* Cannot fail: nreplicas <= RLB_MAX_REPLICAS < HEALTH_NSLOTS. */
	claim_replicas(h, c, 0, c->nreplicas, false);
	atomic_init(&h->mode, HEALTH_PRIVATE);
	/* Heap memory cannot be replaced in place by the file's pages. */
	if (dir && !h->heap && (h->dir = strdup(dir)) &&
	    (h->path = strdup(path))) {
		atomic_init(&h->mode, HEALTH_DEFERRED);
		atomic_init(&h->prune_owed, prune);
		atomic_init(&h->retry_ms, rlb_monotonic_ms() + HEALTH_RETRY_MS);
	}
	return h;
}

void rlb_health_attach_all(struct rlb_config *cfg, bool prune)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int64_t deadline = mono_ns() + HEALTH_LOCK_WAIT_NS;
	int saved = errno;
	int dirfd;

	if (!cfg)
		return;
	dirfd = state_dir_resolve(cfg, dir, sizeof(dir), cfg->nclusters == 0);
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];
		enum attach_result res = ATTACH_REFUSED;
		struct rlb_health *h = NULL;

		rlb_health_detach(c->health);
		if (dirfd >= 0)
			res = attach_file(dirfd, dir, c, prune, deadline, &h,
					  path);
		if (!h)
			h = attach_private(c, res == ATTACH_LATER ? dir : NULL,
					   path, prune);
		c->health = h;
	}
	if (dirfd >= 0)
		rlb_libc()->close(dirfd);
	errno = saved;
}

void rlb_health_detach(struct rlb_health *h)
{
	if (!h)
		return;
	if (h->heap)
		free(h->map);
	else if (h->map)
		munmap(h->map, HEALTH_SIZE);
	free(h->dir);
	free(h->path);
	free(h->label);
	free(h);
}

const char *rlb_health_path(const struct rlb_health *h)
{
	if (h && h->readonly)
		return h->label ? h->label : "(private)";
	return h && h->path && atomic_load(&h->mode) == HEALTH_SHARED
		       ? h->path
		       : "(private)";
}

/* ------------------------------------------------------------------ */
/* Read-only looks (replicalbctl status, resolve --peek: design.md §6) */

/*
 * Put zeroes, read-only, in place of h's pages (or give h its first
 * ones): T unset, counter 0, no replica's key. False if mmap fails.
 */
static bool readonly_zeroes(struct rlb_health *h)
{
	void *map = mmap(h->map, HEALTH_SIZE, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | (h->map ? MAP_FIXED : 0),
			 -1, 0);

	if (map == MAP_FAILED)
		return false;
	h->map = map;
	atomic_store(&h->mode, HEALTH_PRIVATE);
	return true;
}

/*
 * Map c's existing state file fname in dirfd (path) read-only into h,
 * after the checks attach_file() makes: a regular file of ours, not
 * writable by others, of one link, the right size and a valid header.
 * Nothing is created, locked, claimed or set aside. Returns 0, 1 when
 * there is no file (or only a blank one) to read, -1 when it cannot be
 * used (logged).
 */
static int readonly_map(struct rlb_health *h, int dirfd, const char *fname,
			const char *path, const struct rlb_cluster *c)
{
	const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	const char *problem;
	char why[160];
	struct stat st;
	void *map;
	int valid;
	int fd;

	fd = openat(dirfd, fname, flags);
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0) {
		snprintf(why, sizeof(why), "%s",
			 errno == ELOOP ? "it is a symlink" : strerror(errno));
		goto out_log;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, sizeof(why), "not a regular file");
		goto out_close;
	}
	if (owner_problem(&st, why, sizeof(why)))
		goto out_close;
	valid = file_validate(fd, &st, &problem, why, sizeof(why));
	if (valid == 1) {
		rlb_libc()->close(fd);
		return 1;
	}
	if (valid < 0)
		goto out_close;
	map = mmap(NULL, HEALTH_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		snprintf(why, sizeof(why), "mmap: %s", strerror(errno));
		goto out_close;
	}
	rlb_libc()->close(fd);
	h->map = map;
	atomic_store(&h->dev, (uint64_t)st.st_dev);
	atomic_store(&h->ino, (uint64_t)st.st_ino);
	atomic_store(&h->mode, HEALTH_SHARED);
	return 0;

out_close:
	rlb_libc()->close(fd);
out_log:
	log_once(RLB_LOG_WARNING,
		 "state file %s not read (%s): cluster %s shows no state", path,
		 why, c->name ? c->name : "");
	return -1;
}

/*
 * Read-only health of c in the state directory dir (dirfd, -1 when it
 * cannot be opened: absent when `absent`): the file mapped read-only, or
 * zeroes. Its path is the file's, with " (absent)" when there is no file
 * yet and " (private)" when the file or directory cannot be used. NULL
 * only on ENOMEM.
 */
static struct rlb_health *attach_readonly(int dirfd, const char *dir,
					  bool absent,
					  const struct rlb_cluster *c)
{
	struct rlb_health *h = health_new(c->nreplicas);
	char fname[NAME_MAX + 1], path[PATH_MAX];
	const char *suffix = absent ? " (absent)" : " (private)";
	int rc = -1;

	if (!h)
		return NULL;
	h->readonly = true;
	atomic_init(&h->mode, HEALTH_PRIVATE);
	state_file_name(c->name ? c->name : "", fname, sizeof(fname));
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, fname) >=
	    sizeof(path)) {
		suffix = NULL; /* "(private)" */
	} else if (dirfd >= 0) {
		rc = readonly_map(h, dirfd, fname, path, c);
		suffix = rc == 0 ? "" : rc == 1 ? " (absent)" : " (private)";
	}
	if (suffix && (!(h->path = strdup(path)) ||
		       asprintf(&h->label, "%s%s", path, suffix) < 0)) {
		h->label = NULL;
		goto out_free;
	}
	if (rc == 0 || readonly_zeroes(h))
		return h;
	h->map = calloc(1, HEALTH_SIZE);
	h->heap = true;
	if (h->map)
		return h;
out_free:
	rlb_health_detach(h);
	return NULL;
}

void rlb_health_attach_all_readonly(struct rlb_config *cfg)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	char dir[PATH_MAX], why[160];
	int saved = errno;
	bool absent = false;
	struct stat st;
	int dirfd;

	if (!cfg)
		return;
	/* The directory the library would use, neither created nor noted. */
	rlb_health_state_dir(cfg, dir, sizeof(dir));
	dirfd = open(dir, flags);
	if (dirfd < 0) {
		absent = errno == ENOENT;
		snprintf(why, sizeof(why), "%s",
			 errno == ELOOP || errno == ENOTDIR
				 ? "not a directory or a symlink"
				 : strerror(errno));
	} else if (fstat(dirfd, &st) != 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
		rlb_libc()->close(dirfd);
		dirfd = -1;
	} else if (owner_problem(&st, why, sizeof(why))) {
		rlb_libc()->close(dirfd);
		dirfd = -1;
	}
	if (dirfd < 0 && !absent && cfg->nclusters)
		log_once(RLB_LOG_WARNING,
			 "state directory %s not read (%s): no state shown",
			 dir, why);
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];

		rlb_health_detach(c->health);
		c->health = attach_readonly(dirfd, dir, absent, c);
	}
	if (dirfd >= 0)
		rlb_libc()->close(dirfd);
	errno = saved;
}

/* ------------------------------------------------------------------ */
/* Damage and locks while attached (design.md §12.9) */

/*
 * Take h's slow-path flag: false if another thread of this process has
 * it. A flag inherited through fork() from a thread that no longer exists
 * here is taken over, and the file attached again, because that thread
 * may have been half-way through replacing the mapping.
 */
static bool busy_enter(struct rlb_health *h)
{
	pid_t me = getpid(), cur = 0;

	if (atomic_compare_exchange_strong(&h->busy, &cur, me))
		return true;
	if (cur == me || !atomic_compare_exchange_strong(&h->busy, &cur, me))
		return false;
	if (h->path && !h->heap) {
		atomic_store(&h->mode, HEALTH_DEFERRED);
		atomic_store(&h->retry_ms, 0);
	}
	return true;
}

static void busy_leave(struct rlb_health *h)
{
	atomic_store(&h->busy, 0);
}

/*
 * Whether the mapped file still covers the whole mapping. A file that
 * someone cut shorter SIGBUSes the first touch of a page past its end;
 * MADV_POPULATE_READ of the last page tells with EFAULT instead, with no
 * signal and no descriptor. Before Linux 5.14, a stat of the path tells,
 * while the path still names the file (when it does not, nobody can
 * truncate the file by name).
 */
static bool map_whole(struct rlb_health *h)
{
	static atomic_bool no_populate;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t last = (HEALTH_SIZE - 1) / page * page;
	struct stat st;

	if (!atomic_load_explicit(&no_populate, memory_order_relaxed)) {
		if (madvise((char *)h->map + last, HEALTH_SIZE - last,
			    MADV_POPULATE_READ) == 0)
			return true;
		if (errno == EFAULT)
			return false;
		if (errno != EINVAL)
			return true; /* ENOMEM, EINTR: no verdict */
		atomic_store(&no_populate, true);
	}
	return lstat(h->path, &st) != 0 ||
	       (uint64_t)st.st_dev != atomic_load(&h->dev) ||
	       (uint64_t)st.st_ino != atomic_load(&h->ino) ||
	       st.st_size > (off_t)last;
}

/*
 * Whether the path no longer names the mapped file as a whole state file
 * of one link: removed, replaced, cut, or linked elsewhere meanwhile.
 */
static bool file_moved(const struct rlb_health *h)
{
	struct stat st;

	if (lstat(h->path, &st) != 0)
		return errno == ENOENT;
	return (uint64_t)st.st_dev != atomic_load(&h->dev) ||
	       (uint64_t)st.st_ino != atomic_load(&h->ino) ||
	       st.st_nlink != 1 || st.st_size != (off_t)HEALTH_SIZE;
}

/*
 * Under the busy flag: put private anonymous memory in place of the
 * mapped file, whose pages would SIGBUS. False if even that fails.
 */
static bool to_private(struct rlb_health *h, const struct rlb_cluster *c)
{
	if (h->readonly)
		return false;
	if (mmap(h->map, HEALTH_SIZE, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return false;
	header_init(h->map);
	claim_replicas(h, c, 0, c->nreplicas, false);
	atomic_store(&h->mode, HEALTH_DEFERRED);
	return true;
}

/*
 * Under the busy flag: move the file mapping of n (a fresh attach) in
 * place of h's, and take its slots. Consumes n.
 */
static bool adopt(struct rlb_health *h, struct rlb_health *n)
{
	if (h->heap ||
	    mremap(n->map, HEALTH_SIZE, HEALTH_SIZE,
		   MREMAP_MAYMOVE | MREMAP_FIXED, h->map) == MAP_FAILED) {
		rlb_health_detach(n);
		return false;
	}
	for (size_t i = 0; i < h->nreplicas; i++)
		atomic_store(&h->slot[i], atomic_load(&n->slot[i]));
	atomic_store(&h->dev, atomic_load(&n->dev));
	atomic_store(&h->ino, atomic_load(&n->ino));
	atomic_store(&h->prune_owed, atomic_load(&n->prune_owed));
	atomic_store(&h->mode, HEALTH_SHARED);
	n->map = NULL;
	rlb_health_detach(n);
	return true;
}

/* Under the busy flag: attach h's file again, without waiting. */
static void reattach(struct rlb_health *h, const struct rlb_cluster *c,
		     int64_t now)
{
	enum attach_result res = ATTACH_REFUSED;
	char path[PATH_MAX], why[160];
	struct rlb_health *n = NULL;
	int dirfd = state_dir_open(h->dir, why, sizeof(why));

	if (dirfd < 0) {
		log_once(RLB_LOG_WARNING,
			 "state directory %s not used (%s): health of cluster "
			 "%s is private to this process",
			 h->dir, why, c->name ? c->name : "");
	} else {
		res = attach_file(dirfd, h->dir, c, atomic_load(&h->prune_owed),
				  0, &n, path);
		rlb_libc()->close(dirfd);
	}
	if (res == ATTACH_OK && adopt(h, n)) {
		atomic_store(&h->retry_ms, now + (atomic_load(&h->prune_owed)
							  ? HEALTH_RETRY_MS
							  : HEALTH_FOLLOW_MS));
		return;
	}
	if (res == ATTACH_REFUSED && atomic_load(&h->mode) == HEALTH_DEFERRED)
		atomic_store(&h->mode, HEALTH_PRIVATE);
	atomic_store(&h->retry_ms,
		     now + (res == ATTACH_REFUSED ? HEALTH_FOLLOW_MS
						  : HEALTH_RETRY_MS));
}

/* health_check() once per tick: the system calls. */
static void check_slow(struct rlb_health *h, const struct rlb_cluster *c,
		       int64_t now)
{
	bool shared = atomic_load(&h->mode) == HEALTH_SHARED;
	bool whole;

	if (h->readonly) {
		/* Zeroes in place of a file cut short: no SIGBUS. */
		if (shared && !map_whole(h))
			readonly_zeroes(h);
		return;
	}
	whole = !shared || map_whole(h);
	if ((whole && now < atomic_load(&h->retry_ms)) || !busy_enter(h))
		return;
	if (shared && !whole && atomic_load(&h->mode) == HEALTH_SHARED) {
		rlb_log(RLB_LOG_WARNING,
			"state file %s was truncated while in use: health of "
			"cluster %s is private until it is attached again",
			h->path, c->name ? c->name : "");
		if (to_private(h, c))
			atomic_store(&h->retry_ms, 0);
	}
	if (now >= atomic_load(&h->retry_ms)) {
		if (atomic_load(&h->mode) != HEALTH_SHARED ||
		    atomic_load(&h->prune_owed) || file_moved(h))
			reattach(h, c, now);
		else
			atomic_store(&h->retry_ms, now + HEALTH_FOLLOW_MS);
	}
	busy_leave(h);
}

/*
 * At the start of each operation on c's state (a selection, an add, a
 * reset, a look by replicalbctl), at most once per tick of the coarse
 * clock: check that the mapped file is still whole, and attach the file
 * (again) where that is due. A program that touches the state less often
 * than once a tick is never hit by a truncation of the file; see
 * design.md §9 for the others. Keeps errno.
 */
static void health_check(const struct rlb_cluster *c)
{
	struct rlb_health *h = c->health;
	int64_t now, last;
	int saved;

	if (!h || atomic_load_explicit(&h->mode, memory_order_relaxed) ==
			  HEALTH_PRIVATE)
		return;
	now = rlb_monotonic_ms();
	last = atomic_load_explicit(&h->checked_ms, memory_order_relaxed);
	if (now == last || !atomic_compare_exchange_strong_explicit(
				   &h->checked_ms, &last, now,
				   memory_order_relaxed, memory_order_relaxed))
		return;
	saved = errno;
	check_slow(h, c, now);
	errno = saved;
}

/* ------------------------------------------------------------------ */
/* Hot path */

/*
 * Find replica i's slot again after another process pruned or rebuilt the
 * table: under the file lock if the file is still the one mapped and the
 * lock is free at once, else lock-free. NULL if it cannot be had now:
 * then no reclaim of this cluster is tried for HEALTH_RECLAIM_MS.
 */
static struct health_slot *reclaim(struct rlb_health *h,
				   const struct rlb_cluster *c, size_t i)
{
	const int flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int64_t now = rlb_monotonic_ms();
	struct health_slot *s = NULL;
	int saved = errno;
	bool busy = false;
	struct stat st;
	int fd = -1;
	int rc;

	if (h->readonly ||
	    now < atomic_load_explicit(&h->reclaim_ms, memory_order_relaxed))
		return NULL;
	if (atomic_load(&h->mode) == HEALTH_SHARED && (busy = busy_enter(h)))
		fd = open(h->path, flags);
	if (fd >= 0 && (fstat(fd, &st) != 0 ||
			(uint64_t)st.st_dev != atomic_load(&h->dev) ||
			(uint64_t)st.st_ino != atomic_load(&h->ino) ||
			flock(fd, LOCK_EX | LOCK_NB) != 0)) {
		rlb_libc()->close(fd);
		fd = -1;
	}
	if (fd >= 0)
		rc = claim_locked(h, c, i, 1);
	else
		rc = claim_replicas(h, c, i, 1, false);
	if (rc == 0)
		s = &h->map->slots[atomic_load(&h->slot[i])];
	else
		atomic_store(&h->reclaim_ms, now + HEALTH_RECLAIM_MS);
	if (fd >= 0)
		unlock_close(fd);
	if (busy)
		busy_leave(h);
	errno = saved;
	return s;
}

/* Replica i's slot, checked to still hold its identity (one load). */
static struct health_slot *slot_of(const struct rlb_cluster *c, size_t i)
{
	struct rlb_health *h = c->health;
	uint32_t idx;

	if (!h || i >= h->nreplicas || i >= c->nreplicas)
		return NULL;
	idx = atomic_load_explicit(&h->slot[i], memory_order_relaxed);
	if (idx < HEALTH_NSLOTS && atomic_load_explicit(&h->map->slots[idx].key,
							memory_order_acquire) ==
					   c->replicas[i].identity)
		return &h->map->slots[idx];
	if (h->readonly) {
		long found = table_find(h->map->slots, c->replicas[i].identity);

		return found < 0 ? NULL : &h->map->slots[found];
	}
	return reclaim(h, c, i);
}

/* Halve a shared counter k times, atomically against concurrent adds. */
static void shift_counter(_Atomic uint64_t *v, unsigned k)
{
	uint64_t e = atomic_load(v);

	while (e && !atomic_compare_exchange_weak(v, &e, shift_errors(e, k)))
		;
}

/* Add n to a shared counter, saturating at cap. */
static void add_counter(_Atomic uint64_t *v, uint64_t n, uint64_t cap)
{
	uint64_t e = atomic_load(v), next;

	do {
		next = e + n < e ? UINT64_MAX : e + n;
		if (next > cap)
			next = cap;
		if (next == e)
			return;
	} while (!atomic_compare_exchange_weak(v, &e, next));
}

void rlb_health_decay(struct rlb_cluster *c, int64_t now)
{
	struct rlb_health *h = c->health;
	int64_t t;
	unsigned k;

	if (!h || h->readonly)
		return;
	health_check(c);
	t = atomic_load(&h->map->hdr.decay_time);
	if (t == 0) {
		atomic_compare_exchange_strong(&h->map->hdr.decay_time, &t,
					       now);
		return;
	}
	k = decay_shift(c, t, now);
	/* Only the process that moves T shifts, exactly once per move. */
	if (k == 0 ||
	    !atomic_compare_exchange_strong(&h->map->hdr.decay_time, &t, now))
		return;
	for (size_t i = 0; i < c->nreplicas; i++) {
		struct health_slot *s = slot_of(c, i);

		if (!s)
			continue;
		shift_counter(&s->errors, k);
		shift_counter(&s->slowdowns, k);
	}
}

/* T of c, without the check of health_check(). */
static int64_t decay_time_of(const struct rlb_cluster *c)
{
	return c->health ? atomic_load(&c->health->map->hdr.decay_time) : 0;
}

/* Value of a counter of replica i, decayed to now when asked. */
static uint64_t counter(const struct rlb_cluster *c, const _Atomic uint64_t *v,
			int64_t now, bool decayed)
{
	uint64_t e = atomic_load(v);

	if (decayed)
		e = shift_errors(e, decay_shift(c, decay_time_of(c), now));
	return e;
}

/*
 * Counts without decay are read within an operation that has checked the
 * state already (a selection after its decay, a log line after an add);
 * with decay, from replicalbctl, on their own.
 */
uint64_t rlb_health_errors(const struct rlb_cluster *c, size_t i, int64_t now,
			   bool decayed)
{
	struct health_slot *s;

	if (decayed)
		health_check(c);
	s = slot_of(c, i);

	return s ? counter(c, &s->errors, now, decayed) : 0;
}

uint64_t rlb_health_slowdowns(const struct rlb_cluster *c, size_t i,
			      int64_t now, bool decayed)
{
	struct health_slot *s;

	if (decayed)
		health_check(c);
	s = slot_of(c, i);

	return s ? counter(c, &s->slowdowns, now, decayed) : 0;
}

void rlb_health_counts(const struct rlb_cluster *c, size_t i, int64_t now,
		       bool decayed, uint64_t *errors, uint64_t *slowdowns)
{
	struct health_slot *s;
	unsigned k = 0;

	if (decayed) {
		health_check(c);
		k = decay_shift(c, decay_time_of(c), now);
	}
	s = slot_of(c, i);
	*errors = s ? shift_errors(atomic_load(&s->errors), k) : 0;
	*slowdowns = s ? shift_errors(atomic_load(&s->slowdowns), k) : 0;
}

int64_t rlb_health_decay_time(const struct rlb_cluster *c)
{
	health_check(c);
	return decay_time_of(c);
}

/*
 * Before an add: the decay that whole half-lives since T have earned. A
 * half-life of 0 earns nothing here: "forget at the next selection" must
 * not let one failure wipe another that no selection has seen yet.
 */
static void decay_owed(struct rlb_cluster *c, int64_t now)
{
	if (c->s.half_life > 0)
		rlb_health_decay(c, now);
}

/*
 * Both adds first apply the decay owed up to now, as a selection would:
 * a failure seen long after the last selection counts in full instead of
 * being halved away by the next one (design.md §5, the refinement of
 * ClickHouse's decay).
 */
/* Add n to one of replica i's counters, capped at cap, at `now`. */
static void add_to(struct rlb_cluster *c, size_t i, uint64_t n, int64_t now,
		   bool slowdowns, uint64_t cap)
{
	struct health_slot *s;

	if (!c->health || c->health->readonly)
		return;
	health_check(c);
	s = slot_of(c, i);
	if (!s)
		return;
	decay_owed(c, now);
	add_counter(slowdowns ? &s->slowdowns : &s->errors, n, cap);
}

void rlb_health_add_errors(struct rlb_cluster *c, size_t i, uint64_t n,
			   int64_t now)
{
	add_to(c, i, n, now, false,
	       c->s.error_cap > 0 ? (uint64_t)c->s.error_cap : 0);
}

void rlb_health_add_slowdowns(struct rlb_cluster *c, size_t i, uint64_t n,
			      int64_t now)
{
	add_to(c, i, n, now, true, UINT64_MAX);
}

void rlb_health_reset(struct rlb_cluster *c, size_t i)
{
	size_t first = i, last = i;

	if (!c->health || c->health->readonly)
		return;
	health_check(c);
	if (i == SIZE_MAX) {
		first = 0;
		last = c->nreplicas ? c->nreplicas - 1 : 0;
	}
	for (size_t j = first; j <= last && j < c->nreplicas; j++) {
		struct health_slot *s = slot_of(c, j);

		if (s) {
			atomic_store(&s->errors, 0);
			atomic_store(&s->slowdowns, 0);
		}
	}
}

/* Within a selection, after its decay has checked the state. */
uint64_t rlb_health_rr_next(struct rlb_cluster *c)
{
	if (!c->health)
		return 0;
	if (c->health->readonly) /* the turn it would take, not taken */
		return atomic_load_explicit(&c->health->map->hdr.rr_counter,
					    memory_order_relaxed);
	return atomic_fetch_add_explicit(&c->health->map->hdr.rr_counter, 1,
					 memory_order_relaxed);
}

uint64_t rlb_health_rr_peek(const struct rlb_cluster *c)
{
	if (!c->health)
		return 0;
	health_check(c);
	return atomic_load_explicit(&c->health->map->hdr.rr_counter,
				    memory_order_relaxed);
}

int64_t rlb_health_recovery_seconds(const struct rlb_cluster *c, size_t i,
				    int64_t now)
{
	int64_t hl = c->s.half_life;
	int64_t total, elapsed, left, t;
	uint64_t e, sd;

	health_check(c);
	e = rlb_health_errors(c, i, now, false);
	sd = rlb_health_slowdowns(c, i, now, false);
	t = decay_time_of(c);

	if (sd > e)
		e = sd; /* recovery of max(errors, slowdowns) */
	if (hl <= 0 || e == 0)
		return 0;
	if (__builtin_mul_overflow((int64_t)(64 - __builtin_clzll(e)), hl,
				   &total))
		return INT64_MAX;
	if (t == 0)
		return total;
	if (__builtin_sub_overflow(now, t, &elapsed))
		return now < t ? INT64_MAX : 0;
	if (__builtin_sub_overflow(total, elapsed, &left))
		return elapsed < 0 ? INT64_MAX : 0;
	return left > 0 ? left : 0;
}
