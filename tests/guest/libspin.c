// SPDX-License-Identifier: GPL-2.0
/* libspin.so: code that churn dlopen()s, runs and dlclose()s (munmap of a sampled image). */
#include <time.h>

volatile unsigned int spin_sink;

__attribute__((noinline)) void spin_in_lib(unsigned int ms)
{
	struct timespec t0, t;
	unsigned int x = spin_sink;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 20000; i++)
			x = x * 1103515245u + 12345u;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < (long)ms);
	spin_sink = x;
}
