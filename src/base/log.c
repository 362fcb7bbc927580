/* log.c - the library's messages: "replicalb[PID]: ..." to stderr, or to
 * syslog under the ident "replicalb" whatever the program, filtered by
 * level, quiet when nothing is wrong. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "base/base.h"

static const char *const level_names[] = {
	[RLB_LOG_NONE] = "none",       [RLB_LOG_ERROR] = "error",
	[RLB_LOG_WARNING] = "warning", [RLB_LOG_INFO] = "info",
	[RLB_LOG_DEBUG] = "debug",
};

static atomic_int log_level = RLB_LOG_WARNING;
static atomic_int log_target = RLB_LOG_STDERR;

/*
 * One syslog message, sent as syslog(3) would send it but of our own:
 * "<PRI>replicalb[PID]: PROG: TEXT" to /dev/log, the time left to the
 * daemon (rsyslog and journald stamp it). Our own because
 * - the ident is then "replicalb" in every program, which is what an
 *   operator filters on (journalctl -t replicalb, rsyslog's
 *   $programname), and the program is named in the text;
 * - nothing of the program's syslog state is used or changed: no
 *   openlog(), its ident, facility and options stay its own;
 * - syslog(3) takes a lock of libc's, which a fork() while the library's
 *   own thread held it would leave held in the child (design.md §13.4).
 * A datagram socket, else a stream one (an old syslogd's), as glibc
 * does. Opened per message: the library warns rarely, and
 * rate-limits what repeats. No cancellation meanwhile: a cancel in the
 * connect() or write() would leave the socket open.
 */
static void own_syslog(int prio, const char *text)
{
	static const struct sockaddr_un dev_log = {AF_UNIX, "/dev/log"};
	static const int types[] = {SOCK_DGRAM, SOCK_STREAM};
	char msg[1200];
	size_t len;
	int n, fd, cancel;

	n = snprintf(msg, sizeof(msg), "<%d>replicalb[%d]: %s: %s", prio,
		     (int)rlb_libc()->getpid(), program_invocation_short_name,
		     text);
	if (n <= 0)
		return;
	len = (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;
	cancel = rlb_cancel_off();
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		fd = rlb_libc()->socket(AF_UNIX, types[t] | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		if (rlb_libc()->connect(fd, (const struct sockaddr *)&dev_log,
					sizeof(dev_log)) == 0) {
			/* A stream's messages end with a NUL, as glibc's;
			 * MSG_NOSIGNAL: a closed stream must not SIGPIPE
			 * the program. */
			struct iovec iov = {msg, len + (t == 1)};
			struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

			if (rlb_libc()->sendmsg(fd, &mh, MSG_NOSIGNAL) < 0) {
				/* Nowhere to report a failed report. */
			}
			rlb_libc()->close(fd);
			break;
		}
		rlb_libc()->close(fd);
	}
	rlb_cancel_restore(cancel);
}

int rlb_log_level_parse(const char *s, enum rlb_log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(*level_names);
	     i++) {
		if (strcasecmp(s, level_names[i]) == 0) {
			*out = (enum rlb_log_level)i;
			return 0;
		}
	}
	return -1;
}

const char *rlb_log_level_name(enum rlb_log_level level)
{
	if ((unsigned)level >= sizeof(level_names) / sizeof(*level_names))
		return "?";
	return level_names[level];
}

void rlb_log_configure(enum rlb_log_level level, enum rlb_log_target target)
{
	atomic_store(&log_level, level);
	atomic_store(&log_target, target);
}

bool rlb_log_enabled(enum rlb_log_level level)
{
	return level != RLB_LOG_NONE &&
	       (int)level <=
		       atomic_load_explicit(&log_level, memory_order_relaxed);
}

void rlb_log(enum rlb_log_level level, const char *fmt, ...)
{
	static const int syslog_prio[] = {
		[RLB_LOG_NONE] = LOG_DEBUG,	 [RLB_LOG_ERROR] = LOG_ERR,
		[RLB_LOG_WARNING] = LOG_WARNING, [RLB_LOG_INFO] = LOG_INFO,
		[RLB_LOG_DEBUG] = LOG_DEBUG,
	};
	char line[1024];
	int saved = errno;
	size_t off;
	va_list ap;
	int n;

	if (!rlb_log_enabled(level))
		return;
	n = snprintf(line, sizeof(line),
		     "replicalb[%d]: ", (int)rlb_libc()->getpid());
	off = n > 0 ? (size_t)n : 0;
	va_start(ap, fmt);
	n = vsnprintf(line + off, sizeof(line) - off - 1, fmt, ap);
	va_end(ap);
	if (atomic_load(&log_target) == RLB_LOG_SYSLOG) {
		/* The text alone: the tag is own_syslog()'s. */
		own_syslog(LOG_USER | syslog_prio[level], line + off);
		errno = saved;
		return;
	}
	if (n > 0)
		off += (size_t)n < sizeof(line) - off - 1
			       ? (size_t)n
			       : sizeof(line) - off - 2;
	line[off++] = '\n';
	if (rlb_libc()->write(STDERR_FILENO, line, off) < 0) {
		/* Nowhere to report a failed report. */
	}
	errno = saved;
}
