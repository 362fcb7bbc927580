/* cli.c - replicalbctl's command line from one table of options
 * (ctl_options[]) and the caller's table of commands: the parser, the
 * usage text, the words completion offers, and "did you mean" for an
 * unknown command (design.md §6). An option is allowed only with the
 * commands whose `opts` name its flag; a flag of 0 is global. */
#include "config.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"

/* Where an option's argument goes, or what the option does. */
enum opt_action {
	ACT_FLAG,    /* sets its flag only */
	ACT_VALUE,   /* its argument into the field at `field` */
	ACT_APP,     /* -a: a checked app name */
	ACT_HELP,    /* the usage, exit 0 */
	ACT_VERSION, /* the version, exit 0 */
};

struct ctl_option {
	char short_name; /* 0: long only */
	const char *long_name;
	const char *arg; /* its argument's name; NULL: takes none */
	unsigned flag;	 /* CTL_OPT_*; 0: global */
	enum opt_action action;
	size_t field; /* ACT_VALUE, ACT_APP: offsetof(struct ctl_opts, ...) */
	const char *help; /* lines split by \n */
};

#define FIELD(f) offsetof(struct ctl_opts, f)

static const struct ctl_option ctl_options[] = {
	{'c', "config", "FILE", 0, ACT_VALUE, FIELD(config),
	 "config file; default: $REPLICALB_CONFIG,\nelse the system "
	 "file:\n" SYSCONFDIR "/replicalb/replicalb.conf"},
	{'a', "app", "APP", 0, ACT_APP, FIELD(app),
	 "also read apps.d/APP.conf"},
	{'H', "hostname", "NAME", 0, ACT_VALUE, FIELD(hostname),
	 "local hostname for hostname policies"},
	{'n', "count", "COUNT", CTL_OPT_COUNT, ACT_VALUE, FIELD(count),
	 "number of selections"},
	{0, "peek", NULL, CTL_OPT_PEEK, ACT_FLAG, 0, "change no shared state"},
	{'v', "verbose", NULL, CTL_OPT_VERBOSE, ACT_FLAG, 0,
	 "show each replica's key"},
	{0, "json", NULL, CTL_OPT_JSON, ACT_FLAG, 0, "print JSON"},
	{0, "prometheus", NULL, CTL_OPT_PROM, ACT_FLAG, 0,
	 "Prometheus's text format"},
	{0, "interval", "S", CTL_OPT_INTERVAL, ACT_VALUE, FIELD(interval),
	 "again every S seconds, forever"},
	{0, "all", NULL, CTL_OPT_ALL, ACT_FLAG, 0, "every cluster's state"},
	{'h', "help", NULL, 0, ACT_HELP, 0, "show this help"},
	{0, "version", NULL, 0, ACT_VERSION, 0, "show the version"},
};
#define NOPTIONS (sizeof(ctl_options) / sizeof(*ctl_options))

/* The column where help text starts in the usage. */
#define HELP_COLUMN 28

static void verror(const char *fmt, va_list ap)
{
	fputs(CTL_NAME ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void rlb_ctl_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(fmt, ap);
	va_end(ap);
}

int rlb_ctl_usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(fmt, ap);
	va_end(ap);
	fputs(CTL_SYNOPSIS, stderr);
	fputs("Try '" CTL_NAME " --help' for more.\n", stderr);
	return 1;
}

/* How option o is written: "-n" or "--peek". */
static const char *spelling(const struct ctl_option *o, char *buf, size_t len)
{
	if (o->short_name)
		snprintf(buf, len, "-%c", o->short_name);
	else
		snprintf(buf, len, "--%s", o->long_name);
	return buf;
}

/* left, then help from HELP_COLUMN (on a line of its own when left is
 * too wide), its further lines there too. */
static void usage_line(FILE *f, const char *left, const char *help)
{
	int n = fprintf(f, "%s", left);

	if (n >= HELP_COLUMN - 1) {
		fputc('\n', f);
		n = 0;
	}
	for (const char *line = help; line; n = 0) {
		const char *nl = strchr(line, '\n');
		int len = nl ? (int)(nl - line) : (int)strlen(line);

		fprintf(f, "%*s%.*s\n", HELP_COLUMN - n, "", len, line);
		line = nl ? nl + 1 : NULL;
	}
}

void rlb_ctl_usage(FILE *f, const struct ctl_cmd *cmds, size_t ncmds)
{
	char left[160], sp[32], help[160];

	fputs(CTL_SYNOPSIS "\ncommands:\n", f);
	for (size_t i = 0; i < ncmds; i++) {
		size_t off;

		if (!cmds[i].help)
			continue; /* hidden (__complete) */
		off = (size_t)snprintf(left, sizeof(left), "  %s",
				       cmds[i].name);
		for (size_t k = 0; k < NOPTIONS && off < sizeof(left); k++) {
			const struct ctl_option *o = &ctl_options[k];

			if (!o->flag || !(cmds[i].opts & o->flag))
				continue;
			off += (size_t)snprintf(
				left + off, sizeof(left) - off, " [%s%s%s]",
				spelling(o, sp, sizeof(sp)), o->arg ? " " : "",
				o->arg ? o->arg : "");
		}
		if (cmds[i].args && off < sizeof(left))
			snprintf(left + off, sizeof(left) - off, " %s",
				 cmds[i].args);
		usage_line(f, left, cmds[i].help);
	}
	fputs("\noptions:\n", f);
	for (size_t k = 0; k < NOPTIONS; k++) {
		const struct ctl_option *o = &ctl_options[k];
		size_t off = 0;

		if (o->short_name)
			snprintf(left, sizeof(left), "  -%c, --%s%s%s",
				 o->short_name, o->long_name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		else
			snprintf(left, sizeof(left), "      --%s%s%s",
				 o->long_name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		/* A command option's help names its commands first. */
		help[0] = '\0';
		for (size_t i = 0; o->flag && i < ncmds; i++)
			if (cmds[i].help && (cmds[i].opts & o->flag))
				off += (size_t)snprintf(
					help + off, sizeof(help) - off, "%s%s",
					off ? ", " : "", cmds[i].name);
		snprintf(help + off, sizeof(help) - off, "%s%s",
			 off ? ": " : "", o->help);
		usage_line(f, left, help);
	}
}

/* Command i's name, for rlb_closest_word() (hidden ones left out). */
static const char *command_word(void *ctx, size_t i)
{
	const struct ctl_cmd *cmds = ctx;

	return cmds[i].help ? cmds[i].name : NULL;
}

const struct ctl_cmd *rlb_ctl_find_command(const struct ctl_cmd *cmds,
					   size_t ncmds, const char *name,
					   bool report)
{
	const char *close;

	for (size_t i = 0; i < ncmds; i++)
		if (strcmp(name, cmds[i].name) == 0)
			return &cmds[i];
	if (!report)
		return NULL;
	close = rlb_closest_word(name, command_word, (void *)cmds, ncmds, true);
	if (close)
		rlb_ctl_usage_error("unknown command \"%s\"; did you mean "
				    "\"%s\"?",
				    name, close);
	else
		rlb_ctl_usage_error("unknown command \"%s\"", name);
	return NULL;
}

int rlb_ctl_parse(int argc, char **argv, const struct ctl_cmd *cmds,
		  size_t ncmds, struct ctl_opts *o)
{
	struct option longopts[NOPTIONS + 1];
	char shortopts[3 + 2 * NOPTIONS + 1] = "-:";
	size_t ns = 2;
	int ch;

	memset(longopts, 0, sizeof(longopts));
	for (size_t k = 0; k < NOPTIONS; k++) {
		const struct ctl_option *opt = &ctl_options[k];

		/* Every option comes back as 256 + its index. */
		longopts[k] = (struct option){opt->long_name,
					      opt->arg ? required_argument
						       : no_argument,
					      NULL, 256 + (int)k};
		if (opt->short_name) {
			shortopts[ns++] = opt->short_name;
			if (opt->arg)
				shortopts[ns++] = ':';
		}
	}
	shortopts[ns] = '\0';
	o->args = calloc((size_t)argc + 1, sizeof(*o->args));
	if (!o->args) {
		rlb_ctl_error("out of memory");
		return 1;
	}
	/* Leading '-': positionals come back in order as option 1. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) !=
	       -1) {
		const struct ctl_option *opt = NULL;

		if (ch == 1) {
			o->args[o->nargs++] = optarg;
			continue;
		}
		if (ch == ':')
			return rlb_ctl_usage_error(
				"option %s needs an argument",
				argv[optind - 1]);
		if (ch >= 256 && ch < 256 + (int)NOPTIONS)
			opt = &ctl_options[ch - 256];
		for (size_t k = 0; !opt && ch != '?' && k < NOPTIONS; k++)
			if (ctl_options[k].short_name == ch)
				opt = &ctl_options[k];
		if (!opt) {
			/* A long option: unknown, or given an argument. */
			if (optopt <= 0 || optopt >= 256 ||
			    strncmp(argv[optind - 1], "--", 2) == 0)
				return rlb_ctl_usage_error("invalid option %s",
							   argv[optind - 1]);
			return rlb_ctl_usage_error("unknown option -%c",
						   optopt);
		}
		o->given |= opt->flag;
		switch (opt->action) {
		case ACT_FLAG:
			break;
		case ACT_APP:
			if (!*optarg || strchr(optarg, '/') ||
			    strcmp(optarg, ".") == 0 ||
			    strcmp(optarg, "..") == 0)
				return rlb_ctl_usage_error(
					"invalid app name: %s", optarg);
			/* fall through */
		case ACT_VALUE:
			*(const char **)((char *)o + opt->field) = optarg;
			break;
		case ACT_HELP:
			rlb_ctl_usage(stdout, cmds, ncmds);
			return 0;
		case ACT_VERSION:
			puts(CTL_NAME " " PACKAGE_VERSION);
			return 0;
		}
	}
	while (optind < argc)
		o->args[o->nargs++] = argv[optind++];
	return -1;
}

int rlb_ctl_check_options(const struct ctl_cmd *cmd, const struct ctl_opts *o)
{
	char sp[32];

	for (size_t k = 0; k < NOPTIONS; k++) {
		const struct ctl_option *opt = &ctl_options[k];

		if (opt->flag && (o->given & opt->flag) &&
		    !(cmd->opts & opt->flag))
			return rlb_ctl_usage_error(
				"%s does not take %s", cmd->name,
				spelling(opt, sp, sizeof(sp)));
	}
	return 0;
}

bool rlb_ctl_option_takes_arg(const char *word)
{
	for (size_t k = 0; k < NOPTIONS; k++) {
		const struct ctl_option *o = &ctl_options[k];
		char sp[32];

		if (!o->arg)
			continue;
		snprintf(sp, sizeof(sp), "--%s", o->long_name);
		if (strcmp(word, sp) == 0 ||
		    (o->short_name && word[0] == '-' &&
		     word[1] == o->short_name && !word[2]))
			return true;
	}
	return false;
}

void rlb_ctl_print_options(const struct ctl_cmd *cmd)
{
	for (size_t k = 0; k < NOPTIONS; k++) {
		const struct ctl_option *o = &ctl_options[k];

		if (!o->flag || (cmd && (cmd->opts & o->flag)))
			printf("--%s\n", o->long_name);
	}
}
