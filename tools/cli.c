// SPDX-License-Identifier: MIT
/* tools/cli.c - small helpers the command-line tools share. */
#include "cli.h"

#include <stdarg.h>
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
