/* dnswire.c - DNS answers in wire format for unit tests. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/dnswire.h"

static void put16(struct dw *w, uint16_t v)
{
	w->buf[w->len++] = (uint8_t)(v >> 8);
	w->buf[w->len++] = (uint8_t)v;
}

static void put32(struct dw *w, uint32_t v)
{
	put16(w, (uint16_t)(v >> 16));
	put16(w, (uint16_t)v);
}

/* name as labels, ending with the root label; a trailing dot ignored. */
static void put_name(struct dw *w, const char *name)
{
	if (strcmp(name, ".") == 0)
		name++;
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t n = dot ? (size_t)(dot - name) : strlen(name);

		w->buf[w->len++] = (uint8_t)n;
		memcpy(w->buf + w->len, name, n);
		w->len += n;
		name += n;
		if (*name == '.')
			name++;
	}
	w->buf[w->len++] = 0;
}

void dw_start(struct dw *w, const char *qname, uint16_t qtype, int rcode)
{
	w->len = 0;
	put16(w, 0x1234);		    /* id */
	put16(w, 0x8400 | (uint16_t)rcode); /* QR, AA */
	put16(w, 1);			    /* qdcount */
	put16(w, 0);			    /* ancount */
	put16(w, 0);
	put16(w, 0);
	put_name(w, qname);
	put16(w, qtype);
	put16(w, 1); /* IN */
}

/* One more record in the header count at offset `at` (6: answer). */
static void count_up(struct dw *w, size_t at)
{
	w->buf[at + 1]++;
	if (w->buf[at + 1] == 0)
		w->buf[at]++;
}

/* Start a record of owner; returns where its RDLENGTH goes. */
static size_t record(struct dw *w, const char *owner, uint16_t type,
		     uint32_t ttl)
{
	size_t at;

	put_name(w, owner);
	put16(w, type);
	put16(w, 1);
	put32(w, ttl);
	at = w->len;
	put16(w, 0);
	count_up(w, 6);
	return at;
}

static void end_record(struct dw *w, size_t at)
{
	size_t n = w->len - at - 2;

	w->buf[at] = (uint8_t)(n >> 8);
	w->buf[at + 1] = (uint8_t)n;
}

void dw_srv(struct dw *w, const char *owner, uint32_t ttl, uint16_t priority,
	    uint16_t weight, uint16_t port, const char *target)
{
	size_t at = record(w, owner, 33, ttl);

	put16(w, priority);
	put16(w, weight);
	put16(w, port);
	put_name(w, target);
	end_record(w, at);
}

void dw_ptr(struct dw *w, const char *owner, uint32_t ttl, const char *target)
{
	size_t at = record(w, owner, 12, ttl);

	put_name(w, target);
	end_record(w, at);
}

void dw_addr(struct dw *w, const char *owner, uint32_t ttl, const char *addr)
{
	uint8_t b[16];
	bool v6 = strchr(addr, ':') != NULL;
	size_t at = record(w, owner, v6 ? 28 : 1, ttl);

	inet_pton(v6 ? AF_INET6 : AF_INET, addr, b);
	memcpy(w->buf + w->len, b, v6 ? 16 : 4);
	w->len += v6 ? 16 : 4;
	end_record(w, at);
}

void dw_glue(struct dw *w, const char *owner, uint32_t ttl, const char *addr)
{
	/* Written as an answer, then counted where it stands. */
	dw_addr(w, owner, ttl, addr);
	w->buf[7]--;
	if (w->buf[7] == 0xff)
		w->buf[6]--;
	count_up(w, 10);
}

void dw_ask_each(struct rlb_dns_question *q, size_t n,
		 ssize_t (*one)(const char *name, uint16_t type, uint8_t *buf,
				size_t len))
{
	for (size_t i = 0; i < n; i++) {
		errno = 0;
		q[i].len = one(q[i].name, q[i].type, q[i].buf, q[i].cap);
		q[i].err = q[i].len < 0 ? (errno ? errno : ETIMEDOUT) : 0;
	}
}
