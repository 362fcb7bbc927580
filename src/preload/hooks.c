/* hooks.c - the exported interposers. Each decides "is this ours?" and
 * either calls libc or hands over to the core; nothing else lives here. */
#include "config.h"

#include <stdarg.h>

#include "preload/preload.h"

#define RLB_EXPORT __attribute__((visibility("default")))

/*
 * The config in force and the cluster `name` names in it, or NULL (with
 * no reference held) when the name is not a virtual one.
 */
static struct rlb_cluster *virtual_cluster(const char *name,
					   struct rlb_snapshot **snap)
{
	struct rlb_cluster *c;

	if (!name || !(*snap = rlb_session_acquire()))
		return NULL;
	c = rlb_config_find((*snap)->cfg, name);
	if (!c) {
		/* A mistyped virtual name passes through: say so at debug. */
		if (rlb_log_enabled(RLB_LOG_DEBUG))
			rlb_resolve_near_miss((*snap)->cfg, name);
		rlb_session_release(*snap);
	} else if (c->srv || c->dns)
		c = rlb_session_members(c, snap);
	return c;
}

RLB_EXPORT int getaddrinfo(const char *node, const char *service,
			   const struct addrinfo *hints, struct addrinfo **res)
{
	struct rlb_snapshot *snap;
	struct rlb_cluster *c;
	int rc;

	/* AI_NUMERICHOST: a virtual name is not a number; libc says so. */
	if ((hints && (hints->ai_flags & AI_NUMERICHOST)) ||
	    !(c = virtual_cluster(node, &snap)))
		return rlb_libc()->getaddrinfo(node, service, hints, res);
	rc = rlb_resolve_getaddrinfo(c, service, hints, res);
	rlb_session_release(snap);
	return rc;
}

RLB_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret,
				char *buf, size_t buflen,
				struct hostent **result, int *h_errnop)
{
	struct rlb_snapshot *snap;
	struct rlb_cluster *c = virtual_cluster(name, &snap);
	int rc;

	if (!c)
		return rlb_libc()->gethostbyname2_r(name, af, ret, buf, buflen,
						    result, h_errnop);
	rc = rlb_resolve_gethostbyname(c, name, af, ret, buf, buflen, result,
				       h_errnop);
	rlb_session_release(snap);
	return rc;
}

RLB_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf,
			       size_t buflen, struct hostent **result,
			       int *h_errnop)
{
	struct rlb_snapshot *snap;
	struct rlb_cluster *c = virtual_cluster(name, &snap);
	int rc;

	if (!c)
		return rlb_libc()->gethostbyname_r(name, ret, buf, buflen,
						   result, h_errnop);
	rc = rlb_resolve_gethostbyname(c, name, AF_INET, ret, buf, buflen,
				       result, h_errnop);
	rlb_session_release(snap);
	return rc;
}

RLB_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	struct rlb_snapshot *snap;
	struct rlb_cluster *c = virtual_cluster(name, &snap);
	struct hostent *h;

	if (!c)
		return rlb_libc()->gethostbyname2(name, af);
	h = rlb_resolve_gethostbyname_static(c, name, af);
	rlb_session_release(snap);
	return h;
}

RLB_EXPORT struct hostent *gethostbyname(const char *name)
{
	struct rlb_snapshot *snap;
	struct rlb_cluster *c = virtual_cluster(name, &snap);
	struct hostent *h;

	if (!c)
		return rlb_libc()->gethostbyname(name);
	h = rlb_resolve_gethostbyname_static(c, name, AF_INET);
	rlb_session_release(snap);
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

RLB_EXPORT int socket(int domain, int type, int protocol)
{
	if (!rlb_track_active())
		return rlb_libc()->socket(domain, type, protocol);
	return rlb_track_socket(domain, type, protocol);
}

RLB_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			  socklen_t len)
{
	if (!rlb_track_active())
		return rlb_libc()->setsockopt(fd, level, name, val, len);
	return rlb_track_setsockopt(fd, level, name, val, len);
}

RLB_EXPORT int close(int fd)
{
	if (!rlb_track_active())
		return rlb_libc()->close(fd);
	return rlb_track_close(fd);
}

/*
 * The descriptor calls: a descriptor of a connection to a replica made
 * by one of them shares its connection's place in the ledger (design.md
 * §11.8). Others pass straight through.
 */
RLB_EXPORT int dup(int fd)
{
	if (!rlb_track_active())
		return rlb_libc()->dup(fd);
	return rlb_track_dup(fd);
}

RLB_EXPORT int dup2(int fd, int newfd)
{
	if (!rlb_track_active())
		return rlb_libc()->dup2(fd, newfd);
	return rlb_track_dup3(fd, newfd, 0, true);
}

RLB_EXPORT int dup3(int fd, int newfd, int flags)
{
	if (!rlb_track_active())
		return rlb_libc()->dup3(fd, newfd, flags);
	return rlb_track_dup3(fd, newfd, flags, false);
}

/* fcntl's one argument, an int, a long or a pointer, is passed whole, as
 * glibc's own fcntl passes it to the kernel. */
#define FCNTL_BODY                                                             \
	va_list ap;                                                            \
	long arg;                                                              \
                                                                               \
	va_start(ap, cmd);                                                     \
	arg = va_arg(ap, long);                                                \
	va_end(ap);                                                            \
	if (!rlb_track_active())                                               \
		return rlb_libc()->fcntl(fd, cmd, arg);                        \
	return rlb_track_fcntl(fd, cmd, arg)

RLB_EXPORT int fcntl(int fd, int cmd, ...)
{
	FCNTL_BODY;
}

/* What a program built with _FILE_OFFSET_BITS=64 calls: the same. */
RLB_EXPORT int fcntl64(int fd, int cmd, ...)
{
	FCNTL_BODY;
}

RLB_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (!rlb_track_active())
		return rlb_libc()->close_range(first, last, flags);
	return rlb_track_close_range(first, last, flags);
}

/* Descriptors of connections passed to another process (SCM_RIGHTS). */
RLB_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (!rlb_track_active())
		return rlb_libc()->sendmsg(fd, msg, flags);
	return rlb_track_sendmsg(fd, msg, flags);
}

RLB_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t rc = rlb_libc()->recvmsg(fd, msg, flags);
	struct rlb_snapshot *snap;

	/* A receiver may never have resolved a name: what it received is
	 * looked at whenever it is configured at all. Only a message with
	 * room for a descriptor costs more than one comparison. */
	if (rc >= 0 && msg && msg->msg_controllen >= CMSG_LEN(sizeof(int)) &&
	    (snap = rlb_session_acquire())) {
		rlb_track_recvmsg_done(msg);
		rlb_session_release(snap);
	}
	return rc;
}

/*
 * The exec family: what only close-on-exec descriptors hold is let go
 * first (a child forked with its parent's connections, then exec'd, no
 * longer holds them). glibc's own exec functions call execve inside
 * libc, so each is hooked; the l forms are built on the v forms as
 * glibc's are, their arguments on the stack (no malloc after a fork).
 */
/* The v forms' bodies, which the l forms call too: never the exported
 * symbols, which would bind to these hooks through the PLT. */
static int exec_ve(const char *path, char *const argv[], char *const envp[])
{
	rlb_track_before_exec();
	return rlb_libc()->execve(path, argv, envp);
}

static int exec_v(const char *path, char *const argv[])
{
	rlb_track_before_exec();
	return rlb_libc()->execv(path, argv);
}

static int exec_vp(const char *file, char *const argv[])
{
	rlb_track_before_exec();
	return rlb_libc()->execvp(file, argv);
}

RLB_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_ve(path, argv, envp);
}

RLB_EXPORT int execv(const char *path, char *const argv[])
{
	return exec_v(path, argv);
}

RLB_EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_vp(file, argv);
}

RLB_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	rlb_track_before_exec();
	return rlb_libc()->execvpe(file, argv, envp);
}

RLB_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	rlb_track_before_exec();
	return rlb_libc()->fexecve(fd, argv, envp);
}

/*
 * An l form: argv[] built on the stack from arg0 and the arguments in ap
 * up to the NULL, counted as glibc's execl counts them, then (with_env)
 * the envp that follows the NULL; handed to the matching v form's body.
 */
enum exec_l_kind { EXEC_L, EXEC_LP, EXEC_LE };

static int exec_l(enum exec_l_kind kind, const char *path, const char *arg0,
		  va_list ap)
{
	va_list count;
	size_t n = 1;

	va_copy(count, ap);
	while (va_arg(count, char *))
		n++;
	va_end(count);

	char *argv[n + 1];

	argv[0] = (char *)arg0;
	for (size_t i = 1; i < n; i++)
		argv[i] = va_arg(ap, char *);
	argv[n] = NULL;
	if (kind == EXEC_LE) {
		char *const *envp;

		(void)va_arg(ap, char *); /* the NULL */
		envp = va_arg(ap, char *const *);
		return exec_ve(path, argv, envp);
	}
	return kind == EXEC_LP ? exec_vp(path, argv) : exec_v(path, argv);
}

RLB_EXPORT int execl(const char *path, const char *arg0, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg0);
	rc = exec_l(EXEC_L, path, arg0, ap);
	va_end(ap);
	return rc;
}

RLB_EXPORT int execlp(const char *file, const char *arg0, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg0);
	rc = exec_l(EXEC_LP, file, arg0, ap);
	va_end(ap);
	return rc;
}

RLB_EXPORT int execle(const char *path, const char *arg0, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg0);
	rc = exec_l(EXEC_LE, path, arg0, ap);
	va_end(ap);
	return rc;
}
