/* state/state.h - health shared by every process of the user (health.c). */
#ifndef RLB_STATE_H
#define RLB_STATE_H

#include <stdio.h>

#include "model/model.h"

/* ------------------------------------------------------------------ */
/* health.c */

/*
 * Shared health of one cluster: a SysV shared memory segment named by the
 * state file STATE_DIR/NAME.state (a sealed memfd that the processes
 * using it hold, when the kernel's segment limits refuse one; a private
 * anonymous mapping as the last fallback) holding the decay time T, the
 * round-robin counter and one error counter per replica, keyed by replica
 * identity. It is attached at the cluster's first use: the first operation
 * below (or path) attaches it. All updates are lock-free atomics. The functions
 * that start an operation (decay, adds, reset, the peeks) follow a segment that
 * was replaced, at once for a successor and once a second for the state file
 * (design.md §12.9).
 */

/*
 * The state directory: REPLICALB_STATE_DIR / state_dir (cfg->state_dir),
 * else $XDG_RUNTIME_DIR/replicalb, else /tmp/replicalb-UID while it is
 * missing or ours, else $HOME/.cache/replicalb (design.md §5.8). Writes
 * into buf; returns buf. Keeps errno.
 */
const char *rlb_health_state_dir(const struct rlb_config *cfg, char *buf,
				 size_t len);
/*
 * How a process uses a cluster's state (design.md §12.4):
 * - RLB_STATE_COUNT: everything, errors, slowdowns, connections and
 *   round-robin turns (the preload library, replicalbctl record-error);
 * - RLB_STATE_TURN: reads, and takes round-robin turns, but charges
 *   nothing: no error, slowdown, connect or connection (a resolver that
 *   sees no connect, as an NSS module);
 * - RLB_STATE_LOOK: reads only; nothing is created or written
 *   (replicalbctl status, resolve --peek; see below).
 */
enum rlb_state_mode { RLB_STATE_LOOK, RLB_STATE_TURN, RLB_STATE_COUNT };
/*
 * Give every cluster of cfg its health handle (sets c->health), used
 * as mode says and attached at the cluster's first use: no system call here
 * (design.md §12.4). With `prune`, state of replicas no longer in the cluster
 * is dropped when it is attached. Never fails: problems fall back to private
 * state and log one warning (a handle that cannot be allocated is NULL
 * and counts nothing). Never waits for another process.
 */
void rlb_health_attach_all(struct rlb_config *cfg, enum rlb_state_mode mode,
			   bool prune);
/*
 * RLB_STATE_LOOK: every cluster of cfg attached for reading only
 * (replicalbctl status and resolve --peek, design.md §6), at first use: the
 * segment an existing, valid state file names is attached SHM_RDONLY and each
 * replica's slot is looked up, never claimed; nothing is created or written, no
 * directory either. A replica without a slot
 * reads as 0 errors and 0 slowdowns; a missing or unusable file or
 * directory as all zeroes, with T unset. Every update (decay, adds,
 * reset, rr_next) does nothing on such state; rr_next returns the
 * counter unchanged. rlb_health_path() gives the file's path, with
 * " (absent)" when it does not exist yet and " (private)" when it cannot
 * be used.
 */
void rlb_health_detach(struct rlb_health *h);
/*
 * Whether an operation on c's state at monotonic now would do nothing but
 * touch shared memory: attached already, no successor to follow, no room
 * owed, the once-a-second read of the name file not due. Else it may open and
 * read files (never blocking on a lock). For the NSS module, which blocks
 * signals across a call's slow parts only.
 */
bool rlb_health_settled(const struct rlb_cluster *c, int64_t now);
/*
 * Path of the state file in use, or "(private)" (read-only: see above);
 * attaches the cluster if it was not yet (a first status read).
 */
const char *rlb_health_path(const struct rlb_health *h);

/* Decay at a selection (design.md §5), mutating the shared counts and T. */
void rlb_health_decay(struct rlb_cluster *c, int64_t now);
/*
 * Current stored count of replica i, without decay. With `decayed`, the
 * value the next selection at `now` would see, without changing anything.
 */
uint64_t rlb_health_errors(const struct rlb_cluster *c, size_t i, int64_t now,
			   bool decayed);
/* T of the cluster (0 if unset). */
int64_t rlb_health_decay_time(const struct rlb_cluster *c);
/*
 * Both counts of replica i from one slot lookup, as rlb_health_errors()
 * and rlb_health_slowdowns() give them (a selection reads both).
 */
void rlb_health_counts(const struct rlb_cluster *c, size_t i, int64_t now,
		       bool decayed, uint64_t *errors, uint64_t *slowdowns);
/*
 * What a selection at `now` reads (design.md §5): the decay first, as
 * rlb_health_decay() (peek: nothing written, the counts decayed as the
 * next selection would see them instead), then the counts of replicas
 * 0..n-1 into errors[] and slowdowns[], with one look at the state for
 * all. True when the counts decide nothing: no replica has more errors
 * than max_ignored_errors, none has slowdowns.
 */
bool rlb_health_select_counts(struct rlb_cluster *c, size_t n, int64_t now,
			      bool peek, uint64_t *errors, uint64_t *slowdowns);
/* Replica i's slowdown count, as rlb_health_errors() gives errors. */
uint64_t rlb_health_slowdowns(const struct rlb_cluster *c, size_t i,
			      int64_t now, bool decayed);
/*
 * Add n errors to replica i, capped at the cluster's error_cap, or n
 * slowdowns (uncapped). Each first applies the decay owed at `now`, as a
 * selection would, so a late failure is never forgiven before it is seen
 * (design.md §5).
 */
void rlb_health_add_errors(struct rlb_cluster *c, size_t i, uint64_t n,
			   int64_t now);
void rlb_health_add_slowdowns(struct rlb_cluster *c, size_t i, uint64_t n,
			      int64_t now);
/*
 * As those, for the replica of c with this identity that c no longer
 * has (a DNS member that left after its address was handed out, design.md
 * §15.4): its slot is found, or claimed, by identity.
 */
void rlb_health_add_by_identity(struct rlb_cluster *c, uint64_t identity,
				uint64_t n, int64_t now, bool slowdowns);
/* Zero replica i's counts, or every replica's when i == SIZE_MAX. */
void rlb_health_reset(struct rlb_cluster *c, size_t i);
/* Round-robin counter: fetch-and-increment, or just read. */
uint64_t rlb_health_rr_next(struct rlb_cluster *c);
uint64_t rlb_health_rr_peek(const struct rlb_cluster *c);
/* Seconds until max(errors, slowdowns) of replica i decays to 0 (§6). */
int64_t rlb_health_recovery_seconds(const struct rlb_cluster *c, size_t i,
				    int64_t now);
/*
 * Remove state from cfg's state directory (replicalbctl remove-state,
 * design.md §12.10): the name files of clusters that cfg does not have
 * (with `all`, of every cluster) and the segments they name, files set
 * aside or left half-written, and segments made for the directory that
 * nobody has attached and no name file names. Says what it removed on
 * out (NULL: nothing). Returns the number of things removed, or -1 with
 * errno when the directory cannot be read. Creates nothing.
 */
int rlb_health_remove_state(const struct rlb_config *cfg, bool all, FILE *out);

/* ------------------------------------------------------------------ */
/* health_traffic.c */

/*
 * Traffic of one replica (design.md §12.13): connects established and
 * failed since the state was made, and its connections open now:
 * in_flight counts the ledger's entries that a live process holds (what
 * status shows), where the counter a selection reads
 * (rlb_health_in_flight()) may still hold a dead process's share until a
 * survivor reclaims it (within about a second of the next operation on
 * the cluster).
 */
struct rlb_traffic {
	uint64_t connects;
	uint64_t failures;
	uint64_t in_flight;
};
void rlb_health_traffic(const struct rlb_cluster *c, size_t i,
			struct rlb_traffic *t);
/*
 * Connections open now to replicas 0..n-1 of c, host-wide, into out[]:
 * one load each (what least_request reads at every selection).
 */
void rlb_health_in_flight(const struct rlb_cluster *c, size_t n, uint64_t *out);
/* A connect to replica i established (ok) or failed: counted. */
void rlb_health_count_connect(struct rlb_cluster *c, size_t i, bool ok);
/*
 * The connection ledger. Take: the socket of inode ino starts a connect
 * to replica i; it is in flight until the last process that holds it lets
 * go. Drop: this process lets go of it (its last descriptor closed, its
 * connect failed). A process that dies holding connections has them
 * given back by a survivor: rlb_health_reclaim(), which the once-a-second
 * follow of the state calls.
 *
 * Fork, in three steps, so that a parent that closes its copy as soon as
 * fork() returns never drops a connection its child still holds: before
 * the fork (step 0) the parent claims a lease row for the child, still
 * in its own name, and makes it a holder of ino; after it, the parent
 * (step 1) forgets that row, and the child (step 2) takes it over in its
 * own name. A fork that failed leaves the row to the parent until it
 * exits. All keep errno; none waits.
 */
bool rlb_health_conn_take(struct rlb_cluster *c, size_t i, uint64_t ino);
void rlb_health_conn_drop(struct rlb_cluster *c, uint64_t ino);
/*
 * SCM_RIGHTS. Send: once a descriptor of ino has left this process in a
 * message, a hold in transit is added in this process's name, so that the
 * sender's close cannot drop the connection before the receiver has it.
 * Receive: this process holds ino too, and takes over one hold in transit;
 * false when no process holds it, or c has no state on this host (nothing is
 * made for it). A hold never received is given up after HEALTH_TRANSIT_MS (10
 * s), or when its sender dies.
 */
void rlb_health_conn_send(struct rlb_cluster *c, uint64_t ino);
bool rlb_health_conn_receive(struct rlb_cluster *c, uint64_t ino,
			     uint64_t *replica);
/*
 * Whether c has state on this host already: attached here, or its state
 * file exists in the state directory (nothing is made or attached).
 */
bool rlb_health_has_state(const struct rlb_cluster *c);
void rlb_health_conn_fork(struct rlb_cluster *c, uint64_t ino, int step);
/* Give back what dead processes held: the number of rows freed. */
int rlb_health_reclaim(struct rlb_cluster *c);

/* ------------------------------------------------------------------ */
/* health_gc.c */

/*
 * Remove the user's segments whose state directory is gone (replicalbctl
 * gc, design.md §12.11): ours (owner and creator), nobody attached, made
 * in this mount namespace for a directory whose path they keep and where
 * that directory is no more. Says what it removed on out (NULL: nothing).
 * Returns the number removed. Creates nothing.
 */
int rlb_health_gc(FILE *out);

/* ------------------------------------------------------------------ */
/* health_side.c */

/*
 * Side files of cluster `cluster` in state directory dir: NAME.EXT beside
 * its state file (NAME as rlb_dir_file_name() makes it), under the state
 * files' rules (design.md §5.8). rlb_health_side_read() reads at most cap
 * bytes: their number, or -1 when there is none or it is not to be read;
 * a file that is not ours, is writable by others, a symlink, not a
 * regular file, or over cap is set aside (NAME.EXT.corrupt-TIME-PID) with
 * one warning. rlb_health_side_write() replaces it whole (a new file,
 * then rename()), making dir when it is missing: 0 or -1.
 * rlb_health_side_set_aside() sets a file the caller found not valid
 * aside, saying why. No lock of libc's is taken; errno is kept.
 */
ssize_t rlb_health_side_read(const char *dir, const char *cluster,
			     const char *ext, char *buf, size_t cap);
int rlb_health_side_write(const char *dir, const char *cluster, const char *ext,
			  const void *data, size_t len);
void rlb_health_side_set_aside(const char *dir, const char *cluster,
			       const char *ext, const char *why);

/*
 * Save the counts of cfg's clusters whose state is a memfd that this
 * process changed since they were last saved (design.md §12.12): at exit,
 * before exec, and after replicalbctl changed them, so that the next
 * process finds them when no process holds the memfd any more. Nothing
 * is done (no call) when this process holds no memfd. errno is kept.
 */
void rlb_health_save_changed(const struct rlb_config *cfg);

#endif /* RLB_STATE_H */
