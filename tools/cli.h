/* SPDX-License-Identifier: MIT */
/* tools/cli.h - small helpers the command-line tools share. */
#ifndef TOOLS_CLI_H
#define TOOLS_CLI_H

#include <stdio.h>

/**
 * cli_json_str - print @s on stdout as a JSON string, quoted and escaped.
 * @s: NUL-terminated text.
 */
void cli_json_str(const char *s);

/**
 * cli_bad_usage - report a usage error on stderr and give the exit code for it.
 * @prog: the tool's name, which prefixes the message.
 * @usage: prints the tool's usage on the stream it is given; NULL: a hint
 *         to run `@prog --help` is printed instead.
 * @fmt: printf format of what was wrong, naming the option.
 *
 * Return: 2, the tools' exit code for a usage error.
 */
int cli_bad_usage(const char *prog, void (*usage)(FILE *f), const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* TOOLS_CLI_H */
