/* probe.c - one pass of TCP connects to every replica of a config, each
 * within its cluster's connect_timeout_ms, all at once; a replica that
 * connects on none of its addresses counts one error, as a failed
 * connect of a program's would (design.md §6, replicalbctl probe). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlb.h"

#define PROBE_MAX_ADDRS 8 /* addresses tried per replica */

/* One connect in flight. */
struct attempt {
	struct rlb_probe_result *r; /* the replica's result */
	int fd;			    /* -1: finished */
	int64_t deadline_ms;
	struct sockaddr_storage addr;
	socklen_t len;
};

static void addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *p =
		sa->sa_family == AF_INET6
			? (const void *)&((const struct sockaddr_in6 *)sa)
				  ->sin6_addr
			: (const void *)&((const struct sockaddr_in *)sa)
				  ->sin_addr;

	if (!inet_ntop(sa->sa_family, p, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/*
 * The addresses of replica r on port: its literals, else the real
 * resolver's answer (never cached: a probe looks afresh). Returns how
 * many went into out; *gai is the EAI_* code when the name does not
 * resolve.
 */
static int replica_addresses(const struct rlb_replica *r, int port,
			     struct sockaddr_storage *out, socklen_t *lens,
			     int *gai)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV},
			*res = NULL, *ai;
	char service[8];
	int n = 0, rc;

	for (size_t k = 0; k < r->nliteral && n < PROBE_MAX_ADDRS; k++) {
		const struct rlb_addr *lit = &r->literal[k];

		memset(&out[n], 0, sizeof(out[n]));
		if (lit->family == AF_INET) {
			struct sockaddr_in *in = (void *)&out[n];

			in->sin_family = AF_INET;
			in->sin_port = htons((uint16_t)port);
			memcpy(&in->sin_addr, lit->bytes, 4);
			lens[n++] = sizeof(*in);
		} else {
			struct sockaddr_in6 *in6 = (void *)&out[n];

			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons((uint16_t)port);
			memcpy(&in6->sin6_addr, lit->bytes, 16);
			lens[n++] = sizeof(*in6);
		}
	}
	if (r->nliteral)
		return n;
	snprintf(service, sizeof(service), "%d", port);
	rc = rlb_libc()->getaddrinfo(r->host, service, &hints, &res);
	if (rc) {
		*gai = rc;
		return 0;
	}
	for (ai = res; ai && n < PROBE_MAX_ADDRS; ai = ai->ai_next) {
		if (ai->ai_addrlen > sizeof(out[n]))
			continue;
		memcpy(&out[n], ai->ai_addr, ai->ai_addrlen);
		lens[n++] = ai->ai_addrlen;
	}
	rlb_libc()->freeaddrinfo(res);
	return n;
}

/* Start a non-blocking connect; false when it finished at once. */
static bool attempt_start(struct attempt *a)
{
	int fd = socket(a->addr.ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	a->fd = -1;
	if (fd < 0) {
		a->r->err = errno;
		return false;
	}
	if (rlb_libc()->connect(fd, (struct sockaddr *)&a->addr, a->len) == 0 ||
	    errno == EINPROGRESS) {
		a->fd = fd;
		return true;
	}
	a->r->err = errno;
	rlb_libc()->close(fd);
	return false;
}

/* An attempt is over: err 0 means connected. */
static void attempt_end(struct attempt *a, int err, int64_t now)
{
	struct rlb_probe_result *r = a->r;

	rlb_libc()->close(a->fd);
	a->fd = -1;
	if (r->ok)
		return;
	if (err == 0) {
		r->ok = true;
		r->err = 0;
		r->ms = now - r->start_ms;
		addr_text((struct sockaddr *)&a->addr, r->address,
			  sizeof(r->address));
		return;
	}
	r->err = err;
	addr_text((struct sockaddr *)&a->addr, r->address, sizeof(r->address));
}

/* Poll every attempt until it connects, fails or passes its deadline. */
static void run_attempts(struct attempt *att, size_t n)
{
	struct pollfd *pfd = calloc(n ? n : 1, sizeof(*pfd));
	size_t *map = calloc(n ? n : 1, sizeof(*map));

	if (!pfd || !map)
		goto out_free;
	for (;;) {
		int64_t now = rlb_monotonic_ms(), wait = -1;
		size_t live = 0;

		for (size_t i = 0; i < n; i++) {
			struct attempt *a = &att[i];

			if (a->fd < 0)
				continue;
			if (now >= a->deadline_ms) {
				attempt_end(a, ETIMEDOUT, now);
				continue;
			}
			if (wait < 0 || a->deadline_ms - now < wait)
				wait = a->deadline_ms - now;
			pfd[live].fd = a->fd;
			pfd[live].events = POLLOUT;
			pfd[live].revents = 0;
			map[live++] = i;
		}
		if (live == 0)
			break;
		if (poll(pfd, live, (int)wait) < 0 && errno != EINTR)
			break;
		now = rlb_monotonic_ms();
		for (size_t k = 0; k < live; k++) {
			struct attempt *a = &att[map[k]];
			int err = 0;
			socklen_t len = sizeof(err);

			if (!pfd[k].revents)
				continue;
			if (rlb_libc()->getsockopt(a->fd, SOL_SOCKET, SO_ERROR,
						   &err, &len) != 0)
				err = errno;
			attempt_end(a, err, now);
		}
	}
out_free:
	for (size_t i = 0; i < n; i++)
		if (att[i].fd >= 0)
			attempt_end(&att[i], ETIMEDOUT, rlb_monotonic_ms());
	free(pfd);
	free(map);
}

struct rlb_probe_result *rlb_probe(struct rlb_config *cfg, size_t *nresults)
{
	struct rlb_probe_result *res;
	struct attempt *att;
	size_t n = 0, natt = 0;

	for (size_t ci = 0; ci < cfg->nclusters; ci++)
		n += cfg->clusters[ci].nreplicas;
	res = calloc(n ? n : 1, sizeof(*res));
	att = calloc(n ? n * PROBE_MAX_ADDRS : 1, sizeof(*att));
	if (!res || !att) {
		free(res);
		free(att);
		return NULL;
	}
	n = 0;
	for (size_t ci = 0; ci < cfg->nclusters; ci++) {
		struct rlb_cluster *c = &cfg->clusters[ci];

		for (size_t i = 0; i < c->nreplicas; i++) {
			struct rlb_probe_result *r = &res[n++];
			struct sockaddr_storage addrs[PROBE_MAX_ADDRS];
			socklen_t lens[PROBE_MAX_ADDRS];
			int got;

			r->cluster = ci;
			r->replica = i;
			r->port = c->replicas[i].port;
			r->start_ms = rlb_monotonic_ms();
			if (!r->port) {
				r->err = EDESTADDRREQ; /* the program's port */
				continue;
			}
			got = replica_addresses(&c->replicas[i], r->port, addrs,
						lens, &r->gai);
			if (got == 0) {
				if (!r->gai)
					r->gai = EAI_NONAME;
				continue;
			}
			for (int k = 0; k < got; k++) {
				struct attempt *a = &att[natt];

				a->r = r;
				a->addr = addrs[k];
				a->len = lens[k];
				a->deadline_ms =
					r->start_ms + c->s.connect_timeout_ms;
				if (attempt_start(a))
					natt++;
				else
					addr_text((struct sockaddr *)&addrs[k],
						  r->address,
						  sizeof(r->address));
			}
		}
	}
	run_attempts(att, natt);
	free(att);
	/* Count what a program's connect (or lookup) would have counted. */
	for (size_t k = 0; k < n; k++) {
		struct rlb_probe_result *r = &res[k];
		struct rlb_cluster *c = &cfg->clusters[r->cluster];
		bool counts = !r->ok && (r->gai ? r->gai == EAI_NONAME ||
							  r->gai == EAI_AGAIN ||
							  r->gai == EAI_FAIL
						: r->err != EDESTADDRREQ);

		if (counts) {
			rlb_health_add_errors(c, r->replica, 1, rlb_now());
			r->counted = true;
		}
	}
	*nresults = n;
	return res;
}
