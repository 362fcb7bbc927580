/* state/health_internal.h - what the files of shared health share
 * (design.md §12): the segment layout, stores, a cluster's handle, and
 * the cross-file functions of health_table.c, health_segment.c,
 * health_dir.c and health_attach.c; health.c, the hot path, uses them. */
#ifndef RLB_HEALTH_INTERNAL_H
#define RLB_HEALTH_INTERNAL_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "state/state.h"

#define HEALTH_MAGIC	 "RLBSTATE"
#define HEALTH_VERSION	 4
#define HEALTH_MIN_SLOTS 4
#define HEALTH_MAX_SLOTS (2 * RLB_MAX_REPLICAS)
/*
 * The connection ledger of a segment (design.md §12.13): lease rows, one
 * per process that holds connections to the cluster, and one entry per
 * connection open now (its socket's inode, the rows that hold it).
 */
#define HEALTH_ROWS	 256
#define HEALTH_ROW_WORDS (HEALTH_ROWS / 64)
/* Entries for n slots: 16 connections per replica at load 1/2, at least
 * 256, at most 16384 (1.5 MiB). */
#define HEALTH_CONNS_OF(n)                                                     \
	((size_t)(n)*32 < 256	  ? (size_t)256                                \
	 : (size_t)(n)*32 > 16384 ? (size_t)16384                              \
				  : (size_t)(n)*32)
#define HEALTH_CONN_PROBE 64	/* entries one inode may sit in */
#define HEALTH_TRANSIT_MS 10000 /* a descriptor sent is received by then */
#define HEALTH_LEDGER_BYTES(n)                                                 \
	(HEALTH_ROWS * sizeof(struct health_row) +                             \
	 HEALTH_CONNS_OF(n) * sizeof(struct health_conn))
#define HEALTH_SIZE(n)                                                         \
	(sizeof(struct health_header) +                                        \
	 (size_t)(n) * sizeof(struct health_slot) + HEALTH_LEDGER_BYTES(n))
/* A segment of version 3 (the release before the ledger), for the sweep. */
#define HEALTH_V3_SIZE(n)  (sizeof(struct health_header) + (size_t)(n)*32)
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
/* Sweeps at creation (design.md §12.11): once a minute per process, once
 * a second while a kernel limit refuses segments; an orphan attached or
 * detached in the last seconds may just have been named, and is spared. */
#define HEALTH_GC_MS	  60000
#define HEALTH_GC_SOON_MS 1000
#define HEALTH_GC_GRACE_S 2
/*
 * The name file (design.md §12.1): "replicalb-state 2 shm ID TOKEN NS\n",
 * NS the IPC namespace of the segment (rlb_dir_ipc_tag()); the line of
 * version 1, without NS, is read as before. A memfd (design.md §12.12)
 * is named by "replicalb-state 3 memfd PID FD INO TOKEN NS\n": a process
 * that holds it, its descriptor there, and the memfd's inode.
 */
#define NAME_FORMAT	  "replicalb-state 2 shm %d %016llx %016llx\n"
#define NAME_FORMAT_V1	  "replicalb-state 1 shm %d %016llx\n"
#define NAME_FORMAT_MEMFD "replicalb-state 3 memfd %d %d %llu %016llx %016llx\n"
#define NAME_MAX_LEN	  128
/* Memfds one process holds at most: each is a descriptor of the program. */
#define HEALTH_MAX_MEMFDS 64
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
	uint32_t home_len;	     /* bytes of the directory's path kept
				      * in the slots' home words, 0: none */
	uint32_t reserved0;	     /* zero */
	uint64_t home_hash;	     /* home_hash() of that path */
	uint64_t home_mnt;	     /* mount namespace it was made in
				      * (its /proc inode), 0: unknown */
	_Atomic int64_t reclaim_ms;  /* the next reclaim of the ledger,
				      * monotonic ms: one process a second */
	uint64_t reserved;	     /* zero */
};

/* One replica's counts, keyed by its identity. */
struct health_slot {
	_Atomic uint64_t key;	    /* identity, or HEALTH_KEY_* */
	_Atomic uint64_t errors;    /* capped at error_cap */
	_Atomic uint64_t slowdowns; /* attempts abandoned early; uncapped */
	uint64_t home;		    /* 8 bytes of the state directory's path,
				     * in slot order (design.md §12.2) */
	_Atomic uint64_t connects;  /* connects established, ever */
	_Atomic uint64_t failures;  /* connects failed, ever */
	_Atomic uint64_t in_flight; /* connections open now, host-wide: the
				     * live entries of the ledger for it */
	uint64_t reserved;	    /* zero */
};

/*
 * A lease row: a process that holds (or held) connections of the cluster.
 * owner is (pid << 32) | (low 32 bits of its start time in clock ticks
 * since boot), 0 when free; pidns the inode of its PID namespace (0 while
 * being claimed); image a random word of the program image, which an
 * exec() changes (the new image reclaims the old one's row).
 */
struct health_row {
	_Atomic uint64_t owner;
	_Atomic uint64_t pidns;
	_Atomic uint64_t image;
	uint64_t reserved;
};

/*
 * A connection open now: ino the socket's inode (0: free), replica the
 * identity of the replica it is to, holders how many rows hold it, mask
 * the rows (bit r: row r). The last holder to let go drops the replica's
 * in_flight and frees the entry.
 */
struct health_conn {
	_Atomic uint64_t ino;
	_Atomic uint64_t replica;
	_Atomic uint64_t holders;
	_Atomic uint64_t mask[HEALTH_ROW_WORDS];
	/* Holds of descriptors sent with SCM_RIGHTS and not yet received:
	 * bit r, by the sender's row r; sent_ms the last send (monotonic),
	 * after which an unreceived one is given up (HEALTH_TRANSIT_MS). */
	_Atomic uint64_t transit[HEALTH_ROW_WORDS];
	_Atomic int64_t sent_ms;
};

/* A segment: header, then an open-addressing table of nslots slots, then
 * the ledger (rlb_ledger_rows(), rlb_ledger_conns()). */
struct health_map {
	struct health_header hdr;
	struct health_slot slots[];
};

_Static_assert(sizeof(struct health_header) == 128, "header is 128 bytes");
_Static_assert(sizeof(struct health_slot) == 64, "slot is 64 bytes");
_Static_assert(sizeof(struct health_row) == 32, "row is 32 bytes");
_Static_assert(sizeof(struct health_conn) == 96, "entry is 96 bytes");

/* The ledger of segment m of nslots slots. */
static inline struct health_row *rlb_ledger_rows(struct health_map *m,
						 uint32_t nslots)
{
	return (struct health_row *)(void *)&m->slots[nslots];
}

static inline struct health_conn *rlb_ledger_conns(struct health_map *m,
						   uint32_t nslots)
{
	return (struct health_conn *)(void *)(rlb_ledger_rows(m, nslots) +
					      HEALTH_ROWS);
}

/* What holds a store's counters. */
enum store_kind {
	STORE_SHM,   /* a SysV segment named by the name file */
	STORE_MEMFD, /* a sealed memfd named by the name file through a
		      * process that holds it (design.md §12.12) */
	STORE_ANON,  /* private: anonymous shared memory (shared with forks) */
	STORE_HEAP,  /* private or zeroes: calloc, when mmap failed */
};

/* What a name file names (design.md §12.1). */
struct health_name {
	enum store_kind kind; /* STORE_SHM or STORE_MEMFD */
	int id;		      /* STORE_SHM: the segment */
	pid_t pid;	      /* STORE_MEMFD: a process that holds it, */
	int fd;		      /* its descriptor in that process, */
	uint64_t ino;	      /* and the memfd's inode */
	uint64_t token;	      /* as in the header */
	uint64_t ns;	      /* IPC namespace (rlb_dir_ipc_tag()), 0 for a
			       * line of version 1 */
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
	int fd;			 /* STORE_MEMFD: the memfd, held */
	uint64_t dev, ino;	 /* STORE_MEMFD: its inode */
	uint64_t token;		 /* STORE_SHM, STORE_MEMFD: its token */
	char *dir;		 /* state directory, or NULL */
	char *fname;		 /* name file in dir: NAME.state, or this
				  * IPC namespace's NAME.state.ipc-TAG */
	char *label;		 /* rlb_health_path(): the name file,
				  * maybe with " (absent)", or
				  * "(private)" */
	struct store *next;	 /* retired list of the cluster */
	_Atomic int row;	 /* this process's lease row in map, */
	_Atomic pid_t row_pid;	 /* when this process claimed it */
	_Atomic int fork_row;	 /* a row claimed for the child of a
				  * fork under way, -1: none */
	_Atomic bool dirty;	 /* STORE_MEMFD: changed by this process
				  * since its counts were last saved */
	_Atomic int64_t save_ms; /* STORE_MEMFD: no save before this */
	size_t nreplicas;	 /* entries of slot[] */
	_Atomic uint32_t slot[]; /* per replica: index of its slot */
};

/*
 * Where the state directory of a config is (rlb_dir_paths()), computed
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
	enum rlb_state_mode use;	   /* LOOK writes nothing (§6), TURN
					    * charges nothing */
	bool prune;			   /* prune at attach (a reload) */
	_Atomic int mode;		   /* enum health_mode */
	_Atomic bool grow_owed;		   /* a claim found no room */
	_Atomic uint64_t dead_successor;   /* one that could not be attached */
	_Atomic int64_t checked_ms;	   /* coarse tick of the last check */
	_Atomic int64_t follow_ms;	   /* next read of the name file */
	_Atomic int64_t reclaim_ms;	   /* no reclaim before this */
	_Atomic int64_t shm_retry_ms;	   /* in a memfd: no segment tried
					    * again before this */
	_Atomic pid_t busy; /* process in a slow path, 0 if none */
};

/* Whether c's state takes charges (errors, slowdowns, connections):
 * attached RLB_STATE_COUNT. */
static inline bool rlb_health_counting(const struct rlb_cluster *c)
{
	return c->health && c->health->use == RLB_STATE_COUNT;
}

/* Whether s is shared through the name file (a segment or a memfd). */
static inline bool rlb_store_named(const struct store *s)
{
	return s->kind == STORE_SHM || s->kind == STORE_MEMFD;
}

/* Where a segment belongs: its cluster and state directory. */
struct health_home {
	uint64_t name_hash; /* rlb_cluster.name_hash */
	uint64_t dir_dev;   /* state directory, 0 for private memory */
	uint64_t dir_ino;
	const char *path; /* its absolute path, or NULL: not recorded */
	uint64_t mnt;	  /* mount namespace of path, 0: unknown */
};

/* ------------------------------------------------------------------ */
/* health_table.c */

/* Add n to a shared counter, saturating at cap. */
void rlb_table_add(_Atomic uint64_t *v, uint64_t n, uint64_t cap);
/* Slots for n replicas: a power of 2 with load factor at most 1/2. */
uint32_t rlb_table_slots(size_t n);
/*
 * Write a fresh header of a table of nslots slots (T and counter 0), and
 * home's path, when it is absolute and fits, into the slots' home words
 * (design.md §12.2). The slots must still be zero.
 */
void rlb_table_header_init(struct health_map *m, uint32_t nslots,
			   uint64_t token, const struct health_home *home);
/* Fewest slots whose home words hold path (NULL: none). */
uint32_t rlb_table_home_slots(const char *path);
/*
 * The state directory's path that the segment m of size bytes keeps, into
 * buf: its length, or -1 when it keeps none (or not intact, or too long
 * for len). Reads only within size.
 */
int rlb_table_home_get(const struct health_map *m, size_t size, char *buf,
		       size_t len);
/*
 * 0 if the header of a segment of size bytes is valid for token and
 * name_hash, else -1 with the reason in why. The size is the segment's,
 * fixed at its creation: reading within it cannot fault.
 */
int rlb_table_header_validate(const struct health_header *hdr, size_t size,
			      uint64_t token, uint64_t name_hash, char *why,
			      size_t whylen);
/*
 * Slot of id: the one holding it, else the first empty one on its probe
 * path, claimed with a compare-and-swap. The counts of an empty slot are
 * zero: nothing writes a slot before it holds a key. Returns the index,
 * or -1 when the probe path has no room.
 */
long rlb_table_claim(struct health_map *m, uint32_t nslots, uint64_t id);
/*
 * Slot holding id, found along its probe path without claiming anything,
 * or -1: an absent id reads as zero counts.
 */
long rlb_table_find(const struct health_map *m, uint32_t nslots, uint64_t id);
/* Slots that hold a key or a tombstone. */
size_t rlb_table_used(const struct health_map *m, uint32_t nslots);
/* Slots that hold a live key. */
size_t rlb_table_live(const struct health_map *m, uint32_t nslots);
/*
 * Drop every entry whose key is not one of c's replicas: a compare-and-
 * swap to the tombstone, which no claim reuses, so a probe chain is never
 * broken and a count added meanwhile lands in a dropped slot.
 */
void rlb_table_prune(struct health_map *m, uint32_t nslots,
		     const struct rlb_cluster *c);
/*
 * Move every live count of from into to: each count is taken with an
 * atomic exchange, so that any number of processes moving the same
 * segment at once move each count exactly once. Errors are capped at cap.
 * A count that finds no room in to is put back.
 */
void rlb_table_move(struct health_map *from, uint32_t from_slots,
		    struct health_map *to, uint32_t to_slots, uint64_t cap);
/* The error cap of c as a counter's bound. */
uint64_t rlb_table_cap(const struct rlb_cluster *c);
/*
 * Whether hdr (of a segment of size bytes) is a valid header of version 3,
 * the release before the ledger: what the sweep may remove.
 */
bool rlb_table_header_v3(const struct health_header *hdr, size_t size);

/* ------------------------------------------------------------------ */
/* health_traffic.c */

/*
 * Give back what the dead processes' lease rows of s held (design.md
 * §12.13): each connection they alone held leaves in_flight. Returns the
 * number of rows freed.
 */
int rlb_ledger_reclaim(struct store *s);
/* rlb_ledger_reclaim(), unless a process of the host did in the last
 * second (the segment's reclaim_ms). */
void rlb_ledger_reclaim_due(struct store *s);
/*
 * Move the ledger of from into to (rlb_table_move() does, after the
 * counts): rows keep their numbers, entries are taken with an exchange.
 */
void rlb_ledger_move(struct health_map *from, uint32_t from_slots,
		     struct health_map *to, uint32_t to_slots);

/* ------------------------------------------------------------------ */
/* health_segment.c */

/* A store of nreplicas slots' indexes, none attached yet; NULL: ENOMEM. */
struct store *rlb_segment_store(size_t nreplicas);
/*
 * A random token, never 0: it tells a segment named by a name file from
 * a segment that got the same id later, and a name file's from a forged
 * one.
 */
uint64_t rlb_segment_token(void);

/* Detach (or unmap, or free) s and free it; s may be NULL. */
void rlb_segment_free(struct store *s);
/* Remove the segment of s from the system, then detach and free s. */
void rlb_segment_destroy(struct store *s);
/*
 * Why segment id (stat ds) must not be used, or NULL: ours by owner and
 * creator, mode 0600, not removed.
 */
const char *rlb_segment_problem(const struct shmid_ds *ds, char *why,
				size_t whylen);
/*
 * Attach segment id, named with token (or, with lo_only, a successor
 * named by the low 32 bits of its token), as c's store, after the checks
 * of rlb_segment_problem() and rlb_table_header_validate(). NULL with the
 * reason in why.
 */
struct store *rlb_segment_attach(const struct rlb_cluster *c, int id,
				 uint64_t token, bool lo_only, bool readonly,
				 char *why, size_t whylen);
/*
 * A new segment of nslots slots for c, mode 0600, header written. NULL
 * with the reason in why; *limit when the kernel's limits (shmmni,
 * shmall, shmmax) refused it.
 */
struct store *rlb_segment_create(const struct rlb_cluster *c, uint32_t nslots,
				 const struct health_home *home, bool *limit,
				 char *why, size_t whylen);
/*
 * Private memory for c (design.md §12.8): anonymous shared memory, so
 * that forked children share it, else the heap; zeroes only (no header
 * written) when readonly. NULL on ENOMEM.
 */
struct store *rlb_segment_private(const struct rlb_cluster *c, bool readonly);
/*
 * Rename the name file fname of dirfd from s to n, if it still names s:
 * whether it now names n.
 */
bool rlb_segment_rename(int dirfd, const char *fname, const struct store *s,
			const struct store *n);
/* What a name file naming s says: its segment, or this process and s's
 * memfd. */
void rlb_segment_name(const struct store *s, struct health_name *nm);
/* Whether nm names s's memory (through any holder, for a memfd). */
bool rlb_segment_named(const struct store *s, const struct health_name *nm);
/*
 * Follow the successors of first (a segment that a larger one replaced),
 * at most HEALTH_MAX_HOPS: the last one that can be attached, or first
 * itself. Read-write, each hop moves the counts of the segment it leaves
 * into the next (rlb_table_move()). Stores passed on the way are freed;
 * first stays the caller's.
 */
struct store *rlb_segment_follow(const struct rlb_cluster *c,
				 struct store *first);
/*
 * Claim c's replicas in s and make room where the table is too full
 * (grow()); prune when asked. Returns the store to use: s, or the
 * successor it moved to. Stores made on the way are freed, except s,
 * which stays the caller's.
 */
struct store *rlb_segment_settle(const struct rlb_cluster *c, struct store *s,
				 int dirfd, const char *dir, const char *fname,
				 bool prune);

/* ------------------------------------------------------------------ */
/* health_memfd.c */

/*
 * A new sealed memfd of nslots slots for c (design.md §12.12), mapped
 * MAP_SHARED, header written: what stands in for a segment that the
 * kernel's limits refused. Sealed F_SEAL_SHRINK | F_SEAL_GROW |
 * F_SEAL_SEAL, so that nobody can truncate it under a mapping. NULL with
 * the reason in why.
 */
struct store *rlb_memfd_create(const struct rlb_cluster *c, uint32_t nslots,
			       const struct health_home *home, char *why,
			       size_t whylen);
/*
 * The memfd nm names, opened through its holder's /proc/PID/fd/FD and
 * mapped for c after the checks (a regular file of ours with nm's inode,
 * sealed against shrinking and growing, then the header, as for a
 * segment). Read-only, the descriptor is not kept. NULL with the reason
 * in why; *gone when the holder is gone or cannot be reached (the
 * process exited, its number or descriptor reused), which is no fault
 * of the name file.
 */
struct store *rlb_memfd_attach(const struct rlb_cluster *c,
			       const struct health_name *nm, bool readonly,
			       bool *gone, char *why, size_t whylen);
/*
 * Whether this process holds HEALTH_MAX_MEMFDS memfds already: each is a
 * descriptor of the program's, and one that uses select() needs them
 * below FD_SETSIZE.
 */
bool rlb_memfd_full(void);
/* Whether this process holds a memfd at all. */
bool rlb_memfd_any(void);
/* Whether the holder nm names still holds nm's memfd. */
bool rlb_memfd_holder_alive(const struct health_name *nm);
/*
 * Whether s's descriptor still is its memfd: the program may have closed
 * it, or put another file in its place.
 */
bool rlb_memfd_intact(const struct store *s);
/* Close s's descriptor, when it still is s's memfd. */
void rlb_memfd_close(struct store *s);

/* ------------------------------------------------------------------ */
/* health_dir.c */

/*
 * Log a message once per process at level: the same text again (at a
 * reload, a retry, another attach) goes out at debug level only.
 */
void rlb_dir_log_once(enum rlb_log_level level, const char *fmt, ...)
	RLB_PRINTF(2, 3);
/*
 * The inode of this process' namespace of kind ("mnt", "ipc") as
 * /proc/self/ns shows it, or 0 when it cannot be read (no /proc).
 */
uint64_t rlb_dir_ns(const char *kind);
/* Whether name is a name file: NAME.state or NAME.state.ipc-TAG. */
bool rlb_dir_is_name_file(const char *name);
/* Why st (of a state file or directory) must not be used, or NULL. */
const char *rlb_dir_owner_problem(const struct stat *st, char *why,
				  size_t whylen);
/*
 * fstat() fd (a state directory or file) into st and check its owner: 0,
 * or -1 with the reason in why (an fstat error's text too).
 */
int rlb_dir_trusted(int fd, struct stat *st, char *why, size_t whylen);
/*
 * The state directory cfg asks for, into buf (design.md §5.8): state_dir
 * (REPLICALB_STATE_DIR applied), else $XDG_RUNTIME_DIR/replicalb, else
 * the default /tmp/replicalb-EUID; then *fb is the fallback for a default
 * that another user took first, $HOME/.cache/replicalb, or "" when HOME
 * is unknown (unset, relative, or ignored in secure mode). False when a
 * path does not fit.
 */
bool rlb_dir_paths(const struct rlb_config *cfg, char *buf, size_t len,
		   char *fb, size_t fblen);
/* Whether dir is ours to use or to create (without opening it). */
bool rlb_dir_usable(const char *dir);
/*
 * Open the state directory dir (created if missing) as a directory fd
 * that passed the ownership checks, or -1 with the reason in why.
 */
int rlb_dir_open(const char *dir, char *why, size_t whylen);
/*
 * Open the state directory d names (with the fallback for a squatted
 * default) into dir, or -1 after one warning (none when quiet).
 */
int rlb_dir_resolve(const struct health_dirs *d, char *dir, size_t len,
		    bool quiet);
/*
 * File name of cluster `name`: NAME.state with bytes outside [a-z0-9._-]
 * replaced by '_'; overlong names are cut and made unique by a hash, so
 * that "NAME.state.corrupt-..." still fits NAME_MAX.
 */
void rlb_dir_file_name(const char *name, char *out, size_t outlen);
/*
 * Read the name file fname in dirfd: 0 with what it names in *nm (nm->ns
 * the IPC namespace that holds it, 0 when a line of version 1 does not
 * say), 1 when there is none, -1 when it is not a valid name file (why;
 * *v2 when it is a state file of version 2). Read with pread, never
 * mapped.
 */
int rlb_dir_name_read(int dirfd, const char *fname, struct health_name *nm,
		      bool *v2, struct stat *st, char *why, size_t whylen);
/*
 * This process' IPC namespace as a name file names it: a hash of the
 * boot (boot_id: hosts sharing a directory over NFS differ) and of the
 * namespace's inode; never 0, or 0 when /proc cannot tell.
 */
uint64_t rlb_dir_ipc_tag(void);
/*
 * The name file of cluster file fname that the IPC namespace tag keeps
 * beside another namespace's (design.md §5.8): fname.ipc-TAG.
 */
void rlb_dir_ns_file_name(const char *fname, uint64_t tag, char *out,
			  size_t outlen);
/*
 * Write a name file naming nm (its ns ignored: this IPC namespace's tag
 * goes in the line) as a new temporary file, then
 * link it to fname (replace false: fails with EEXIST when a name exists,
 * so that the first of processes starting together wins) or rename it
 * over fname. 0, or -1 with errno.
 */
int rlb_dir_name_write(int dirfd, const char *fname,
		       const struct health_name *nm, bool replace);
/*
 * Set aside the name file fname of dir (dirfd), found not valid (why):
 * renamed NAME.state.corrupt-TIME-PID, or removed when it is a state file
 * of version 2 (v2), whose 256 KiB nobody reads any more. Nothing is done
 * when fname is no longer the file st described: another process replaced
 * it meanwhile, and its file is read again.
 */
void rlb_dir_set_aside(int dirfd, const char *dir, const char *fname,
		       const struct stat *st, bool v2, const char *why);

/* ------------------------------------------------------------------ */
/* health_side.c: side files of an open, trusted state directory */

/* Read side file name of dirfd (dir its path, for messages) into buf, as
 * rlb_health_side_read(): -1 when absent or refused (refused ones are set
 * aside). */
ssize_t rlb_side_read_at(int dirfd, const char *dir, const char *name,
			 char *buf, size_t cap);
/* Replace side file name of dirfd by a whole new file: 0, or -1. */
int rlb_side_write_at(int dirfd, const char *name, const void *data,
		      size_t len);
/* Set side file name aside as NAME.corrupt-TIME-PID, one warning (why). */
void rlb_side_set_aside_at(int dirfd, const char *dir, const char *name,
			   const char *why);

/* ------------------------------------------------------------------ */
/* health_saved.c: the counts of a memfd kept in a file (design.md §12.12) */

/* The saved-counts file of name file fname: NAME.saved[.ipc-TAG]. */
void rlb_saved_name(const char *fname, char *out, size_t outlen);
/*
 * Seed s, a store just made and not yet named, from the saved counts of
 * name file fname in dirfd (dir its path): errors (capped for c),
 * slowdowns, connects and failures of each replica, T and the
 * round-robin counter. A damaged file is set aside. True if seeded.
 * look: s is a look's zeroes (replicalbctl status), and nothing is
 * changed in the directory.
 */
bool rlb_saved_seed(struct store *s, const struct rlb_cluster *c, int dirfd,
		    const char *dir, const char *fname, bool look);
/* Remove the saved counts of fname: a segment persists by itself. */
void rlb_saved_remove(int dirfd, const char *fname);
/* s, a memfd, was changed by this process: its counts are saved now,
 * unless they were less than a second ago (then at exit). */
void rlb_saved_changed(struct store *s);

/* ------------------------------------------------------------------ */
/* health_gc.c */

/* A state directory being attached or cleaned, for rlb_gc_sweep(). */
struct gc_here {
	uint64_t dev, ino; /* the directory */
	const char *path;  /* its path, or NULL */
	const int *named;  /* sorted ids its name files name */
	size_t nnamed;
};

#define GC_GONE_DIRS 1u /* also segments whose directory is gone */
#define GC_GRACE     2u /* spare orphans of here touched just now */

/*
 * Remove the user's segments (owner and creator, mode 0600, version 3,
 * nobody attached) that no state file can name any more (design.md
 * §12.11): made for here (its inode, and its path when they keep
 * another: the inode was reused) and named by none of its name files
 * (touched in the last HEALTH_GC_GRACE_S seconds too, unless GC_GRACE);
 * with GC_GONE_DIRS, also those made, in this mount namespace, for a
 * directory whose path they keep and that is gone from it. Says what it
 * removed on out (NULL: nothing). Returns the number removed.
 */
int rlb_gc_sweep(const struct gc_here *here, unsigned flags, FILE *out);
/*
 * The sorted ids that the name files of dirfd name (malloc'd, *ids NULL
 * when none): 0, or -1 when the directory cannot be listed or memory is
 * short.
 */
int rlb_gc_named(int dirfd, int **ids, size_t *nids);
/*
 * Before a segment is made for home (its directory open as dirfd):
 * sweep, at most once every HEALTH_GC_MS per process, or, urgent (a
 * kernel limit refused a segment), every HEALTH_GC_SOON_MS. Returns
 * the number of segments removed.
 */
int rlb_gc_at_create(int dirfd, const struct health_home *home, bool urgent);

/* ------------------------------------------------------------------ */
/* health_attach.c */

/* Whether s names a successor that this cluster has not tried in vain. */
bool rlb_attach_successor_due(const struct rlb_health *h,
			      const struct store *s);
/*
 * The slow part of rlb_attach_check(), once per tick: follow a successor at
 * once, make room that a claim found missing, and read the name file
 * again once a second.
 */
void rlb_attach_slow(struct rlb_health *h, const struct rlb_cluster *c,
		     struct store *s, int64_t now, bool force);
/*
 * c's store for an operation that rlb_attach_check() does not start (a read
 * within a selection, the counter): a successor published meanwhile by
 * another process is followed at once, for one load of its field.
 */
struct store *rlb_attach_now(const struct rlb_cluster *c);
/*
 * At the start of each operation on c's state (a selection, an add, a
 * reset, a look by replicalbctl): attach at first use, and at most once
 * per tick of the coarse clock follow the state where it moved. Returns
 * the store to use, or NULL. Keeps errno.
 */
struct store *rlb_attach_check(const struct rlb_cluster *c);

#endif /* RLB_HEALTH_INTERNAL_H */
