/* SPDX-License-Identifier: MIT */
/*
 * The byte pattern the rendezvous tests write and compare (test_rndv.c,
 * test_rndv_zc.c): byte i of a message of len bytes is
 * i * 131 + len * 7 + salt (mod 256), which repeats every 256 bytes. So
 * one period is computed and the rest copied and compared with memcpy()
 * and memcmp(): megabytes stay cheap under the sanitizers, whose
 * instrumented byte loops made the 16 MiB cases the slowest part of the
 * rendezvous tests there.
 */
#ifndef PC_TEST_PATTERN_H
#define PC_TEST_PATTERN_H

#include <stdint.h>
#include <string.h>

#define PAT_PERIOD 256u

static inline uint8_t pat(uint32_t i, uint32_t len, uint8_t salt)
{
	return (uint8_t)(i * 131u + len * 7u + salt);
}

/* @d[0, @len) = the pattern. */
static inline void pat_fill(uint8_t *d, uint32_t len, uint8_t salt)
{
	uint32_t i, n = len < PAT_PERIOD ? len : PAT_PERIOD;

	for (i = 0; i < n; i++)
		d[i] = pat(i, len, salt);
	/* a multiple of the period is there: copy it after itself, doubling */
	for (i = n; i < len; i *= 2)
		memcpy(d + i, d, len - i < i ? len - i : i);
}

/* The first of @d's @n bytes that is not the pattern of a @len-byte message, or -1. */
static inline long pat_diff(const uint8_t *d, uint32_t n, uint32_t len, uint8_t salt)
{
	uint8_t ref[PAT_PERIOD];
	uint32_t off, k, i;

	for (i = 0; i < PAT_PERIOD; i++)
		ref[i] = pat(i, len, salt);
	for (off = 0; off < n; off += PAT_PERIOD) {
		k = n - off < PAT_PERIOD ? n - off : PAT_PERIOD;
		if (!memcmp(d + off, ref, k))
			continue;
		for (i = 0; i < k; i++)
			if (d[off + i] != ref[i])
				return (long)(off + i);
	}
	return -1;
}

#endif /* PC_TEST_PATTERN_H */
