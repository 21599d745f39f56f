/* SPDX-License-Identifier: MIT */
/*
 * Layer "worker" (docs/architecture.md): worker.c (the thread: its setup,
 * loop, idle and teardown, the control messages) and poller.c (the
 * application's pollers). What the engine and the control thread call.
 */
#ifndef PC_THREAD_PVT_H
#define PC_THREAD_PVT_H

#include "dp_pvt.h"

/* worker.c */
int worker_start(struct pc_worker *w, const struct worker_cfg *cfg);
void worker_stop(struct pc_worker *w);
void worker_release_device(struct pc_worker *w);
void worker_destroy(struct pc_worker *w);
void worker_wake(struct pc_worker *w);
unsigned int worker_apply_ctl(struct pc_worker *w);
void worker_sample(const struct pc_worker *w, struct pc_worker_stats *st);

/* poller.c (worker thread) */
unsigned int worker_run_pollers(struct pc_worker *w, unsigned int hi);
unsigned int worker_poller_fds(struct pc_worker *w, struct pollfd *pfd, unsigned int max);

#endif /* PC_THREAD_PVT_H */
