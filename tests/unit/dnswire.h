/* dnswire.h - DNS answers in wire format for unit tests: one question and
 * answer records, names uncompressed, built as a server would send them. */
#ifndef RLB_TEST_DNSWIRE_H
#define RLB_TEST_DNSWIRE_H

#include <resolv.h>
#include <sys/types.h>

#include "engine/engine.h"
#include <stddef.h>
#include <stdint.h>

struct dw {
	uint8_t buf[65536];
	size_t len;
};

/* A response to (qname, qtype) with RCODE rcode and no records yet. */
void dw_start(struct dw *w, const char *qname, uint16_t qtype, int rcode);
/* An SRV record of owner in the answer section. */
void dw_srv(struct dw *w, const char *owner, uint32_t ttl, uint16_t priority,
	    uint16_t weight, uint16_t port, const char *target);
/* A PTR record of owner naming target. */
void dw_ptr(struct dw *w, const char *owner, uint32_t ttl, const char *target);
/* An A or AAAA record (by the address text's family). */
void dw_addr(struct dw *w, const char *owner, uint32_t ttl, const char *addr);
/* The same in the additional section: after every answer record. */
void dw_glue(struct dw *w, const char *owner, uint32_t ttl, const char *addr);

/*
 * A client's ask() from a per-question answer function `one` (the length
 * of the answer it put in buf, or -1 with errno): each question of q[0 ..
 * n) in turn (engine.h, struct rlb_dns_client).
 */
void dw_ask_each(struct rlb_dns_question *q, size_t n,
		 ssize_t (*one)(const char *name, uint16_t type, uint8_t *buf,
				size_t len));

#endif /* RLB_TEST_DNSWIRE_H */
