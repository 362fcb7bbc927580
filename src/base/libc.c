/* libc.c - the seam to the system (design.md §10.3): one table of the
 * functions through which the library reaches the kernel and the clock.
 * The hooked names are found with dlsym(RTLD_NEXT), so that we stack with
 * nss_wrapper, socket_wrapper and sanitizers and never call our own hooks. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
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

static int syscall_setsockopt(int fd, int level, int name, const void *val,
			      socklen_t len)
{
	return (int)syscall(SYS_setsockopt, fd, level, name, val, len);
}

static int syscall_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

static int syscall_dup(int fd)
{
	return (int)syscall(SYS_dup, fd);
}

static int syscall_dup2(int fd, int newfd)
{
	return (int)syscall(SYS_dup2, fd, newfd);
}

static int syscall_dup3(int fd, int newfd, int flags)
{
	return (int)syscall(SYS_dup3, fd, newfd, flags);
}

static ssize_t syscall_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return syscall(SYS_sendmsg, fd, msg, flags);
}

static ssize_t syscall_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return syscall(SYS_recvmsg, fd, msg, flags);
}

static int syscall_execve(const char *path, char *const argv[],
			  char *const envp[])
{
	return (int)syscall(SYS_execve, path, argv, envp);
}

/* Never reached: glibc exports them all. */
static int missing_execv(const char *path, char *const argv[])
{
	return syscall_execve(path, argv, environ);
}

static int missing_execvp(const char *file, char *const argv[])
{
	return syscall_execve(file, argv, environ);
}

static int missing_execvpe(const char *file, char *const argv[],
			   char *const envp[])
{
	return syscall_execve(file, argv, envp);
}

static int missing_fexecve(int fd, char *const argv[], char *const envp[])
{
	(void)fd, (void)argv, (void)envp;
	errno = ENOSYS;
	return -1;
}

static int syscall_close_range(unsigned first, unsigned last, int flags)
{
#ifdef SYS_close_range
	return (int)syscall(SYS_close_range, first, last, flags);
#else
	(void)first, (void)last, (void)flags;
	errno = ENOSYS;
	return -1;
#endif
}

/* libc's fcntl, past our hook (design.md §11.8): variadic, so called as
 * such; its one argument is an int, a long or a pointer, passed whole. */
static int syscall_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

static int (*next_fcntl)(int fd, int cmd, ...);

/* Fixed-argument forms of libc's variadic functions. */
static int libc_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags, mode);
}

static int libc_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return openat(dirfd, path, flags, mode);
}

static int libc_fcntl(int fd, int cmd, long arg)
{
	return next_fcntl(fd, cmd, arg);
}

static void *libc_mremap(void *old, size_t oldlen, size_t newlen, int flags,
			 void *new_addr)
{
	return mremap(old, oldlen, newlen, flags, new_addr);
}

static int libc_getrlimit(int resource, struct rlimit *rl)
{
	return getrlimit(resource, rl);
}

/* glibc has no futex(): the system call. */
static long libc_futex(uint32_t *word, int op, uint32_t val,
		       const struct timespec *timeout)
{
	return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

struct rlb_libc rlb_libc_table;
atomic_bool rlb_libc_bound;
/* The functions as bound, kept so that tests can put them back. */
static struct rlb_libc defaults;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

#define NAME(ret, name, params, args) #name,
static const char *const names[] = {RLB_LIBC_ENTRIES(NAME)};
#undef NAME
_Static_assert(sizeof(names) / sizeof(names[0]) == RLB_LIBC_COUNT,
	       "every entry of struct rlb_libc is a function pointer");

#define NEXT(field, fallback)                                                  \
	do {                                                                   \
		void *sym = dlsym(RTLD_NEXT, #field);                          \
		*(void **)&t->field = sym ? sym : (void *)fallback;            \
	} while (0)

static void bind_table(void)
{
	struct rlb_libc *t = &rlb_libc_table;
	int saved = errno;

	NEXT(getaddrinfo, missing_getaddrinfo);
	NEXT(freeaddrinfo, missing_freeaddrinfo);
	NEXT(gethostbyname, missing_gethostbyname);
	NEXT(gethostbyname2, missing_gethostbyname2);
	NEXT(gethostbyname_r, missing_gethostbyname_r);
	NEXT(gethostbyname2_r, missing_gethostbyname2_r);
	NEXT(socket, syscall_socket);
	NEXT(connect, syscall_connect);
	NEXT(getsockopt, syscall_getsockopt);
	NEXT(setsockopt, syscall_setsockopt);
	NEXT(close, syscall_close);
	NEXT(dup, syscall_dup);
	NEXT(dup2, syscall_dup2);
	NEXT(dup3, syscall_dup3);
	NEXT(close_range, syscall_close_range);
	NEXT(sendmsg, syscall_sendmsg);
	NEXT(recvmsg, syscall_recvmsg);
	NEXT(execve, syscall_execve);
	NEXT(execv, missing_execv);
	NEXT(execvp, missing_execvp);
	NEXT(execvpe, missing_execvpe);
	NEXT(fexecve, missing_fexecve);
	*(void **)&next_fcntl = dlsym(RTLD_NEXT, "fcntl");
	if (!next_fcntl)
		next_fcntl = syscall_fcntl;
	/* Not exported by us: libc's own, as a direct call would reach. */
	t->getsockname = getsockname;
	t->bind = bind;
	t->fcntl = libc_fcntl;
	t->poll = poll;
	t->open = libc_open;
	t->openat = libc_openat;
	t->read = read;
	t->pread = pread;
	t->write = write;
	t->readlinkat = readlinkat;
	t->stat = stat;
	t->lstat = lstat;
	t->fstat = fstat;
	t->fstatat = fstatat;
	t->statx = statx;
	t->access = access;
	t->realpath = realpath;
	t->mkdir = mkdir;
	t->chmod = chmod;
	t->fchmod = fchmod;
	t->flock = flock;
	t->ftruncate = ftruncate;
	t->fallocate = fallocate;
	t->renameat = renameat;
	t->linkat = linkat;
	t->unlinkat = unlinkat;
	t->opendir = opendir;
	t->fdopendir = fdopendir;
	t->readdir = readdir;
	t->closedir = closedir;
	t->mmap = mmap;
	t->munmap = munmap;
	t->mremap = libc_mremap;
	t->madvise = madvise;
	t->memfd_create = memfd_create;
	t->shmget = shmget;
	t->shmat = shmat;
	t->shmdt = shmdt;
	t->shmctl = shmctl;
	t->getpid = getpid;
	t->geteuid = geteuid;
	t->getrandom = getrandom;
	t->gethostname = gethostname;
	t->getrlimit = libc_getrlimit;
	t->sigaction = sigaction;
	t->pthread_sigmask = pthread_sigmask;
	t->nanosleep = nanosleep;
	t->futex = libc_futex;
	t->pthread_create = pthread_create;
	t->now = clock_gettime;
	defaults = *t;
	atomic_store_explicit(&rlb_libc_bound, true, memory_order_release);
	errno = saved;
}

void rlb_libc_bind(void)
{
	pthread_once(&table_once, bind_table);
}

const char *rlb_libc_name(size_t i)
{
	return i < RLB_LIBC_COUNT ? names[i] : NULL;
}

void rlb_libc_reset(void)
{
	*rlb_libc() = defaults;
}
