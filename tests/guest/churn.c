// SPDX-License-Identifier: GPL-2.0
/*
 * churn: a process tree that changes its mappings while being profiled, so queued samples must
 * survive munmap, exec and exit. Each round:
 *   - dlopen("libspin.so"), spin in spin_in_lib() for MS ms, dlclose() (file-backed code
 *     unmapped right after being sampled);
 *   - mmap anonymous executable memory, copy a countdown loop into it, run it, munmap it;
 *   - fork a child that spins in child_spin() and exits; fork a child that execs
 *     "churn --spin MS" (a fresh image of the same file) and exits.
 *
 *   churn ROUNDS MS      run ROUNDS rounds, print "churn: done"
 *   churn --spin MS      spin in child_spin() for MS ms and exit
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile unsigned int churn_sink;

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

__attribute__((noinline)) void child_spin(unsigned int ms)
{
	struct timespec t0;
	unsigned int x = churn_sink;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 20000; i++)
			x = x * 1103515245u + 12345u;
	} while (elapsed_ms(&t0) < (long)ms);
	churn_sink = x;
}

#if defined(__aarch64__)
/* A64: countdown: subs w0, w0, #1; b.ne countdown; ret */
static const unsigned int countdown[] = { 0x71000400, 0x54ffffe1, 0xd65f03c0 };
#else
/* ARM: countdown: subs r0, r0, #1; bne countdown; bx lr */
static const unsigned int countdown[] = { 0xe2500001, 0x1afffffd, 0xe12fff1e };
#endif

static void run_anon(unsigned int ms)
{
	size_t len = 4096;
	unsigned int (*fn)(unsigned int);
	struct timespec t0;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("churn: mmap");
		exit(1);
	}
	memcpy(p, countdown, sizeof(countdown));
	__builtin___clear_cache((char *)p, (char *)p + sizeof(countdown));
	fn = (unsigned int (*)(unsigned int))p;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		fn(200000);
	while (elapsed_ms(&t0) < (long)ms);
	munmap(p, len);
}

static void run_lib(unsigned int ms)
{
	void *h = dlopen("libspin.so", RTLD_NOW);
	void (*spin)(unsigned int);

	if (!h) {
		fprintf(stderr, "churn: dlopen: %s\n", dlerror());
		exit(1);
	}
	spin = (void (*)(unsigned int))dlsym(h, "spin_in_lib");
	if (!spin) {
		fprintf(stderr, "churn: dlsym: %s\n", dlerror());
		exit(1);
	}
	spin(ms);
	dlclose(h);
}

int main(int argc, char **argv)
{
	unsigned int rounds, ms;

	if (argc == 3 && !strcmp(argv[1], "--spin")) {
		child_spin(atoi(argv[2]));
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: churn ROUNDS MS | churn --spin MS\n");
		return 2;
	}
	rounds = atoi(argv[1]);
	ms = atoi(argv[2]);
	for (unsigned int r = 0; r < rounds; r++) {
		pid_t a, b;

		run_lib(ms);
		run_anon(ms);
		a = fork();
		if (a == 0) {
			child_spin(ms);
			_exit(0);
		}
		b = fork();
		if (b == 0) {
			char arg[16];

			snprintf(arg, sizeof(arg), "%u", ms);
			execl("/proc/self/exe", "churn", "--spin", arg, (char *)NULL);
			_exit(127);
		}
		if (a < 0 || b < 0 || waitpid(a, NULL, 0) != a || waitpid(b, NULL, 0) != b) {
			fprintf(stderr, "churn: fork/wait failed\n");
			return 1;
		}
	}
	printf("churn: done\n");
	return 0;
}
