/* nss_call.c - call one entry point of an NSS module directly, as
 * systemd's test-nss-hosts does, and print what it gave (nss.sh):
 *
 *   nss_call MODULE ENTRY NAME AF BUFLEN [prealloc] [blocks] [pause]
 *
 * ENTRY is 4 (gethostbyname4_r), 3, 2 or 1 (gethostbyname_r); AF is
 * inet, inet6 or unspec; prealloc hands 4_r a tuple of the caller's.
 * Prints "STATUS errno=E h_errno=H", then one address a line; for 4_r
 * "first=caller" when the list starts in the caller's tuple. Also checks
 * that errno is kept and the signal mask unchanged across the call.
 * blocks: the call is made twice, and after each "blocks=N" says how
 * often the module blocked signals in it (pthread_sigmask(SIG_BLOCK),
 * interposed here: exported, the program linked -rdynamic); pause: 1.1 s
 * between the two (the state's once-a-second follow is due then). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <nss.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum nss_status (*fn4)(const char *, struct gaih_addrtuple **, char *,
			       size_t, int *, int *, int32_t *);
typedef enum nss_status (*fn3)(const char *, int, struct hostent *, char *,
			       size_t, int *, int *, int32_t *, char **);
typedef enum nss_status (*fn2)(const char *, int, struct hostent *, char *,
			       size_t, int *, int *);
typedef enum nss_status (*fn1)(const char *, struct hostent *, char *, size_t,
			       int *, int *);

static int nblocks;

/* The module's pthread_sigmask(): counted, then libc's. */
__attribute__((visibility("default"))) int
pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	static int (*real)(int, const sigset_t *, sigset_t *);

	if (!real)
		real = (int (*)(int, const sigset_t *, sigset_t *))dlsym(
			RTLD_NEXT, "pthread_sigmask");
	if (how == SIG_BLOCK)
		nblocks++;
	return real ? real(how, set, old) : EINVAL;
}

static const char *status_name(enum nss_status st)
{
	switch (st) {
	case NSS_STATUS_SUCCESS:
		return "SUCCESS";
	case NSS_STATUS_NOTFOUND:
		return "NOTFOUND";
	case NSS_STATUS_TRYAGAIN:
		return "TRYAGAIN";
	case NSS_STATUS_UNAVAIL:
		return "UNAVAIL";
	default:
		return "OTHER";
	}
}

static void print_addr(int af, const void *bytes)
{
	char text[INET6_ADDRSTRLEN];

	printf("%s\n", inet_ntop(af, bytes, text, sizeof(text)));
}

/* One call of entry f, printed; errno and the signal mask checked. */
static void call(void *f, int entry, const char *name, int af, char *buf,
		 size_t buflen, bool prealloc)
{
	int err = 0, herr = 0;
	enum nss_status st;
	sigset_t before, after;
	struct hostent h;
	int32_t ttl = 42;

	sigemptyset(&before);
	sigaddset(&before, SIGUSR1);
	sigprocmask(SIG_SETMASK, &before, NULL);
	errno = 4242;
	if (entry == 4) {
		struct gaih_addrtuple mine = {0}, *pat = NULL;

		if (prealloc)
			pat = &mine;
		st = ((fn4)f)(name, &pat, buf, buflen, &err, &herr, &ttl);
		printf("%s errno=%d h_errno=%d\n", status_name(st),
		       st == NSS_STATUS_SUCCESS ? 0 : err, herr);
		if (st == NSS_STATUS_SUCCESS) {
			printf("ttl=%d%s\n", (int)ttl,
			       pat == &mine ? " first=caller" : "");
			for (struct gaih_addrtuple *t = pat; t; t = t->next)
				print_addr(t->family, t->addr);
		}
	} else {
		char *canon = NULL;

		if (entry == 3)
			st = ((fn3)f)(name, af, &h, buf, buflen, &err, &herr,
				      &ttl, &canon);
		else if (entry == 2)
			st = ((fn2)f)(name, af, &h, buf, buflen, &err, &herr);
		else
			st = ((fn1)f)(name, &h, buf, buflen, &err, &herr);
		printf("%s errno=%d h_errno=%d\n", status_name(st),
		       st == NSS_STATUS_SUCCESS ? 0 : err, herr);
		if (st == NSS_STATUS_SUCCESS) {
			printf("name=%s alias=%s", h.h_name, h.h_aliases[0]);
			if (entry == 3)
				printf(" ttl=%d canon=%s", (int)ttl,
				       canon == h.h_name ? "h_name" : "other");
			printf("\n");
			for (char **a = h.h_addr_list; *a; a++)
				print_addr(h.h_addrtype, *a);
		}
	}
	/* errno kept, signal mask as it was. */
	if (errno != 4242)
		printf("errno changed: %d\n", errno);
	sigprocmask(SIG_SETMASK, NULL, &after);
	if (!sigismember(&after, SIGUSR1) || sigismember(&after, SIGUSR2))
		printf("signal mask changed\n");
}

int main(int argc, char **argv)
{
	char symbol[64], *buf;
	int af, entry;
	size_t buflen;
	bool prealloc = false, blocks = false, pause = false;
	void *lib, *f;

	if (argc < 6) {
		fprintf(stderr, "usage: nss_call MODULE ENTRY NAME AF BUFLEN "
				"[prealloc] [blocks]\n");
		return 2;
	}
	for (int k = 6; k < argc; k++) {
		prealloc |= strcmp(argv[k], "prealloc") == 0;
		blocks |= strcmp(argv[k], "blocks") == 0;
		pause |= strcmp(argv[k], "pause") == 0;
	}
	entry = atoi(argv[2]);
	af = strcmp(argv[4], "inet6") == 0    ? AF_INET6
	     : strcmp(argv[4], "unspec") == 0 ? AF_UNSPEC
					      : AF_INET;
	buflen = strtoul(argv[5], NULL, 10);
	lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	snprintf(symbol, sizeof(symbol), "_nss_replicalb_gethostbyname%s_r",
		 entry == 1   ? ""
		 : entry == 2 ? "2"
		 : entry == 3 ? "3"
			      : "4");
	f = dlsym(lib, symbol);
	buf = malloc(buflen ? buflen : 1);
	if (!f || !buf)
		return 2;
	for (int k = 0; k < (blocks ? 2 : 1); k++) {
		if (k && pause)
			nanosleep(&(struct timespec){1, 100000000}, NULL);
		nblocks = 0;
		call(f, entry, argv[3], af, buf, buflen, prealloc);
		if (blocks)
			printf("blocks=%d\n", nblocks);
	}
	return 0;
}
