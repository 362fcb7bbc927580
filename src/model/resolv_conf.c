/* resolv_conf.c - resolv.conf(5) as the library's own stub resolver reads
 * it (engine/dns_client.c): the name servers, timeout, attempts, rotate
 * and use-vc, with glibc's defaults and bounds. Pure: the caller reads
 * the file and the RES_OPTIONS variable. */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* glibc's <resolv.h>: RES_TIMEOUT, RES_DFLRETRY, RES_MAXRETRANS and
 * RES_MAXRETRY. */
#define DEFAULT_TIMEOUT_S 5
#define DEFAULT_ATTEMPTS  2
#define MAX_TIMEOUT_S	  30
#define MAX_ATTEMPTS	  5

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The decimal number at s (up to a space or the end), else -1. */
static long small_number(const char *s, const char *end)
{
	long v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s >= '0' && *s <= '9'; s++)
		if ((v = v * 10 + (*s - '0')) > 1000)
			v = 1000;
	return s == end || is_space(*s) ? v : -1;
}

/* Whether word [s, end) is opt, or starts with opt when opt ends in ':'. */
static bool option_is(const char *s, const char *end, const char *opt)
{
	size_t n = strlen(opt);

	if (opt[n - 1] == ':')
		return (size_t)(end - s) > n && memcmp(s, opt, n) == 0;
	return (size_t)(end - s) == n && memcmp(s, opt, n) == 0;
}

/* The options of one "options" line, or of RES_OPTIONS: [s, end). */
static void take_options(const char *s, const char *end,
			 struct rlb_resolv_conf *rc)
{
	while (s < end) {
		const char *w;
		long v;

		while (s < end && is_space(*s))
			s++;
		for (w = s; s < end && !is_space(*s); s++)
			;
		if (option_is(w, s, "timeout:") &&
		    (v = small_number(w + 8, s)) >= 0)
			rc->timeout_s =
				v > MAX_TIMEOUT_S ? MAX_TIMEOUT_S : (int)v;
		else if (option_is(w, s, "attempts:") &&
			 (v = small_number(w + 9, s)) >= 0)
			rc->attempts = v > MAX_ATTEMPTS ? MAX_ATTEMPTS
				       : v < 1		? 1
							: (int)v;
		else if (option_is(w, s, "rotate"))
			rc->rotate = true;
		else if (option_is(w, s, "use-vc"))
			rc->use_vc = true;
	}
}

/* A "nameserver" address [s, end): IPv4, or IPv6 with a numeric scope. */
static void take_server(const char *s, const char *end,
			struct rlb_resolv_conf *rc)
{
	char text[INET6_ADDRSTRLEN + 16], *pct;
	size_t n = (size_t)(end - s);
	struct sockaddr_in *v4;
	struct sockaddr_in6 *v6;

	if (rc->nns >= RLB_RESOLV_MAXNS || n == 0 || n >= sizeof(text))
		return;
	memcpy(text, s, n);
	text[n] = '\0';
	v4 = (struct sockaddr_in *)&rc->ns[rc->nns];
	v6 = (struct sockaddr_in6 *)&rc->ns[rc->nns];
	memset(&rc->ns[rc->nns], 0, sizeof(rc->ns[0]));
	if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(53);
		rc->nslen[rc->nns++] = sizeof(*v4);
		return;
	}
	if ((pct = strchr(text, '%'))) {
		char *endp;
		unsigned long scope = strtoul(pct + 1, &endp, 10);

		/* An interface name needs a system call to read: such a
		 * server is left out (design.md §15.1). */
		if (*endp || endp == pct + 1 || scope > UINT32_MAX)
			return;
		*pct = '\0';
		v6->sin6_scope_id = (uint32_t)scope;
	}
	if (inet_pton(AF_INET6, text, &v6->sin6_addr) != 1)
		return;
	v6->sin6_family = AF_INET6;
	v6->sin6_port = htons(53);
	rc->nslen[rc->nns++] = sizeof(*v6);
}

void rlb_resolv_conf_parse(const char *text, size_t len,
			   const char *env_options, struct rlb_resolv_conf *rc)
{
	const char *p = text, *end = text ? text + len : NULL;

	memset(rc, 0, sizeof(*rc));
	rc->timeout_s = DEFAULT_TIMEOUT_S;
	rc->attempts = DEFAULT_ATTEMPTS;
	while (p && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *w, *we;

		if (!eol)
			eol = end;
		for (w = p; w < eol && !is_space(*w); w++)
			;
		for (we = w; we < eol && is_space(*we); we++)
			;
		/* A keyword, then its values; '#' and ';' lines are
		 * comments, as is anything after a value's own '#'. */
		if (w - p == 10 && memcmp(p, "nameserver", 10) == 0 && we > w) {
			const char *v = we;

			while (we < eol && !is_space(*we) && *we != '#' &&
			       *we != ';')
				we++;
			take_server(v, we, rc);
		} else if (w - p == 7 && memcmp(p, "options", 7) == 0 &&
			   we > w) {
			take_options(we, eol, rc);
		}
		p = eol + 1;
	}
	if (env_options)
		take_options(env_options, env_options + strlen(env_options),
			     rc);
	if (rc->nns == 0) {
		/* No server named: glibc asks the loopback's. */
		struct sockaddr_in *v4 = (struct sockaddr_in *)&rc->ns[0];

		memset(v4, 0, sizeof(*v4));
		v4->sin_family = AF_INET;
		v4->sin_port = htons(53);
		v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		rc->nslen[0] = sizeof(*v4);
		rc->nns = 1;
	}
}

int64_t rlb_resolv_conf_wait_ms(const struct rlb_resolv_conf *rc, size_t ns)
{
	/* glibc's send_dg(): retrans << ns, divided by the number of
	 * servers past the first; never below a second. */
	int64_t s = (int64_t)rc->timeout_s << (ns < 8 ? ns : 8);

	if (ns > 0 && rc->nns)
		s /= (int64_t)rc->nns;
	return (s < 1 ? 1 : s) * 1000;
}

int64_t rlb_resolv_conf_budget_ms(const struct rlb_resolv_conf *rc)
{
	int64_t ms = 0;

	for (size_t ns = 0; ns < rc->nns; ns++)
		ms += rlb_resolv_conf_wait_ms(rc, ns);
	return ms * (rc->attempts > 0 ? rc->attempts : 1);
}
