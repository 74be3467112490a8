// SPDX-License-Identifier: GPL-2.0
/*
 * optool: guest-side helper for oprofile-rs tests and `make run` (static armhf binary).
 *
 *   optool write FILE VALUE        write VALUE (as given, plus "\n" unless --raw) in one write
 *   optool write --raw FILE VALUE  write exactly VALUE
 *   optool read FILE [COUNT]       one read of COUNT bytes (default 4096), print the data
 *   optool open2 FILE              open FILE twice; report the second open
 *   optool bufread COUNT [ALARM]   open the buffer, one read of COUNT bytes (ALARM s alarm, may
 *                                  be fractional)
 *   optool as UID CMD...           setuid(UID) then exec CMD
 *   optool capture OUT CMD...      like oprofiled: open buffer, enable=1, run CMD while reading
 *                                  the buffer into OUT, then enable=0, read the rest, close;
 *                                  prints "ok N bytes, workload status S, session T ns" (T:
 *                                  CLOCK_MONOTONIC from before enable=1 to after enable=0, an
 *                                  outer bound of the session) and exits 0 only if S is 0
 *   optool spin MS                 busy-loop in user space for MS milliseconds (wall clock)
 *   optool reads N BYTES MS        open the buffer, enable=1, spin MS ms, enable=0, then N reads
 *                                  of BYTES each (2 s alarm): "ok K" = reads that returned data
 *   optool time CMD...             run CMD; then print "TIME ns N user_ns U sys_ns S status X":
 *                                  wall time (CLOCK_MONOTONIC), CMD's user and system CPU time
 *                                  and its exit status; exit status 0 if CMD ran (`make bench`)
 *   optool clockres                print "CLOCKRES ns N": the smallest step of CLOCK_MONOTONIC
 *                                  seen in 100000 back-to-back reads (the clocksource's
 *                                  resolution as ktime_get_ns() sees it; `make bench`)
 *
 * Results are printed as "ok", "ok N" (bytes) or "ERR <ERRNO NAME>"; exit status 0/1.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OPDIR "/dev/oprofile/"

static const char *errname(int e)
{
	switch (e) {
	case EINVAL: return "EINVAL";
	case EBUSY: return "EBUSY";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EINTR: return "EINTR";
	case EFAULT: return "EFAULT";
	case ENOMEM: return "ENOMEM";
	case ENOENT: return "ENOENT";
	case ESPIPE: return "ESPIPE";
	case ENODEV: return "ENODEV";
	default: return "E?";
	}
}

static int report(long r)
{
	if (r < 0) {
		printf("ERR %s\n", errname(errno));
		return 1;
	}
	printf("ok\n");
	return 0;
}

static void on_signal(int sig) { (void)sig; }

static void no_restart(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: blocking reads return EINTR */
	sigaction(sig, &sa, NULL);
}

static int write_file(const char *path, const char *val, int raw)
{
	char buf[4096];
	int fd = open(path, O_WRONLY);
	ssize_t r;

	if (fd < 0)
		return report(-1);
	snprintf(buf, sizeof(buf), raw ? "%s" : "%s\n", val);
	r = write(fd, buf, strlen(buf));
	if (r >= 0 && (size_t)r != strlen(buf)) {
		printf("ERR short write %zd\n", r);
		return 1;
	}
	return report(r < 0 ? -1 : (close(fd), 0));
}

/* A cycle-heavy user-space loop (counting-mode and sampling tests). */
static volatile unsigned long spin_sink;

static void spin_quiet(long ms)
{
	struct timeval start, now;
	unsigned long x = 1;

	gettimeofday(&start, NULL);
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
		spin_sink = x;
		gettimeofday(&now, NULL);
	} while ((now.tv_sec - start.tv_sec) * 1000L + (now.tv_usec - start.tv_usec) / 1000 < ms);
}

static int spin(long ms)
{
	spin_quiet(ms);
	printf("ok\n");
	return 0;
}

/* One descriptor for the whole capture, so a lazy umount meanwhile does not stop us. */
static int enable_fd = -1;

static int enable(const char *v)
{
	if (enable_fd < 0)
		enable_fd = open(OPDIR "enable", O_WRONLY);
	if (enable_fd < 0)
		return -1;
	/* oprofilefs takes writes at offset 0 only. */
	return pwrite(enable_fd, v, strlen(v), 0) < 0 ? -1 : 0;
}

static long buffer_bytes(void)
{
	FILE *f = fopen(OPDIR "buffer_size", "r");
	long words = 0;

	if (!f || fscanf(f, "%ld", &words) != 1)
		words = 131072;
	if (f)
		fclose(f);
	return words * (long)sizeof(long);
}

static long long ns_of(const struct timeval *tv)
{
	return tv->tv_sec * 1000000000LL + tv->tv_usec * 1000LL;
}

static int timed(char **cmd)
{
	struct timespec t0, t1;
	struct rusage ru;
	int status;
	pid_t child;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	child = fork();
	if (child < 0)
		return report(-1);
	if (!child) {
		execvp(cmd[0], cmd);
		_exit(127);
	}
	if (wait4(child, &status, 0, &ru) < 0)
		return report(-1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fflush(stdout);
	printf("TIME ns %lld user_ns %lld sys_ns %lld status %d\n",
	       (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec),
	       ns_of(&ru.ru_utime), ns_of(&ru.ru_stime), WIFEXITED(status) ? WEXITSTATUS(status) : 128);
	return 0;
}

static int clockres(void)
{
	long long prev, now, step = -1;
	struct timespec t;
	int i;

	clock_gettime(CLOCK_MONOTONIC, &t);
	prev = t.tv_sec * 1000000000LL + t.tv_nsec;
	for (i = 0; i < 100000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		now = t.tv_sec * 1000000000LL + t.tv_nsec;
		if (now != prev && (step < 0 || now - prev < step))
			step = now - prev;
		prev = now;
	}
	printf("CLOCKRES ns %lld\n", step);
	return step > 0 ? 0 : 1;
}

static int capture(const char *out, char **cmd)
{
	long size = buffer_bytes();
	char *buf = malloc(size);
	int fd, ofd, status = 0, done = 0;
	long total = 0;
	struct timespec t0, t1;
	ssize_t n;
	pid_t child;

	if (!buf)
		return 1;
	fd = open(OPDIR "buffer", O_RDONLY);
	if (fd < 0)
		return report(-1);
	ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (ofd < 0)
		return report(-1);
	no_restart(SIGCHLD);
	/*
	 * SIGCHLD may arrive while we are not inside read(); a 200 ms interval timer interrupts the
	 * blocking read too, so the child's exit is noticed promptly either way.
	 */
	no_restart(SIGALRM);
	{
		struct itimerval it = { { 0, 200000 }, { 0, 200000 } };

		if (setitimer(ITIMER_REAL, &it, NULL))
			return report(-1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (enable("1\n")) {
		printf("ERR enable: %s\n", errname(errno));
		return 1;
	}
	child = fork();
	if (child == 0) {
		execvp(cmd[0], cmd);
		perror(cmd[0]);
		_exit(127);
	}
	while (!done) {
		n = read(fd, buf, size);
		if (n > 0) {
			if (write(ofd, buf, n) != n)
				return report(-1);
			total += n;
		} else if (n < 0 && errno != EINTR) {
			return report(-1);
		}
		if (waitpid(child, &status, WNOHANG) == child)
			done = 1;
	}
	{
		struct itimerval off = { { 0, 0 }, { 0, 0 } };

		setitimer(ITIMER_REAL, &off, NULL);
	}
	if (enable("0\n"))
		return report(-1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* Stop flushed everything and marked the buffer ready: one read takes the rest. */
	n = read(fd, buf, size);
	if (n < 0)
		return report(-1);
	if (n > 0 && write(ofd, buf, n) != n)
		return report(-1);
	total += n;
	close(ofd);
	close(fd);
	printf("ok %ld bytes, workload status %d, session %lld ns\n", total,
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1,
	       (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* A profiling period of MS ms, then N reads of BYTES: the buffer_read profile point's test. */
static int reads(long n, size_t bytes, long ms)
{
	char *buf = malloc(bytes);
	int fd = open(OPDIR "buffer", O_RDONLY);
	long got = 0;

	if (!buf || fd < 0)
		return report(-1);
	if (enable("1\n"))
		return report(-1);
	spin_quiet(ms);
	if (enable("0\n"))
		return report(-1);
	no_restart(SIGALRM);
	for (long i = 0; i < n; i++) {
		struct itimerval it = { { 0, 0 }, { 2, 0 } };

		setitimer(ITIMER_REAL, &it, NULL);
		if (read(fd, buf, bytes) > 0)
			got++;
	}
	close(fd);
	printf("ok %ld\n", got);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 4 && !strcmp(argv[1], "write") && strcmp(argv[2], "--raw"))
		return write_file(argv[2], argv[3], 0);
	if (argc >= 5 && !strcmp(argv[1], "write"))
		return write_file(argv[3], argv[4], 1);
	if (argc >= 3 && !strcmp(argv[1], "read")) {
		size_t count = argc > 3 ? strtoul(argv[3], NULL, 0) : 4096;
		char *buf = malloc(count + 1);
		int fd = open(argv[2], O_RDONLY);
		ssize_t n;

		if (fd < 0)
			return report(-1);
		n = read(fd, buf, count);
		if (n < 0)
			return report(-1);
		fwrite(buf, 1, n, stdout);
		return 0;
	}
	if (argc >= 5 && !strcmp(argv[1], "reads"))
		return reads(atol(argv[2]), strtoul(argv[3], NULL, 0), atol(argv[4]));
	if (argc >= 3 && !strcmp(argv[1], "open2")) {
		int a = open(argv[2], O_RDONLY), b;

		if (a < 0)
			return report(-1);
		b = open(argv[2], O_RDONLY);
		return report(b);
	}
	if (argc >= 3 && !strcmp(argv[1], "bufread")) {
		size_t count = strtoul(argv[2], NULL, 0);
		char *buf = malloc(count + 1);
		int fd = open(OPDIR "buffer", O_RDONLY);
		ssize_t n;

		if (fd < 0)
			return report(-1);
		if (argc > 3) {
			double secs = atof(argv[3]);
			struct itimerval it = { { 0, 0 }, { (long)secs, (long)((secs - (long)secs) * 1e6) } };

			no_restart(SIGALRM);
			if (setitimer(ITIMER_REAL, &it, NULL)) {
				printf("ERR setitimer %s\n", errname(errno));
				return 1;
			}
		}
		n = read(fd, buf, count);
		if (n < 0)
			return report(-1);
		printf("ok %zd\n", n);
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "as")) {
		if (setuid(atoi(argv[2])))
			return report(-1);
		execvp(argv[3], argv + 3);
		return report(-1);
	}
	if (argc >= 4 && !strcmp(argv[1], "capture"))
		return capture(argv[2], argv + 3);
	if (argc >= 3 && !strcmp(argv[1], "spin"))
		return spin(atol(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "time"))
		return timed(argv + 2);
	if (argc == 2 && !strcmp(argv[1], "clockres"))
		return clockres();
	fprintf(stderr, "usage: see the comment at the top of optool.c\n");
	return 2;
}
