/* SPDX-License-Identifier: MIT */
/*
 * USDT probes (provider "pollcore"), not installed.
 *
 * PC_PROBE(name, args...) marks a point of the data path for perf, bpftrace
 * or SystemTap: a one-byte nop at the site plus an ELF note
 * (.note.stapsdt) naming it and where its arguments are. An unused probe
 * costs that nop; its arguments are operands the compiler already has in a
 * register or memory, so pass only values at hand, never something computed
 * for the probe. Without <sys/sdt.h> (meson -Dusdt=disabled, or
 * systemtap-sdt-dev missing) it compiles to nothing and the arguments are
 * not evaluated.
 *
 * The probes, with their arguments (docs/profiling.md shows how to use them):
 *   poll_batch(n)                    a CQ poll that returned n > 0 completions
 *   post_batch(qpn, wrs)             one send doorbell: wrs WRs on QP qpn
 *   srq_refill(posted, outstanding)  one SRQ doorbell; receives posted now
 *   conn_up(qpn, passive)            a connection is UP on its worker
 *   conn_down(qpn, err, was_up)      a connection drained; err: negative
 *                                    errno or 0 for a plain disconnect
 *   credit_stall(qpn)                a send waits for the peer's credits
 *                                    (once per episode)
 *   handoff_full(slot, backlog)      the application's ring for slot is full;
 *                                    backlog: messages now kept back
 *
 * Threads: any; a probe has no state.
 */
#ifndef PC_PROBE_PVT_H
#define PC_PROBE_PVT_H

#include "pc_config.h"

#if PC_HAVE_USDT
#define SDT_USE_VARIADIC 1 /* STAP_PROBEV */
#include <sys/sdt.h>
#define PC_PROBE(name, ...) STAP_PROBEV(pollcore, name, ##__VA_ARGS__)
#else
#define PC_PROBE(name, ...) do { } while (0)
#endif

#endif /* PC_PROBE_PVT_H */
