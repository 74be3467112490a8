// SPDX-License-Identifier: GPL-2.0
/*
 * hot: a profile with a known answer. work() calls hot_a() and hot_b(), whose loops are the same
 * instructions run 7000 and 3000 times per round, so a profiler must put about 70% of the
 * program's samples in hot_a and 30% in hot_b, with work() as their caller and main() above.
 * Built with symbols, debug info and frame pointers (-g -marm -fno-omit-frame-pointer).
 *
 *   hot SECONDS [A B]   run rounds for SECONDS (wall clock, default 2), print "hot: N rounds";
 *                       A and B: hot_a's and hot_b's iterations per round (default 7000 3000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned int a_iters = 7000, b_iters = 3000;

volatile unsigned int hot_sink;

__attribute__((noinline)) void hot_a(unsigned int n)
{
	unsigned int x = hot_sink;

	for (unsigned int i = 0; i < n; i++)
		x = x * 1103515245u + 12345u;
	hot_sink = x;
}

__attribute__((noinline)) void hot_b(unsigned int n)
{
	unsigned int x = hot_sink;

	for (unsigned int i = 0; i < n; i++)
		x = x * 1103515245u + 12345u;
	hot_sink = x;
}

__attribute__((noinline)) void work(void)
{
	hot_a(a_iters);
	hot_b(b_iters);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	double end = now() + secs;
	unsigned long rounds = 0;

	if (argc > 3) {
		a_iters = strtoul(argv[2], NULL, 0);
		b_iters = strtoul(argv[3], NULL, 0);
	}

	do {
		for (int i = 0; i < 16; i++)
			work();
		rounds += 16;
	} while (now() < end);
	printf("hot: %lu rounds\n", rounds);
	return 0;
}
