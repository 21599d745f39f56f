/* SPDX-License-Identifier: MIT */
/*
 * tools/hist.h - the tools' latency histogram (pollcore-bench):
 * log-linear, exact below 256 ns, then 128 buckets per power of two; fixed
 * memory, one add per sample, no allocation. One thread writes a histogram;
 * merge them afterwards.
 */
#ifndef TOOLS_HIST_H
#define TOOLS_HIST_H

#include <stdint.h>

#define HIST_SUB     128u
#define HIST_BUCKETS (HIST_SUB * 58u)

struct tool_hist {
	uint64_t n, min, max;
	uint64_t b[HIST_BUCKETS];
};

/* Records one sample @v (nanoseconds). */
static inline void hist_add(struct tool_hist *h, uint64_t v)
{
	unsigned int i, e;

	if (v < 2 * HIST_SUB) {
		i = (unsigned int)v;
	} else {
		e = 63u - (unsigned int)__builtin_clzll(v);
		i = HIST_SUB * (e - 6) + (unsigned int)((v >> (e - 7)) & (HIST_SUB - 1));
	}
	h->b[i]++;
	if (!h->n++ || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

/**
 * hist_merge - add @from's samples to @into.
 * @into: the sum.
 * @from: a histogram no thread writes any more.
 */
void hist_merge(struct tool_hist *into, const struct tool_hist *from);

/**
 * hist_quantile - the value at quantile @q.
 * @h: histogram.
 * @q: 0 to 1 (0.5: the median).
 *
 * Return: the middle of the bucket holding it, within [min, max]; 0 when
 * @h is empty.
 */
double hist_quantile(const struct tool_hist *h, double q);

#endif /* TOOLS_HIST_H */
