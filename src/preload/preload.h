/* preload/preload.h - the preload library, a product of the session
 * (session/session.h): its wiring and charging (runtime.c), answers
 * (resolve.c), the DNS cache (dnscache.c) and connect tracking (track_*.c). */
#ifndef RLB_PRELOAD_H
#define RLB_PRELOAD_H

#include "session/session.h"

/* ------------------------------------------------------------------ */
/* runtime.c: the preload as a product of the session (session.h) */

/*
 * At exit and before exec: the counts of memfd state this process changed
 * are saved for the next process (rlb_health_save_changed()). Nothing
 * when the session never started. Keeps errno.
 */
void rlb_runtime_save_state(void);
/*
 * Count failure f against its replicas in the snapshot in force (what
 * tracking reports; see rlb_snapshot_charge()). Keeps errno.
 */
void rlb_runtime_charge(const struct rlb_failure *f);
/* rlb_track_ops.receive over the snapshot in force. Keeps errno. */
size_t rlb_runtime_receive(uint64_t ino, struct rlb_owner *owners);
/* rlb_track_ops.traffic over the snapshot in force. Keeps errno. */
void rlb_runtime_traffic(const struct rlb_owner *owners, size_t n, uint64_t ino,
			 enum rlb_conn_event ev);
/* rlb_track_ops.next_address over the snapshot in force. */
bool rlb_runtime_next_address(const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen);

/* ------------------------------------------------------------------ */
/* resolve.c */

/*
 * name, which is no virtual name of cfg, passes through: at debug level,
 * say so when it is close to one ("did you mean"). Keeps errno.
 */
void rlb_resolve_near_miss(const struct rlb_config *cfg, const char *name);
/*
 * getaddrinfo() of virtual name of cluster c (design.md §4): a list in
 * selection order, allocated in glibc's layout so that libc's
 * freeaddrinfo() frees it. Returns 0 or an EAI_* code.
 */
int rlb_resolve_getaddrinfo(struct rlb_cluster *c, const char *service,
			    const struct addrinfo *hints,
			    struct addrinfo **res);
/*
 * gethostbyname2_r() of a virtual name: fills ret using only buf, which
 * may start at any address (the pointer arrays are aligned inside it).
 * Returns 0, ERANGE (buffer too small) or another errno value, and sets
 * *result, *h_errnop and errno as glibc does.
 */
int rlb_resolve_gethostbyname(struct rlb_cluster *c, const char *name, int af,
			      struct hostent *ret, char *buf, size_t buflen,
			      struct hostent **result, int *h_errnop);
/*
 * gethostbyname2() of a virtual name: the result lives in one static
 * buffer shared by all threads, as glibc's does. Sets h_errno.
 */
struct hostent *rlb_resolve_gethostbyname_static(struct rlb_cluster *c,
						 const char *name, int af);
/*
 * connect_failover (design.md §5.4): the address of the best replica not
 * in `tried` of the first cluster of `tried` found in cfg that fails
 * over, by a selection that changes nothing (peek), in failed's family,
 * with the replica's port, else failed's. Handed out (tracked). False
 * when no replica is left.
 */
bool rlb_resolve_next_address(struct rlb_config *cfg,
			      const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen);
/* Fork handler hooks for the static hostent's lock (runtime.c). */
void rlb_resolve_fork_lock(void);
void rlb_resolve_fork_unlock(void);

/* ------------------------------------------------------------------ */
/* dnscache.c */

/*
 * The real getaddrinfo's answer to (host, service, q), from the
 * per-process cache while younger than ttl_s seconds (pinned: forever;
 * ttl_s <= 0 and not pinned: never cached). Sets *fresh when the resolver
 * was really asked. Returns a malloc'd copy (free()), or NULL when out of
 * memory. The cache is bounded in entries and bytes, and a service no
 * real service looks like is never kept.
 */
struct rlb_dns_answer *rlb_dnscache_ask(const char *host, const char *service,
					const struct addrinfo *q, int64_t ttl_s,
					bool pinned, bool *fresh);
/* Drop every cached answer (tests). */
void rlb_dnscache_flush(void);
/* What the cached questions and answers take now, in bytes (tests). */
size_t rlb_dnscache_bytes(void);
/* Fork handler hooks for the cache's lock (runtime.c). */
void rlb_dnscache_fork_lock(void);
void rlb_dnscache_fork_unlock(void);

/* ------------------------------------------------------------------ */
/* track.c */

/*
 * Remember that address sa was handed out for replica i of cluster c, so
 * that a failed connect to it counts against that replica.
 */
void rlb_track_handout(const struct rlb_cluster *c, size_t i,
		       const struct sockaddr *sa, socklen_t len);
/* The same for literal lit of replica i with port (network order). */
void rlb_track_handout_literal(const struct rlb_cluster *c, size_t i,
			       const struct rlb_addr *lit, uint16_t port);
/* The same for replica i's one literal, IPv4 addr (network order). */
void rlb_track_handout_v4(const struct rlb_cluster *c, size_t i, uint32_t addr,
			  uint16_t port);
/*
 * What tracking asks of its owner (runtime.c registers them at start):
 * charge() counts a failure against its replicas; traffic() tells the
 * host-wide counts what the connection ledger saw; next_address() gives,
 * for connect_failover, the address of the best replica of the failed
 * one's cluster not among `tried`, in the family of `failed` and with the
 * port resolution would have given (handed out, so tracked), or false.
 * save_state() saves what must outlive the process, at exit and before
 * exec (rlb_runtime_save_state()).
 */
struct rlb_track_ops {
	void (*charge)(const struct rlb_failure *f);
	/* The ledger's events (rlb_snapshot_traffic()). */
	void (*traffic)(const struct rlb_owner *owners, size_t n, uint64_t ino,
			enum rlb_conn_event ev);
	/* A descriptor of socket ino received (rlb_snapshot_receive()). */
	size_t (*receive)(uint64_t ino, struct rlb_owner *owners);
	bool (*next_address)(const struct rlb_owner *tried, size_t ntried,
			     const struct sockaddr *failed, socklen_t len,
			     struct sockaddr_storage *out, socklen_t *outlen);
	void (*save_state)(void);
};
void rlb_track_set_ops(const struct rlb_track_ops *ops);
/* Fork handler hooks for tracking's one lock (runtime.c). */
void rlb_track_fork_lock(void);
void rlb_track_fork_unlock(void);
/* In a forked child: forget the parent's pending attempts (runtime.c). */
void rlb_track_after_fork_child(void);

/*
 * Hook bodies: same contract as the libc functions. Connects to replica
 * addresses are bounded, fail over when asked, and report what counts
 * (design.md §5).
 */
int rlb_track_connect(int fd, const struct sockaddr *sa, socklen_t len);
/* socket(): when it was made, against a fork's copies (design.md
 * §5.10). Keeps errno. */
int rlb_track_socket(int domain, int type, int protocol);
/* setsockopt(): an option a hedge cannot copy is remembered (design.md
 * §5.10). */
int rlb_track_setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len);
int rlb_track_getsockopt(int fd, int level, int name, void *val,
			 socklen_t *len);
int rlb_track_close(int fd);
/* The descriptor calls (track_ledger.c): dup, dup2 (two) or dup3,
 * fcntl (F_DUPFD*), close_range. */
int rlb_track_dup(int fd);
int rlb_track_dup3(int fd, int newfd, int flags, bool two);
int rlb_track_fcntl(int fd, int cmd, long arg);
int rlb_track_close_range(unsigned first, unsigned last, int flags);
/* sendmsg, recvmsg: descriptors of connections passed with SCM_RIGHTS. */
ssize_t rlb_track_sendmsg(int fd, const struct msghdr *msg, int flags);
/* After a recvmsg() that filled msg: the connections it carried. Keeps
 * errno. */
void rlb_track_recvmsg_done(const struct msghdr *msg);
/*
 * The ledger around a fork (rlb_health_conn_fork()): step 0 before it,
 * with no lock of ours held; 1 in the parent after it; 2 in the child,
 * last, with every lock free again: the child holds the parent's
 * connections too.
 */
void rlb_track_ledger_fork(int step);
/*
 * Before an exec: the connections that only close-on-exec descriptors
 * hold end with this image, and are let go (design.md §11.8). An exec
 * that then fails leaves them open and uncounted. Keeps errno.
 */
void rlb_track_before_exec(void);
/*
 * Settle attempts the program dropped without our close() (a raw close
 * system call, longjmp): each older than its bound counts one error.
 * Cheap when nothing is pending; resolution calls it.
 */
void rlb_track_sweep(void);
/* Whether connect/close must look at anything at all (cheap). */
bool rlb_track_active(void);

#endif /* RLB_PRELOAD_H */
