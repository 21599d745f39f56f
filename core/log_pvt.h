/* SPDX-License-Identifier: MIT */
/*
 * The thread's last error, recorded where an error is returned (core, numa
 * and workers; not exported). The application reads it with
 * pc_last_error(); the library logs it only at debug level, since the
 * caller gets the error and decides whether it is worth a line.
 */
#ifndef PC_LOG_PVT_H
#define PC_LOG_PVT_H

#include <pollcore/common.h>

/*
 * set_error - record @fmt as the thread's last error; returns @err (a
 * negative errno), so that callers write `return set_error(-EINVAL, ...)`.
 */
int set_error(int err, const char *fmt, ...) pc_printf(2, 3);

/* set_error() that also logs at @level (e.g. PC_LOG_DEBUG, or WARN for what no caller sees). */
int set_errorl(enum pc_log_level level, int err, const char *fmt, ...) pc_printf(3, 4);

#endif /* PC_LOG_PVT_H */
