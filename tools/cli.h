/* SPDX-License-Identifier: MIT */
/* tools/cli.h - small helpers the command-line tools share. */
#ifndef TOOLS_CLI_H
#define TOOLS_CLI_H

/**
 * cli_json_str - print @s on stdout as a JSON string, quoted and escaped.
 * @s: NUL-terminated text.
 */
void cli_json_str(const char *s);

#endif /* TOOLS_CLI_H */
