/* nss/nss.h - the NSS module, libnss_replicalb.so.2 (design.md §16): a
 * product of the session (session/session.h) that glibc loads for
 * `hosts: files replicalb dns`, so that every dynamically linked program,
 * preloaded or not, resolves virtual names to replicas in policy order.
 * It takes round-robin turns and charges nothing (RLB_STATE_TURN), and
 * never re-enters NSS: replica host names are read from /etc/hosts or
 * asked of DNS by the library's own stub (resolver.c). */
#ifndef RLB_NSS_H
#define RLB_NSS_H

#include "session/session.h"

/* ------------------------------------------------------------------ */
/* resolver.c */

/*
 * How the module resolves a replica's host name (struct rlb_resolver):
 * an IP literal as itself; else the first match in /etc/hosts (its
 * addresses of the family asked); else A and AAAA (as the family asks)
 * of the stub resolver over resolv.conf, asked together. Never through
 * NSS, never cached (nscd or a local resolver caches). Keeps errno.
 */
extern const struct rlb_resolver rlb_nss_resolver;
/* Test seam: the hosts file read (NULL: /etc/hosts). */
void rlb_nss_hosts_file(const char *path);
/* This host's name without NSS: gethostname(), and the first name of its
 * line in /etc/hosts that has a dot, as glibc's files source would give. */
void rlb_nss_local_fqdn(char *buf, size_t len);

#endif /* RLB_NSS_H */
