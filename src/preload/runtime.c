/* runtime.c - the preload library as a product of the session
 * (session/session.h): its snapshots count everything (RLB_STATE_COUNT);
 * at the start it adds its locks to the fork handler and wires connect
 * tracking to the snapshot in force, where tracking's reports are
 * charged. */
#include "config.h"

#include <errno.h>

#include "preload/preload.h"

void rlb_runtime_charge(const struct rlb_failure *f)
{
	struct rlb_snapshot *snap;

	if (f->n == 0 || !(snap = rlb_session_acquire()))
		return;
	rlb_snapshot_charge(snap, f);
	rlb_session_release(snap);
}

size_t rlb_runtime_receive(uint64_t ino, struct rlb_owner *owners)
{
	struct rlb_snapshot *snap;
	int saved = errno;
	size_t n = 0;

	if ((snap = rlb_session_acquire())) {
		n = rlb_snapshot_receive(snap, ino, owners);
		rlb_session_release(snap);
	}
	errno = saved;
	return n;
}

void rlb_runtime_traffic(const struct rlb_owner *owners, size_t n, uint64_t ino,
			 enum rlb_conn_event ev)
{
	struct rlb_snapshot *snap;
	int saved = errno;

	if (n && (snap = rlb_session_acquire())) {
		rlb_snapshot_traffic(snap, owners, n, ino, ev);
		rlb_session_release(snap);
	}
	errno = saved;
}

bool rlb_runtime_next_address(const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen)
{
	struct rlb_snapshot *snap = rlb_session_acquire();
	bool found;

	if (!snap)
		return false;
	found = rlb_resolve_next_address(snap->cfg, tried, ntried, failed, len,
					 out, outlen);
	rlb_session_release(snap);
	return found;
}

void rlb_runtime_save_state(void)
{
	struct rlb_snapshot *snap = rlb_session_current();

	if (snap)
		rlb_health_save_changed(snap->cfg);
	rlb_snapshot_put(snap);
}

/* What connect tracking reports to and asks of the snapshot's owner. */
static const struct rlb_track_ops track_ops = {
	.charge = rlb_runtime_charge,
	.traffic = rlb_runtime_traffic,
	.receive = rlb_runtime_receive,
	.next_address = rlb_runtime_next_address,
	.save_state = rlb_runtime_save_state,
};

/* The ledger's fork steps (rlb_track_ledger_fork()). */
static void ledger_fork_prepare(void)
{
	rlb_track_ledger_fork(0);
}

static void ledger_fork_parent(void)
{
	rlb_track_ledger_fork(1);
}

/* Last, with every lock free again: the child holds the parent's
 * connections too (design.md §11.8). */
static void ledger_fork_child(void)
{
	rlb_track_ledger_fork(2);
}

/* The pending connects are the parent's to count; then the lock. */
static void track_fork_child(void)
{
	rlb_track_after_fork_child();
	rlb_track_fork_unlock();
}

static void preload_init(void)
{
	rlb_session_atfork(RLB_FORK_LEDGER, ledger_fork_prepare,
			   ledger_fork_parent, ledger_fork_child);
	rlb_session_atfork(RLB_FORK_HOSTENT, rlb_resolve_fork_lock,
			   rlb_resolve_fork_unlock, rlb_resolve_fork_unlock);
	rlb_session_atfork(RLB_FORK_DNSCACHE, rlb_dnscache_fork_lock,
			   rlb_dnscache_fork_unlock, rlb_dnscache_fork_unlock);
	rlb_session_atfork(RLB_FORK_TRACK, rlb_track_fork_lock,
			   rlb_track_fork_unlock, track_fork_child);
	rlb_track_set_ops(&track_ops);
}

const struct rlb_session_product rlb_session_product = {
	.mode = RLB_STATE_COUNT,
	.init = preload_init,
};
