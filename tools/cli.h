/* SPDX-License-Identifier: MIT */
/*
 * tools/cli.h - the tools' one command line (docs/tools.md): the options
 * every tool shares, numbers with units, the idle mode, deprecated
 * spellings, engine setup, listen/connect, stop signals, the server's
 * wait, and JSON output.
 *
 * A tool calls cli_init() first, rewrites old spellings with cli_aliases(),
 * puts the CLI_OPT_* entries it takes in its getopt_long() table, hands
 * every option it does not handle itself to cli_common_opt(), and builds
 * its engine with cli_engine_params() and cli_engine_start().
 *
 * Exit codes: 0 done, 1 failed, CLI_EXIT_USAGE (2) bad usage.
 */
#ifndef TOOLS_CLI_H
#define TOOLS_CLI_H

#include <pollcore/engine.h>

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_USAGE 2

/* getopt codes of the shared options without a short form */
enum { CLI_IDLE = 0x1000, CLI_TOOL_FIRST = 0x1100 /* a tool's own long-only codes start here */ };

/* getopt_long() entries of the shared options: one spelling, one short letter, everywhere */
#define CLI_OPT_ADDR	{ "addr", required_argument, NULL, 'a' }
#define CLI_OPT_PORT	{ "port", required_argument, NULL, 'p' }
#define CLI_OPT_DEVICE	{ "device", required_argument, NULL, 'd' }
#define CLI_OPT_WORKERS { "workers", required_argument, NULL, 'w' }
#define CLI_OPT_IDLE	{ "idle", required_argument, NULL, CLI_IDLE }
#define CLI_OPT_NONUMA	{ "no-numa", no_argument, NULL, 'N' }
#define CLI_OPT_JSON	{ "json", no_argument, NULL, 'j' }
#define CLI_OPT_TIME	{ "time", required_argument, NULL, 'D' }
#define CLI_OPT_HELP	{ "help", no_argument, NULL, 'h' }

/**
 * struct cli_common - the values of the shared options.
 * @addr: --addr: a server's listen address (NULL: any); a client's server.
 * @port: --port: the rdma_cm port.
 * @device: --device: the RDMA device (NULL: the first one).
 * @workers: --workers: workers per device.
 * @idle: --idle: busy, hybrid or auto (PC_IDLE_AUTO, the default).
 * @no_numa: --no-numa: workers unpinned, memory not placed.
 * @json: --json: figures as one JSON object on stdout.
 * @time_s: --time: run length in seconds (0: the tool's default).
 * @devices: @device as the engine takes it (cli_engine_params()).
 */
struct cli_common {
	const char *addr;
	uint32_t port;
	const char *device;
	uint32_t workers;
	enum pc_idle idle;
	bool no_numa;
	bool json;
	double time_s;
	const char *devices[2];
};

/**
 * cli_init - name the tool and its usage text for every message of this file.
 * @prog: the tool's name, e.g. "pollcore-echo".
 * @usage: prints the usage on the stream given (--help on stdout, a usage
 *         error on stderr); NULL: a usage error prints a hint to run --help.
 */
void cli_init(const char *prog, void (*usage)(FILE *f));

/** cli_prog - the name given to cli_init(). */
const char *cli_prog(void);

/**
 * struct cli_alias - a deprecated spelling and the one that replaces it.
 * @old: e.g. "--bind"; "--old=VALUE" is rewritten too.
 * @now: e.g. "--addr", or "--idle=busy" for an old flag that now is a value.
 */
struct cli_alias {
	const char *old;
	const char *now;
};

/**
 * cli_aliases - rewrite deprecated spellings in @argv before getopt_long()
 * reads it, with a note on stderr for each ("PROG: --bind is deprecated,
 * use --addr"). Stops at "--".
 * @argc: argument count.
 * @argv: the arguments, rewritten in place.
 * @a: the tool's aliases, ended by { NULL }.
 */
void cli_aliases(int argc, char **argv, const struct cli_alias *a);

/**
 * cli_usage_error - a usage error: say what, then the usage (or a hint).
 * @fmt: printf format of what was wrong, naming the option.
 *
 * Return: CLI_EXIT_USAGE.
 */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * cli_bad_option - getopt_long() returned '?' or ':' for argv[optind - 1].
 * @mode: "server", "client" or NULL, named in the message.
 * @argv: the arguments getopt_long() read.
 *
 * Return: CLI_EXIT_USAGE.
 */
int cli_bad_option(const char *mode, char **argv);

/**
 * cli_u32 - a whole number from @min to @max; cli_size32 takes a unit too
 * (k, m, g: binary), cli_seconds a number of seconds (fractions, and the
 * suffixes ms, s, m).
 * @opt: the option, named in the error.
 * @s: the text.
 * @min: smallest allowed.
 * @max: largest allowed.
 * @out: the value.
 *
 * Return: 0, or -1 after a usage error said why.
 */
int cli_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out);
int cli_size32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out);
int cli_size64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out);
int cli_seconds(const char *opt, const char *s, double min, double max, double *out);

/**
 * cli_common_opt - handle one of the shared options.
 * @c: the values.
 * @opt: what getopt_long() returned.
 * @arg: optarg.
 *
 * Return: 0 handled, CLI_EXIT_USAGE after a usage error, -1 not a shared
 * option ('h' included: the tool prints its usage).
 */
int cli_common_opt(struct cli_common *c, int opt, const char *arg);

/**
 * cli_other_opt - the end of a tool's option switch: -h prints the usage
 * on stdout and exits 0; '?' and ':' (unknown option, missing value) are a
 * usage error naming the option; the rest goes to cli_common_opt().
 * @c: the values.
 * @opt: what getopt_long() returned.
 * @mode: "server", "client" or NULL, named in a usage error.
 * @argv: the arguments getopt_long() read.
 *
 * Return: 0 handled, CLI_EXIT_USAGE after a usage error.
 */
int cli_other_opt(struct cli_common *c, int opt, const char *mode, char **argv);

/**
 * cli_client_addr - a client's server address: --addr, or else the one
 * argument left after the options.
 * @c: the values; @c->addr is set.
 * @argc: argument count.
 * @argv: the arguments getopt_long() read (optind after the options).
 *
 * Return: 0, or CLI_EXIT_USAGE (no address, or an argument too many).
 */
int cli_client_addr(struct cli_common *c, int argc, char **argv);

/**
 * cli_engine_params - the shared options' part of an engine's parameters:
 * devices, workers per device, idle mode, no_numa.
 * @c: the values.
 * @p: parameters, size set.
 */
void cli_engine_params(struct cli_common *c, struct pc_engine_params *p);

/**
 * cli_engine_start - pc_engine_create(), saying why on stderr when it fails.
 * @who: "server", "client" or NULL, after the tool's name.
 * @p: the parameters.
 *
 * Return: the engine, or NULL.
 */
struct pc_engine *cli_engine_start(const char *who, const struct pc_engine_params *p);

/**
 * cli_listen - pc_listen() on --addr and --port, saying why when it fails.
 * @e: the engine.
 * @who: as for cli_engine_start().
 * @c: the values.
 *
 * Return: 0 or the negative errno of pc_listen().
 */
int cli_listen(struct pc_engine *e, const char *who, const struct cli_common *c);

/**
 * cli_connect - pc_connect() to @c->addr, port @c->port, saying why when it fails.
 * @e: the engine.
 * @c: the values.
 * @i: the connection's number (from 0), and @n: how many, for the message.
 * @n: see @i.
 * @timeout_ms: pc_connect()'s.
 * @user: pc_connect()'s.
 *
 * Return: the connection, or NULL.
 */
struct pc_conn *cli_connect(struct pc_engine *e, const struct cli_common *c, unsigned int i,
			    unsigned int n, int timeout_ms, void *user);

/**
 * cli_block_stop_signals - block SIGINT and SIGTERM in the calling thread,
 * before it starts any other, so that every thread inherits the mask and
 * the signals wait for cli_wait_stop(), sigwait() or a signalfd.
 * @sigs: set to the two signals, for that wait.
 */
void cli_block_stop_signals(sigset_t *sigs);

/**
 * cli_wait_stop - a server's main loop: wait for SIGINT or SIGTERM.
 * @sigs: from cli_block_stop_signals().
 * @tick: called every @tick_ms while waiting, or NULL.
 * @tick_ms: see @tick.
 * @arg: @tick's.
 *
 * Return: the signal.
 */
int cli_wait_stop(const sigset_t *sigs, void (*tick)(void *arg), unsigned int tick_ms, void *arg);

/**
 * cli_catch_stop - a client's SIGINT and SIGTERM call @fn (which sets a flag).
 * @fn: the handler.
 */
void cli_catch_stop(void (*fn)(int sig));

/**
 * cli_json_str - print @s on stdout as a JSON string, quoted and escaped.
 * @s: NUL-terminated text.
 */
void cli_json_str(const char *s);

/**
 * cli_json_take_stdout - keep stdout for the JSON object alone: what the
 * tool prints on stdout from now on (its own lines, the library's) goes to
 * stderr. For a server with --json, which prints its figures at the end.
 *
 * Return: 0 or a negative errno (then nothing changed).
 */
int cli_json_take_stdout(void);

/**
 * struct cli_json - a JSON object printed on stdout as it is built.
 * @depth: objects and arrays open.
 * @more: per depth, whether a member was printed already (a comma is due).
 */
struct cli_json {
	unsigned int depth;
	bool more[8];
};

void cli_json_begin(struct cli_json *j);			/* { */
void cli_json_end(struct cli_json *j);				/* } and a newline */
void cli_json_object(struct cli_json *j, const char *key);	/* "key": { (NULL in an array) */
void cli_json_array(struct cli_json *j, const char *key);	/* "key": [ */
void cli_json_close(struct cli_json *j, char c);		/* } or ] */
void cli_json_u64(struct cli_json *j, const char *key, uint64_t v);
void cli_json_i64(struct cli_json *j, const char *key, int64_t v);
void cli_json_num(struct cli_json *j, const char *key, double v);
void cli_json_string(struct cli_json *j, const char *key, const char *s);
void cli_json_bool(struct cli_json *j, const char *key, bool v);

/**
 * cli_json_workers - "workers": an array of every worker's main counters.
 * @j: the object being printed.
 * @e: the engine (NULL: an empty array).
 */
void cli_json_workers(struct cli_json *j, const struct pc_engine *e);

#endif /* TOOLS_CLI_H */
