/*
 * CPU feature probe for sr_prefetchw (prefetch.h): CPUID 0x80000001 ECX
 * bit 8 (PRFCHW, "3dnowprefetch" in /proc/cpuinfo), read once at load.
 */
#include "core/prefetch.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

bool sr_have_prefetchw;

__attribute__((constructor)) static void probe_prefetchw(void)
{
#if defined(__x86_64__)
	unsigned int a, b, c, d;

	if (__get_cpuid(0x80000001u, &a, &b, &c, &d))
		sr_have_prefetchw = (c >> 8) & 1;
#endif
}
