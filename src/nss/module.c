/* module.c - the entry points glibc's NSS calls in libnss_replicalb.so.2
 * (design.md §16), after systemd's nss-myhostname and nss-resolve: one
 * core (lookup(), formatted by engine/format.c) behind gethostbyname4_r,
 * gethostbyname3_r, and the _2_r and _r forms built on 3_r. A name that
 * is not virtual is NOTFOUND at once, so the next source answers it. On
 * a short buffer: TRYAGAIN with ERANGE, so that the caller grows it.
 * Signals are blocked across the parts of a call that take locks or
 * wait, errno is kept, *ttlp is 0. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <nss.h>
#include <signal.h>
#include <string.h>

#include "nss/nss.h"

#define RLB_NSS_EXPORT __attribute__((visibility("default")))

/* The module takes turns and charges nothing, and finds the host's name
 * without NSS. */
const struct rlb_session_product rlb_session_product = {
	.mode = RLB_STATE_TURN,
	.init = NULL,
	.local_fqdn = rlb_nss_local_fqdn,
};

/* What a format step gives back: 0, ERANGE or ENOENT. */
typedef int (*format_fn)(const struct rlb_addr_list *l, const char *hname,
			 const char *name, void *out, char *buf, size_t len);

/*
 * errno kept across one call of the module, and signals blocked across
 * every part of it that takes a lock, waits or reads a file: the
 * session's start and reload, DNS membership, a replica's name
 * resolved, the state's once-a-second follow (systemd's rule, so that a handler
 * that interrupts the call never finds a lock held by the thread it
 * interrupted). The common call, a cached snapshot and replicas that are IP
 * literals, takes no lock and makes no system call, so it leaves the mask
 * alone: two pthread_sigmask() system calls would be most of its cost.
 */
struct guard {
	sigset_t old;
	bool blocked;
	int saved_errno;
};

static void guard_enter(struct guard *g)
{
	g->saved_errno = errno;
	g->blocked = false;
}

/* From here on, signals blocked (once). */
static void guard_block(struct guard *g)
{
	sigset_t all;

	if (g->blocked)
		return;
	sigfillset(&all);
	g->blocked = pthread_sigmask(SIG_BLOCK, &all, &g->old) == 0;
}

/*
 * errno back as it was, then the status's errno: glibc passes &errno as
 * errnop, and reads ERANGE there to grow the buffer.
 */
static void guard_leave(struct guard *g, enum nss_status st, int err,
			int *errnop)
{
	if (g->blocked)
		pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	errno = g->saved_errno;
	if (st != NSS_STATUS_SUCCESS)
		*errnop = err;
}

/* Addresses an answer holds without an allocation. */
#define LOOKUP_INLINE_ADDRS 8

/*
 * The answer for name in family af (AF_UNSPEC: both), formatted by fmt
 * into out and buf while the snapshot is held (hname lives in it);
 * signals blocked by g where it takes the slow paths.
 */
static enum nss_status lookup(struct guard *g, const char *name, int af,
			      format_fn fmt, void *out, char *buf,
			      size_t buflen, int *errnop, int *herrnop)
{
	struct rlb_dns_addr inline_addrs[LOOKUP_INLINE_ADDRS];
	struct rlb_addr_list got = RLB_ADDR_LIST_IN(inline_addrs);
	struct rlb_answer_sink sink = rlb_collect_sink(&got);
	struct addrinfo q = {.ai_family = af, .ai_socktype = SOCK_STREAM};
	enum nss_status st = NSS_STATUS_NOTFOUND;
	struct rlb_snapshot *snap;
	struct rlb_cluster *c;
	const char *hname = NULL;
	bool settled;
	int rc;

	*errnop = ENOENT;
	*herrnop = HOST_NOT_FOUND;
	if (!name)
		return NSS_STATUS_NOTFOUND;
	snap = rlb_session_acquire_settled(&settled);
	if (!settled) {
		guard_block(g);
		snap = rlb_session_acquire();
	}
	if (!snap)
		return NSS_STATUS_NOTFOUND;
	c = rlb_config_find(snap->cfg, name);
	/* Not all literals: the resolver reads /etc/hosts or asks DNS;
	 * the state's once-a-second look at its name file is due. */
	if (c && (c->srv || c->dns || !c->view || !c->view->all_literal ||
		  !rlb_health_settled(c, rlb_op_monotonic_ms())))
		guard_block(g);
	if (c && (c->srv || c->dns)) {
		c = rlb_session_members(c, &snap);
		if (!c)
			return NSS_STATUS_NOTFOUND; /* no reference held */
	}
	if (!c)
		goto out;
	rc = rlb_answer(c, NULL, &q, false, &rlb_nss_resolver, &sink, &hname);
	if (rc == EAI_MEMORY) {
		*errnop = ENOMEM;
		*herrnop = NO_RECOVERY;
		st = NSS_STATUS_UNAVAIL;
		goto out;
	}
	if (rlb_addr_list_unique(&got, af) == 0) {
		/* A DNS cluster whose DNS never answered: try again. */
		if (c->nreplicas == 0 && rc == EAI_AGAIN) {
			*errnop = EAGAIN;
			*herrnop = TRY_AGAIN;
			st = NSS_STATUS_TRYAGAIN;
		}
		goto out;
	}
	rc = fmt(&got, hname, name, out, buf, buflen);
	if (rc == ERANGE) {
		/* Never NO_RECOVERY: the caller grows the buffer. */
		*errnop = ERANGE;
		*herrnop = NETDB_INTERNAL;
		st = NSS_STATUS_TRYAGAIN;
	} else if (rc == 0) {
		*errnop = 0;
		*herrnop = NETDB_SUCCESS;
		st = NSS_STATUS_SUCCESS;
	}
out:
	rlb_addr_list_free(&got);
	rlb_session_release(snap);
	return st;
}

static int fmt_gaih(const struct rlb_addr_list *l, const char *hname,
		    const char *name, void *out, char *buf, size_t len)
{
	(void)name;
	/* Every tuple carries the canonical name: the first replica's. */
	return rlb_format_gaih(l, hname, out, buf, len);
}

struct host_out {
	struct hostent *host;
	int af;
	char **canonp;
};

static int fmt_hostent(const struct rlb_addr_list *l, const char *hname,
		       const char *name, void *out, char *buf, size_t len)
{
	struct host_out *h = out;
	int rc = rlb_format_hostent(l, h->af, hname, name, h->host, buf, len);

	if (rc == 0 && h->canonp)
		*h->canonp = h->host->h_name;
	return rc;
}

RLB_NSS_EXPORT enum nss_status
_nss_replicalb_gethostbyname4_r(const char *name, struct gaih_addrtuple **pat,
				char *buffer, size_t buflen, int *errnop,
				int *herrnop, int32_t *ttlp)
{
	struct guard g;
	enum nss_status st;
	int err;

	guard_enter(&g);
	st = lookup(&g, name, AF_UNSPEC, fmt_gaih, pat, buffer, buflen, &err,
		    herrnop);
	if (st == NSS_STATUS_SUCCESS && ttlp)
		*ttlp = 0;
	guard_leave(&g, st, err, errnop);
	return st;
}

RLB_NSS_EXPORT enum nss_status
_nss_replicalb_gethostbyname3_r(const char *name, int af, struct hostent *host,
				char *buffer, size_t buflen, int *errnop,
				int *herrnop, int32_t *ttlp, char **canonp)
{
	struct host_out out = {host, af, canonp};
	struct guard g;
	enum nss_status st;
	int err;

	guard_enter(&g);
	if (af != AF_INET && af != AF_INET6) {
		err = EAFNOSUPPORT;
		*herrnop = NO_DATA;
		st = NSS_STATUS_UNAVAIL;
	} else {
		st = lookup(&g, name, af, fmt_hostent, &out, buffer, buflen,
			    &err, herrnop);
	}
	if (st == NSS_STATUS_SUCCESS && ttlp)
		*ttlp = 0;
	guard_leave(&g, st, err, errnop);
	return st;
}

RLB_NSS_EXPORT enum nss_status
_nss_replicalb_gethostbyname2_r(const char *name, int af, struct hostent *host,
				char *buffer, size_t buflen, int *errnop,
				int *herrnop)
{
	return _nss_replicalb_gethostbyname3_r(name, af, host, buffer, buflen,
					       errnop, herrnop, NULL, NULL);
}

RLB_NSS_EXPORT enum nss_status
_nss_replicalb_gethostbyname_r(const char *name, struct hostent *host,
			       char *buffer, size_t buflen, int *errnop,
			       int *herrnop)
{
	return _nss_replicalb_gethostbyname3_r(name, AF_INET, host, buffer,
					       buflen, errnop, herrnop, NULL,
					       NULL);
}
