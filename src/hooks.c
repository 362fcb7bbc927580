/* hooks.c - the exported interposers. Each decides "is this ours?" and
 * either calls libc or hands over to the core; nothing else lives here. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rlb.h"

#define RLB_EXPORT __attribute__((visibility("default")))

/*
 * The config in force and the cluster `name` names in it, or NULL (with
 * no reference held) when the name is not a virtual one.
 */
static struct rlb_cluster *virtual_cluster(const char *name,
					   struct rlb_config **cfg)
{
	struct rlb_cluster *c;

	if (!name || !(*cfg = rlb_runtime_acquire()))
		return NULL;
	c = rlb_config_find(*cfg, name);
	if (!c)
		rlb_runtime_release(*cfg);
	return c;
}

RLB_EXPORT int getaddrinfo(const char *node, const char *service,
			   const struct addrinfo *hints, struct addrinfo **res)
{
	struct rlb_config *cfg;
	struct rlb_cluster *c;
	int rc;

	/* AI_NUMERICHOST: a virtual name is not a number; libc says so. */
	if ((hints && (hints->ai_flags & AI_NUMERICHOST)) ||
	    !(c = virtual_cluster(node, &cfg)))
		return rlb_libc()->getaddrinfo(node, service, hints, res);
	rc = rlb_resolve_getaddrinfo(c, service, hints, res);
	rlb_runtime_release(cfg);
	return rc;
}

RLB_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret,
				char *buf, size_t buflen,
				struct hostent **result, int *h_errnop)
{
	struct rlb_config *cfg;
	struct rlb_cluster *c = virtual_cluster(name, &cfg);
	int rc;

	if (!c)
		return rlb_libc()->gethostbyname2_r(name, af, ret, buf, buflen,
						    result, h_errnop);
	rc = rlb_resolve_gethostbyname(c, name, af, ret, buf, buflen, result,
				       h_errnop);
	rlb_runtime_release(cfg);
	return rc;
}

RLB_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf,
			       size_t buflen, struct hostent **result,
			       int *h_errnop)
{
	struct rlb_config *cfg;
	struct rlb_cluster *c = virtual_cluster(name, &cfg);
	int rc;

	if (!c)
		return rlb_libc()->gethostbyname_r(name, ret, buf, buflen,
						   result, h_errnop);
	rc = rlb_resolve_gethostbyname(c, name, AF_INET, ret, buf, buflen,
				       result, h_errnop);
	rlb_runtime_release(cfg);
	return rc;
}

/*
 * The non-reentrant variants share one static result, as glibc's do;
 * the buffer grows as needed and is only touched under its lock.
 */
static pthread_mutex_t static_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hostent static_host;
static char *static_buf;
static size_t static_len;

static pthread_once_t static_once = PTHREAD_ONCE_INIT;

static void static_lock_acquire(void)
{
	pthread_mutex_lock(&static_lock);
}

static void static_lock_release(void)
{
	pthread_mutex_unlock(&static_lock);
}

static void static_init(void)
{
	pthread_atfork(static_lock_acquire, static_lock_release,
		       static_lock_release);
}

static struct hostent *virtual_gethostbyname(struct rlb_cluster *c,
					     const char *name, int af)
{
	struct hostent *result = NULL;
	int herr = 0, rc;

	pthread_once(&static_once, static_init);
	pthread_mutex_lock(&static_lock);
	for (;;) {
		if (!static_buf) {
			static_len = 1024;
			static_buf = malloc(static_len);
			if (!static_buf) {
				herr = NETDB_INTERNAL;
				errno = ENOMEM;
				break;
			}
		}
		rc = rlb_resolve_gethostbyname(c, name, af, &static_host,
					       static_buf, static_len, &result,
					       &herr);
		if (rc != ERANGE || static_len >= (1u << 20))
			break;
		free(static_buf);
		static_buf = NULL;
		static_len *= 2;
		static_buf = malloc(static_len);
		if (!static_buf) {
			herr = NETDB_INTERNAL;
			errno = ENOMEM;
			break;
		}
	}
	pthread_mutex_unlock(&static_lock);
	h_errno = herr;
	return result;
}

RLB_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	struct rlb_config *cfg;
	struct rlb_cluster *c = virtual_cluster(name, &cfg);
	struct hostent *h;

	if (!c)
		return rlb_libc()->gethostbyname2(name, af);
	h = virtual_gethostbyname(c, name, af);
	rlb_runtime_release(cfg);
	return h;
}

RLB_EXPORT struct hostent *gethostbyname(const char *name)
{
	struct rlb_config *cfg;
	struct rlb_cluster *c = virtual_cluster(name, &cfg);
	struct hostent *h;

	if (!c)
		return rlb_libc()->gethostbyname(name);
	h = virtual_gethostbyname(c, name, AF_INET);
	rlb_runtime_release(cfg);
	return h;
}

RLB_EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	/* Checks "is this a replica's address?" first, in a few loads. */
	return rlb_track_connect(fd, sa, len);
}

RLB_EXPORT int getsockopt(int fd, int level, int name, void *val,
			  socklen_t *len)
{
	if (!rlb_track_active())
		return rlb_libc()->getsockopt(fd, level, name, val, len);
	return rlb_track_getsockopt(fd, level, name, val, len);
}

RLB_EXPORT int close(int fd)
{
	if (!rlb_track_active())
		return rlb_libc()->close(fd);
	return rlb_track_close(fd);
}
