// SPDX-License-Identifier: MIT
/* tools/cli.c - the tools' one command line (cli.h, docs/tools.md). */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "pollcore";
static void (*prog_usage)(FILE *f);

void cli_init(const char *name, void (*usage)(FILE *f))
{
	prog = name;
	prog_usage = usage;
	opterr = 0; /* cli_bad_option() says it, naming the option */
}

const char *cli_prog(void)
{
	return prog;
}

void cli_aliases(int argc, char **argv, const struct cli_alias *a)
{
	const struct cli_alias *x;
	size_t n;
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		for (x = a; x->old; x++) {
			n = strlen(x->old);
			if (strncmp(argv[i], x->old, n) || (argv[i][n] && argv[i][n] != '='))
				continue;
			/* "--idle=busy" is said as it is typed most: "--idle busy" */
			fprintf(stderr, "%s: %s is deprecated, use %.*s%s%s\n", prog, x->old,
				(int)strcspn(x->now, "="), x->now, strchr(x->now, '=') ? " " : "",
				strchr(x->now, '=') ? strchr(x->now, '=') + 1 : "");
			if (argv[i][n] == '=' && !strchr(x->now, '=')) {
				/* "--old=VALUE": "--now=VALUE"; kept for the process' life */
				char *s = malloc(strlen(x->now) + strlen(argv[i] + n) + 1);

				if (s) {
					strcpy(s, x->now);
					strcat(s, argv[i] + n);
					argv[i] = s;
				}
			} else {
				argv[i] = (char *)x->now;
			}
			break;
		}
	}
}

static int vusage(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	if (prog_usage)
		prog_usage(stderr);
	else
		fprintf(stderr, "(%s --help for usage)\n", prog);
	return CLI_EXIT_USAGE;
}

int cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vusage(fmt, ap);
	va_end(ap);
	return ret;
}

int cli_bad_option(const char *mode, char **argv)
{
	return cli_usage_error("%s%sunknown option or missing value: '%s'", mode ? mode : "",
			       mode ? ": " : "", argv[optind - 1]);
}

/* @s as a whole number, and the rest after it in @end; false when there is none */
static bool whole(const char *s, unsigned long long *v, char **end)
{
	errno = 0;
	*v = strtoull(s, end, 10);
	return *s >= '0' && *s <= '9' && !errno && *end != s;
}

int cli_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!whole(s, &v, &end) || *end || v < min || v > max) {
		cli_usage_error("%s: '%s' is not a number from %u to %u", opt, s, min, max);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static int size_of(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!whole(s, &v, &end))
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if ((*end == 'i' || *end == 'I') && shift)
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

int cli_size64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (size_of(s, &v) || v < min || v > max) {
		cli_usage_error("%s: '%s' is not a size from %" PRIu64 " to %" PRIu64
				" bytes (suffixes k, m, g, t)", opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_size32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (cli_size64(opt, s, min, max, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int cli_seconds(const char *opt, const char *s, double min, double max, double *out)
{
	double v, scale = 1;
	char *end;

	errno = 0;
	v = strtod(s, &end);
	if (end != s && !strcmp(end, "ms"))
		scale = 1e-3;
	else if (end != s && !strcmp(end, "m"))
		scale = 60;
	else if (end != s && *end && strcmp(end, "s"))
		end = (char *)s;
	v *= scale;
	if (end == s || errno || !isfinite(v) || v < min || v > max) {
		cli_usage_error("%s: '%s' is not a number of seconds from %g to %g (suffixes ms, "
				"s, m)", opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_common_opt(struct cli_common *c, int opt, const char *arg)
{
	switch (opt) {
	case 'a':
		c->addr = arg;
		return 0;
	case 'p':
		return cli_u32("--port", arg, 1, 65535, &c->port) ? CLI_EXIT_USAGE : 0;
	case 'd':
		if (!*arg)
			return cli_usage_error("--device: the name is empty");
		c->device = arg;
		return 0;
	case 'w':
		return cli_u32("--workers", arg, 1, 64, &c->workers) ? CLI_EXIT_USAGE : 0;
	case CLI_IDLE:
		if (!strcmp(arg, "busy"))
			c->idle = PC_IDLE_BUSY;
		else if (!strcmp(arg, "hybrid"))
			c->idle = PC_IDLE_HYBRID;
		else if (!strcmp(arg, "auto"))
			c->idle = PC_IDLE_AUTO;
		else
			return cli_usage_error("--idle: '%s' is not busy, hybrid or auto", arg);
		return 0;
	case 'N':
		c->no_numa = true;
		return 0;
	case 'j':
		c->json = true;
		return 0;
	case 'D':
		return cli_seconds("--time", arg, 0.001, 86400, &c->time_s) ? CLI_EXIT_USAGE : 0;
	}
	return -1;
}

int cli_other_opt(struct cli_common *c, int opt, const char *mode, char **argv)
{
	int ret;

	if (opt == 'h') {
		if (prog_usage)
			prog_usage(stdout);
		exit(0);
	}
	if (opt == '?' || opt == ':')
		return cli_bad_option(mode, argv);
	ret = cli_common_opt(c, opt, optarg);
	if (ret < 0) /* an entry of the tool's table that its switch forgot */
		return cli_usage_error("%s: option not handled", argv[optind - 1]);
	return ret;
}

int cli_client_addr(struct cli_common *c, int argc, char **argv)
{
	if (optind < argc && !c->addr)
		c->addr = argv[optind++];
	if (!c->addr)
		return cli_usage_error("client: the server address is missing (e.g. "
				       "fe80::ff:fe00:1%%d0)");
	if (optind != argc)
		return cli_usage_error("client: unexpected argument '%s'", argv[optind]);
	return 0;
}

void cli_engine_params(struct cli_common *c, struct pc_engine_params *p)
{
	c->devices[0] = c->device;
	c->devices[1] = NULL;
	p->devices = c->device ? c->devices : NULL;
	p->workers_per_device = c->workers ? c->workers : 1;
	p->idle = c->idle;
	p->no_numa = c->no_numa;
}

static const char *sep(const char *who)
{
	return who ? " " : "";
}

struct pc_engine *cli_engine_start(const char *who, const struct pc_engine_params *p)
{
	struct pc_engine *e = pc_engine_create(p);

	if (!e)
		fprintf(stderr, "%s%s%s: cannot start the engine: %s\n", prog, sep(who),
			who ? who : "", pc_last_error());
	return e;
}

int cli_listen(struct pc_engine *e, const char *who, const struct cli_common *c)
{
	int ret = pc_listen(e, c->addr, (uint16_t)c->port);

	if (ret)
		fprintf(stderr, "%s%s%s: cannot listen on %s port %u: %s\n", prog, sep(who),
			who ? who : "", c->addr ? c->addr : "any address", c->port, pc_last_error());
	return ret;
}

struct pc_conn *cli_connect(struct pc_engine *e, const struct cli_common *c, unsigned int i,
			    unsigned int n, int timeout_ms, void *user)
{
	struct pc_conn *conn = pc_connect(e, c->addr, (uint16_t)c->port, -1, timeout_ms, user);

	if (!conn)
		fprintf(stderr, "%s client: cannot connect to %s port %u (connection %u of %u): "
			"%s (%s)\n", prog, c->addr, c->port, i + 1, n, strerror(errno),
			pc_last_error());
	return conn;
}

void cli_block_stop_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
}

int cli_wait_stop(const sigset_t *sigs, void (*tick)(void *arg), unsigned int tick_ms, void *arg)
{
	const struct timespec t = { .tv_sec = tick_ms / 1000,
				    .tv_nsec = (long)(tick_ms % 1000) * 1000000 };
	int sig;

	for (;;) {
		if (!tick) {
			if (!sigwait(sigs, &sig))
				return sig;
			continue;
		}
		sig = sigtimedwait(sigs, NULL, &t);
		if (sig > 0)
			return sig;
		tick(arg);
	}
}

void cli_catch_stop(void (*fn)(int sig))
{
	struct sigaction sa = { .sa_handler = fn };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* --- JSON ------------------------------------------------------------------------------------ */

static FILE *json_out; /* NULL: stdout */

#define JOUT (json_out ? json_out : stdout)
#define json_putc(c) fputc((c), JOUT)

int cli_json_take_stdout(void)
{
	int fd = dup(STDOUT_FILENO);

	fflush(stdout);
	if (fd < 0 || !(json_out = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		if (fd >= 0 && !json_out)
			close(fd);
		json_out = NULL;
		return -errno;
	}
	return 0;
}

void cli_json_str(const char *s)
{
	json_putc('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(JOUT, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(JOUT, "\\u%04x", (unsigned char)*s);
		else
			json_putc(*s);
	}
	json_putc('"');
}

/* The comma before a member and its key. */
static void member(struct cli_json *j, const char *key)
{
	if (j->more[j->depth])
		fputs(", ", JOUT);
	j->more[j->depth] = true;
	if (key) {
		cli_json_str(key);
		fputs(": ", JOUT);
	}
}

static void open_(struct cli_json *j, const char *key, char c)
{
	member(j, key);
	json_putc(c);
	if (j->depth + 1 < PC_ARRAY_SIZE(j->more))
		j->depth++;
	j->more[j->depth] = false;
}

void cli_json_begin(struct cli_json *j)
{
	*j = (struct cli_json){ 0 };
	json_putc('{');
}

void cli_json_end(struct cli_json *j)
{
	while (j->depth)
		cli_json_close(j, '}');
	fputs("}\n", JOUT);
	fflush(JOUT);
}

void cli_json_object(struct cli_json *j, const char *key)
{
	open_(j, key, '{');
}

void cli_json_array(struct cli_json *j, const char *key)
{
	open_(j, key, '[');
}

void cli_json_close(struct cli_json *j, char c)
{
	json_putc(c);
	if (j->depth)
		j->depth--;
}

void cli_json_u64(struct cli_json *j, const char *key, uint64_t v)
{
	member(j, key);
	fprintf(JOUT, "%" PRIu64, v);
}

void cli_json_i64(struct cli_json *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(JOUT, "%" PRId64, v);
}

void cli_json_num(struct cli_json *j, const char *key, double v)
{
	member(j, key);
	if (isfinite(v))
		fprintf(JOUT, "%.6g", v);
	else
		fputs("null", JOUT);
}

void cli_json_string(struct cli_json *j, const char *key, const char *s)
{
	member(j, key);
	if (s)
		cli_json_str(s);
	else
		fputs("null", JOUT);
}

void cli_json_bool(struct cli_json *j, const char *key, bool v)
{
	member(j, key);
	fputs(v ? "true" : "false", JOUT);
}

void cli_json_workers(struct cli_json *j, const struct pc_engine *e)
{
	struct pc_worker_stats s;
	unsigned int i;

	cli_json_array(j, "workers");
	for (i = 0; e && !pc_engine_stats(e, i, &s); i++) {
		cli_json_object(j, NULL);
		cli_json_string(j, "name", s.name);
		cli_json_i64(j, "pu", s.pu);
		cli_json_i64(j, "numa_node", s.numa_node);
		cli_json_u64(j, "loops", s.loops);
		cli_json_u64(j, "completions", s.completions);
		cli_json_u64(j, "rx_msgs", s.rx_msgs);
		cli_json_u64(j, "tx_msgs", s.tx_msgs);
		cli_json_u64(j, "wrs_posted", s.wrs_posted);
		cli_json_u64(j, "doorbells", s.doorbells);
		cli_json_u64(j, "credit_writes", s.credit_writes);
		cli_json_u64(j, "sleeps", s.sleeps);
		cli_json_u64(j, "wc_errors", s.wc_errors);
		cli_json_close(j, '}');
	}
	cli_json_close(j, ']');
}
