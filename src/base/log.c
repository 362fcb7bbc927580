/* log.c - the library's messages: "replicalb[PID]: ..." to stderr or
 * syslog, filtered by level, quiet when nothing is wrong. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
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
/* This thread is one of the library's own (rlb_log_own_thread()). */
static RLB_TLS bool own_thread;

void rlb_log_own_thread(void)
{
	own_thread = true;
}

/*
 * A syslog message sent the way syslog(3) would, but with no lock of
 * libc's (syslog(3) holds one that a fork() would copy held): one
 * datagram "<PRI>PROG: LINE" to /dev/log, the time left to the daemon.
 */
static void own_syslog(int prio, const char *line)
{
	static const struct sockaddr_un dev_log = {AF_UNIX, "/dev/log"};
	char msg[1200];
	int n, fd;

	n = snprintf(msg, sizeof(msg), "<%d>%s: %s", prio,
		     program_invocation_short_name, line);
	if (n <= 0)
		return;
	fd = rlb_libc()->socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (rlb_libc()->connect(fd, (const struct sockaddr *)&dev_log,
				sizeof(dev_log)) == 0 &&
	    rlb_libc()->write(fd, msg,
			      (size_t)n < sizeof(msg) ? (size_t)n
						      : sizeof(msg) - 1) < 0) {
		/* Nowhere to report a failed report. */
	}
	rlb_libc()->close(fd);
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
	if (n > 0)
		off += (size_t)n < sizeof(line) - off - 1
			       ? (size_t)n
			       : sizeof(line) - off - 2;
	if (atomic_load(&log_target) == RLB_LOG_SYSLOG) {
		line[off] = '\0';
		if (own_thread)
			own_syslog(LOG_USER | syslog_prio[level], line);
		else
			/* (parenthesised: a fortified syslog may be a
			 * macro) */
			(rlb_libc()->syslog)(LOG_USER | syslog_prio[level],
					     line);
	} else {
		line[off++] = '\n';
		if (rlb_libc()->write(STDERR_FILENO, line, off) < 0) {
			/* Nowhere to report a failed report. */
		}
	}
	errno = saved;
}
