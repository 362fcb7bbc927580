/* tun_link.c - a point-to-point link between two network namespaces, made
 * of two TUN devices, that can hold the packets to chosen addresses. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/*
 * Usage:
 *   tun_link [-a NAME] [-b NAME] [-n NETNS] [-d ADDR:MS[:all]]... -c SOCK
 *   tun_link -C SOCK COMMAND...
 *
 * The first form opens TUN device -a (default rlbtun0) in the namespace
 * it starts in, then enters the network namespace NETNS (a path such as
 * /proc/PID/ns/net; without -n, a new one of its own) and opens TUN
 * device -b (default rlbtun1) there. It forwards every IPv4 packet read
 * from one device to the other, unchanged; anything else (IPv6 router
 * solicitations) is dropped. Packets from -a to -b whose destination has
 * a hold rule wait that long first: by default only a TCP SYN without
 * ACK (a connect's SYN and its retransmissions), with "all" every packet
 * to that address. Held packets keep their order per destination; at
 * most LINK_MAX_HELD are held at once, the rest are dropped and counted.
 * It listens for commands on the UNIX socket SOCK, then prints "ready"
 * and its pid on stdout. It exits 0 on SIGTERM, SIGINT or SIGHUP, and
 * when its parent exits (the test that started it died).
 *
 * The second form sends one command to a running link and prints the
 * answer; it exits 0 when the answer is "ok ...". Commands:
 *   hold ADDR MS [syn|all]   set the rule for ADDR (MS 0: no rule)
 *   rules                    "ok ADDR MS syn|all ..." for every rule
 *   stats                    "ok forwarded N held N dropped N"
 * The devices come up unconfigured: the caller sets their addresses,
 * links and routes (tests/integration/lib_latency.sh).
 */

#define LINK_MAX_RULES 64
#define LINK_MAX_HELD  4096
#define LINK_PKT_MAX   65536

struct rule {
	struct in_addr addr; /* destination the rule is for */
	unsigned int ms;     /* how long its packets wait */
	int all;	     /* every packet, not only SYNs */
};

struct held {
	struct held *next;   /* next to release, in release order */
	uint64_t release_us; /* monotonic time it goes out */
	size_t len;	     /* bytes in pkt */
	unsigned char pkt[]; /* the IPv4 packet */
};

static struct rule rules[LINK_MAX_RULES];
static int nrules;
static struct held *queue;
static int nheld;
static unsigned long long n_forwarded, n_held, n_dropped;
static volatile sig_atomic_t stopping;

static void die(const char *what)
{
	fprintf(stderr, "tun_link: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void on_signal(int sig)
{
	stopping = 1;
}

static int tun_open(const char *name)
{
	struct ifreq ifr;
	int fd;

	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		die("/dev/net/tun");
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		die(name);
	return fd;
}

static struct rule *rule_find(struct in_addr addr)
{
	int i;

	for (i = 0; i < nrules; i++)
		if (rules[i].addr.s_addr == addr.s_addr)
			return &rules[i];
	return NULL;
}

/* Set (ms > 0) or remove (ms 0) the rule for addr: 0, or -1 when full. */
static int rule_set(struct in_addr addr, unsigned int ms, int all)
{
	struct rule *r = rule_find(addr);

	if (ms == 0) {
		if (r)
			*r = rules[--nrules];
		return 0;
	}
	if (!r) {
		if (nrules == LINK_MAX_RULES)
			return -1;
		r = &rules[nrules++];
	}
	r->addr = addr;
	r->ms = ms;
	r->all = all;
	return 0;
}

/* "ADDR MS [syn|all]" or "ADDR:MS[:all]": 0, or -1 when malformed. */
static int rule_parse(char *spec, struct in_addr *addr, unsigned int *ms,
		      int *all)
{
	char *words[3], *end, *save = NULL;
	int n = 0;
	unsigned long v;

	for (char *w = strtok_r(spec, " :", &save); w;
	     w = strtok_r(NULL, " :", &save)) {
		if (n == 3)
			return -1;
		words[n++] = w;
	}
	if (n < 2 || inet_pton(AF_INET, words[0], addr) != 1)
		return -1;
	errno = 0;
	v = strtoul(words[1], &end, 10);
	if (errno || *end || end == words[1] || v > 600000)
		return -1;
	*ms = (unsigned int)v;
	*all = 0;
	if (n == 3) {
		if (strcmp(words[2], "all") == 0)
			*all = 1;
		else if (strcmp(words[2], "syn") != 0)
			return -1;
	}
	return 0;
}

/* The rule that holds this packet (read from the first device), or NULL. */
static const struct rule *rule_for(const unsigned char *p, size_t len)
{
	struct in_addr dst;
	const struct rule *r;
	size_t ihl;
	unsigned char flags;

	if (len < 20 || (p[0] >> 4) != 4)
		return NULL;
	memcpy(&dst, p + 16, sizeof(dst));
	r = rule_find(dst);
	if (!r || r->all)
		return r;
	ihl = (size_t)(p[0] & 0x0f) * 4;
	/* TCP, first fragment, flags byte present: SYN set, ACK clear. */
	if (ihl < 20 || p[9] != IPPROTO_TCP ||
	    (((p[6] & 0x1f) << 8) | p[7]) != 0 || len < ihl + 14)
		return NULL;
	flags = p[ihl + 13];
	return (flags & 0x12) == 0x02 ? r : NULL;
}

static void hold(const unsigned char *p, size_t len, unsigned int ms)
{
	struct held *h, **at;

	if (nheld == LINK_MAX_HELD) {
		n_dropped++;
		return;
	}
	h = malloc(sizeof(*h) + len);
	if (!h) {
		n_dropped++;
		return;
	}
	h->release_us = now_us() + (uint64_t)ms * 1000;
	h->len = len;
	memcpy(h->pkt, p, len);
	/* After every packet due no later: per destination, order is kept. */
	for (at = &queue; *at && (*at)->release_us <= h->release_us;
	     at = &(*at)->next)
		;
	h->next = *at;
	*at = h;
	nheld++;
	n_held++;
}

static void send_pkt(int fd, const unsigned char *p, size_t len)
{
	if (write(fd, p, len) == (ssize_t)len)
		n_forwarded++;
	else
		n_dropped++;
}

/* Forward what is waiting on from to to; hold_rules: from is the first. */
static void pump(int from, int to, int hold_rules)
{
	static unsigned char buf[LINK_PKT_MAX];
	const struct rule *r;
	ssize_t n;

	while ((n = read(from, buf, sizeof(buf))) > 0) {
		if ((buf[0] >> 4) != 4)
			continue;
		r = hold_rules ? rule_for(buf, (size_t)n) : NULL;
		if (r)
			hold(buf, (size_t)n, r->ms);
		else
			send_pkt(to, buf, (size_t)n);
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		die("read");
}

/* Send the held packets that are due; the ms until the next (max 1000). */
static int release(int to)
{
	uint64_t now = now_us();
	struct held *h;

	while (queue && queue->release_us <= now) {
		h = queue;
		queue = h->next;
		nheld--;
		send_pkt(to, h->pkt, h->len);
		free(h);
	}
	if (!queue)
		return 1000;
	return (int)((queue->release_us - now + 999) / 1000);
}

static void answer(int c, char *line)
{
	char out[4096], *cmd, *rest;
	struct in_addr addr;
	unsigned int ms;
	int all, i;
	size_t off;

	line[strcspn(line, "\r\n")] = '\0';
	cmd = line + strspn(line, " ");
	rest = cmd + strcspn(cmd, " ");
	if (*rest)
		*rest++ = '\0';
	if (strcmp(cmd, "hold") == 0) {
		if (rule_parse(rest, &addr, &ms, &all) < 0)
			snprintf(out, sizeof(out),
				 "error: hold ADDR MS [syn|all]");
		else if (rule_set(addr, ms, all) < 0)
			snprintf(out, sizeof(out), "error: too many rules");
		else
			snprintf(out, sizeof(out), "ok");
	} else if (strcmp(cmd, "rules") == 0) {
		off = (size_t)snprintf(out, sizeof(out), "ok");
		for (i = 0; i < nrules && off < sizeof(out); i++)
			off += (size_t)snprintf(
				out + off, sizeof(out) - off, " %s %u %s",
				inet_ntoa(rules[i].addr), rules[i].ms,
				rules[i].all ? "all" : "syn");
	} else if (strcmp(cmd, "stats") == 0) {
		snprintf(out, sizeof(out),
			 "ok forwarded %llu held %llu dropped %llu",
			 n_forwarded, n_held, n_dropped);
	} else {
		snprintf(out, sizeof(out), "error: unknown command");
	}
	strcat(out, "\n");
	if (write(c, out, strlen(out)) < 0)
		return;
}

/* One command from one client, answered at once (the client waits). */
static void serve_ctl(int ls)
{
	struct timeval tv = {.tv_sec = 1};
	char line[512];
	size_t len = 0;
	ssize_t n;
	int c;

	c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return;
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (len < sizeof(line) - 1 &&
	       (n = read(c, line + len, sizeof(line) - 1 - len)) > 0) {
		len += (size_t)n;
		if (memchr(line, '\n', len))
			break;
	}
	line[len] = '\0';
	answer(c, line);
	close(c);
}

/* A UNIX stream socket, and path as its address in sun. */
static int ctl_socket(const char *path, struct sockaddr_un *sun)
{
	int s;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path)) {
		errno = ENAMETOOLONG;
		die(path);
	}
	strcpy(sun->sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die("socket");
	return s;
}

static int ctl_listen(const char *path)
{
	struct sockaddr_un sun;
	int s = ctl_socket(path, &sun);

	unlink(path);
	if (bind(s, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    listen(s, 8) < 0)
		die(path);
	return s;
}

static int ctl_send(const char *path, int argc, char **argv)
{
	struct sockaddr_un sun;
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	int s = ctl_socket(path, &sun), i;

	if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		die(path);
	for (i = 0; i < argc; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
					i ? " " : "", argv[i]);
	if (len >= sizeof(buf) - 1)
		return 2;
	buf[len++] = '\n';
	if (write(s, buf, len) != (ssize_t)len)
		die("write");
	len = 0;
	while (len < sizeof(buf) - 1 &&
	       (n = read(s, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(s);
	fputs(buf, stdout);
	return strncmp(buf, "ok", 2) == 0 && (buf[2] == '\n' || buf[2] == ' ')
		       ? 0
		       : 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: tun_link [-a NAME] [-b NAME] [-n NETNS] "
			"[-d ADDR:MS[:all]]... -c SOCK\n"
			"       tun_link -C SOCK hold ADDR MS [syn|all] | "
			"rules | stats\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *name_a = "rlbtun0", *name_b = "rlbtun1", *netns = NULL;
	const char *ctl = NULL;
	struct sigaction sa;
	struct pollfd pf[3];
	struct in_addr addr;
	unsigned int ms;
	int opt, all, fd_a, fd_b, ls, nsfd, timeout;
	pid_t parent = getppid();

	while ((opt = getopt(argc, argv, "+a:b:n:d:c:C:")) != -1) {
		switch (opt) {
		case 'a':
			name_a = optarg;
			break;
		case 'b':
			name_b = optarg;
			break;
		case 'n':
			netns = optarg;
			break;
		case 'd':
			if (rule_parse(optarg, &addr, &ms, &all) < 0 ||
			    rule_set(addr, ms, all) < 0)
				usage();
			break;
		case 'c':
			ctl = optarg;
			break;
		case 'C':
			if (optind >= argc)
				usage();
			return ctl_send(optarg, argc - optind, argv + optind);
		default:
			usage();
		}
	}
	if (!ctl || optind != argc)
		usage();

	/* Bounded: a test that dies takes its link with it. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		die("prctl");
	if (getppid() != parent)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	fd_a = tun_open(name_a);
	if (netns) {
		nsfd = open(netns, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			die(netns);
		if (setns(nsfd, CLONE_NEWNET) < 0)
			die("setns");
		close(nsfd);
	} else if (unshare(CLONE_NEWNET) < 0) {
		die("unshare");
	}
	fd_b = tun_open(name_b);
	ls = ctl_listen(ctl);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);

	pf[0] = (struct pollfd){.fd = fd_a, .events = POLLIN};
	pf[1] = (struct pollfd){.fd = fd_b, .events = POLLIN};
	pf[2] = (struct pollfd){.fd = ls, .events = POLLIN};
	while (!stopping) {
		timeout = release(fd_b);
		if (poll(pf, 3, timeout) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (getppid() != parent)
			break;
		if (pf[0].revents & POLLIN)
			pump(fd_a, fd_b, 1);
		if (pf[1].revents & POLLIN)
			pump(fd_b, fd_a, 0);
		if (pf[2].revents & POLLIN)
			serve_ctl(ls);
		if ((pf[0].revents | pf[1].revents) & (POLLERR | POLLHUP))
			break;
	}
	unlink(ctl);
	return 0;
}
