// SPDX-License-Identifier: GPL-2.0
/*
 * callers: call chains with a known answer, built as distributions build C (gcc -O2, no frame
 * pointer; Thumb-2 on armhf) and stripped on the board.
 *
 *   callers split SECONDS   leaf() runs under caller_a() and caller_b() in a 2:1 split (the same
 *                           work per call; which caller calls next is drawn pseudo-randomly, 2 in
 *                           3 caller_a, so that no sampling period can lock onto a fixed order),
 *                           for SECONDS of wall clock; prints "callers: N calls"
 *   callers corrupt SECONDS spin_on_junk() spins with sp (AArch64: sp and the frame pointer x29)
 *                           pointing into a heap buffer of random words (a corrupted stack): its
 *                           samples' chains must end, counted
 *   callers refused SECONDS none|vvar
 *                           spin_on_junk() with sp in memory the sampling interrupt must not read:
 *                           a PROT_NONE mapping (none), or the vDSO's data page ([vvar]:
 *                           VM_MIXEDMAP, the flags of a driver's device mapping, but plain RAM
 *                           whose reading is harmless if the module did read it); its
 *                           snapshots must be refused, counted
 *   callers sort N          libc's qsort() of N words, whose comparison function cmp_words()
 *                           calls leaf(): chains leaf <- cmp_words <- (libc qsort) <- sort_words
 *                           <- main
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

volatile unsigned int leaf_sink;

/* noipa: no inlining, cloning or identical-code folding, so each caller is its own frame. */
__attribute__((noipa)) unsigned int leaf(unsigned int n)
{
	unsigned int x = leaf_sink;

	for (unsigned int i = 0; i < n; i++)
		x = x * 1103515245u + 12345u;
	leaf_sink = x;
	return x;
}

__attribute__((noipa)) unsigned int caller_a(unsigned int n)
{
	return leaf(n) + 1;	/* not a tail call: caller_a stays on the stack */
}

__attribute__((noipa)) unsigned int caller_b(unsigned int n)
{
	return leaf(n) ^ 3;
}

static int cmp_words(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	leaf(64);
	return x < y ? -1 : x > y;
}

__attribute__((noipa)) static unsigned int sort_words(unsigned int *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_words);
	return v[0];	/* not a tail call: sort_words stays on the stack */
}

/*
 * Spins `n` rounds with sp moved to `junk` (no memory access meanwhile: nothing uses the bad
 * stack, and interrupts run on the kernel's). On AArch64 the frame pointer x29 too: a user chain
 * there starts from the frame record x29 points to, which is then random words.
 */
__attribute__((noipa)) void spin_on_junk(void *junk, unsigned int n)
{
#if defined(__aarch64__)
	__asm__ volatile("mov x9, sp\n\t"
			 "mov x10, x29\n\t"
			 "mov sp, %0\n\t"
			 "mov x29, %0\n\t"
			 "1: subs %w1, %w1, #1\n\t"
			 "b.ne 1b\n\t"
			 "mov sp, x9\n\t"
			 "mov x29, x10"
			 : "+r"(junk), "+r"(n) : : "x9", "x10", "cc", "memory");
#else
	__asm__ volatile("mov r12, sp\n\t"
			 "mov sp, %0\n\t"
			 "1: subs %1, %1, #1\n\t"
			 "bne 1b\n\t"
			 "mov sp, r12"
			 : "+r"(junk), "+r"(n) : : "r12", "cc", "memory");
#endif
}

/*
 * A stack pointer (16-byte aligned, mid-mapping) in memory the module must not read: a fresh
 * PROT_NONE mapping ("none"), or this process's [vvar] mapping ("vvar"). NULL, said on stderr,
 * when there is none.
 */
static char *refused_stack(const char *kind)
{
	unsigned long start = 0, end = 0;
	char line[256];
	FILE *maps;

	if (!strcmp(kind, "none")) {
		char *p = mmap(NULL, 64 * 1024, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		return p == MAP_FAILED ? NULL : p + 32 * 1024;
	}
	if (strcmp(kind, "vvar") || !(maps = fopen("/proc/self/maps", "r")))
		return NULL;
	while (fgets(line, sizeof(line), maps))
		if (strstr(line, "[vvar]") && sscanf(line, "%lx-%lx", &start, &end) == 2)
			break;
	fclose(maps);
	if (end <= start) {
		fprintf(stderr, "callers: no [vvar] mapping\n");
		return NULL;
	}
	return (char *)((start + (end - start) / 2) & ~15ul);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "split")) {
		double end = now() + atof(argv[2]);
		unsigned long calls = 0;
		unsigned int acc = 0, x = 2463534242u;

		while (now() < end) {
			for (int i = 0; i < 16; i++, calls++) {
				x ^= x << 13, x ^= x >> 17, x ^= x << 5;	/* xorshift32 */
				acc += x % 3 ? caller_a(2000) : caller_b(2000);
			}
		}
		printf("callers: %lu calls (%u)\n", calls, acc & 1);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "corrupt")) {
		double end = now() + atof(argv[2]);
		unsigned int *junk = malloc(64 * 1024), x = 2463534242u;

		if (!junk)
			return 1;
		for (size_t i = 0; i < 64 * 1024 / sizeof(*junk); i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;	/* xorshift32 */
			junk[i] = x;
		}
		while (now() < end)
			spin_on_junk(junk + 8 * 1024, 1000000);
		printf("callers: spun on junk\n");
		free(junk);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "refused")) {
		double end = now() + atof(argv[2]);
		char *where = refused_stack(argv[3]);

		if (!where)
			return 2;
		while (now() < end)
			spin_on_junk(where, 1000000);
		printf("callers: spun with sp at %p (%s)\n", (void *)where, argv[3]);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "sort")) {
		size_t n = strtoul(argv[2], NULL, 0);
		unsigned int *v = malloc(n * sizeof(*v));

		if (!v)
			return 1;
		for (size_t i = 0; i < n; i++)
			v[i] = (unsigned int)(i * 2654435761u);
		printf("callers: sorted %zu words (%u)\n", n, sort_words(v, n) & 1);
		free(v);
		return 0;
	}
	fprintf(stderr, "usage: callers split SECONDS | callers corrupt SECONDS | "
		"callers refused SECONDS none|vvar | callers sort N\n");
	return 2;
}
