/* probe.c - one pass of TCP connects to every replica of a config, each
 * within its cluster's connect_timeout_ms, as many at once as the
 * descriptor limit allows; a replica that connects on none of its
 * addresses counts one error, as a failed connect of a program's would,
 * and a failure of ours counts nothing (design.md §6.1). A cluster with
 * an HTTP check (health_check_path) asks each connection GET PATH and
 * takes a 2xx status within health_check_timeout_ms as healthy; another
 * status, or none in time, fails it as a refused connect would
 * (ClickHouse's /replicas_status: 503 on a lagging replica). */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ctl/ctl.h"

#define PROBE_MAX_ADDRS 8 /* addresses tried per replica */
/* Descriptors left to everything else while a pass runs: the resolver,
 * the state files, logging. */
#define PROBE_FD_RESERVE 16

/* Bytes of an HTTP answer read for its status line. */
#define PROBE_HTTP_HEAD 128

/* One connect to one address of a replica, and its HTTP check. */
struct attempt {
	struct rlb_probe_result *r; /* the replica's result */
	int fd;			    /* open while connecting, else -1 */
	int64_t timeout_ms;	    /* the cluster's bound; 0: none */
	int64_t start_ms;	    /* when its own connect started */
	struct sockaddr_storage addr;
	socklen_t len;
	/* The HTTP check: path (NULL: none), Host, the answer's bound. */
	const char *path, *host;
	int64_t read_timeout_ms;
	bool reading;	 /* connected, waiting for the status line */
	int64_t sent_ms; /* when the request went */
	size_t got;	 /* bytes of head[] */
	char head[PROBE_HTTP_HEAD];
};

/* A replica's own addresses, found before any connect starts. */
struct target {
	struct rlb_probe_result *r;
	int64_t timeout_ms;
	const struct rlb_cluster *c; /* its HTTP check */
	const char *host;
	int n; /* addresses in addr[] */
	struct sockaddr_storage addr[PROBE_MAX_ADDRS];
	socklen_t len[PROBE_MAX_ADDRS];
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

/* Whether a failed lookup is the replica's: its name has no address. */
static bool replica_gai(int gai)
{
	return gai == EAI_NONAME || gai == EAI_AGAIN || gai == EAI_FAIL ||
	       gai == EAI_NODATA || gai == EAI_ADDRFAMILY;
}

/*
 * Local failures that a finished attempt may cure (a descriptor, a
 * buffer or a local port freed): retried while others are in flight.
 */
static bool retryable(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS ||
	       err == ENOMEM || err == EADDRNOTAVAIL || err == EAGAIN;
}

/*
 * The addresses of t's replica r on port: its literals, else the real
 * resolver's answer (never cached: a probe looks afresh). A lookup that
 * fails sets r->gai (and r->err for EAI_SYSTEM) and the outcome.
 */
static void target_resolve(struct target *t, const struct rlb_replica *r,
			   int port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV},
			*res = NULL, *ai;
	char service[8];
	int rc;

	t->n = 0;
	for (size_t k = 0; k < r->nliteral && t->n < PROBE_MAX_ADDRS; k++) {
		const struct rlb_addr *lit = &r->literal[k];
		struct sockaddr_storage *out = &t->addr[t->n];

		memset(out, 0, sizeof(*out));
		if (lit->family == AF_INET) {
			struct sockaddr_in *in = (void *)out;

			in->sin_family = AF_INET;
			in->sin_port = htons((uint16_t)port);
			memcpy(&in->sin_addr, lit->bytes, 4);
			t->len[t->n++] = sizeof(*in);
		} else {
			struct sockaddr_in6 *in6 = (void *)out;

			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons((uint16_t)port);
			memcpy(&in6->sin6_addr, lit->bytes, 16);
			t->len[t->n++] = sizeof(*in6);
		}
	}
	if (r->nliteral)
		return;
	snprintf(service, sizeof(service), "%d", port);
	errno = 0;
	rc = rlb_libc()->getaddrinfo(r->host, service, &hints, &res);
	if (rc) {
		t->r->gai = rc;
		t->r->err = rc == EAI_SYSTEM ? errno : 0;
		t->r->outcome =
			replica_gai(rc) ? RLB_PROBE_FAILED : RLB_PROBE_LOCAL;
		return;
	}
	for (ai = res; ai && t->n < PROBE_MAX_ADDRS; ai = ai->ai_next) {
		if (ai->ai_addrlen > sizeof(t->addr[0]))
			continue;
		memcpy(&t->addr[t->n], ai->ai_addr, ai->ai_addrlen);
		t->len[t->n++] = ai->ai_addrlen;
	}
	rlb_libc()->freeaddrinfo(res);
	if (t->n == 0) {
		t->r->gai = EAI_NONAME;
		t->r->outcome = RLB_PROBE_FAILED;
	}
}

/* An attempt is over: err 0 means connected. */
static void attempt_end(struct attempt *a, int err, int64_t now)
{
	struct rlb_probe_result *r = a->r;

	if (a->fd >= 0)
		rlb_libc()->close(a->fd);
	a->fd = -1;
	if (r->outcome == RLB_PROBE_OK)
		return;
	if (err == 0) {
		r->outcome = RLB_PROBE_OK;
		r->err = 0;
		r->ms = now - a->start_ms;
	} else if (rlb_errno_counts(err)) {
		r->err = err;
	} else {
		r->local_err = err;
	}
	addr_text((struct sockaddr *)&a->addr, r->address, sizeof(r->address));
}

/*
 * Start a's non-blocking connect. Returns 1 when it is in flight, 0 when
 * it is over (attempt_end() done), -1 when it failed with a local error
 * that a finished attempt may cure (nothing done: try again later).
 */
static int attempt_start(struct attempt *a, bool may_retry)
{
	int fd, err;

	a->start_ms = rlb_monotonic_ms();
	fd = rlb_libc()->socket(a->addr.ss_family,
				SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = errno;
		goto out_failed;
	}
	/* EINTR: the connect goes on in the background, as EINPROGRESS. */
	if (rlb_libc()->connect(fd, (struct sockaddr *)&a->addr, a->len) == 0 ||
	    errno == EINPROGRESS || errno == EINTR) {
		a->fd = fd;
		return 1;
	}
	err = errno;
	rlb_libc()->close(fd);
out_failed:
	if (may_retry && retryable(err))
		return -1;
	attempt_end(a, err, rlb_monotonic_ms());
	return 0;
}

/*
 * How many connects may be in flight at once: the descriptors the soft
 * limit leaves after those open now and a reserve, at least 1.
 */
static size_t fd_budget(void)
{
	struct rlimit rl;
	size_t open_now = 0;
	DIR *d;

	if (rlb_libc()->getrlimit(RLIMIT_NOFILE, &rl) != 0 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return SIZE_MAX;
	d = rlb_libc()->opendir("/proc/self/fd");
	if (d) {
		while (rlb_libc()->readdir(d))
			open_now++;
		rlb_libc()->closedir(
			d); /* counted ".", ".." and its own: 3 too many */
		open_now = open_now > 3 ? open_now - 3 : 0;
	}
	if (rl.rlim_cur <= open_now + PROBE_FD_RESERVE)
		return 1;
	return (size_t)(rl.rlim_cur - open_now - PROBE_FD_RESERVE);
}

static int64_t deadline_of(const struct attempt *a)
{
	if (a->reading)
		return a->sent_ms + a->read_timeout_ms;
	return a->timeout_ms > 0 ? a->start_ms + a->timeout_ms : INT64_MAX;
}

/*
 * The HTTP check is over for a: status is the answer's (2xx: healthy),
 * or 0 when none came in time, -1 when what came is no HTTP answer.
 */
static void http_end(struct attempt *a, int status, int64_t now)
{
	struct rlb_probe_result *r = a->r;

	if (status >= 200 && status <= 299) {
		r->http_status = status;
		attempt_end(a, 0, now);
		return;
	}
	if (a->fd >= 0)
		rlb_libc()->close(a->fd);
	a->fd = -1;
	a->reading = false;
	if (r->outcome == RLB_PROBE_OK)
		return;
	r->http_status = status;
	r->http_timeout_ms = status == 0 ? a->read_timeout_ms : 0;
	r->err = 0;
	addr_text((struct sockaddr *)&a->addr, r->address, sizeof(r->address));
}

/*
 * a connected: send its request. False when it could not go (a's end
 * done: a connection that takes no request is no healthy one).
 */
static bool http_send(struct attempt *a, int64_t now)
{
	char req[RLB_MAX_HOST + 512];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.0\r\nHost: %s\r\n"
			 "User-Agent: replicalbctl-probe\r\n"
			 "Connection: close\r\n\r\n",
			 a->path, a->host);
	struct iovec iov = {req, n > 0 ? (size_t)n : 0};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	/* MSG_NOSIGNAL: a replica that resets at once is a failed check,
	 * not a SIGPIPE for this tool. */
	if (n <= 0 || (size_t)n >= sizeof(req) ||
	    rlb_libc()->sendmsg(a->fd, &mh, MSG_NOSIGNAL) != n) {
		http_end(a, -1, now);
		return false;
	}
	a->reading = true;
	a->sent_ms = now;
	a->got = 0;
	return true;
}

/*
 * a's answer readable: read what fits of its head. Returns true while
 * the status line is not complete (a waits on).
 */
static bool http_read(struct attempt *a, int64_t now)
{
	ssize_t n = rlb_libc()->read(a->fd, a->head + a->got,
				     sizeof(a->head) - 1 - a->got);
	int status = -1;
	char *eol;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n > 0)
		a->got += (size_t)n;
	a->head[a->got] = '\0';
	eol = strchr(a->head, '\n');
	if (!eol && n > 0 && a->got < sizeof(a->head) - 1)
		return true;
	/* "HTTP/1.x NNN ...": anything else, or an end first, is none. */
	if (strncmp(a->head, "HTTP/", 5) == 0) {
		const char *sp = strchr(a->head, ' ');

		if (sp && sp < (eol ? eol : a->head + a->got) && sp[1] >= '1' &&
		    sp[1] <= '5' && sp[2] >= '0' && sp[2] <= '9' &&
		    sp[3] >= '0' && sp[3] <= '9' &&
		    (sp[4] == ' ' || sp[4] == '\r' || sp[4] == '\n'))
			status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 +
				 (sp[3] - '0');
	}
	http_end(a, status, now);
	return false;
}

/*
 * Run every attempt to its end: start them in order while fewer than the
 * budget are in flight, poll, read every result that arrived, and only
 * then give up those past their own deadline. A local failure that a
 * finished attempt may cure waits for one to finish.
 */
static void run_attempts(struct attempt *att, size_t n)
{
	size_t cap = fd_budget(), next = 0, live = 0;
	struct pollfd *pfd;
	size_t *map;

	if (cap > n)
		cap = n ? n : 1;
	pfd = calloc(cap, sizeof(*pfd));
	map = calloc(cap, sizeof(*map));
	if (!pfd || !map) {
		for (size_t i = 0; i < n; i++)
			attempt_end(&att[i], ENOMEM, rlb_monotonic_ms());
		goto out_free;
	}
	for (;;) {
		int64_t now, wait = -1;
		size_t kept = 0;
		int rc;

		/* Start what the budget allows; a replica already answered
		 * needs no more of its addresses. */
		while (next < n && live < cap) {
			struct attempt *a = &att[next];

			if (a->r->outcome == RLB_PROBE_OK) {
				next++;
				continue;
			}
			rc = attempt_start(a, live > 0);
			if (rc < 0) {
				cap = live; /* until one of them finishes */
				break;
			}
			next++;
			if (rc == 1) {
				pfd[live].fd = a->fd;
				pfd[live].events = POLLOUT;
				map[live++] = (size_t)(a - att);
			}
		}
		if (live == 0)
			break; /* next == n: a local error needs live > 0 */
		now = rlb_monotonic_ms();
		for (size_t k = 0; k < live; k++) {
			int64_t d = deadline_of(&att[map[k]]);

			if (d == INT64_MAX)
				continue;
			d = d > now ? d - now : 0;
			if (wait < 0 || d < wait)
				wait = d;
		}
		if (wait > INT_MAX)
			wait = INT_MAX;
		for (size_t k = 0; k < live; k++)
			pfd[k].revents = 0;
		rc = rlb_libc()->poll(pfd, live, (int)wait);
		if (rc < 0 && errno != EINTR) {
			int err = errno;

			/* Ours: nothing to judge the replicas by. */
			for (size_t k = 0; k < live; k++)
				attempt_end(&att[map[k]], err,
					    rlb_monotonic_ms());
			live = 0;
			continue;
		}
		/* Every result that arrived first, then the deadlines. */
		now = rlb_monotonic_ms();
		for (size_t k = 0; k < live; k++) {
			struct attempt *a = &att[map[k]];
			int err = 0;
			socklen_t len = sizeof(err);

			if (!pfd[k].revents)
				continue;
			if (a->reading) {
				http_read(a, now);
				continue;
			}
			if (rlb_libc()->getsockopt(a->fd, SOL_SOCKET, SO_ERROR,
						   &err, &len) != 0)
				err = errno;
			/* Connected, with a check to make: its request, then
			 * the answer is waited for. */
			if (err == 0 && a->path &&
			    a->r->outcome != RLB_PROBE_OK) {
				if (http_send(a, now))
					pfd[k].events = POLLIN;
				continue;
			}
			attempt_end(a, err, now);
		}
		for (size_t k = 0; k < live; k++) {
			struct attempt *a = &att[map[k]];

			if (a->fd >= 0 && now >= deadline_of(a)) {
				if (a->reading)
					http_end(a, 0, now);
				else
					attempt_end(a, ETIMEDOUT, now);
			}
		}
		/* Keep the ones still in flight, in order. */
		for (size_t k = 0; k < live; k++) {
			if (att[map[k]].fd < 0)
				continue;
			pfd[kept] = pfd[k];
			map[kept++] = map[k];
		}
		live = kept;
	}
out_free:
	for (size_t i = 0; i < n; i++)
		if (att[i].fd >= 0)
			attempt_end(&att[i], ETIMEDOUT, rlb_monotonic_ms());
	free(pfd);
	free(map);
}

/*
 * Count one error against replica i of c, and tell whether it is in the
 * shared state afterwards: the cluster's state is its file (not private
 * memory: a directory we cannot write, a refused or deferred file) and
 * the replica has a slot that holds a count (a full table has none).
 */
static bool count_error(struct rlb_cluster *c, size_t i)
{
	rlb_health_add_errors(c, i, 1, rlb_now());
	if (strcmp(rlb_health_path(c->health), "(private)") == 0)
		return false;
	return c->s.error_cap <= 0 ||
	       rlb_health_errors(c, i, rlb_now(), false) > 0;
}

struct rlb_probe_result *rlb_probe(struct rlb_config *cfg, size_t *nresults)
{
	struct rlb_probe_result *res;
	struct target *tgt;
	struct attempt *att = NULL;
	size_t n = 0, natt = 0;

	for (size_t ci = 0; ci < cfg->nclusters; ci++)
		n += cfg->clusters[ci].nreplicas;
	res = calloc(n ? n : 1, sizeof(*res));
	tgt = calloc(n ? n : 1, sizeof(*tgt));
	if (!res || !tgt)
		goto out_nomem;
	/* Every lookup before any connect starts: a slow one delays the
	 * pass but charges no other replica's bound. */
	n = 0;
	for (size_t ci = 0; ci < cfg->nclusters; ci++) {
		struct rlb_cluster *c = &cfg->clusters[ci];

		for (size_t i = 0; i < c->nreplicas; i++) {
			struct rlb_probe_result *r = &res[n];
			struct target *t = &tgt[n++];

			r->cluster = ci;
			r->replica = i;
			r->port = c->replicas[i].port;
			/* An HTTP check on a port of its own (ClickHouse's
			 * 8123 beside the native 9000). */
			r->http = c->health_path != NULL;
			if (r->http && c->health_port)
				r->port = c->health_port;
			t->r = r;
			t->c = c;
			t->host = c->replicas[i].host;
			t->timeout_ms = c->s.connect_timeout_ms;
			if (!r->port) {
				r->outcome = RLB_PROBE_NO_PORT;
				continue;
			}
			r->outcome = RLB_PROBE_FAILED;
			target_resolve(t, &c->replicas[i], r->port);
			natt += (size_t)t->n;
		}
	}
	att = calloc(natt ? natt : 1, sizeof(*att));
	if (!att)
		goto out_nomem;
	natt = 0;
	for (size_t k = 0; k < n; k++) {
		for (int j = 0; j < tgt[k].n; j++) {
			struct attempt *a = &att[natt++];

			a->r = tgt[k].r;
			a->fd = -1;
			a->timeout_ms = tgt[k].timeout_ms;
			a->addr = tgt[k].addr[j];
			a->len = tgt[k].len[j];
			a->path = tgt[k].c->health_path;
			a->host = tgt[k].host;
			a->read_timeout_ms =
				tgt[k].c->s.health_check_timeout_ms;
		}
	}
	free(tgt);
	tgt = NULL;
	run_attempts(att, natt);
	free(att);
	/* Count what a program's connect (or lookup) would have counted;
	 * a replica we could not probe on every address counts nothing. */
	for (size_t k = 0; k < n; k++) {
		struct rlb_probe_result *r = &res[k];

		if (r->outcome == RLB_PROBE_FAILED && !r->gai && r->local_err)
			r->outcome = RLB_PROBE_LOCAL;
		if (r->outcome != RLB_PROBE_FAILED)
			continue;
		r->counted =
			count_error(&cfg->clusters[r->cluster], r->replica);
	}
	*nresults = n;
	return res;
out_nomem:
	free(res);
	free(tgt);
	free(att);
	return NULL;
}
