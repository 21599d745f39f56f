// SPDX-License-Identifier: MIT
/* tools/cli.c - small helpers the command-line tools share. */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>

void cli_json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

int cli_bad_usage(const char *prog, void (*usage)(FILE *f), const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (usage)
		usage(stderr);
	else
		fprintf(stderr, "(%s --help for usage)\n", prog);
	return 2;
}

int cli_parse_size(const char *prog, void (*usage)(FILE *f), const char *opt, const char *s,
		   uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned int shift = 0;
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s != '\0' && *s != '-' && !errno && end != s) {
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
		if (*end == '\0' && v <= (UINT64_MAX >> shift) && (v << shift) >= min &&
		    (v << shift) <= max) {
			*out = v << shift;
			return 0;
		}
	}
	cli_bad_usage(prog, usage, "%s: '%s' is not a size from %llu to %llu bytes (suffixes k, m, "
		      "g, t)", opt, s, (unsigned long long)min, (unsigned long long)max);
	return -1;
}

void cli_block_stop_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
}
