/* dcookie: calls lookup_dcookie exactly as OProfile 0.9.9's daemon/opd_cookie.c does, for
 * tests/guest/legacy.sh (run under `oprof legacy`, which serves the call from
 * /dev/oprofile/images; without it the call is ENOSYS since Linux 5.12).
 *
 *   dcookie lookup ID SIZE        one call: "OK LEN PATH" or "ERR ENAME"; checks that only
 *                                 LEN bytes were written, the last a NUL ("BAD ..." if not)
 *   dcookie lookup2 LO HI SIZE    the same with the cookie's two 32-bit words given
 *   dcookie check IMAGES          every "ID PATH" line of an images file: the answer at
 *                                 size 4096 and at exactly LEN is the path; at LEN-1 ERANGE.
 *                                 Prints "ok N ids" or the first mismatch
 *   dcookie badbuf ID             a NULL buffer and a read-only one: "EFAULT EFAULT" (and the
 *                                 read-only page unchanged)
 *   dcookie killed ID N           N times: a child calls in a loop and is SIGKILLed after
 *                                 0..2 ms (some while their call is in the supervisor); then
 *                                 one call of ours: "OK LEN PATH"
 *   dcookie stopped ID            stops the supervisor (SIGSTOP; found as our parent's other
 *                                 child named oprof), lets a child block in the call, kills
 *                                 it, continues the supervisor; prints "blocked killed" and
 *                                 then one call's "OK LEN PATH"
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __NR_lookup_dcookie
#if defined(__arm__)
#define __NR_lookup_dcookie 249
#elif defined(__aarch64__)
#define __NR_lookup_dcookie 18
#elif defined(__x86_64__)
#define __NR_lookup_dcookie 212
#endif
#endif

/* opd_cookie.c (0.9.9): 32-bit ARM EABI little-endian passes the cookie's words low first. */
static long call2(uint32_t lo, uint32_t hi, char *buf, size_t size)
{
#if defined(__arm__)
	return syscall(__NR_lookup_dcookie, (unsigned long)lo, (unsigned long)hi, buf, size);
#else
	return syscall(__NR_lookup_dcookie, ((uint64_t)hi << 32) | lo, buf, size);
#endif
}

static const char *ename(int e)
{
	switch (e) {
	case EINVAL: return "EINVAL";
	case ERANGE: return "ERANGE";
	case EFAULT: return "EFAULT";
	case EPERM: return "EPERM";
	case ENOSYS: return "ENOSYS";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	default: return "E?";
	}
}

#define GUARD 64
#define FILL 0xa5

/* One call into a fresh buffer of SIZE + GUARD bytes filled with FILL. Prints the answer;
 * returns the length (or -errno), the path in out (if non-NULL, up to 4096 bytes). */
static long lookup(uint32_t lo, uint32_t hi, size_t size, char *out, int print)
{
	unsigned char *buf = malloc(size + GUARD);
	long r, i;

	memset(buf, FILL, size + GUARD);
	r = call2(lo, hi, (char *)buf, size);
	if (r < 0) {
		r = -errno;
		for (i = 0; i < (long)(size + GUARD); i++)
			if (buf[i] != FILL) {
				if (print)
					printf("BAD %s but byte %ld written\n", ename(-r), i);
				free(buf);
				return -1000;
			}
		if (print)
			printf("ERR %s\n", ename(-r));
	} else {
		if (r == 0 || (size_t)r > size || buf[r - 1] != 0 || memchr(buf, 0, r) != buf + r - 1) {
			if (print)
				printf("BAD length %ld for size %zu\n", r, size);
			free(buf);
			return -1000;
		}
		for (i = r; i < (long)(size + GUARD); i++)
			if (buf[i] != FILL) {
				if (print)
					printf("BAD byte %ld written past the length %ld\n", i, r);
				free(buf);
				return -1000;
			}
		if (print)
			printf("OK %ld %s\n", r, (char *)buf);
		if (out)
			memcpy(out, buf, r);
	}
	free(buf);
	return r;
}

/* "\012" and "\134" back to newline and backslash (rust/common/image.rs). */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && !strncmp(s, "\\012", 4)) { *d++ = '\n'; s += 3; }
		else if (s[0] == '\\' && !strncmp(s, "\\134", 4)) { *d++ = '\\'; s += 3; }
		else *d++ = *s;
	}
	*d = 0;
}

static int check(const char *file)
{
	FILE *f = fopen(file, "r");
	char line[8192], got[4096];
	unsigned long id;
	int n = 0, off;
	long r;

	if (!f) { perror(file); return 1; }
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%lu %n", &id, &off) != 1)
			continue;
		unescape(line + off);
		r = lookup(id, 0, 4096, got, 0);
		if (r != (long)strlen(line + off) + 1 || strcmp(got, line + off)) {
			printf("mismatch id %lu: %ld '%s', want '%s'\n", id, r, r > 0 ? got : ename(-r), line + off);
			return 1;
		}
		if (lookup(id, 0, r, got, 0) != r || strcmp(got, line + off)) {
			printf("id %lu: size %ld (exactly the length) failed\n", id, r);
			return 1;
		}
		if (lookup(id, 0, r - 1, NULL, 0) != -ERANGE) {
			printf("id %lu: size %ld (one short) is not ERANGE\n", id, r - 1);
			return 1;
		}
		n++;
	}
	printf("ok %d ids\n", n);
	return 0;
}

static int badbuf(uint32_t id)
{
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long a, b;
	int i;

	a = call2(id, 0, NULL, 4096) < 0 ? errno : 0;
	b = call2(id, 0, ro, 4096) < 0 ? errno : 0;
	for (i = 0; i < 4096; i++)
		if (ro[i]) { printf("read-only page written\n"); return 1; }
	printf("%s %s\n", a ? ename(a) : "OK", b ? ename(b) : "OK");
	return 0;
}

static int killed(uint32_t id, int n)
{
	char buf[4096];
	int i;

	srand(getpid());
	for (i = 0; i < n; i++) {
		pid_t c = fork();
		if (c == 0)
			for (;;)
				call2(id, 0, buf, sizeof(buf));
		struct timespec t = { 0, (rand() % 2000) * 1000L };
		nanosleep(&t, NULL);
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
	}
	return lookup(id, 0, 4096, NULL, 1) > 0 ? 0 : 1;
}

/* Our parent's other child named "oprof": the supervisor oprof legacy forked. */
static pid_t supervisor(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	while (d && (e = readdir(d))) {
		char p[300], stat[512], comm[64];
		int pid, ppid;
		FILE *f;

		snprintf(p, sizeof(p), "/proc/%s/stat", e->d_name);
		if (!(f = fopen(p, "r")))
			continue;
		if (fgets(stat, sizeof(stat), f) &&
		    sscanf(stat, "%d (%63[^)]) %*c %d", &pid, comm, &ppid) == 3 &&
		    !strcmp(comm, "oprof") && ppid == getppid())
			found = pid;
		fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

static int stopped(uint32_t id)
{
	pid_t s = supervisor(), c;
	char buf[4096];
	int st;

	if (!s) { printf("no supervisor found\n"); return 1; }
	kill(s, SIGSTOP);
	c = fork();
	if (c == 0)
		_exit(call2(id, 0, buf, sizeof(buf)) > 0 ? 0 : 1);
	usleep(300000);
	if (waitpid(c, &st, WNOHANG) != 0) {
		printf("the call returned while the supervisor was stopped\n");
		kill(s, SIGCONT);
		return 1;
	}
	kill(c, SIGKILL);
	waitpid(c, &st, 0);
	printf("blocked %s\n", WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? "killed" : "exited");
	kill(s, SIGCONT);
	return lookup(id, 0, 4096, NULL, 1) > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "lookup"))
		return lookup(strtoul(argv[2], 0, 0), 0, strtoul(argv[3], 0, 0), NULL, 1) == -1000;
	if (argc == 5 && !strcmp(argv[1], "lookup2"))
		return lookup(strtoul(argv[2], 0, 0), strtoul(argv[3], 0, 0), strtoul(argv[4], 0, 0),
			      NULL, 1) == -1000;
	if (argc == 3 && !strcmp(argv[1], "check"))
		return check(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "badbuf"))
		return badbuf(strtoul(argv[2], 0, 0));
	if (argc == 4 && !strcmp(argv[1], "killed"))
		return killed(strtoul(argv[2], 0, 0), atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "stopped"))
		return stopped(strtoul(argv[2], 0, 0));
	fprintf(stderr, "usage: see the comment at the top of dcookie.c\n");
	return 2;
}
