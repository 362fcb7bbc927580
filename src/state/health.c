/* health.c - shared health state (design.md §5.8, §12): per-cluster SysV
 * shared memory segments of error counts, decay time and round-robin
 * counter, found through a small name file in the state directory,
 * attached when the cluster is first used, updated with lock-free
 * atomics; a segment's size is fixed at creation, so nothing a user does
 * to the directory can cut memory from under a program. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/state.h"

#define HEALTH_MAGIC	 "RLBSTATE"
#define HEALTH_VERSION	 3
#define HEALTH_MIN_SLOTS 4
#define HEALTH_MAX_SLOTS (2 * RLB_MAX_REPLICAS)
#define HEALTH_SIZE(n)                                                         \
	(sizeof(struct health_header) +                                        \
	 (size_t)(n) * sizeof(struct health_slot))
#define HEALTH_KEY_EMPTY   0 /* never claimed in this segment */
#define HEALTH_KEY_DROPPED 1 /* pruned: skipped by probes, never reused */
#define HEALTH_NO_SLOT	   UINT32_MAX
#define HEALTH_FOLLOW_MS   1000 /* how often the name file is read again */
#define HEALTH_RECLAIM_MS  100	/* after a failed reclaim, none before this */
#define HEALTH_STEM_MAX	   200	/* longer cluster names are cut and hashed */
#define HEALTH_CHECK_SEED  0x524c4253u
#define HEALTH_MAX_RETIRED 64 /* stores one cluster may move away from */
#define HEALTH_MAX_HOPS	   8  /* successors followed in one go */
#define HEALTH_TRIES	   4  /* name files set aside in one attach */
/* The name file: "replicalb-state 1 shm ID TOKEN\n" (design.md §12.1). */
#define NAME_FORMAT  "replicalb-state 1 shm %d %016llx\n"
#define NAME_MAX_LEN 64
/* Size of a version-2 state file (a mapped file), replaced at upgrade. */
#define V2_FILE_SIZE (64 + 8192 * 32)

/*
 * Counters live in memory shared between processes, so their atomics must
 * be real instructions, not libatomic's process-local locks.
 */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_LONG_LOCK_FREE == 2,
	       "64-bit atomics must be lock-free");

/* First 128 bytes of a segment; native byte order. */
struct health_header {
	char magic[8];		     /* HEALTH_MAGIC, not NUL-terminated */
	uint32_t version;	     /* HEALTH_VERSION */
	uint32_t nslots;	     /* power of 2, HEALTH_MIN..MAX_SLOTS */
	uint64_t token;		     /* random; the name file names it too */
	uint64_t name_hash;	     /* rlb_cluster.name_hash */
	uint64_t dir_dev;	     /* the state directory it was made */
	uint64_t dir_ino;	     /* for (replicalbctl remove-state) */
	int64_t created;	     /* wall clock at creation, seconds */
	uint64_t check;		     /* header_check() of the fields above */
	_Atomic int64_t decay_time;  /* T of design.md §5, 0 while unset */
	_Atomic uint64_t rr_counter; /* round-robin selections so far */
	_Atomic uint64_t successor;  /* 0, or successor_code() of the
				      * larger segment that replaces this */
	uint64_t reserved[5];	     /* zero */
};

/* One replica's counts, keyed by its identity. */
struct health_slot {
	_Atomic uint64_t key;	    /* identity, or HEALTH_KEY_* */
	_Atomic uint64_t errors;    /* capped at error_cap */
	_Atomic uint64_t slowdowns; /* attempts abandoned early; uncapped */
	uint64_t reserved;
};

/* A segment: header, then an open-addressing table of nslots slots. */
struct health_map {
	struct health_header hdr;
	struct health_slot slots[];
};

_Static_assert(sizeof(struct health_header) == 128, "header is 128 bytes");
_Static_assert(sizeof(struct health_slot) == 32, "slot is 32 bytes");

/* What holds a store's counters. */
enum store_kind {
	STORE_SHM,  /* a SysV segment named by the name file */
	STORE_ANON, /* private: anonymous shared memory (shared with forks) */
	STORE_HEAP, /* private or zeroes: calloc, when mmap failed */
};

/*
 * One attached set of counters of a cluster, with the slot of each of its
 * replicas. A store a cluster moved away from stays mapped until the
 * cluster's health is detached, because another thread may still be
 * using it.
 */
struct store {
	struct health_map *map; /* the counters */
	size_t size;		/* bytes of map */
	uint32_t nslots;	/* slots in map */
	enum store_kind kind;
	bool readonly;		 /* attached SHM_RDONLY, or zeroes */
	int shmid;		 /* STORE_SHM: the segment */
	uint64_t token;		 /* STORE_SHM: its token */
	char *dir;		 /* state directory, or NULL */
	char *label;		 /* rlb_health_path(): the name file,
				  * maybe with " (absent)", or
				  * "(private)" */
	struct store *next;	 /* retired list of the cluster */
	size_t nreplicas;	 /* entries of slot[] */
	_Atomic uint32_t slot[]; /* per replica: index of its slot */
};

/*
 * Where the state directory of a config is (state_dir_paths()), computed
 * once per config and shared by its clusters.
 */
struct health_dirs {
	_Atomic unsigned refs;
	bool ok;	     /* want fits */
	char want[PATH_MAX]; /* state_dir, XDG or the default */
	char fb[PATH_MAX];   /* fallback of a squatted default, or "" */
};

/* How a cluster's health stands (rlb_health.mode). */
enum health_mode {
	HEALTH_UNATTACHED, /* not used yet: attached at first use */
	HEALTH_SHARED,	   /* cur is the named segment */
	HEALTH_PRIVATE,	   /* cur is private memory until the next load */
	HEALTH_NONE,	   /* not even private memory could be had */
};

/*
 * One cluster's view of its state (opaque outside this file): nothing
 * but a few words until the cluster is first used (design.md §12.4).
 */
struct rlb_health {
	_Atomic(struct store *) cur;	   /* NULL until attached */
	struct store *retired;		   /* moved away from; busy flag */
	unsigned nretired;		   /* entries of retired */
	const struct rlb_cluster *cluster; /* whose health this is */
	struct health_dirs *dirs;	   /* the state directory */
	bool readonly;			 /* a look that writes nothing (§6) */
	bool prune;			 /* prune at attach (a reload) */
	_Atomic int mode;		 /* enum health_mode */
	_Atomic bool grow_owed;		 /* a claim found no room */
	_Atomic uint64_t dead_successor; /* one that could not be attached */
	_Atomic int64_t checked_ms;	 /* coarse tick of the last check */
	_Atomic int64_t follow_ms;	 /* next read of the name file */
	_Atomic int64_t reclaim_ms;	 /* no reclaim before this */
	_Atomic pid_t busy;		 /* process in a slow path, 0 if none */
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
	/* Unsigned: T read from shared memory may be anything. */
	delta = (uint64_t)now - (uint64_t)t;
	k = delta / (uint64_t)hl;
	return k >= 64 ? 64 : (unsigned)k;
}

static uint64_t shift_errors(uint64_t e, unsigned k)
{
	return k >= 64 ? 0 : e >> k;
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

/* Halve a shared counter k times, atomically against concurrent adds. */
static void shift_counter(_Atomic uint64_t *v, unsigned k)
{
	uint64_t e = atomic_load(v);

	while (e && !atomic_compare_exchange_weak(v, &e, shift_errors(e, k)))
		;
}

/* ------------------------------------------------------------------ */
/* The slot table (design.md §12.3) */

/* Slots for n replicas: a power of 2 with load factor at most 1/2. */
static uint32_t slots_for(size_t n)
{
	uint32_t slots = HEALTH_MIN_SLOTS;

	while (slots < HEALTH_MAX_SLOTS && slots < 2 * n)
		slots *= 2;
	return slots;
}

static uint64_t header_check(const struct health_header *hdr)
{
	/* The fields before check, which are contiguous and unpadded. */
	return rlb_hash64(hdr, offsetof(struct health_header, check),
			  HEALTH_CHECK_SEED);
}

/* Where a segment belongs: its cluster and state directory. */
struct health_home {
	uint64_t name_hash; /* rlb_cluster.name_hash */
	uint64_t dir_dev;   /* state directory, 0 for private memory */
	uint64_t dir_ino;
};

static void header_init(struct health_map *m, uint32_t nslots, uint64_t token,
			const struct health_home *home)
{
	struct health_header *hdr = &m->hdr;

	memset(hdr, 0, sizeof(*hdr));
	memcpy(hdr->magic, HEALTH_MAGIC, sizeof(hdr->magic));
	hdr->version = HEALTH_VERSION;
	hdr->nslots = nslots;
	hdr->token = token;
	hdr->name_hash = home->name_hash;
	hdr->dir_dev = home->dir_dev;
	hdr->dir_ino = home->dir_ino;
	hdr->created = rlb_now();
	atomic_store(&hdr->decay_time, 0);
	atomic_store(&hdr->rr_counter, 0);
	atomic_store(&hdr->successor, 0);
	hdr->check = header_check(hdr);
}

/*
 * 0 if the header of a segment of size bytes is valid for token and
 * name_hash, else -1 with the reason in why. The size is the segment's,
 * fixed at its creation: reading within it cannot fault.
 */
static int header_validate(const struct health_header *hdr, size_t size,
			   uint64_t token, uint64_t name_hash, char *why,
			   size_t whylen)
{
	uint32_t n = hdr->nslots;

	if (memcmp(hdr->magic, HEALTH_MAGIC, sizeof(hdr->magic)) != 0)
		snprintf(why, whylen, "bad magic");
	else if (hdr->version != HEALTH_VERSION)
		snprintf(why, whylen, "version %u, expected %u", hdr->version,
			 HEALTH_VERSION);
	else if (n < HEALTH_MIN_SLOTS || n > HEALTH_MAX_SLOTS || (n & (n - 1)))
		snprintf(why, whylen, "%u slots", n);
	else if (size != HEALTH_SIZE(n))
		snprintf(why, whylen, "size %zu for %u slots", size, n);
	else if (hdr->check != header_check(hdr))
		snprintf(why, whylen, "bad header checksum");
	else if (hdr->token != token)
		snprintf(why, whylen, "another token");
	else if (hdr->name_hash != name_hash)
		snprintf(why, whylen, "another cluster's");
	else
		return 0;
	return -1;
}

/*
 * Slot of id: the one holding it, else the first empty one on its probe
 * path, claimed with a compare-and-swap. The counts of an empty slot are
 * zero: nothing writes a slot before it holds a key. Returns the index,
 * or -1 when the probe path has no room.
 */
static long table_claim(struct health_map *m, uint32_t nslots, uint64_t id)
{
	size_t home = id & (nslots - 1);

	for (size_t n = 0; n < nslots; n++) {
		size_t idx = (home + n) & (nslots - 1);
		uint64_t key = atomic_load(&m->slots[idx].key);

		if (key == HEALTH_KEY_EMPTY &&
		    atomic_compare_exchange_strong(&m->slots[idx].key, &key,
						   id))
			return (long)idx;
		if (key == id)
			return (long)idx;
	}
	return -1;
}

/*
 * Slot holding id, found along its probe path without claiming anything,
 * or -1: an absent id reads as zero counts.
 */
static long table_find(const struct health_map *m, uint32_t nslots, uint64_t id)
{
	size_t home = id & (nslots - 1);

	for (size_t n = 0; n < nslots; n++) {
		size_t idx = (home + n) & (nslots - 1);
		uint64_t key = atomic_load(&m->slots[idx].key);

		if (key == id)
			return (long)idx;
		if (key == HEALTH_KEY_EMPTY)
			return -1;
	}
	return -1;
}

/* Slots that hold a key or a tombstone. */
static size_t table_used(const struct health_map *m, uint32_t nslots)
{
	size_t n = 0;

	for (size_t i = 0; i < nslots; i++)
		n += atomic_load_explicit(&m->slots[i].key,
					  memory_order_relaxed) !=
		     HEALTH_KEY_EMPTY;
	return n;
}

/* Slots that hold a live key. */
static size_t table_live(const struct health_map *m, uint32_t nslots)
{
	size_t n = 0;

	for (size_t i = 0; i < nslots; i++)
		n += atomic_load_explicit(&m->slots[i].key,
					  memory_order_relaxed) >
		     HEALTH_KEY_DROPPED;
	return n;
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

/*
 * Drop every entry whose key is not one of c's replicas: a compare-and-
 * swap to the tombstone, which no claim reuses, so a probe chain is never
 * broken and a count added meanwhile lands in a dropped slot.
 */
static void table_prune(struct health_map *m, uint32_t nslots,
			const struct rlb_cluster *c)
{
	uint64_t *ids = sorted_identities(c);

	if (!ids)
		return;
	for (size_t i = 0; i < nslots; i++) {
		uint64_t key = atomic_load(&m->slots[i].key);

		if (key <= HEALTH_KEY_DROPPED ||
		    bsearch(&key, ids, c->nreplicas, sizeof(*ids), cmp_u64))
			continue;
		atomic_compare_exchange_strong(&m->slots[i].key, &key,
					       HEALTH_KEY_DROPPED);
	}
	free(ids);
}

/*
 * Move every live count of from into to: each count is taken with an
 * atomic exchange, so that any number of processes moving the same
 * segment at once move each count exactly once. Errors are capped at cap.
 * A count that finds no room in to is put back.
 */
static void table_move(struct health_map *from, uint32_t from_slots,
		       struct health_map *to, uint32_t to_slots, uint64_t cap)
{
	for (size_t i = 0; i < from_slots; i++) {
		struct health_slot *s = &from->slots[i];
		uint64_t key = atomic_load(&s->key), e, sd;
		long idx;

		if (key <= HEALTH_KEY_DROPPED)
			continue;
		e = atomic_exchange(&s->errors, 0);
		sd = atomic_exchange(&s->slowdowns, 0);
		if (!e && !sd)
			continue;
		idx = table_claim(to, to_slots, key);
		if (idx < 0) {
			add_counter(&s->errors, e, UINT64_MAX);
			add_counter(&s->slowdowns, sd, UINT64_MAX);
			continue;
		}
		add_counter(&to->slots[idx].errors, e, cap);
		add_counter(&to->slots[idx].slowdowns, sd, UINT64_MAX);
	}
}

/* ------------------------------------------------------------------ */
/* The state directory (design.md §5.8) */

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
 * Open the state directory d names (with the fallback for a squatted
 * default) into dir, or -1 after one warning (none when quiet).
 */
static int state_dir_resolve(const struct health_dirs *d, char *dir, size_t len,
			     bool quiet)
{
	char why[160], why2[160];
	const char *fb = d->fb;
	int fd = -1;

	snprintf(dir, len, "%s", d->want);
	if (!d->ok)
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

/* ------------------------------------------------------------------ */
/* Name files (design.md §12.1) */

/*
 * Parse the text of a name file: 0 with *id and *token, -1 with the
 * reason in why. Exactly one line of NAME_FORMAT, nothing else.
 */
static int name_parse(const char *text, size_t len, int *id, uint64_t *token,
		      char *why, size_t whylen)
{
	char buf[NAME_MAX_LEN + 1], again[NAME_MAX_LEN + 1];
	unsigned long long tok;
	int n = -1, v;

	if (len == 0 || len > NAME_MAX_LEN || memchr(text, '\0', len)) {
		snprintf(why, whylen, "%s", len ? "not a name file" : "empty");
		return -1;
	}
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (sscanf(buf, "replicalb-state 1 shm %d %16llx%n", &v, &tok, &n) !=
		    2 ||
	    n < 0 || v < 0) {
		snprintf(why, whylen, "not a name file");
		return -1;
	}
	/* The canonical text only: no signs, spaces or short tokens. */
	snprintf(again, sizeof(again), NAME_FORMAT, v, tok);
	if (strcmp(again, buf) != 0) {
		snprintf(why, whylen, "not a name file");
		return -1;
	}
	*id = v;
	*token = tok;
	return 0;
}

/*
 * Read the name file fname in dirfd: 0 with the segment it names, 1 when
 * there is none, -1 when it is not a valid name file (why; *v2 when it is
 * a state file of version 2). Read with pread, never mapped.
 */
static int name_read(int dirfd, const char *fname, int *id, uint64_t *token,
		     bool *v2, struct stat *st, char *why, size_t whylen)
{
	const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	char text[NAME_MAX_LEN + 1];
	ssize_t len;
	int fd, rc = -1;

	*v2 = false;
	if (fstatat(dirfd, fname, st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 1;
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	fd = openat(dirfd, fname, flags);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		snprintf(why, whylen, "%s",
			 errno == ELOOP ? "it is a symlink" : strerror(errno));
		return -1;
	}
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
	*v2 = st->st_size == V2_FILE_SIZE;
	len = pread(fd, text, sizeof(text), 0);
	if (len < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		goto out_close;
	}
	rc = name_parse(text, (size_t)len, id, token, why, whylen);
out_close:
	rlb_libc()->close(fd);
	return rc;
}

/*
 * Write a name file naming (id, token) as a new temporary file, then
 * link it to fname (replace false: fails with EEXIST when a name exists,
 * so that the first of processes starting together wins) or rename it
 * over fname. 0, or -1 with errno.
 */
static int name_write(int dirfd, const char *fname, int id, uint64_t token,
		      bool replace)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	char tmp[NAME_MAX + 64], text[NAME_MAX_LEN + 1];
	int fd, len, rc, err;

	snprintf(tmp, sizeof(tmp), "%s.tmp-%ld-%08x", fname, (long)getpid(),
		 rlb_random_u32());
	len = snprintf(text, sizeof(text), NAME_FORMAT, id,
		       (unsigned long long)token);
	fd = openat(dirfd, tmp, flags, 0600);
	if (fd < 0)
		return -1;
	fchmod(fd, 0600);
	rc = write(fd, text, (size_t)len) == len ? 0 : -1;
	err = errno;
	rlb_libc()->close(fd);
	if (rc == 0)
		rc = replace ? renameat(dirfd, tmp, dirfd, fname)
			     : linkat(dirfd, tmp, dirfd, fname, 0);
	if (rc != 0)
		err = errno;
	if (rc != 0 || !replace)
		unlinkat(dirfd, tmp, 0);
	errno = err;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Segments and stores */

static struct store *store_new(size_t nreplicas)
{
	struct store *s;

	s = calloc(1, sizeof(*s) + nreplicas * sizeof(s->slot[0]));
	if (!s)
		return NULL;
	s->shmid = -1;
	s->nreplicas = nreplicas;
	for (size_t i = 0; i < nreplicas; i++)
		atomic_init(&s->slot[i], HEALTH_NO_SLOT);
	return s;
}

static void store_free(struct store *s)
{
	if (!s)
		return;
	if (s->map) {
		if (s->kind == STORE_SHM)
			shmdt(s->map);
		else if (s->kind == STORE_ANON)
			munmap(s->map, s->size);
		else
			free(s->map);
	}
	free(s->dir);
	free(s->label);
	free(s);
}

static void dirs_put(struct health_dirs *d)
{
	if (d && atomic_fetch_sub(&d->refs, 1) == 1)
		free(d);
}

/* Remove the segment of s from the system, then detach and free s. */
static void store_destroy(struct store *s)
{
	if (s && s->kind == STORE_SHM)
		shmctl(s->shmid, IPC_RMID, NULL);
	store_free(s);
}

/* The successor field that names segment id with token. */
static uint64_t successor_code(int id, uint64_t token)
{
	return ((uint64_t)(uint32_t)(id + 1) << 32) | (token & 0xffffffffu);
}

/*
 * A random token: it tells a segment named by a name file from a segment
 * that got the same id later, and a name file's from a forged one.
 */
static uint64_t new_token(void)
{
	uint64_t t = ((uint64_t)rlb_random_u32() << 32) | rlb_random_u32();

	return t ? t : 1;
}

/*
 * Why segment id (stat ds) must not be used, or NULL: ours by owner and
 * creator, mode 0600, not removed.
 */
static const char *segment_problem(const struct shmid_ds *ds, char *why,
				   size_t whylen)
{
	uid_t me = geteuid();

	if (ds->shm_perm.uid != me || ds->shm_perm.cuid != me)
		snprintf(why, whylen, "segment owned by uid %lu, made by %lu",
			 (unsigned long)ds->shm_perm.uid,
			 (unsigned long)ds->shm_perm.cuid);
	else if ((ds->shm_perm.mode & 0777) != 0600)
		snprintf(why, whylen, "segment mode %04o, expected 0600",
			 (unsigned)(ds->shm_perm.mode & 0777));
	else if (ds->shm_perm.mode & SHM_DEST)
		snprintf(why, whylen, "segment removed");
	else if (ds->shm_segsz < HEALTH_SIZE(HEALTH_MIN_SLOTS) ||
		 ds->shm_segsz > HEALTH_SIZE(HEALTH_MAX_SLOTS))
		snprintf(why, whylen, "segment of %zu bytes",
			 (size_t)ds->shm_segsz);
	else
		return NULL;
	return why;
}

/*
 * Attach segment id, named with token (or, with lo_only, a successor
 * named by the low 32 bits of its token), as c's store, after the checks
 * of segment_problem() and header_validate(). NULL with the reason in
 * why.
 */
static struct store *segment_attach(const struct rlb_cluster *c, int id,
				    uint64_t token, bool lo_only, bool readonly,
				    char *why, size_t whylen)
{
	struct shmid_ds ds;
	struct store *s;
	void *map;

	/* Stat before attaching: another user's segment is never mapped. */
	if (shmctl(id, IPC_STAT, &ds) != 0) {
		snprintf(why, whylen, "segment %d: %s", id,
			 errno == EINVAL || errno == EIDRM ? "removed"
							   : strerror(errno));
		return NULL;
	}
	if (segment_problem(&ds, why, whylen))
		return NULL;
	map = shmat(id, NULL, readonly ? SHM_RDONLY : 0);
	if (map == (void *)-1) {
		snprintf(why, whylen, "segment %d: %s", id, strerror(errno));
		return NULL;
	}
	/* The same segment still: the id may have been reused meanwhile. */
	if (shmctl(id, IPC_STAT, &ds) != 0 || segment_problem(&ds, why, whylen))
		goto out_detach;
	if (lo_only)
		token = (((struct health_map *)map)->hdr.token &
			 ~(uint64_t)0xffffffffu) |
			(token & 0xffffffffu);
	if (header_validate(&((struct health_map *)map)->hdr, ds.shm_segsz,
			    token, c->name_hash, why, whylen) != 0)
		goto out_detach;
	s = store_new(c->nreplicas);
	if (!s) {
		snprintf(why, whylen, "%s", strerror(ENOMEM));
		goto out_detach;
	}
	s->map = map;
	s->size = ds.shm_segsz;
	s->nslots = s->map->hdr.nslots;
	s->kind = STORE_SHM;
	s->readonly = readonly;
	s->shmid = id;
	s->token = token;
	return s;

out_detach:
	shmdt(map);
	return NULL;
}

/*
 * A new segment of nslots slots for c, mode 0600, header written. NULL
 * with the reason in why; *limit when the kernel's limits (shmmni,
 * shmall, shmmax) refused it.
 */
static struct store *segment_create(const struct rlb_cluster *c,
				    uint32_t nslots,
				    const struct health_home *home, bool *limit,
				    char *why, size_t whylen)
{
	size_t size = HEALTH_SIZE(nslots);
	struct store *s = store_new(c->nreplicas);
	void *map;
	int id;

	*limit = false;
	if (!s) {
		snprintf(why, whylen, "%s", strerror(ENOMEM));
		return NULL;
	}
	id = shmget(IPC_PRIVATE, size, IPC_CREAT | IPC_EXCL | 0600);
	if (id < 0) {
		/* No size in the text: one warning for clusters of any size. */
		*limit = errno == ENOSPC || errno == ENOMEM || errno == EINVAL;
		snprintf(why, whylen,
			 "cannot create a shared memory segment: %s%s",
			 strerror(errno),
			 *limit ? " (kernel.shmmni, shmall or shmmax)" : "");
		free(s);
		return NULL;
	}
	map = shmat(id, NULL, 0);
	if (map == (void *)-1) {
		snprintf(why, whylen, "segment %d: %s", id, strerror(errno));
		shmctl(id, IPC_RMID, NULL);
		free(s);
		return NULL;
	}
	s->map = map;
	s->size = size;
	s->nslots = nslots;
	s->kind = STORE_SHM;
	s->shmid = id;
	s->token = new_token();
	header_init(s->map, nslots, s->token, home);
	return s;
}

/*
 * Private memory for c (design.md §12.8): anonymous shared memory, so
 * that forked children share it, else the heap; zeroes only (no header
 * written) when readonly. NULL on ENOMEM.
 */
static struct store *store_private(const struct rlb_cluster *c, bool readonly)
{
	struct store *s = store_new(c->nreplicas);

	if (!s)
		return NULL;
	s->nslots = slots_for(c->nreplicas);
	s->size = HEALTH_SIZE(s->nslots);
	s->kind = STORE_ANON;
	s->readonly = readonly;
	s->map = mmap(NULL, s->size, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s->map == MAP_FAILED) {
		s->kind = STORE_HEAP;
		s->map = calloc(1, s->size);
		if (!s->map) {
			free(s);
			return NULL;
		}
	}
	if (!readonly) {
		struct health_home home = {c->name_hash, 0, 0};

		header_init(s->map, s->nslots, 0, &home);
		for (size_t i = 0; i < c->nreplicas; i++)
			atomic_store(
				&s->slot[i],
				(uint32_t)table_claim(s->map, s->nslots,
						      c->replicas[i].identity));
	}
	return s;
}

/* The error cap of c as a counter's bound. */
static uint64_t cap_of(const struct rlb_cluster *c)
{
	return c->s.error_cap > 0 ? (uint64_t)c->s.error_cap : 0;
}

/*
 * Follow the successors of first (a segment that a larger one replaced),
 * at most HEALTH_MAX_HOPS: the last one that can be attached, or first
 * itself. Read-write, each hop moves the counts of the segment it leaves
 * into the next (table_move()). Stores passed on the way are freed;
 * first stays the caller's.
 */
static struct store *follow_successors(const struct rlb_cluster *c,
				       struct store *first)
{
	struct store *s = first;
	char why[160];

	for (int hop = 0; hop < HEALTH_MAX_HOPS && s->kind == STORE_SHM;
	     hop++) {
		uint64_t code = atomic_load(&s->map->hdr.successor);
		struct store *n;

		if (!code)
			break;
		n = segment_attach(c, (int)(code >> 32) - 1, code, true,
				   s->readonly, why, sizeof(why));
		if (!n)
			break;
		if (!s->readonly)
			table_move(s->map, s->nslots, n->map, n->nslots,
				   cap_of(c));
		if (s != first)
			store_free(s);
		s = n;
	}
	return s;
}

/* ------------------------------------------------------------------ */
/* Attach (design.md §12.4) */

/*
 * Set aside the name file fname of dir (dirfd), found not valid (why):
 * renamed NAME.state.corrupt-TIME-PID, or removed when it is a state file
 * of version 2 (v2), whose 256 KiB nobody reads any more. Nothing is done
 * when fname is no longer the file st described: another process replaced
 * it meanwhile, and its file is read again.
 */
static void name_set_aside(int dirfd, const char *dir, const char *fname,
			   const struct stat *st, bool v2, const char *why)
{
	char aside[NAME_MAX + 64];
	struct stat cur;

	if (fstatat(dirfd, fname, &cur, AT_SYMLINK_NOFOLLOW) != 0 ||
	    cur.st_dev != st->st_dev || cur.st_ino != st->st_ino)
		return;
	if (v2 && unlinkat(dirfd, fname, 0) == 0) {
		log_once(RLB_LOG_INFO,
			 "state file %s/%s of an older version removed: "
			 "state is now kept in shared memory segments",
			 dir, fname);
		return;
	}
	snprintf(aside, sizeof(aside), "%s.corrupt-%lld-%ld", fname,
		 (long long)rlb_now(), (long)getpid());
	if (renameat(dirfd, fname, dirfd, aside) != 0) {
		if (errno != ENOENT)
			log_once(RLB_LOG_WARNING,
				 "state file %s/%s is not valid (%s) and "
				 "cannot be set aside: %s",
				 dir, fname, why, strerror(errno));
		return;
	}
	rlb_log(RLB_LOG_WARNING,
		"state file %s/%s is not valid (%s): set aside as %s/%s and "
		"recreated",
		dir, fname, why, dir, aside);
}

/*
 * The segment that the name file fname of dir (dirfd) names, attached
 * for c; when there is none, mine, or else a new segment, is named by
 * creating the name file with link(): of processes that start together,
 * the first link wins and the others attach its segment and remove their
 * own. A name file that is not valid, or names a segment that fails the
 * checks, is set aside first. Returns mine when the name file names it;
 * NULL with the reason in why (*limit: the kernel's segment limits).
 * Successors are not followed here.
 */
static struct store *attach_named(const struct rlb_cluster *c, int dirfd,
				  const char *dir, const char *fname,
				  struct store *mine, bool *limit, char *why,
				  size_t whylen)
{
	struct health_home home = {c->name_hash, 0, 0};
	struct stat dst;

	*limit = false;
	if (fstat(dirfd, &dst) == 0) {
		home.dir_dev = (uint64_t)dst.st_dev;
		home.dir_ino = (uint64_t)dst.st_ino;
	}
	for (int tries = 0; tries <= HEALTH_TRIES; tries++) {
		struct stat st;
		uint64_t token;
		struct store *s;
		bool v2;
		int rc, id, err;

		rc = name_read(dirfd, fname, &id, &token, &v2, &st, why,
			       whylen);
		if (rc == 0 && mine && mine->shmid == id &&
		    mine->token == token)
			return mine;
		if (rc == 0) {
			s = segment_attach(c, id, token, false, false, why,
					   whylen);
			if (s)
				return s;
		}
		if (rc <= 0) {
			if (tries == HEALTH_TRIES)
				break;
			name_set_aside(dirfd, dir, fname, &st, v2, why);
			continue;
		}
		s = mine;
		if (!s && !(s = segment_create(c, slots_for(c->nreplicas),
					       &home, limit, why, whylen)))
			return NULL;
		if (name_write(dirfd, fname, s->shmid, s->token, false) == 0)
			return s;
		err = errno;
		if (s != mine)
			store_destroy(s);
		if (err != EEXIST) {
			snprintf(why, whylen, "cannot write it: %s",
				 strerror(err));
			return NULL;
		}
		/* Another process named its segment first: use that one. */
	}
	snprintf(why, whylen, "it keeps being corrupted or replaced");
	return NULL;
}

/* Replicas of c that s has no slot for. */
static size_t missing_replicas(const struct rlb_cluster *c,
			       const struct store *s)
{
	size_t n = 0;

	for (size_t i = 0; i < c->nreplicas; i++)
		n += table_find(s->map, s->nslots, c->replicas[i].identity) < 0;
	return n;
}

/*
 * A larger (or tombstone-free) successor of segment s, with c's replicas
 * claimed (design.md §12.3): a new segment takes every live count of s,
 * its T and its counter, and is published with a compare-and-swap of s's
 * successor field; the winner renames the name file to it and removes s
 * from the system (it lives on while attached). A process that loses the
 * race moves what it took into the winner's segment and removes its own.
 * NULL when nothing better can be had (s stays in use).
 */
static struct store *grow(const struct rlb_cluster *c, struct store *s,
			  int dirfd, const char *dir, const char *fname)
{
	size_t need = table_live(s->map, s->nslots) + missing_replicas(c, s);
	uint32_t nslots = slots_for(need);
	uint64_t code, expected = 0;
	struct store *n, *m;
	char why[200];
	bool limit;

	struct health_home home = {c->name_hash, s->map->hdr.dir_dev,
				   s->map->hdr.dir_ino};

	if (s->kind != STORE_SHM || s->readonly)
		return NULL;
	n = segment_create(c, nslots, &home, &limit, why, sizeof(why));
	if (!n) {
		log_once(RLB_LOG_WARNING,
			 "state of cluster %s cannot grow (%s): replicas "
			 "without a slot count nothing",
			 c->name, why);
		return NULL;
	}
	atomic_store(&n->map->hdr.decay_time,
		     atomic_load(&s->map->hdr.decay_time));
	atomic_store(&n->map->hdr.rr_counter,
		     atomic_load(&s->map->hdr.rr_counter));
	for (size_t i = 0; i < c->nreplicas; i++)
		table_claim(n->map, n->nslots, c->replicas[i].identity);
	table_move(s->map, s->nslots, n->map, n->nslots, cap_of(c));
	code = successor_code(n->shmid, n->token);
	if (atomic_compare_exchange_strong(&s->map->hdr.successor, &expected,
					   code)) {
		struct stat st;
		uint64_t token;
		bool v2;
		int id;

		if (dirfd >= 0 &&
		    name_read(dirfd, fname, &id, &token, &v2, &st, why,
			      sizeof(why)) == 0 &&
		    id == s->shmid && token == s->token &&
		    name_write(dirfd, fname, n->shmid, n->token, true) == 0)
			shmctl(s->shmid, IPC_RMID, NULL);
		/* Counts added to s while n was being filled. */
		table_move(s->map, s->nslots, n->map, n->nslots, cap_of(c));
		rlb_log(RLB_LOG_INFO,
			"state of cluster %s moved to a segment of %u slots",
			c->name, nslots);
		return n;
	}
	m = follow_successors(c, s);
	if (m == s) {
		table_move(n->map, n->nslots, s->map, s->nslots, cap_of(c));
		store_destroy(n);
		return NULL;
	}
	table_move(n->map, n->nslots, m->map, m->nslots, cap_of(c));
	store_destroy(n);
	(void)dir;
	return m;
}

/*
 * Claim c's replicas in s and make room where the table is too full
 * (grow()); prune when asked. Returns the store to use: s, or the
 * successor it moved to. Stores made on the way are freed, except s,
 * which stays the caller's.
 */
static struct store *settle(const struct rlb_cluster *c, struct store *s,
			    int dirfd, const char *dir, const char *fname,
			    bool prune)
{
	struct store *cur = s;

	for (int round = 0; round < HEALTH_TRIES; round++) {
		size_t used, live;
		bool room = true;
		struct store *n;

		for (size_t i = 0; i < c->nreplicas; i++) {
			long idx = table_claim(cur->map, cur->nslots,
					       c->replicas[i].identity);

			if (idx < 0)
				room = false;
			else
				atomic_store(&cur->slot[i], (uint32_t)idx);
		}
		used = table_used(cur->map, cur->nslots);
		live = table_live(cur->map, cur->nslots);
		if (room && (used * 2 <= cur->nslots ||
			     (slots_for(live) <= cur->nslots && used == live)))
			break;
		n = grow(c, cur, dirfd, dir, fname);
		if (!n)
			break;
		if (cur != s)
			store_free(cur);
		cur = n;
	}
	if (prune)
		table_prune(cur->map, cur->nslots, c);
	return cur;
}

/* Label of a store: the name file's path, with suffix. */
static void store_label(struct store *s, const char *dir, const char *fname,
			const char *suffix)
{
	if (asprintf(&s->label, "%s/%s%s", dir, fname, suffix) < 0)
		s->label = NULL;
}

/* Log that c's state is private, and why (once per process and text). */
static void log_private(const struct rlb_cluster *c, const char *path,
			const char *why, bool limit)
{
	if (limit)
		/* Without the cluster: one warning for many clusters. */
		log_once(RLB_LOG_WARNING,
			 "%s: health of this and other clusters is private "
			 "to this process",
			 why);
	else
		log_once(RLB_LOG_WARNING,
			 "state file %s not used (%s): health of cluster %s "
			 "is private to this process",
			 path, why, c->name);
}

/* First use, read-write: the named segment, else private memory. */
static struct store *attach_rw(struct rlb_health *h,
			       const struct rlb_cluster *c)
{
	char dir[PATH_MAX], fname[NAME_MAX + 1], why[200];
	struct store *s = NULL, *tip;
	bool limit = false;
	int dirfd = -1;

	state_file_name(c->name ? c->name : "", fname, sizeof(fname));
	if (h->dirs)
		dirfd = state_dir_resolve(h->dirs, dir, sizeof(dir), false);
	if (dirfd < 0)
		return store_private(c, false);
	if (strlen(dir) + strlen(fname) + 2 > PATH_MAX) {
		snprintf(why, sizeof(why), "path too long");
		goto out_private;
	}
	s = attach_named(c, dirfd, dir, fname, NULL, &limit, why, sizeof(why));
	if (!s)
		goto out_private;
	tip = follow_successors(c, s);
	if (tip != s)
		store_free(s);
	s = settle(c, tip, dirfd, dir, fname, h->prune);
	if (s != tip)
		store_free(tip);
	s->dir = strdup(dir);
	store_label(s, dir, fname, "");
	rlb_libc()->close(dirfd);
	return s;

out_private:
	log_private(c, dir, why, limit);
	rlb_libc()->close(dirfd);
	return store_private(c, false);
}

/*
 * First use, read-only (replicalbctl status, resolve --peek): the named
 * segment attached SHM_RDONLY, or zeroes; nothing is created or changed,
 * no directory either.
 */
static struct store *attach_look(struct rlb_health *h,
				 const struct rlb_cluster *c)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	char dir[PATH_MAX], fname[NAME_MAX + 1], why[200];
	const char *suffix = " (private)";
	struct store *s = NULL;
	struct stat st;
	uint64_t token;
	bool v2;
	int dirfd, id, rc;

	state_file_name(c->name ? c->name : "", fname, sizeof(fname));
	if (!h->dirs)
		goto out_zeroes;
	snprintf(dir, sizeof(dir), "%s", h->dirs->want);
	if (h->dirs->fb[0] && !dir_usable(dir))
		snprintf(dir, sizeof(dir), "%s", h->dirs->fb);
	dirfd = open(dir, flags);
	if (dirfd < 0) {
		if (errno == ENOENT) {
			suffix = " (absent)";
			goto out_zeroes;
		}
		snprintf(why, sizeof(why), "%s",
			 errno == ELOOP || errno == ENOTDIR
				 ? "not a directory or a symlink"
				 : strerror(errno));
		log_once(RLB_LOG_WARNING,
			 "state directory %s not read (%s): no state shown",
			 dir, why);
		goto out_zeroes;
	}
	if (fstat(dirfd, &st) != 0 || owner_problem(&st, why, sizeof(why))) {
		log_once(RLB_LOG_WARNING,
			 "state directory %s not read (%s): no state shown",
			 dir, why);
		rlb_libc()->close(dirfd);
		goto out_zeroes;
	}
	rc = name_read(dirfd, fname, &id, &token, &v2, &st, why, sizeof(why));
	rlb_libc()->close(dirfd);
	if (rc == 1) {
		suffix = " (absent)";
		goto out_zeroes;
	}
	if (rc == 0)
		s = segment_attach(c, id, token, false, true, why, sizeof(why));
	if (!s) {
		log_once(RLB_LOG_WARNING,
			 "state file %s/%s not read (%s): cluster %s shows no "
			 "state",
			 dir, fname, why, c->name ? c->name : "");
		goto out_zeroes;
	}
	s = follow_successors(c, s);
	store_label(s, dir, fname, "");
	return s;

out_zeroes:
	s = store_private(c, true);
	if (s && h->dirs && strlen(dir) + strlen(fname) + 2 <= PATH_MAX)
		store_label(s, dir, fname, suffix);
	return s;
}

/*
 * c's store, attached at this first use if it is not yet (design.md
 * §12.4). Threads that use a cluster first at the same time each attach
 * (the name file makes them agree on the segment); one store is
 * published, the others are dropped. NULL only when not even private
 * memory could be had. Keeps errno.
 */
static struct store *store_of(const struct rlb_cluster *c)
{
	struct rlb_health *h = c->health;
	struct store *s, *expected = NULL;
	int saved;

	if (!h)
		return NULL;
	s = atomic_load_explicit(&h->cur, memory_order_acquire);
	if (s ||
	    atomic_load_explicit(&h->mode, memory_order_relaxed) == HEALTH_NONE)
		return s;
	saved = errno;
	s = h->readonly ? attach_look(h, c) : attach_rw(h, c);
	if (!s) {
		atomic_store(&h->mode, HEALTH_NONE);
	} else if (atomic_compare_exchange_strong(&h->cur, &expected, s)) {
		atomic_store(&h->follow_ms,
			     rlb_monotonic_ms() + HEALTH_FOLLOW_MS);
		atomic_store(&h->mode, s->kind == STORE_SHM ? HEALTH_SHARED
							    : HEALTH_PRIVATE);
	} else {
		store_free(s);
		s = expected;
	}
	errno = saved;
	return s;
}

void rlb_health_attach_all(struct rlb_config *cfg, bool prune)
{
	struct health_dirs *dirs;
	int saved = errno;

	if (!cfg || cfg->nclusters == 0)
		return;
	dirs = calloc(1, sizeof(*dirs));
	if (dirs) {
		dirs->ok = state_dir_paths(cfg, dirs->want, sizeof(dirs->want),
					   dirs->fb, sizeof(dirs->fb));
		atomic_init(&dirs->refs, 1);
	}
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];
		struct rlb_health *h = calloc(1, sizeof(*h));

		rlb_health_detach(c->health);
		c->health = h;
		if (!h)
			continue;
		h->cluster = c;
		h->prune = prune;
		if (dirs) {
			atomic_fetch_add(&dirs->refs, 1);
			h->dirs = dirs;
		}
	}
	dirs_put(dirs);
	errno = saved;
}

void rlb_health_attach_all_readonly(struct rlb_config *cfg)
{
	if (!cfg)
		return;
	rlb_health_attach_all(cfg, false);
	for (size_t i = 0; i < cfg->nclusters; i++)
		if (cfg->clusters[i].health)
			cfg->clusters[i].health->readonly = true;
}

void rlb_health_detach(struct rlb_health *h)
{
	if (!h)
		return;
	store_free(atomic_load(&h->cur));
	while (h->retired) {
		struct store *next = h->retired->next;

		store_free(h->retired);
		h->retired = next;
	}
	dirs_put(h->dirs);
	free(h);
}

const char *rlb_health_path(const struct rlb_health *h)
{
	struct store *s;

	if (!h)
		return "(private)";
	s = store_of(h->cluster);
	return s && s->label ? s->label : "(private)";
}

/* ------------------------------------------------------------------ */
/* Following the state while attached (design.md §12.9) */

/*
 * Take h's slow-path flag: false if another thread of this process has
 * it. A flag inherited through fork() from a thread that no longer
 * exists here is taken over: the store pointer it may have been about to
 * change is published atomically, so nothing is half done.
 */
static bool busy_enter(struct rlb_health *h)
{
	pid_t me = getpid(), cur = 0;

	if (atomic_compare_exchange_strong(&h->busy, &cur, me))
		return true;
	return cur != me && atomic_compare_exchange_strong(&h->busy, &cur, me);
}

static void busy_leave(struct rlb_health *h)
{
	atomic_store(&h->busy, 0);
}

/*
 * Under the busy flag: use n instead of s from now on. s stays mapped
 * (another thread may be using it) until the health is detached; what was
 * added to it until the switch is moved into n. False when this cluster
 * has moved too often already (n is freed; s stays in use).
 */
static bool switch_to(struct rlb_health *h, const struct rlb_cluster *c,
		      struct store *s, struct store *n)
{
	if (h->nretired >= HEALTH_MAX_RETIRED) {
		log_once(RLB_LOG_WARNING,
			 "state of cluster %s was replaced too often: this "
			 "process keeps its segment until the next config load",
			 c->name);
		store_free(n);
		return false;
	}
	atomic_store(&h->cur, n);
	s->next = h->retired;
	h->retired = s;
	h->nretired++;
	if (!s->readonly)
		table_move(s->map, s->nslots, n->map, n->nslots, cap_of(c));
	return true;
}

/*
 * Once a second: whether the name file still names s, whole and of ours;
 * if not (removed, emptied, cut, replaced, its segment removed or given
 * another mode), attach what it names, or name s again, or a new segment
 * when s is gone too. Returns the store to use (s if nothing changed).
 */
static struct store *follow_name(struct rlb_health *h,
				 const struct rlb_cluster *c, struct store *s)
{
	char fname[NAME_MAX + 1], why[200], why2[200];
	struct store *n, *tip;
	struct shmid_ds ds;
	bool gone, v2, limit;
	struct stat st;
	uint64_t token;
	int dirfd, id;

	if (!s->dir)
		return s;
	state_file_name(c->name ? c->name : "", fname, sizeof(fname));
	if (shmctl(s->shmid, IPC_STAT, &ds) != 0) {
		gone = true;
		snprintf(why2, sizeof(why2), "segment %d removed", s->shmid);
	} else {
		gone = segment_problem(&ds, why2, sizeof(why2)) != NULL;
	}
	dirfd = state_dir_open(s->dir, why, sizeof(why));
	if (dirfd < 0)
		return s;
	if (!gone &&
	    name_read(dirfd, fname, &id, &token, &v2, &st, why, sizeof(why)) ==
		    0 &&
	    id == s->shmid && token == s->token) {
		rlb_libc()->close(dirfd);
		return s;
	}
	n = attach_named(c, dirfd, s->dir, fname, gone ? NULL : s, &limit, why,
			 sizeof(why));
	if (n && n != s) {
		tip = follow_successors(c, n);
		if (tip != n)
			store_free(n);
		n = settle(c, tip, dirfd, s->dir, fname, h->prune);
		if (n != tip)
			store_free(tip);
		n->dir = strdup(s->dir);
		n->label = s->label ? strdup(s->label) : NULL;
		log_once(RLB_LOG_WARNING,
			 "state of cluster %s was replaced or removed while in "
			 "use (%s): now segment %d",
			 c->name, gone ? why2 : "the name file changed",
			 n->shmid);
		/* Nobody finds s any more: gone once all have moved. */
		if (!gone)
			shmctl(s->shmid, IPC_RMID, NULL);
	}
	rlb_libc()->close(dirfd);
	return n ? n : s;
}

/* Whether s names a successor that this cluster has not tried in vain. */
static bool successor_due(const struct rlb_health *h, const struct store *s)
{
	uint64_t code = atomic_load(&s->map->hdr.successor);

	return code && code != atomic_load_explicit(&h->dead_successor,
						    memory_order_relaxed);
}

/*
 * The slow part of health_check(), once per tick: follow a successor at
 * once, make room that a claim found missing, and read the name file
 * again once a second.
 */
static void check_slow(struct rlb_health *h, const struct rlb_cluster *c,
		       struct store *s, int64_t now, bool force)
{
	bool succ = successor_due(h, s);
	bool grow_owed = atomic_load(&h->grow_owed);
	struct store *n;

	if ((!succ && !grow_owed && !force &&
	     now < atomic_load(&h->follow_ms)) ||
	    !busy_enter(h))
		return;
	s = atomic_load(&h->cur);
	n = s;
	if (succ || grow_owed) {
		char fname[NAME_MAX + 1], why[160];
		int dirfd =
			s->dir ? state_dir_open(s->dir, why, sizeof(why)) : -1;
		struct store *tip = follow_successors(c, s);

		atomic_store(&h->grow_owed, false);
		state_file_name(c->name ? c->name : "", fname, sizeof(fname));
		n = settle(c, tip, dirfd, s->dir, fname, false);
		if (n != tip && tip != s)
			store_free(tip);
		if (dirfd >= 0)
			rlb_libc()->close(dirfd);
		/* Gone already: not again at every operation; the name file
		 * is read again once a second. */
		if (tip == s)
			atomic_store(&h->dead_successor,
				     atomic_load(&s->map->hdr.successor));
		if (n != s) {
			n->dir = s->dir ? strdup(s->dir) : NULL;
			n->label = s->label ? strdup(s->label) : NULL;
		}
	} else {
		atomic_store(&h->follow_ms, now + HEALTH_FOLLOW_MS);
		n = follow_name(h, c, s);
	}
	if (n != s)
		switch_to(h, c, s, n);
	busy_leave(h);
}

/*
 * c's store for an operation that health_check() does not start (a read
 * within a selection, the counter): a successor published meanwhile by
 * another process is followed at once, for one load of its field.
 */
static struct store *store_now(const struct rlb_cluster *c)
{
	struct store *s = store_of(c);
	int saved;

	if (!s || s->kind != STORE_SHM || s->readonly ||
	    !atomic_load_explicit(&s->map->hdr.successor,
				  memory_order_relaxed) ||
	    !successor_due(c->health, s))
		return s;
	saved = errno;
	check_slow(c->health, c, s, rlb_monotonic_ms(), true);
	errno = saved;
	return atomic_load_explicit(&c->health->cur, memory_order_acquire);
}

/*
 * At the start of each operation on c's state (a selection, an add, a
 * reset, a look by replicalbctl): attach at first use, and at most once
 * per tick of the coarse clock follow the state where it moved. Returns
 * the store to use, or NULL. Keeps errno.
 */
static struct store *health_check(const struct rlb_cluster *c)
{
	struct store *s = store_of(c);
	struct rlb_health *h = c->health;
	int64_t now, last;
	int saved;

	if (!s || s->kind != STORE_SHM || s->readonly)
		return s;
	if (atomic_load_explicit(&s->map->hdr.successor,
				 memory_order_relaxed) &&
	    successor_due(h, s))
		return store_now(c);
	now = rlb_monotonic_ms();
	last = atomic_load_explicit(&h->checked_ms, memory_order_relaxed);
	if (now == last || !atomic_compare_exchange_strong_explicit(
				   &h->checked_ms, &last, now,
				   memory_order_relaxed, memory_order_relaxed))
		return s;
	saved = errno;
	check_slow(h, c, s, now, false);
	errno = saved;
	return atomic_load_explicit(&h->cur, memory_order_acquire);
}

/* ------------------------------------------------------------------ */
/* Hot path (design.md §12.5) */

/*
 * Claim replica i's slot again, lock-free, after another process pruned
 * it. NULL when the table has no room: a successor is made at the next
 * check, and no reclaim of this cluster is tried for HEALTH_RECLAIM_MS.
 */
static struct health_slot *reclaim(const struct rlb_cluster *c, struct store *s,
				   size_t i)
{
	struct rlb_health *h = c->health;
	int64_t now = rlb_monotonic_ms();
	long idx;

	if (s->readonly ||
	    now < atomic_load_explicit(&h->reclaim_ms, memory_order_relaxed))
		return NULL;
	idx = table_claim(s->map, s->nslots, c->replicas[i].identity);
	if (idx >= 0) {
		atomic_store(&s->slot[i], (uint32_t)idx);
		return &s->map->slots[idx];
	}
	atomic_store(&h->reclaim_ms, now + HEALTH_RECLAIM_MS);
	if (s->kind == STORE_SHM) {
		atomic_store(&h->grow_owed, true);
		atomic_store(&h->checked_ms, 0);
	}
	return NULL;
}

/* Replica i's slot in s, checked to still hold its identity (one load). */
static struct health_slot *slot_of(const struct rlb_cluster *c, struct store *s,
				   size_t i)
{
	uint32_t idx;

	if (!s || i >= s->nreplicas || i >= c->nreplicas)
		return NULL;
	idx = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
	if (idx < s->nslots && atomic_load_explicit(&s->map->slots[idx].key,
						    memory_order_acquire) ==
				       c->replicas[i].identity)
		return &s->map->slots[idx];
	if (s->readonly) {
		long found =
			table_find(s->map, s->nslots, c->replicas[i].identity);

		return found < 0 ? NULL : &s->map->slots[found];
	}
	return reclaim(c, s, i);
}

void rlb_health_decay(struct rlb_cluster *c, int64_t now)
{
	struct store *s = health_check(c);
	int64_t t;
	unsigned k;

	if (!s || s->readonly)
		return;
	t = atomic_load(&s->map->hdr.decay_time);
	if (t == 0) {
		atomic_compare_exchange_strong(&s->map->hdr.decay_time, &t,
					       now);
		return;
	}
	k = decay_shift(c, t, now);
	/* Only the process that moves T shifts, exactly once per move. */
	if (k == 0 ||
	    !atomic_compare_exchange_strong(&s->map->hdr.decay_time, &t, now))
		return;
	for (size_t i = 0; i < c->nreplicas; i++) {
		struct health_slot *slot = slot_of(c, s, i);

		if (!slot)
			continue;
		shift_counter(&slot->errors, k);
		shift_counter(&slot->slowdowns, k);
	}
}

/* T of store s (0 if unset or none). */
static int64_t decay_time_of(const struct store *s)
{
	return s ? atomic_load(&s->map->hdr.decay_time) : 0;
}

/*
 * Counts without decay are read within an operation that has checked the
 * state already (a selection after its decay, a log line after an add);
 * with decay, from replicalbctl, on their own.
 */
void rlb_health_counts(const struct rlb_cluster *c, size_t i, int64_t now,
		       bool decayed, uint64_t *errors, uint64_t *slowdowns)
{
	struct store *s = decayed ? health_check(c) : store_now(c);
	struct health_slot *slot = slot_of(c, s, i);
	unsigned k = decayed ? decay_shift(c, decay_time_of(s), now) : 0;

	*errors = slot ? shift_errors(atomic_load(&slot->errors), k) : 0;
	*slowdowns = slot ? shift_errors(atomic_load(&slot->slowdowns), k) : 0;
}

uint64_t rlb_health_errors(const struct rlb_cluster *c, size_t i, int64_t now,
			   bool decayed)
{
	uint64_t e, sd;

	rlb_health_counts(c, i, now, decayed, &e, &sd);
	return e;
}

uint64_t rlb_health_slowdowns(const struct rlb_cluster *c, size_t i,
			      int64_t now, bool decayed)
{
	uint64_t e, sd;

	rlb_health_counts(c, i, now, decayed, &e, &sd);
	return sd;
}

int64_t rlb_health_decay_time(const struct rlb_cluster *c)
{
	return decay_time_of(health_check(c));
}

/*
 * Add n to one of replica i's counters, capped at cap, at `now`. Adding
 * first applies the decay owed up to now, as a selection would: a
 * failure seen long after the last selection counts in full instead of
 * being halved away by the next one (design.md §5). A half-life of 0
 * earns nothing here: "forget at the next selection" must not let one
 * failure wipe another that no selection has seen yet. An add that lands
 * in a store this process or another has just moved away from is moved
 * after it (design.md §12.3).
 */
static void add_to(struct rlb_cluster *c, size_t i, uint64_t n, int64_t now,
		   bool slowdowns, uint64_t cap)
{
	struct rlb_health *h = c->health;
	struct health_slot *slot;
	struct store *s;

	s = health_check(c);
	if (!s || s->readonly)
		return;
	if (c->s.half_life > 0)
		rlb_health_decay(c, now);
	slot = slot_of(c, s, i);
	if (!slot)
		return;
	add_counter(slowdowns ? &slot->slowdowns : &slot->errors, n, cap);
	if (s->kind != STORE_SHM)
		return;
	if (successor_due(h, s) && atomic_load(&h->cur) == s) {
		int saved = errno;

		check_slow(h, c, s, rlb_monotonic_ms(), true);
		errno = saved;
	}
	if (atomic_load(&h->cur) != s) {
		struct store *cur = atomic_load(&h->cur);

		table_move(s->map, s->nslots, cur->map, cur->nslots, cap_of(c));
	}
}

void rlb_health_add_errors(struct rlb_cluster *c, size_t i, uint64_t n,
			   int64_t now)
{
	add_to(c, i, n, now, false, cap_of(c));
}

void rlb_health_add_slowdowns(struct rlb_cluster *c, size_t i, uint64_t n,
			      int64_t now)
{
	add_to(c, i, n, now, true, UINT64_MAX);
}

void rlb_health_reset(struct rlb_cluster *c, size_t i)
{
	struct store *s = health_check(c);
	size_t first = i, last = i;

	if (!s || s->readonly)
		return;
	if (i == SIZE_MAX) {
		first = 0;
		last = c->nreplicas ? c->nreplicas - 1 : 0;
	}
	for (size_t j = first; j <= last && j < c->nreplicas; j++) {
		struct health_slot *slot = slot_of(c, s, j);

		if (slot) {
			atomic_store(&slot->errors, 0);
			atomic_store(&slot->slowdowns, 0);
		}
	}
}

/* Within a selection, after its decay has checked the state. */
uint64_t rlb_health_rr_next(struct rlb_cluster *c)
{
	struct store *s = store_now(c);

	if (!s)
		return 0;
	if (s->readonly) /* the turn it would take, not taken */
		return atomic_load_explicit(&s->map->hdr.rr_counter,
					    memory_order_relaxed);
	return atomic_fetch_add_explicit(&s->map->hdr.rr_counter, 1,
					 memory_order_relaxed);
}

uint64_t rlb_health_rr_peek(const struct rlb_cluster *c)
{
	struct store *s = health_check(c);

	return s ? atomic_load_explicit(&s->map->hdr.rr_counter,
					memory_order_relaxed)
		 : 0;
}

int64_t rlb_health_recovery_seconds(const struct rlb_cluster *c, size_t i,
				    int64_t now)
{
	int64_t hl = c->s.half_life;
	int64_t total, elapsed, left, t;
	uint64_t e, sd;

	rlb_health_counts(c, i, now, false, &e, &sd);
	t = rlb_health_decay_time(c);

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

/* ------------------------------------------------------------------ */
/* Removing state (replicalbctl remove-state, design.md §12.10) */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

/* Whether entry name is a file this library leaves in a state directory. */
static bool is_state_entry(const char *name, bool *name_file)
{
	const char *dot = strstr(name, ".state");

	*name_file = dot && strcmp(dot, ".state") == 0;
	return *name_file ||
	       (dot && (strncmp(dot, ".state.corrupt-", 15) == 0 ||
			strncmp(dot, ".state.tmp-", 11) == 0));
}

/*
 * Remove segment id if it is ours, and say so on out. True if removed.
 */
static bool remove_segment(int id, const char *why, FILE *out)
{
	struct shmid_ds ds;

	if (shmctl(id, IPC_STAT, &ds) != 0 || ds.shm_perm.uid != geteuid() ||
	    ds.shm_perm.cuid != geteuid() || shmctl(id, IPC_RMID, NULL) != 0)
		return false;
	if (out)
		fprintf(out, "removed segment %d (%s)\n", id, why);
	return true;
}

/*
 * Segments of ours made for the directory (dev, ino) that nobody has
 * attached and no name file names (named: sorted ids): left by a process
 * that died between making one and naming it, or that moved away and
 * exited before removing it.
 */
static int remove_orphans(uint64_t dev, uint64_t ino, const int *named,
			  size_t nnamed, FILE *out)
{
	struct shm_info info;
	int max, removed = 0;

	max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);
	for (int idx = 0; idx <= max; idx++) {
		struct health_header hdr;
		struct shmid_ds ds;
		void *map;
		int id = shmctl(idx, SHM_STAT, &ds);

		if (id < 0 || ds.shm_perm.uid != geteuid() ||
		    ds.shm_perm.cuid != geteuid() || ds.shm_nattch != 0 ||
		    ds.shm_segsz < sizeof(hdr) ||
		    (nnamed &&
		     bsearch(&id, named, nnamed, sizeof(*named), cmp_int)))
			continue;
		map = shmat(id, NULL, SHM_RDONLY);
		if (map == (void *)-1)
			continue;
		memcpy(&hdr, map, sizeof(hdr));
		shmdt(map);
		if (memcmp(hdr.magic, HEALTH_MAGIC, sizeof(hdr.magic)) == 0 &&
		    hdr.version == HEALTH_VERSION && hdr.dir_dev == dev &&
		    hdr.dir_ino == ino &&
		    remove_segment(id, "named by no state file", out))
			removed++;
	}
	return removed;
}

int rlb_health_remove_state(const struct rlb_config *cfg, bool all, FILE *out)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	size_t nkeep = cfg ? cfg->nclusters : 0, nnamed = 0, cap = 0;
	char dir[PATH_MAX], why[160];
	char **keep = NULL;
	int *named = NULL;
	struct dirent *de;
	int dirfd, removed = 0;
	struct stat st;
	DIR *d;

	rlb_health_state_dir(cfg, dir, sizeof(dir));
	dirfd = open(dir, flags);
	if (dirfd < 0)
		return errno == ENOENT ? 0 : -1;
	if (fstat(dirfd, &st) != 0 || owner_problem(&st, why, sizeof(why))) {
		rlb_log(RLB_LOG_ERROR, "state directory %s not used (%s)", dir,
			why);
		rlb_libc()->close(dirfd);
		errno = EPERM;
		return -1;
	}
	d = fdopendir(dirfd);
	if (!d) {
		rlb_libc()->close(dirfd);
		return -1;
	}
	keep = calloc(nkeep ? nkeep : 1, sizeof(*keep));
	for (size_t i = 0; keep && i < nkeep; i++) {
		keep[i] = malloc(NAME_MAX + 1);
		if (keep[i])
			state_file_name(cfg->clusters[i].name, keep[i],
					NAME_MAX + 1);
		else
			nkeep = i;
	}
	if (!keep)
		nkeep = 0;
	if (nkeep)
		qsort(keep, nkeep, sizeof(*keep), cmp_str);
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		struct stat nst;
		uint64_t token;
		bool name_file, v2;
		int id, rc;

		if (!is_state_entry(name, &name_file))
			continue;
		rc = name_read(dirfd, name, &id, &token, &v2, &nst, why,
			       sizeof(why));
		if (name_file && !all && keep &&
		    bsearch(&name, keep, nkeep, sizeof(*keep), cmp_str)) {
			if (rc == 0 && nnamed == cap) {
				int *more = realloc(
					named, (cap * 2 + 16) * sizeof(*more));

				if (more) {
					named = more;
					cap = cap * 2 + 16;
				}
			}
			if (rc == 0 && nnamed < cap)
				named[nnamed++] = id;
			continue;
		}
		if (rc == 0 && name_file)
			removed += remove_segment(id, name, out);
		if (unlinkat(dirfd, name, 0) == 0) {
			removed++;
			if (out)
				fprintf(out, "removed %s/%s\n", dir, name);
		}
	}
	if (nnamed)
		qsort(named, nnamed, sizeof(*named), cmp_int);
	removed += remove_orphans((uint64_t)st.st_dev, (uint64_t)st.st_ino,
				  named, nnamed, out);
	for (size_t i = 0; i < nkeep; i++)
		free(keep[i]);
	free(keep);
	free(named);
	closedir(d);
	return removed;
}
