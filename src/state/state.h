/* state/state.h - health shared by every process of the user (health.c). */
#ifndef RLB_STATE_H
#define RLB_STATE_H

#include "model/model.h"

/* ------------------------------------------------------------------ */
/* health.c */

/*
 * Shared health of one cluster: a memory-mapped state file (or a private
 * anonymous mapping as fallback) holding the decay time T, the
 * round-robin counter and one error counter per replica, keyed by replica
 * identity. All updates are lock-free atomics. The functions that start an
 * operation (decay, adds, reset, the peeks) first check, once per clock
 * tick, that the file is still whole and in place (design.md §12.9).
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
 * Attach shared state to every cluster of cfg (sets c->health). With
 * `prune`, state of replicas no longer in the cluster is dropped. Never
 * fails: problems fall back to private state and log one warning. Waits
 * at most about 1 ms in all for other processes' locks; a file that needs
 * the lock is attached later, by a selection (design.md §12.4).
 */
void rlb_health_attach_all(struct rlb_config *cfg, bool prune);
/*
 * Attach every cluster of cfg for reading only (replicalbctl status and
 * resolve --peek, design.md §6): an existing, valid state file is mapped
 * read-only and each replica's slot is looked up, never claimed; nothing
 * is created or written, no directory either. A replica without a slot
 * reads as 0 errors and 0 slowdowns; a missing or unusable file or
 * directory as all zeroes, with T unset. Every update (decay, adds,
 * reset, rr_next) does nothing on such state; rr_next returns the
 * counter unchanged. rlb_health_path() gives the file's path, with
 * " (absent)" when it does not exist yet and " (private)" when it cannot
 * be used.
 */
void rlb_health_attach_all_readonly(struct rlb_config *cfg);
void rlb_health_detach(struct rlb_health *h);
/* Path of the state file in use, or "(private)" (read-only: see above). */
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
/* Zero replica i's counts, or every replica's when i == SIZE_MAX. */
void rlb_health_reset(struct rlb_cluster *c, size_t i);
/* Round-robin counter: fetch-and-increment, or just read. */
uint64_t rlb_health_rr_next(struct rlb_cluster *c);
uint64_t rlb_health_rr_peek(const struct rlb_cluster *c);
/* Seconds until max(errors, slowdowns) of replica i decays to 0 (§6). */
int64_t rlb_health_recovery_seconds(const struct rlb_cluster *c, size_t i,
				    int64_t now);

#endif /* RLB_STATE_H */
