/* resolver.c - the NSS module's resolver of replica host names: never
 * through NSS (the module is called from inside it), so an IP literal is
 * itself, /etc/hosts is read here, and DNS is asked by the library's own
 * stub resolver (engine/dns_client.c) and parsed by model/dnsmsg.c. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nss/nss.h"

#define HOSTS_MAX_BYTES (4 << 20) /* a larger hosts file is not read */
#define ANSWER_BYTES	65536	  /* one DNS answer, TCP's at most */
#define MAX_ADDRS	64	  /* addresses of one host name kept */

static const char *_Atomic hosts_path = "/etc/hosts";

void rlb_nss_hosts_file(const char *path)
{
	atomic_store(&hosts_path, path ? path : "/etc/hosts");
}

/* What one lookup collects, before it becomes an rlb_dns_answer. */
struct found {
	struct rlb_addr addrs[MAX_ADDRS];
	size_t n;
};

static bool family_wanted(int want, int family)
{
	return want == AF_UNSPEC || want == family;
}

static void found_add(struct found *f, int family, const void *bytes)
{
	if (f->n == MAX_ADDRS)
		return;
	f->addrs[f->n].family = family;
	memcpy(f->addrs[f->n].bytes, bytes, family == AF_INET6 ? 16 : 4);
	f->n++;
}

/* host as an IP literal: true, with its address if of family want. */
static bool literal(const char *host, int want, struct found *f)
{
	uint8_t b[16];

	if (inet_pton(AF_INET, host, b) == 1) {
		if (family_wanted(want, AF_INET))
			found_add(f, AF_INET, b);
		return true;
	}
	if (inet_pton(AF_INET6, host, b) == 1) {
		if (family_wanted(want, AF_INET6))
			found_add(f, AF_INET6, b);
		return true;
	}
	return false;
}

/* The hosts file, whole and NUL-terminated (malloc'd), or NULL. */
static char *hosts_read(void)
{
	int fd = rlb_libc()->open(atomic_load(&hosts_path),
				  O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
	struct stat st;
	char *text = NULL;
	ssize_t n;

	if (fd < 0)
		return NULL;
	if (rlb_libc()->fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size < HOSTS_MAX_BYTES &&
	    (text = malloc((size_t)st.st_size + 1))) {
		n = rlb_libc()->pread(fd, text, (size_t)st.st_size, 0);
		if (n < 0) {
			free(text);
			text = NULL;
		} else {
			text[n] = '\0';
		}
	}
	rlb_libc()->close(fd);
	return text;
}

/*
 * Each line "ADDRESS NAME [ALIAS...]" of text whose names hold host
 * (ASCII case-insensitive): its address, when of family want, as glibc's
 * files source gives them (every matching line, in file order). True if
 * any line named host, whatever its family.
 */
static bool hosts_match(char *text, const char *host, int want, struct found *f)
{
	bool named = false;
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(line, '#'), *ws = NULL, *addr, *name;
		uint8_t b[16];
		bool match = false;

		if (hash)
			*hash = '\0';
		addr = strtok_r(line, " \t\r", &ws);
		if (!addr)
			continue;
		while ((name = strtok_r(NULL, " \t\r", &ws)))
			if (strcasecmp(name, host) == 0)
				match = true;
		if (!match)
			continue;
		named = true;
		if (inet_pton(AF_INET, addr, b) == 1 &&
		    family_wanted(want, AF_INET))
			found_add(f, AF_INET, b);
		else if (inet_pton(AF_INET6, addr, b) == 1 &&
			 family_wanted(want, AF_INET6))
			found_add(f, AF_INET6, b);
	}
	return named;
}

/*
 * A and AAAA of host (as want asks) from the stub, asked together: 0
 * with the addresses, else the EAI_* code (EAI_NONAME: it does not
 * exist; EAI_NODATA: not in this family; EAI_AGAIN: no answer).
 */
static int dns_ask(const char *host, int want, struct found *f)
{
	struct rlb_dns_question q[2] = {{0}};
	size_t nq = 0;
	bool exists = false, answered = false;

	if (!rlb_dns_name_valid(host))
		return EAI_NONAME;
	if (family_wanted(want, AF_INET))
		q[nq++] = (struct rlb_dns_question){.name = host,
						    .type = RLB_DNS_T_A};
	if (family_wanted(want, AF_INET6))
		q[nq++] = (struct rlb_dns_question){.name = host,
						    .type = RLB_DNS_T_AAAA};
	for (size_t i = 0; i < nq; i++) {
		q[i].cap = ANSWER_BYTES;
		q[i].buf = malloc(ANSWER_BYTES);
		if (!q[i].buf)
			goto out;
	}
	rlb_dns_stub.ask(q, nq, INT64_MAX);
	for (size_t i = 0; i < nq; i++) {
		struct rlb_dns_reply r;

		if (q[i].len < 0 || rlb_dns_parse(q[i].buf, (size_t)q[i].len,
						  host, q[i].type, &r) != 0)
			continue;
		answered = true;
		if (r.rcode == RLB_DNS_RCODE_NOERROR)
			exists = true;
		for (size_t k = 0; k < r.nanswer; k++)
			found_add(f, r.records[k].addr.family,
				  r.records[k].addr.bytes);
		rlb_dns_reply_free(&r);
	}
out:
	for (size_t i = 0; i < nq; i++)
		free(q[i].buf);
	if (f->n)
		return 0;
	if (!answered)
		return EAI_AGAIN;
	return exists ? EAI_NODATA : EAI_NONAME;
}

/* The answer of f: each address with the port and the socket type. */
static struct rlb_dns_answer *answer_of(const struct found *f, int error,
					const char *service,
					const struct addrinfo *q)
{
	struct rlb_dns_answer *a =
		calloc(1, sizeof(*a) + f->n * sizeof(a->addrs[0]));
	uint16_t port = service ? htons((uint16_t)atoi(service)) : 0;

	if (!a)
		return NULL;
	a->error = f->n ? 0 : error;
	for (size_t i = 0; i < f->n; i++) {
		struct rlb_dns_addr *d = &a->addrs[a->n++];

		d->family = f->addrs[i].family;
		d->socktype = q->ai_socktype ? q->ai_socktype : SOCK_STREAM;
		d->protocol =
			d->socktype == SOCK_DGRAM ? IPPROTO_UDP : IPPROTO_TCP;
		if (d->family == AF_INET6) {
			struct sockaddr_in6 *s6 = (void *)&d->addr;

			s6->sin6_family = AF_INET6;
			s6->sin6_port = port;
			memcpy(&s6->sin6_addr, f->addrs[i].bytes, 16);
			d->addrlen = sizeof(*s6);
		} else {
			struct sockaddr_in *s4 = (void *)&d->addr;

			s4->sin_family = AF_INET;
			s4->sin_port = port;
			memcpy(&s4->sin_addr, f->addrs[i].bytes, 4);
			d->addrlen = sizeof(*s4);
		}
	}
	return a;
}

static struct rlb_dns_answer *nss_ask(const char *host, const char *service,
				      const struct addrinfo *q, int64_t ttl_s,
				      bool pinned, bool *fresh)
{
	int want = q->ai_family, saved = errno, error = 0;
	struct found f = {.n = 0};
	struct rlb_dns_answer *a;
	char *hosts;

	/* No cancel between a malloc and its free (the DNS wait is a
	 * cancellation point): it acts at the program's next one. */
	int cancel = rlb_cancel_off();

	(void)ttl_s;
	(void)pinned;
	*fresh = true;
	if (!literal(host, want, &f)) {
		hosts = hosts_read();
		if (!hosts || !hosts_match(hosts, host, want, &f))
			error = dns_ask(host, want, &f);
		else if (!f.n)
			error = EAI_NODATA;
		free(hosts);
	} else if (!f.n) {
		error = EAI_ADDRFAMILY;
	}
	a = answer_of(&f, error, service, q);
	rlb_cancel_restore(cancel);
	errno = saved;
	return a;
}

const struct rlb_resolver rlb_nss_resolver = {.ask = nss_ask};

void rlb_nss_local_fqdn(char *buf, size_t len)
{
	char name[RLB_MAX_HOST + 1] = "", *hosts;
	char *save = NULL;

	if (gethostname(name, sizeof(name) - 1) != 0)
		name[0] = '\0';
	snprintf(buf, len, "%s", name);
	if (strchr(name, '.') || !name[0] || !(hosts = hosts_read()))
		return;
	/* The canonical name glibc's files source gives: the first name of
	 * the first line naming this host. */
	for (char *line = strtok_r(hosts, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(line, '#'), *ws = NULL, *first, *n;
		bool match = false;

		if (hash)
			*hash = '\0';
		if (!strtok_r(line, " \t\r", &ws) ||
		    !(first = strtok_r(NULL, " \t\r", &ws)))
			continue;
		for (n = first; n && !match; n = strtok_r(NULL, " \t\r", &ws))
			match = strcasecmp(n, name) == 0;
		if (match) {
			snprintf(buf, len, "%s", first);
			break;
		}
	}
	free(hosts);
}
