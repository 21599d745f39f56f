// SPDX-License-Identifier: MIT
#include <pollcore/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log_pvt.h"
#include "pc_config.h"

static pc_log_fn sink;
static void *sink_arg;
static int log_level = -1;
static __thread char last_error[512];

const char *pc_version(void)
{
	return PC_VERSION;
}

void pc_log_set_sink(pc_log_fn fn, void *arg)
{
	sink = fn;
	sink_arg = arg;
}

void pc_log_set_level(enum pc_log_level level)
{
	__atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

static int current_level(void)
{
	int l = __atomic_load_n(&log_level, __ATOMIC_RELAXED);

	if (l < 0) {
		const char *env = getenv("PC_LOG_LEVEL");

		l = env ? atoi(env) : PC_LOG_INFO;
		__atomic_store_n(&log_level, l, __ATOMIC_RELAXED);
	}
	return l;
}

static void emit(enum pc_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };

	if ((int)level > current_level())
		return;
	if (sink) {
		sink(level, msg, sink_arg);
		return;
	}
	fprintf(stderr, "pollcore %s: %s\n", names[level], msg);
}

void pc_log(enum pc_log_level level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if ((int)level > current_level())
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	emit(level, buf);
}

const char *pc_last_error(void)
{
	return last_error;
}

static int record_error(enum pc_log_level level, int err, const char *fmt, va_list ap)
{
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	emit(level, last_error);
	return err;
}

int set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	/* returned to the caller, who decides whether it is worth a line */
	err = record_error(PC_LOG_DEBUG, err, fmt, ap);
	va_end(ap);
	return err;
}

int set_errorl(enum pc_log_level level, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = record_error(level, err, fmt, ap);
	va_end(ap);
	return err;
}
