// SPDX-License-Identifier: MIT
/* tools/cli.c - small helpers the command-line tools share. */
#include "cli.h"

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
