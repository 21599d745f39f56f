// SPDX-License-Identifier: MIT
/* tools/hist.c - the tools' latency histogram (hist.h). */
#include "hist.h"

void hist_merge(struct tool_hist *into, const struct tool_hist *from)
{
	unsigned int i;

	if (!from->n)
		return;
	for (i = 0; i < HIST_BUCKETS; i++)
		into->b[i] += from->b[i];
	into->min = into->n && into->min < from->min ? into->min : from->min;
	into->max = into->max > from->max ? into->max : from->max;
	into->n += from->n;
}

/* The middle of bucket @i (its exact value below 256 ns). */
static double hist_value(unsigned int i)
{
	unsigned int e;

	if (i < 2 * HIST_SUB)
		return i;
	e = i / HIST_SUB + 6;
	return (double)((uint64_t)(HIST_SUB + i % HIST_SUB) << (e - 7)) +
	       (double)(1ull << (e - 7)) / 2;
}

double hist_quantile(const struct tool_hist *h, double q)
{
	uint64_t want = (uint64_t)(q * (double)h->n), seen = 0;
	unsigned int i;
	double v;

	if (!h->n)
		return 0;
	want = want >= h->n ? h->n - 1 : want;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen > want) {
			v = hist_value(i);
			v = v < (double)h->min ? (double)h->min : v;
			return v > (double)h->max ? (double)h->max : v;
		}
	}
	return (double)h->max;
}
