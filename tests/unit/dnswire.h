/* dnswire.h - DNS answers in wire format for unit tests: one question and
 * answer records, names uncompressed, built as a server would send them. */
#ifndef RLB_TEST_DNSWIRE_H
#define RLB_TEST_DNSWIRE_H

#include <resolv.h>
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
 * Stand-ins for libc's resolver in the seam (base.h), for a fake server's
 * res_nsend(): init and close do nothing; the query is "TYPE NAME", all a
 * fake server needs to know what was asked.
 */
int dw_res_ninit(res_state st);
void dw_res_nclose(res_state st);
int dw_res_nmkquery(res_state st, int op, const char *name, int class, int type,
		    const unsigned char *data, int datalen,
		    const unsigned char *newrr, unsigned char *buf, int buflen);

#endif /* RLB_TEST_DNSWIRE_H */
