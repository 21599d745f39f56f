/* SPDX-License-Identifier: MIT */
/*
 * How the library grows its ABI (docs/api.md, "Versions"): every parameter
 * structure carries its size as the caller compiled it, fields are only
 * ever added at its end, and a function whose arguments or structure change
 * keeps its old version for old programs (symbol versioning: the map
 * workers/libpollcore.map, PC_SYMVER below, compat.c).
 *
 * Pure logic; any thread.
 */
#ifndef PC_ABI_PVT_H
#define PC_ABI_PVT_H

#include <stddef.h>
#include <string.h>

#include <pollcore/common.h>

#include "log_pvt.h"

/*
 * abi_copy - the caller's structure of @size bytes into ours of @ours
 * bytes: what it lacks is 0 (a default), and what it has beyond ours must
 * be 0 too (a field this library does not know: refused, not ignored).
 * @base: the smallest size there ever was; @what names the structure.
 *
 * Return: 0, -EINVAL (@size below @base) or -E2BIG, pc_last_error() saying
 * which field to fix.
 */
static inline int abi_copy(void *dst, size_t ours, const void *src, size_t size, size_t base,
			   const char *what)
{
	const unsigned char *tail = (const unsigned char *)src + ours;
	size_t i;

	if (size < base)
		return set_error(-EINVAL, "struct %s: size %zu; set it to sizeof(struct %s) "
				 "(%zu in this library)", what, size, what, ours);
	for (i = 0; size > ours && i < size - ours; i++)
		if (tail[i])
			return set_error(-E2BIG, "struct %s: size %zu, and byte %zu, past the %zu "
					 "bytes this library knows, is set: a field it cannot "
					 "honour (a newer header than the library)", what, size,
					 ours + i, ours);
	memset(dst, 0, ours);
	memcpy(dst, src, PC_MIN(size, ours));
	return 0;
}

/*
 * PC_SYMVER_DEFAULT(impl, name, ver): @impl is what programs linked now get
 * for @name (name@@ver). PC_SYMVER(impl, name, ver): @impl is @name for the
 * programs linked against version @ver (name@ver). The map lists @name in
 * both versions' nodes; @impl itself stays local.
 */
#define PC_SYMVER(impl, name, ver) __asm__(".symver " #impl ", " #name "@" ver)
#define PC_SYMVER_DEFAULT(impl, name, ver) __asm__(".symver " #impl ", " #name "@@" ver)

#endif /* PC_ABI_PVT_H */
