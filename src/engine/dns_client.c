/* dns_client.c - the library's own stub resolver (design.md §15.1): the
 * questions of one refresh sent together to resolv.conf's servers over
 * UDP, TCP after a truncated answer, with glibc's timeouts and attempts.
 * Nothing of libc's resolver runs, so no lock of libc's is ever held by a
 * thread of ours when the program forks (issue 20), and every system
 * call goes through the seam. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define CONF_PATH "/etc/resolv.conf"
#define CONF_MAX  65536 /* bytes of resolv.conf read */
#define QUERY_MAX 300	/* a question on the wire: header, name, type */
#define WINDOW	  64	/* questions in flight on one socket */
#define UDP_MAX	  65536 /* a datagram read whole */

/* A test's resolver config instead of resolv.conf (rlb_dns_stub_use()). */
static const struct rlb_resolv_conf *_Atomic test_conf;

void rlb_dns_stub_use(const struct rlb_resolv_conf *rc)
{
	atomic_store(&test_conf, rc);
}

/* resolv.conf and RES_OPTIONS as they are now: read at every refresh, as
 * glibc rereads a changed file. */
static void read_conf(struct rlb_resolv_conf *rc)
{
	const struct rlb_resolv_conf *t = atomic_load(&test_conf);
	char *text;
	ssize_t n = -1;
	int fd;

	if (t) {
		*rc = *t;
		return;
	}
	text = malloc(CONF_MAX);
	fd = rlb_libc()->open(CONF_PATH, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
	if (text && fd >= 0)
		n = rlb_libc()->read(fd, text, CONF_MAX);
	if (fd >= 0)
		rlb_libc()->close(fd);
	rlb_resolv_conf_parse(n > 0 ? text : NULL, n > 0 ? (size_t)n : 0,
			      rlb_secure_mode() ? NULL : getenv("RES_OPTIONS"),
			      rc);
	free(text);
}

int64_t rlb_dns_stub_budget_ms(void)
{
	struct rlb_resolv_conf rc;

	read_conf(&rc);
	return rlb_resolv_conf_budget_ms(&rc);
}

/* One question as it is being asked. */
struct asking {
	struct rlb_dns_question *q;
	uint8_t query[QUERY_MAX];
	size_t qlen;
	bool done;	  /* q has its answer */
	bool kept;	  /* q holds a server's refusal (SERVFAIL...),
			   * given when no other server answers */
	int64_t deadline; /* of its wait at the current server */
};

/* One ask: the questions, the resolver config, the overall deadline. */
struct ask {
	struct asking *a;
	size_t n, left; /* questions, and those not done */
	struct rlb_resolv_conf rc;
	int64_t deadline;
	uint8_t *dgram; /* UDP_MAX bytes */
};

static int64_t now_ms(void)
{
	return rlb_monotonic_ms();
}

/* A socket of type to server ns, connected (UDP) or connecting (TCP). */
static int server_socket(const struct ask *k, size_t ns, int type)
{
	const struct sockaddr *sa = (const struct sockaddr *)&k->rc.ns[ns];
	int fd = rlb_libc()->socket(sa->sa_family,
				    type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (rlb_libc()->connect(fd, sa, k->rc.nslen[ns]) < 0 &&
	    errno != EINPROGRESS) {
		int saved = errno;

		rlb_libc()->close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* Wait for events on fd until deadline; 1 ready, 0 time out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int64_t left = deadline - now_ms();
		int rc;

		if (left <= 0)
			return 0;
		rc = rlb_libc()->poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

/* Take answer msg[0 .. len) for x: done, or kept as a refusal. */
static void take_answer(struct ask *k, struct asking *x, const uint8_t *msg,
			size_t len)
{
	int rcode = msg[3] & 0x0f;

	if (len > x->q->cap) {
		x->q->err = EMSGSIZE;
		return;
	}
	memcpy(x->q->buf, msg, len);
	x->q->len = (ssize_t)len;
	/* SERVFAIL, NOTIMP, REFUSED: another server may know better, as
	 * glibc's res_send() asks the next one. */
	if (rcode == 2 || rcode == 4 || rcode == 5) {
		x->kept = true;
		return;
	}
	x->done = true;
	k->left--;
}

/* Read all of n bytes from TCP socket fd by deadline. */
static bool tcp_read(int fd, uint8_t *buf, size_t n, int64_t deadline)
{
	while (n) {
		ssize_t got = rlb_libc()->read(fd, buf, n);

		if (got > 0) {
			buf += got;
			n -= (size_t)got;
			continue;
		}
		if (got == 0 || (errno != EAGAIN && errno != EINTR))
			return false;
		if (errno == EAGAIN && wait_fd(fd, POLLIN, deadline) != 1)
			return false;
	}
	return true;
}

/*
 * Ask x of server ns over TCP (after a truncated answer, or use-vc), by
 * deadline. Takes the answer; else x stays as it was.
 */
static void ask_tcp(struct ask *k, struct asking *x, size_t ns,
		    int64_t deadline)
{
	uint8_t out[2 + QUERY_MAX], lenb[2];
	int fd = server_socket(k, ns, SOCK_STREAM), err = 0;
	socklen_t elen = sizeof(err);
	size_t mlen, sent = 0;

	if (fd < 0) {
		x->q->err = errno;
		return;
	}
	if (wait_fd(fd, POLLOUT, deadline) != 1 ||
	    rlb_libc()->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 ||
	    err) {
		x->q->err = err ? err : ETIMEDOUT;
		goto out_close;
	}
	out[0] = (uint8_t)(x->qlen >> 8);
	out[1] = (uint8_t)x->qlen;
	memcpy(out + 2, x->query, x->qlen);
	while (sent < x->qlen + 2) {
		ssize_t w =
			rlb_libc()->write(fd, out + sent, x->qlen + 2 - sent);

		if (w > 0)
			sent += (size_t)w;
		else if (w < 0 && errno == EAGAIN &&
			 wait_fd(fd, POLLOUT, deadline) == 1)
			continue;
		else if (w < 0 && errno == EINTR)
			continue;
		else
			goto out_fail;
	}
	if (!tcp_read(fd, lenb, 2, deadline))
		goto out_fail;
	mlen = (size_t)lenb[0] << 8 | lenb[1];
	if (mlen > UDP_MAX || !tcp_read(fd, k->dgram, mlen, deadline))
		goto out_fail;
	if (rlb_dns_reply_of(x->query, x->qlen, k->dgram, mlen))
		take_answer(k, x, k->dgram, mlen);
	goto out_close;
out_fail:
	x->q->err = errno ? errno : ETIMEDOUT;
out_close:
	rlb_libc()->close(fd);
}

/* A fresh id for x, unlike those of the questions in flight. */
static void new_id(struct ask *k, struct asking *x, struct asking **flight,
		   size_t nflight)
{
	uint16_t id;
	bool clash;

	do {
		id = (uint16_t)rlb_random_u32();
		clash = false;
		for (size_t i = 0; i < nflight; i++)
			if (flight[i] != x && flight[i]->query[0] == id >> 8 &&
			    flight[i]->query[1] == (uint8_t)id)
				clash = true;
	} while (clash);
	x->query[0] = (uint8_t)(id >> 8);
	x->query[1] = (uint8_t)id;
}

/* Remove flight[i] (order does not matter). */
static void land(struct asking **flight, size_t *nflight, size_t i)
{
	flight[i] = flight[--*nflight];
}

/*
 * One pass over server ns: every question not done is sent (at most
 * WINDOW in flight) and waits at most `wait` ms for its answer there.
 * Returns when each has its answer, a refusal, or its time.
 */
static void ask_udp(struct ask *k, size_t ns, int64_t wait)
{
	struct asking *flight[WINDOW];
	size_t nflight = 0, next = 0;
	int fd = server_socket(k, ns, SOCK_DGRAM);

	if (fd < 0) {
		for (size_t i = 0; i < k->n; i++)
			if (!k->a[i].done)
				k->a[i].q->err = errno;
		return;
	}
	for (;;) {
		int64_t now = now_ms(), first = INT64_MAX;
		int rc;

		/* Send what fits the window. */
		while (nflight < WINDOW && next < k->n) {
			struct asking *x = &k->a[next++];

			if (x->done)
				continue;
			new_id(k, x, flight, nflight);
			if (rlb_libc()->write(fd, x->query, x->qlen) < 0) {
				x->q->err = errno;
				if (errno == ECONNREFUSED)
					goto out_close;
				continue;
			}
			x->deadline = now + wait < k->deadline ? now + wait
							       : k->deadline;
			flight[nflight++] = x;
		}
		/* What has run out of time at this server. */
		for (size_t i = 0; i < nflight;) {
			if (flight[i]->deadline <= now) {
				if (!flight[i]->kept)
					flight[i]->q->err = ETIMEDOUT;
				land(flight, &nflight, i);
				continue;
			}
			if (flight[i]->deadline < first)
				first = flight[i]->deadline;
			i++;
		}
		if (nflight == 0) {
			if (next >= k->n)
				break;
			continue;
		}
		rc = wait_fd(fd, POLLIN, first);
		if (rc < 0)
			break;
		if (rc == 0)
			continue;
		/* Every datagram waiting: each answers one in flight, or
		 * is nobody's (a late answer, a forgery) and dropped. */
		for (;;) {
			ssize_t len = rlb_libc()->read(fd, k->dgram, UDP_MAX);

			if (len < 0 && errno == EINTR)
				continue;
			if (len < 0 && errno == ECONNREFUSED) {
				/* The server's port is closed (ICMP): the
				 * next server, at once, as glibc does. */
				for (size_t i = 0; i < nflight; i++)
					if (!flight[i]->kept)
						flight[i]->q->err =
							ECONNREFUSED;
				goto out_close;
			}
			if (len < 0)
				break;
			for (size_t i = 0; i < nflight; i++) {
				struct asking *x = flight[i];
				int r = rlb_dns_reply_of(x->query, x->qlen,
							 k->dgram, (size_t)len);

				if (!r)
					continue;
				land(flight, &nflight, i);
				if (r == 2 && !k->rc.use_vc)
					ask_tcp(k, x, ns, x->deadline);
				else
					take_answer(k, x, k->dgram,
						    (size_t)len);
				break;
			}
		}
	}
out_close:
	rlb_libc()->close(fd);
}

static void stub_ask(struct rlb_dns_question *q, size_t n, int64_t deadline)
{
	struct ask k = {.n = n, .left = 0, .deadline = deadline};
	size_t start = 0;
	int saved = errno;

	k.a = calloc(n ? n : 1, sizeof(*k.a));
	k.dgram = malloc(UDP_MAX);
	for (size_t i = 0; i < n; i++) {
		q[i].len = -1;
		q[i].err = ENOMEM;
	}
	if (!k.a || !k.dgram)
		goto out_free;
	read_conf(&k.rc);
	for (size_t i = 0; i < n; i++) {
		ssize_t ql = rlb_dns_query(0, q[i].name, q[i].type,
					   k.a[i].query, QUERY_MAX);

		k.a[i].q = &q[i];
		q[i].err = ETIMEDOUT;
		if (ql < 0) {
			q[i].err = EINVAL;
			k.a[i].done = true;
			continue;
		}
		k.a[i].qlen = (size_t)ql;
		k.left++;
	}
	if (k.rc.rotate)
		start = rlb_random_u32() % k.rc.nns;
	for (int t = 0; t < k.rc.attempts && k.left; t++) {
		for (size_t s = 0; s < k.rc.nns && k.left; s++) {
			size_t ns = (start + s) % k.rc.nns;
			int64_t wait = rlb_resolv_conf_wait_ms(&k.rc, s);

			if (now_ms() >= k.deadline)
				goto out_free;
			if (!k.rc.use_vc) {
				ask_udp(&k, ns, wait);
				continue;
			}
			for (size_t i = 0; i < n; i++) {
				int64_t d = now_ms() + wait;

				if (!k.a[i].done)
					ask_tcp(&k, &k.a[i], ns,
						d < k.deadline ? d
							       : k.deadline);
			}
		}
	}
out_free:
	/* A refusal kept stands as the answer: the server said so. */
	for (size_t i = 0; k.a && i < n; i++)
		if (!k.a[i].done && !k.a[i].kept)
			q[i].len = -1;
	free(k.dgram);
	free(k.a);
	errno = saved;
}

const struct rlb_dns_client rlb_dns_stub = {.ask = stub_ask};
