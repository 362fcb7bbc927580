/* dnsmsg.c - DNS messages (RFC 1035 §4): the answer to one question, read
 * with every count, length and compression pointer checked. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define DNS_HEADER    12     /* bytes of the header, RFC 1035 §4.1.1 */
#define DNS_FLAG_QR   0x8000 /* a response */
#define DNS_FLAG_TC   0x0200 /* truncated */
#define DNS_CLASS_IN  1
#define DNS_MAX_LABEL 63
#define DNS_MAX_NAME  255 /* bytes of a name on the wire, RFC 1035 §2.3.4 */
#define DNS_MAX_JUMPS 128 /* compression pointers in one name */
#define DNS_MAX_CHAIN 16  /* CNAMEs followed from the question's name */
#define DNS_RR_FIXED  10  /* type, class, ttl, rdlength */
#define DNS_SRV_FIXED 6	  /* priority, weight, port */
/* A record runs past the end of the message: positive, for it is no
 * error when TC says the message was cut. */
#define DNS_CUT 1

/* A name as read from a message. */
struct dns_name {
	char text[RLB_MAX_HOST + 1]; /* lowercase labels joined by '.', no
				      * trailing dot ("" for the root);
				      * meaningless unless plain */
	/*
	 * Every byte of every label is a letter, digit, '-' or '_': what
	 * rlb_dns_name_valid() accepts. Only such a name is written as
	 * text, compared or handed out: a label holding a '.', a space, a
	 * NUL or a byte above 0x7f would become another name, or no name,
	 * once it is text that a config, a log or getaddrinfo() reads.
	 */
	bool plain;
};

/* One resource record (RFC 1035 §4.1.3), its rdata checked (check_rdata()). */
struct dns_rr {
	struct dns_name owner;
	uint16_t type;
	uint16_t class;
	uint32_t ttl;
	size_t rdata; /* offset of the rdata in the message */
	size_t rdlength;
};

enum dns_section { DNS_ANSWER, DNS_AUTHORITY, DNS_ADDITIONAL };

/* One parse: the message, the question, and what the first walk found. */
struct dns_parse {
	const uint8_t *msg;
	size_t len;
	uint16_t qtype;
	bool tc;
	size_t count[3]; /* records per section (enum dns_section) */
	size_t first;	 /* offset of the first record */
	size_t whole;	 /* records in the message whole: all of them,
			  * unless TC is set and one is cut off */
	/* The question's name, then the names its CNAMEs lead to. */
	char reached[DNS_MAX_CHAIN + 1][RLB_MAX_HOST + 1];
	size_t nreached;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static bool plain_byte(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/*
 * Read the name at msg[*at ..) into *name and move *at past it. Its
 * labels must end before `end`; running past it returns `overrun`
 * (DNS_CUT for a name whose end is the message's, -EINVAL inside an
 * rdata). A compression pointer must point past the header and strictly
 * before the labels that hold it, and the labels it leads to must end
 * before those too: every jump goes further back, so no loop can form
 * (real compressors only point at names written before). Label types
 * 0x40 and 0x80, a name over 255 bytes and a bad pointer are -EINVAL.
 */
static int read_name(const uint8_t *msg, size_t *at, size_t end, int overrun,
		     struct dns_name *name)
{
	size_t p = *at, start = *at, wire = 1, n = 0;
	unsigned jumps = 0;

	name->plain = true;
	for (;;) {
		size_t label;

		if (p >= end)
			return jumps ? -EINVAL : overrun;
		label = msg[p];
		if ((label & 0xc0) == 0xc0) {
			size_t target;

			if (p + 1 >= end)
				return jumps ? -EINVAL : overrun;
			target = (label & 0x3f) << 8 | msg[p + 1];
			if (target < DNS_HEADER || target >= start ||
			    ++jumps > DNS_MAX_JUMPS)
				return -EINVAL;
			if (jumps == 1)
				*at = p + 2;
			end = start;
			start = p = target;
			continue;
		}
		if (label > DNS_MAX_LABEL)
			return -EINVAL;
		if (label == 0)
			break;
		wire += 1 + label;
		if (wire > DNS_MAX_NAME)
			return -EINVAL;
		if (end - p - 1 < label)
			return jumps ? -EINVAL : overrun;
		if (n)
			name->text[n++] = '.';
		for (size_t i = 1; i <= label; i++) {
			uint8_t c = msg[p + i];

			name->plain = name->plain && plain_byte(c);
			name->text[n++] = (char)lower(c);
		}
		p += 1 + label;
	}
	if (!jumps)
		*at = p + 1;
	name->text[n] = '\0'; /* n <= wire - 2 <= 253 */
	return 0;
}

/*
 * The name in rr's rdata (a CNAME's, an SRV's target after its fixed
 * part), which must fill the rdata exactly: 0 or -EINVAL.
 */
static int rdata_name(const uint8_t *msg, const struct dns_rr *rr,
		      struct dns_name *name)
{
	size_t at = rr->rdata, end = rr->rdata + rr->rdlength;

	if (rr->type == RLB_DNS_T_SRV)
		at += DNS_SRV_FIXED;
	if (read_name(msg, &at, end, -EINVAL, name) != 0 || at != end)
		return -EINVAL;
	return 0;
}

/*
 * Whether rr's rdata has the shape its type gives it: 0 or -EINVAL. Only
 * class IN is checked: in other classes the types mean other things
 * (CHAOS's A is a name and an address), and those records are skipped.
 */
static int check_rdata(const uint8_t *msg, const struct dns_rr *rr)
{
	struct dns_name name;

	if (rr->class != DNS_CLASS_IN)
		return 0;
	switch (rr->type) {
	case RLB_DNS_T_A:
		return rr->rdlength == 4 ? 0 : -EINVAL;
	case RLB_DNS_T_AAAA:
		return rr->rdlength == 16 ? 0 : -EINVAL;
	case RLB_DNS_T_SRV:
		if (rr->rdlength < DNS_SRV_FIXED + 1)
			return -EINVAL;
		return rdata_name(msg, rr, &name);
	case RLB_DNS_T_CNAME:
	case RLB_DNS_T_PTR:
		return rdata_name(msg, rr, &name);
	default:
		return 0;
	}
}

/*
 * Read the record at msg[*at ..) and move *at past it: 0, DNS_CUT when
 * it runs past the message's end, or -EINVAL when it is malformed.
 */
static int read_rr(const struct dns_parse *ps, size_t *at, struct dns_rr *rr)
{
	const uint8_t *msg = ps->msg;
	size_t p = *at;
	int rc;

	rc = read_name(msg, &p, ps->len, DNS_CUT, &rr->owner);
	if (rc != 0)
		return rc;
	if (ps->len - p < DNS_RR_FIXED)
		return DNS_CUT;
	rr->type = get16(msg + p);
	rr->class = get16(msg + p + 2);
	rr->ttl = get32(msg + p + 4);
	rr->rdlength = get16(msg + p + 8);
	p += DNS_RR_FIXED;
	if (ps->len - p < rr->rdlength)
		return DNS_CUT;
	rr->rdata = p;
	rc = check_rdata(msg, rr);
	if (rc != 0)
		return rc;
	*at = p + rr->rdlength;
	return 0;
}

static enum dns_section section_of(const struct dns_parse *ps, size_t i)
{
	if (i < ps->count[DNS_ANSWER])
		return DNS_ANSWER;
	if (i < ps->count[DNS_ANSWER] + ps->count[DNS_AUTHORITY])
		return DNS_AUTHORITY;
	return DNS_ADDITIONAL;
}

/*
 * The header and the question: 0 with ps filled up to ps->first, or
 * -EINVAL when the message is no standard response to (qname, qtype).
 * qname is lowercase, without a trailing dot. A question cut off is
 * -EINVAL even with TC set: it could be anybody's.
 */
static int read_question(struct dns_parse *ps, const char *qname)
{
	const uint8_t *msg = ps->msg;
	struct dns_name name;
	size_t at = DNS_HEADER;
	uint16_t flags;

	if (ps->len < DNS_HEADER)
		return -EINVAL;
	flags = get16(msg + 2);
	if (!(flags & DNS_FLAG_QR) || ((flags >> 11) & 0xf) != 0 ||
	    get16(msg + 4) != 1)
		return -EINVAL;
	ps->tc = flags & DNS_FLAG_TC;
	ps->count[DNS_ANSWER] = get16(msg + 6);
	ps->count[DNS_AUTHORITY] = get16(msg + 8);
	ps->count[DNS_ADDITIONAL] = get16(msg + 10);
	if (read_name(msg, &at, ps->len, -EINVAL, &name) != 0 ||
	    ps->len - at < 4)
		return -EINVAL;
	if (!name.plain || strcmp(name.text, qname) != 0 ||
	    get16(msg + at) != ps->qtype || get16(msg + at + 2) != DNS_CLASS_IN)
		return -EINVAL;
	ps->first = at + 4;
	return 0;
}

/*
 * Walk every record once, checking each: 0 with ps->whole set and
 * *room the most records the reply can take, or -EINVAL. A record cut
 * off ends the walk when TC is set, and fails the message otherwise;
 * bytes after the last record are ignored, as resolvers do.
 */
static int check_records(struct dns_parse *ps, size_t *room)
{
	size_t total = ps->count[DNS_ANSWER] + ps->count[DNS_AUTHORITY] +
		       ps->count[DNS_ADDITIONAL];
	size_t at = ps->first, answers = 0, extras = 0, i;
	struct dns_rr rr;

	for (i = 0; i < total; i++) {
		int rc = read_rr(ps, &at, &rr);

		if (rc == DNS_CUT && ps->tc)
			break;
		if (rc != 0)
			return -EINVAL;
		if (rr.class != DNS_CLASS_IN)
			continue;
		if (section_of(ps, i) == DNS_ANSWER && rr.type == ps->qtype)
			answers++;
		else if (section_of(ps, i) == DNS_ADDITIONAL &&
			 (rr.type == RLB_DNS_T_A || rr.type == RLB_DNS_T_AAAA))
			extras++;
	}
	ps->whole = i;
	*room = (answers < RLB_MAX_REPLICAS ? answers : RLB_MAX_REPLICAS) +
		(extras < RLB_MAX_REPLICAS ? extras : RLB_MAX_REPLICAS);
	return 0;
}

/* Whether name is the question's or one its CNAMEs lead to. */
static bool is_reached(const struct dns_parse *ps, const struct dns_name *name)
{
	if (!name->plain)
		return false;
	for (size_t i = 0; i < ps->nreached; i++)
		if (strcmp(ps->reached[i], name->text) == 0)
			return true;
	return false;
}

/*
 * Follow the answer section's CNAMEs (class IN) from the question's
 * name: any CNAME owned by a name reached adds its target, in whatever
 * order the records come, until a walk adds nothing or DNS_MAX_CHAIN
 * names were added. A loop adds nothing new, so it ends the walks; a
 * target that is not plain is not followed.
 */
static void follow_cnames(struct dns_parse *ps)
{
	size_t answers = ps->count[DNS_ANSWER] < ps->whole
				 ? ps->count[DNS_ANSWER]
				 : ps->whole;
	bool grew = true;

	while (grew) {
		size_t at = ps->first;
		struct dns_rr rr;
		struct dns_name target;

		grew = false;
		for (size_t i = 0; i < answers; i++) {
			if (read_rr(ps, &at, &rr) != 0)
				return; /* checked by check_records() */
			if (rr.class != DNS_CLASS_IN ||
			    rr.type != RLB_DNS_T_CNAME ||
			    !is_reached(ps, &rr.owner) ||
			    rdata_name(ps->msg, &rr, &target) != 0 ||
			    !target.plain || is_reached(ps, &target))
				continue;
			if (ps->nreached > DNS_MAX_CHAIN)
				return;
			memcpy(ps->reached[ps->nreached++], target.text,
			       sizeof(target.text));
			grew = true;
		}
	}
}

/*
 * Fill *rec from rr, an A, AAAA or SRV of class IN: false when it cannot
 * be handed out (an SRV target that is not plain: that record is
 * skipped, the message still counts).
 */
static bool fill_record(const struct dns_parse *ps, const struct dns_rr *rr,
			struct rlb_dns_record *rec)
{
	const uint8_t *rdata = ps->msg + rr->rdata;
	struct dns_name target;

	memset(rec, 0, sizeof(*rec));
	rec->type = rr->type;
	rec->ttl = rr->ttl;
	switch (rr->type) {
	case RLB_DNS_T_SRV:
		if (rdata_name(ps->msg, rr, &target) != 0 || !target.plain)
			return false;
		rec->priority = get16(rdata);
		rec->weight = get16(rdata + 2);
		rec->port = get16(rdata + 4);
		memcpy(rec->name, target.text, sizeof(rec->name));
		return true;
	case RLB_DNS_T_PTR:
		if (rdata_name(ps->msg, rr, &target) != 0 || !target.plain)
			return false;
		memcpy(rec->name, target.text, sizeof(rec->name));
		return true;
	case RLB_DNS_T_A:
	case RLB_DNS_T_AAAA:
		rec->addr.family = rr->type == RLB_DNS_T_A ? AF_INET : AF_INET6;
		memcpy(rec->addr.bytes, rdata, rr->rdlength);
		memcpy(rec->name, rr->owner.text, sizeof(rec->name));
		return rr->owner.plain;
	default:
		return false;
	}
}

/*
 * Walk the whole records again and keep the answers to the question and
 * the additional addresses, at most RLB_MAX_REPLICAS of each (more than
 * a 64 KiB message can hold of SRV records; the rest are dropped), into
 * out->records (room entries).
 */
static void collect(const struct dns_parse *ps, struct rlb_dns_reply *out)
{
	size_t at = ps->first, extras = 0;
	struct dns_rr rr;

	for (size_t i = 0; i < ps->whole; i++) {
		enum dns_section sec = section_of(ps, i);
		bool address;

		if (read_rr(ps, &at, &rr) != 0)
			return; /* checked by check_records() */
		address = rr.type == RLB_DNS_T_A || rr.type == RLB_DNS_T_AAAA;
		if (rr.class != DNS_CLASS_IN)
			continue;
		if (sec == DNS_ANSWER && rr.type == RLB_DNS_T_CNAME &&
		    is_reached(ps, &rr.owner)) {
			if (rr.ttl < out->min_ttl)
				out->min_ttl = rr.ttl;
		} else if (sec == DNS_ANSWER && rr.type == ps->qtype &&
			   out->nanswer < RLB_MAX_REPLICAS &&
			   is_reached(ps, &rr.owner) &&
			   fill_record(ps, &rr, &out->records[out->n])) {
			out->nanswer++;
			out->n++;
			if (rr.ttl < out->min_ttl)
				out->min_ttl = rr.ttl;
		} else if (sec == DNS_ADDITIONAL && address &&
			   extras < RLB_MAX_REPLICAS &&
			   fill_record(ps, &rr, &out->records[out->n])) {
			extras++;
			out->n++;
		}
	}
}

/*
 * Walks over the records: one that checks everything and sizes the
 * reply (one allocation, no record copied twice), those of
 * follow_cnames() (one when no CNAME leads on, two for a chain in
 * order), one that collects. qtype must be A, AAAA, SRV or PTR and
 * qname a valid name (rlb_dns_name_valid()), else -EINVAL: no other
 * answer could be a struct rlb_dns_record. The rcode is the header's 4
 * bits (an OPT record's extended bits are not read). Keeps errno.
 */
int rlb_dns_parse(const uint8_t *msg, size_t len, const char *qname,
		  uint16_t qtype, struct rlb_dns_reply *out)
{
	struct dns_parse *ps;
	size_t room, qlen;
	int saved = errno, rc;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!msg || !rlb_dns_name_valid(qname) ||
	    (qtype != RLB_DNS_T_A && qtype != RLB_DNS_T_AAAA &&
	     qtype != RLB_DNS_T_SRV && qtype != RLB_DNS_T_PTR))
		return -EINVAL;
	/* About 4.5 KiB of names: too much for the stack of a hook. */
	ps = calloc(1, sizeof(*ps));
	if (!ps) {
		errno = saved;
		return -ENOMEM;
	}
	ps->msg = msg;
	ps->len = len;
	ps->qtype = qtype;
	rlb_ascii_lower(ps->reached[0], qname, sizeof(ps->reached[0]));
	qlen = strlen(ps->reached[0]);
	if (ps->reached[0][qlen - 1] == '.')
		ps->reached[0][qlen - 1] = '\0';
	ps->nreached = 1;

	rc = read_question(ps, ps->reached[0]);
	if (rc == 0)
		rc = check_records(ps, &room);
	if (rc != 0)
		goto out_free;
	if (room) {
		out->records = calloc(room, sizeof(*out->records));
		if (!out->records) {
			rc = -ENOMEM;
			goto out_free;
		}
	}
	follow_cnames(ps);
	out->rcode = msg[3] & 0xf;
	out->truncated = ps->tc;
	out->min_ttl = UINT32_MAX;
	collect(ps, out);
out_free:
	free(ps);
	errno = saved;
	return rc;
}

void rlb_dns_reply_free(struct rlb_dns_reply *r)
{
	if (!r)
		return;
	free(r->records);
	memset(r, 0, sizeof(*r));
}

bool rlb_dns_name_valid(const char *s)
{
	size_t len, label = 0;

	if (!s)
		return false;
	len = strlen(s);
	if (len && s[len - 1] == '.')
		len--;
	/* 253 without the trailing dot: 255 bytes on the wire. */
	if (len == 0 || len > RLB_MAX_HOST - 2)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if (!plain_byte((uint8_t)s[i]) ||
			   ++label > DNS_MAX_LABEL) {
			return false;
		}
	}
	return label > 0;
}

/* ------------------------------------------------------------------ */
/* Questions (the library's own stub resolver, engine/dns_client.c) */

ssize_t rlb_dns_query(uint16_t id, const char *name, uint16_t type,
		      uint8_t *buf, size_t len)
{
	size_t off = DNS_HEADER, start;
	const char *p;

	if (!rlb_dns_name_valid(name) || len < DNS_HEADER + DNS_MAX_NAME + 4)
		return -EINVAL;
	memset(buf, 0, DNS_HEADER);
	buf[0] = (uint8_t)(id >> 8);
	buf[1] = (uint8_t)id;
	buf[2] = 0x01; /* RD: the server recurses, as libc's stub asks */
	buf[5] = 1;    /* QDCOUNT */
	for (p = name; *p;) {
		size_t n = strcspn(p, ".");

		start = off++;
		memcpy(buf + off, p, n);
		buf[start] = (uint8_t)n;
		off += n;
		p += n;
		if (*p == '.')
			p++;
	}
	buf[off++] = 0;
	buf[off++] = (uint8_t)(type >> 8);
	buf[off++] = (uint8_t)type;
	buf[off++] = 0;
	buf[off++] = DNS_CLASS_IN;
	return (ssize_t)off;
}

static uint8_t ascii_lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 'a' - 'A') : c;
}

int rlb_dns_reply_of(const uint8_t *query, size_t qlen, const uint8_t *reply,
		     size_t rlen)
{
	if (qlen < DNS_HEADER + 5 || rlen < qlen)
		return 0;
	if (query[0] != reply[0] || query[1] != reply[1] ||
	    !(get16(reply + 2) & DNS_FLAG_QR) ||
	    (query[2] & 0x78) != (reply[2] & 0x78) || get16(reply + 4) != 1)
		return 0;
	/* The question echoed, its name in any case (0x20 encoding). */
	for (size_t i = DNS_HEADER; i < qlen; i++)
		if (ascii_lower(query[i]) != ascii_lower(reply[i]))
			return 0;
	return get16(reply + 2) & DNS_FLAG_TC ? 2 : 1;
}
