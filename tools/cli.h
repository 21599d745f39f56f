/* SPDX-License-Identifier: MIT */
/* tools/cli.h - small helpers the command-line tools share. */
#ifndef TOOLS_CLI_H
#define TOOLS_CLI_H

#include <signal.h>
#include <stdint.h>
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

/**
 * cli_parse_size - a size: a number with an optional k, m, g or t suffix
 * (binary; "Ki", "KiB" and "KB" read alike), from @min to @max bytes.
 * @prog: the tool's name, for the usage error.
 * @usage: as for cli_bad_usage().
 * @opt: the option, named in the error.
 * @s: the text.
 * @min: smallest allowed.
 * @max: largest allowed.
 * @out: the bytes.
 *
 * Return: 0, or -1 after cli_bad_usage() said why.
 */
int cli_parse_size(const char *prog, void (*usage)(FILE *f), const char *opt, const char *s,
		   uint64_t min, uint64_t max, uint64_t *out);

/**
 * cli_block_stop_signals - block SIGINT and SIGTERM in the calling thread,
 * before it starts any other, so that every thread inherits the mask and
 * the signals wait for sigwait(), sigtimedwait() or a signalfd.
 * @sigs: set to the two signals, for that wait.
 */
void cli_block_stop_signals(sigset_t *sigs);

#endif /* TOOLS_CLI_H */
