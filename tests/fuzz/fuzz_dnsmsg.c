/* fuzz_dnsmsg.c - libFuzzer target: DNS messages (dnsmsg.c).
 *
 * The input is one DNS message, as a server would send it. It is parsed
 * as the answer to a few questions: its own question's name and type
 * when they can be one (so that mutations get past the question), that
 * name in upper case with a trailing dot as each of A, AAAA and SRV, and
 * a fixed name. Every reply is checked against the contract of model.h
 * and freed. When the message parses with TC set, it must also parse cut
 * anywhere after its question (what is whole is kept, the rest dropped).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/model.h"

#define HEADER 12

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_setup();
	return 0;
}

/*
 * The question's name as text into buf (size RLB_MAX_HOST + 1), and the
 * offset just past the question; 0 when there is none to read. The first
 * name of a message has nothing before it to point at: labels only.
 */
static size_t question(const uint8_t *msg, size_t len, char *buf,
		       uint16_t *qtype)
{
	size_t p = HEADER, n = 0;

	while (p < len && msg[p] != 0) {
		size_t label = msg[p];

		if (label > 63 || len - p - 1 < label ||
		    n + label + 1 > RLB_MAX_HOST)
			return 0;
		if (n)
			buf[n++] = '.';
		memcpy(buf + n, msg + p + 1, label);
		n += label;
		p += 1 + label;
	}
	buf[n] = '\0';
	if (p >= len || len - p - 1 < 4)
		return 0;
	*qtype = (uint16_t)(msg[p + 1] << 8 | msg[p + 2]);
	return p + 5;
}

static void check_record(const struct rlb_dns_record *rec, bool answer,
			 uint16_t qtype)
{
	const char *end = memchr(rec->name, '\0', sizeof(rec->name));
	size_t len = end ? (size_t)(end - rec->name) : 0;

	fuzz_check(end != NULL, "name NUL-terminated");
	fuzz_check(len <= RLB_MAX_HOST - 2, "name at most 253 bytes");
	fuzz_check(len == 0 || (rlb_dns_name_valid(rec->name) &&
				rec->name[len - 1] != '.'),
		   "name valid, without the trailing dot");
	for (size_t i = 0; i < len; i++)
		fuzz_check(rec->name[i] < 'A' || rec->name[i] > 'Z',
			   "name lowercase");
	if (answer)
		fuzz_check(rec->type == qtype, "answers of the asked type");
	else
		fuzz_check(rec->type == RLB_DNS_T_A ||
				   rec->type == RLB_DNS_T_AAAA,
			   "additional records A or AAAA");
	switch (rec->type) {
	case RLB_DNS_T_A:
		fuzz_check(rec->addr.family == AF_INET, "A is AF_INET");
		break;
	case RLB_DNS_T_AAAA:
		fuzz_check(rec->addr.family == AF_INET6, "AAAA is AF_INET6");
		break;
	case RLB_DNS_T_SRV:
		fuzz_check(rec->addr.family == 0, "SRV has no address");
		break;
	case RLB_DNS_T_PTR:
		fuzz_check(rec->addr.family == 0, "PTR has no address");
		break;
	default:
		fuzz_check(0, "type A, AAAA, SRV or PTR");
	}
}

/* Parse msg as the answer to (qname, qtype) and check the contract. */
static int parse_checked(const uint8_t *msg, size_t len, const char *qname,
			 uint16_t qtype)
{
	struct rlb_dns_reply r;
	int rc;

	errno = EILSEQ;
	rc = rlb_dns_parse(msg, len, qname, qtype, &r);
	fuzz_check(errno == EILSEQ, "errno kept");
	fuzz_check(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "result");
	if (rc != 0) {
		fuzz_check(r.records == NULL && r.n == 0,
			   "nothing in a failed reply");
		return rc;
	}
	fuzz_check(r.nanswer <= r.n, "nanswer <= n");
	fuzz_check(r.nanswer <= RLB_MAX_REPLICAS &&
			   r.n - r.nanswer <= RLB_MAX_REPLICAS,
		   "records capped");
	fuzz_check(r.rcode == (msg[3] & 0xf), "rcode");
	fuzz_check(r.truncated == ((msg[2] & 0x02) != 0), "TC");
	for (size_t i = 0; i < r.n; i++) {
		check_record(&r.records[i], i < r.nanswer, qtype);
		if (i < r.nanswer)
			fuzz_check(r.min_ttl <= r.records[i].ttl,
				   "min_ttl at most every answer's");
	}
	rlb_dns_reply_free(&r);
	fuzz_check(r.records == NULL && r.n == 0, "freed reply empty");
	return 0;
}

/* With TC set, msg parses cut after its question (at qend) if whole. */
static void check_cuts(const uint8_t *data, size_t size, size_t qend,
		       const char *qname, uint16_t qtype)
{
	uint8_t *msg = malloc(size);

	if (!msg)
		return;
	memcpy(msg, data, size);
	msg[2] |= 0x02;
	if (parse_checked(msg, size, qname, qtype) == 0) {
		size_t cuts[] = {qend, qend + (size - qend) / 2, size - 1};

		for (size_t i = 0; i < sizeof(cuts) / sizeof(*cuts); i++)
			if (cuts[i] >= qend && cuts[i] < size)
				fuzz_check(parse_checked(msg, cuts[i], qname,
							 qtype) == 0,
					   "a cut message with TC parses");
	}
	free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t types[] = {RLB_DNS_T_A, RLB_DNS_T_AAAA,
					 RLB_DNS_T_SRV, RLB_DNS_T_PTR};
	char name[RLB_MAX_HOST + 1], upper[RLB_MAX_HOST + 2];
	uint16_t qtype = 0;
	size_t qend = size >= HEADER ? question(data, size, name, &qtype) : 0;

	parse_checked(data, size, "db.example.com", RLB_DNS_T_A);
	if (!qend || !rlb_dns_name_valid(name))
		return 0;
	parse_checked(data, size, name, qtype);
	for (size_t i = 0; name[i]; i++)
		upper[i] = name[i] >= 'a' && name[i] <= 'z'
				   ? (char)(name[i] - 'a' + 'A')
				   : name[i];
	snprintf(upper + strlen(name), 2, ".");
	for (size_t i = 0; i < sizeof(types) / sizeof(*types); i++)
		parse_checked(data, size, upper, types[i]);
	check_cuts(data, size, qend, name, qtype);
	return 0;
}
