/* SPDX-License-Identifier: MIT */
/* pollcore/pollcore.h - everything an application needs. */
#ifndef POLLCORE_POLLCORE_H
#define POLLCORE_POLLCORE_H

#include <pollcore/common.h>
#include <pollcore/verbs.h>
#include <pollcore/ring.h>
#include <pollcore/pool.h>
#include <pollcore/numa.h>
#include <pollcore/engine.h>
#include <pollcore/poller.h>
#include <pollcore/stats.h>

#endif /* POLLCORE_POLLCORE_H */
