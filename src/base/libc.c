/* libc.c - the libc seam: real functions found with dlsym(RTLD_NEXT), so
 * that we stack with nss_wrapper, socket_wrapper and sanitizers. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

/* Fallbacks for a symbol that dlsym cannot find: never crash. */
static int missing_getaddrinfo(const char *node, const char *service,
			       const struct addrinfo *hints,
			       struct addrinfo **res)
{
	errno = ENOSYS;
	return EAI_SYSTEM;
}

static void missing_freeaddrinfo(struct addrinfo *ai)
{
}

static struct hostent *missing_gethostbyname(const char *name)
{
	h_errno = NO_RECOVERY;
	return NULL;
}

static struct hostent *missing_gethostbyname2(const char *name, int af)
{
	h_errno = NO_RECOVERY;
	return NULL;
}

static int missing_gethostbyname_r(const char *name, struct hostent *ret,
				   char *buf, size_t len,
				   struct hostent **result, int *h_errnop)
{
	*result = NULL;
	*h_errnop = NO_RECOVERY;
	return ENOSYS;
}

static int missing_gethostbyname2_r(const char *name, int af,
				    struct hostent *ret, char *buf, size_t len,
				    struct hostent **result, int *h_errnop)
{
	return missing_gethostbyname_r(name, ret, buf, len, result, h_errnop);
}

static int syscall_socket(int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}

static int syscall_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	return (int)syscall(SYS_connect, fd, sa, len);
}

static int syscall_getsockopt(int fd, int level, int name, void *val,
			      socklen_t *len)
{
	return (int)syscall(SYS_getsockopt, fd, level, name, val, len);
}

static int syscall_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

static struct rlb_libc table;
/* The functions as bound, kept so that tests can put them back. */
static struct rlb_libc defaults;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static atomic_bool table_bound;

#define BIND(field, fallback)                                                  \
	do {                                                                   \
		void *sym = dlsym(RTLD_NEXT, #field);                          \
		*(void **)&table.field = sym ? sym : (void *)fallback;         \
	} while (0)

static void bind_table(void)
{
	int saved = errno;

	BIND(getaddrinfo, missing_getaddrinfo);
	BIND(freeaddrinfo, missing_freeaddrinfo);
	BIND(gethostbyname, missing_gethostbyname);
	BIND(gethostbyname2, missing_gethostbyname2);
	BIND(gethostbyname_r, missing_gethostbyname_r);
	BIND(gethostbyname2_r, missing_gethostbyname2_r);
	BIND(socket, syscall_socket);
	BIND(connect, syscall_connect);
	BIND(getsockopt, syscall_getsockopt);
	BIND(close, syscall_close);
	defaults = table;
	atomic_store_explicit(&table_bound, true, memory_order_release);
	errno = saved;
}

struct rlb_libc *rlb_libc(void)
{
	/* Every hooked call comes here: skip pthread_once once bound. */
	if (!atomic_load_explicit(&table_bound, memory_order_acquire))
		pthread_once(&table_once, bind_table);
	return &table;
}

void rlb_libc_reset(void)
{
	*rlb_libc() = defaults;
}
