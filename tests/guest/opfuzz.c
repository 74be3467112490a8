// SPDX-License-Identifier: GPL-2.0
/*
 * opfuzz: fault-injection helper of the oprofile-rs guest tests (static armhf binary).
 *
 *   opfuzz fuzz SEED WRITES READS  seeded writes and reads of every file under /dev/oprofile,
 *                                  each checked against Documentation/oprofilefs.rst (fuzz.sh)
 *   opfuzz toggle SECONDS          write enable=1, enable=0 in a loop (stress.sh)
 *   opfuzz settings SECONDS        write valid settings, counter values, dump, profile point and
 *                                  kprof commands in a loop (stress.sh)
 *   opfuzz reader SECONDS [STOP]   open buffer and read it until SECONDS passed, or until the
 *                                  file STOP exists (stress.sh: as long as the togglers run)
 *   opfuzz hold ENABLE             open buffer (ENABLE 1: and enable=1), print "holding", read
 *                                  until killed
 *   opfuzz exitopen MS [kill]      open buffer, enable=1, spin MS ms in user space, then exit
 *                                  (kill: SIGKILL itself) without closing: the release runs in
 *                                  the exiting task, before the first periodic sync if MS < 100
 *   opfuzz closerace ENABLE        one thread blocks reading buffer while the main thread closes
 *                                  the descriptor; dump wakes the reader; then buffer is free
 *   opfuzz delmod NAME             delete_module(NAME, O_NONBLOCK) (rmmod's errno)
 *   opfuzz nocap CAPS CMD...       drop CAPS (comma list: sys_admin, syslog) from every set and
 *                                  the bounding set, then exec CMD (still uid 0)
 *   opfuzz access                  every file under /dev/oprofile: "R path" if this user can
 *                                  open and read it, "- path ERRNO" if not
 *
 * fuzz prints "SEED n", then "RESULT ok|fail TEXT" lines (a fixed number, see fuzz.sh) and up
 * to 30 "MISMATCH" lines naming the operation, the data and the expected and actual results.
 * The other commands print "ok ..." or "ERR <ERRNO> ..." and exit 0/1.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* offsets >= 4 GiB */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define OP "/dev/oprofile"
#define MAX_WRITE 49 /* legacy TMPBUFSIZE - 1 */
#define BLOB (64 * 1024)

static const char *ename(int e)
{
	const char *n = e ? strerrorname_np(e) : "ok";

	return n ? n : "E?";
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void on_signal(int sig) { (void)sig; }

/* SIGALRM without SA_RESTART: a blocked read returns EINTR. */
static void alarm_every(long usec)
{
	struct sigaction sa;
	struct itimerval it = { { 0, usec }, { 0, usec } };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static void alarm_off(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &it, NULL);
}

/* Writes a string at offset 0: 0 or the errno. */
static int put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), e = 0;

	if (fd < 0)
		return errno;
	if (pwrite(fd, s, strlen(s), 0) != (ssize_t)strlen(s))
		e = errno ? errno : EIO;
	close(fd);
	return e;
}

static int put_fd(int fd, const char *s)
{
	return pwrite(fd, s, strlen(s), 0) == (ssize_t)strlen(s) ? 0 : errno;
}

/* Reads a whole (small) file into buf, NUL-terminated: length or -errno. */
static ssize_t slurp_fd(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	while (got + 1 < cap && (n = pread(fd, buf + got, cap - 1 - got, got)) > 0)
		got += n;
	if (n < 0 && got == 0)
		return -errno;
	buf[got] = 0;
	return got;
}

static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = slurp_fd(fd, buf, cap);
	close(fd);
	return n;
}

/* ---------------------------------------------------------------- the seeded generator */

static uint64_t rng;

static uint64_t rnd(void) /* splitmix64 */
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

/* ---------------------------------------------------------------- the files and their rules */

enum kind { K_SETTING, K_COUNTER, K_ENABLE, K_DUMP, K_PP, K_KPCTL, K_RO, K_BUFFER, NKINDS };
static const char *kind_name[NKINDS] = {
	"settings", "counter files", "enable", "dump", "profile_points", "kprof/kpctl",
	"read-only files", "buffer",
};

/* Result buckets of a category. */
enum { RES_OK, RES_EINVAL, RES_EBUSY, RES_EFAULT, RES_ESPIPE, RES_EBADF, RES_OTHER, NRES };
static const char *res_name[NRES] = { "ok", "EINVAL", "EBUSY", "EFAULT", "ESPIPE", "EBADF", "other" };

static int bucket(int e)
{
	switch (e) {
	case 0: return RES_OK;
	case EINVAL: return RES_EINVAL;
	case EBUSY: return RES_EBUSY;
	case EFAULT: return RES_EFAULT;
	case ESPIPE: return RES_ESPIPE;
	case EBADF: return RES_EBADF;
	default: return RES_OTHER;
	}
}

struct ofile {
	char path[160];
	const char *rel;
	enum kind kind;
	uint64_t min, max; /* K_SETTING, K_COUNTER */
	uint64_t value;    /* tracked value of K_SETTING, K_COUNTER */
	int wfd, rfd;
	int big;           /* kpdata: compare windows, not whole copies */
};

#define MAX_FILES 256
static struct ofile files[MAX_FILES];
static int nfiles;

static struct {
	long n, mismatch, res[NRES];
	int files;
} cat[NKINDS];
static long reads_n, reads_bad, breads_n, breads_bad, ctl_bad, nstate[3];
static long mismatches;

/* State of the profiler as the fuzzer knows it. */
enum { IDLE, SETUP, RUNNING };
static const char *state_name[3] = { "idle", "set up", "running" };
static int state = IDLE, bfd = -1;
static int kprof_started, prints;

#define MAX_POINTS 32
static char points[MAX_POINTS][32];
static int point_on[MAX_POINTS], npoints;

static long op;

/* ---------------------------------------------------------------- faulting user pointers */

/*
 * The buffers of the fuzz's faulting reads and writes, by class (Documentation/oprofilefs.rst,
 * "Errors"). vfs_read/vfs_write refuse with EFAULT, before any file operation runs, a buffer
 * that does not end at or below the user address limit (access_ok: p + n <= TASK_SIZE_MAX, an
 * empty buffer too); any other reaches the file, which faults where it copies (EFAULT) and, like
 * dump, succeeds where it copies nothing. The limit of the guests' kernels: ARMv7 TASK_SIZE =
 * PAGE_OFFSET 0xc0000000 - 16 MiB (VMSPLIT_3G), arm64 TASK_SIZE_MAX = 2^48 (48-bit VAs).
 */
#ifdef __aarch64__
#define USER_LIMIT (1UL << 48)
#define KERNEL_PTR 0xffff800080000000UL /* the linear map */
#else
#define USER_LIMIT 0xbf000000UL
#define KERNEL_PTR 0xc0008000UL         /* kernel text */
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

enum ptr_class {
	P_GOOD,     /* the fuzz's own buffer */
	P_PROTNONE, /* a PROT_NONE mapping: reaches the file */
	P_NULL,     /* page 0, never mapped: reaches the file */
	P_AT_LIMIT, /* ends exactly at the limit, in a PROT_NONE mapping there: reaches the file */
	P_CROSS,    /* starts below the limit and ends above it (n = 0: at the limit): refused */
	P_KERNEL,   /* a kernel address: refused, whatever n */
	NPTR
};
static const char *ptr_name[NPTR] = { "good", "PROT_NONE", "NULL", "ending at the limit", "crossing the limit",
				      "kernel" };
static char *badpage;   /* PROT_NONE, BLOB + 4096 bytes */
static char *limitpage; /* PROT_NONE, BLOB + 4096 bytes ending at USER_LIMIT; NULL if in use */

/* Per class: faulting writes refused by the VFS / reaching the file, the same for dump, reads;
 * operations on faulting buffers not as documented. */
static long ptr_refused[NPTR], ptr_reached[NPTR], dump_refused, dump_reached, ptr_reads[NPTR], ptr_bad;

/* The pointer of class c for a buffer of n bytes. */
static char *bad_ptr(int c, size_t n)
{
	switch (c) {
	case P_PROTNONE: return badpage;
	case P_NULL: return NULL;
	case P_AT_LIMIT: return limitpage + (BLOB + 4096) - n;
	case P_CROSS: return (char *)(uintptr_t)(USER_LIMIT - (n ? below(n) : 0));
	default: return (char *)(uintptr_t)KERNEL_PTR;
	}
}

/* A class other than P_GOOD (P_AT_LIMIT only if its mapping could be placed). */
static int pick_bad(void)
{
	int c;

	do
		c = 1 + below(NPTR - 1);
	while (c == P_AT_LIMIT && !limitpage);
	return c;
}

/* Whether vfs_read/vfs_write refuse the buffer p, n bytes (access_ok): EFAULT before the file. */
static int vfs_refuses(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;

	return n > USER_LIMIT || a > USER_LIMIT - n;
}

/* Mismatch classes: the write kinds, then reads, buffer reads, state changes. */
enum { C_READ = NKINDS, C_BREAD, C_CTL, NCLASSES };
static int mclass, mshown[NCLASSES];

/* Prints a mismatch of class mclass: at most 6 per class, so one flood hides no other. */
static void mismatch(const char *fmt, ...)
{
	va_list ap;

	mismatches++;
	if (++mshown[mclass] > 6)
		return;
	printf("MISMATCH op %ld (%s): ", op, state_name[state]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void hex(char *out, const unsigned char *d, size_t n)
{
	size_t i, m = n < 24 ? n : 24;

	for (i = 0; i < m; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
	strcpy(out + 2 * m, n > m ? "..." : "");
}

static const struct { const char *name; uint64_t min, max; } setting_rules[] = {
	{ "buffer_size", 1024, 1 << 24 },     /* rust/oprof.rs BUFFER_SIZE_RANGE */
	{ "buffer_watershed", 0, 1 << 24 },
	{ "cpu_buffer_size", 16, 1 << 20 },
	{ "backtrace_depth", 0, 128 },        /* ARM models record backtraces */
	{ "user_stack_size", 0, 16384 },      /* rust/user_stack.rs USER_STACK_SIZE_MAX */
	{ "image_ids_max", 1, 1 << 20 },      /* rust/oprof.rs IMAGE_IDS_MAX_RANGE */
};
static const struct { const char *name; uint64_t min, max; } counter_rules[] = {
	{ "enabled", 0, 1 }, { "event", 0, 0xffff }, { "count", 0, 0xffffffffULL },
	{ "unit_mask", 0, 0xff }, { "kernel", 0, 1 }, { "user", 0, 1 }, /* common/counter.rs */
};

static void classify(struct ofile *f)
{
	const char *r = f->rel, *slash = strchr(r, '/');
	size_t i;

	f->kind = K_RO;
	for (i = 0; i < sizeof(setting_rules) / sizeof(setting_rules[0]); i++)
		if (!strcmp(r, setting_rules[i].name)) {
			f->kind = K_SETTING;
			f->min = setting_rules[i].min;
			f->max = setting_rules[i].max;
		}
	if (slash && r[0] >= '0' && r[0] <= '9' && strspn(r, "0123456789") == (size_t)(slash - r))
		for (i = 0; i < sizeof(counter_rules) / sizeof(counter_rules[0]); i++)
			if (!strcmp(slash + 1, counter_rules[i].name)) {
				f->kind = K_COUNTER;
				f->min = counter_rules[i].min;
				f->max = counter_rules[i].max;
			}
	if (!strcmp(r, "enable"))
		f->kind = K_ENABLE;
	if (!strcmp(r, "dump"))
		f->kind = K_DUMP;
	if (!strcmp(r, "buffer"))
		f->kind = K_BUFFER;
	if (!strcmp(r, "profile_points"))
		f->kind = K_PP;
	if (!strcmp(r, "kprof/kpctl"))
		f->kind = K_KPCTL;
	f->big = !strcmp(r, "kprof/kpdata");
}

static int add_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	struct ofile *f;

	(void)st;
	(void)ftw;
	if (type != FTW_F || nfiles >= MAX_FILES)
		return 0;
	f = &files[nfiles++];
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->rel = f->path + strlen(OP) + 1;
	classify(f);
	cat[f->kind].files++;
	return 0;
}

/* ---------------------------------------------------------------- the oracle */

/* Documented number grammar (rust/common/parse.rs): decimal, or 0x/0X hex, one optional
 * trailing newline; no sign, space or other byte; must fit 64 bits. 0: ok. */
static int parse_num(const unsigned char *b, size_t n, uint64_t *v)
{
	int radix = 10;
	uint64_t x = 0;
	size_t i = 0;

	if (n && b[n - 1] == '\n')
		n--;
	if (n >= 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X')) {
		radix = 16;
		i = 2;
	}
	if (i == n)
		return -1;
	for (; i < n; i++) {
		int d;

		if (b[i] >= '0' && b[i] <= '9')
			d = b[i] - '0';
		else if (radix == 16 && b[i] >= 'a' && b[i] <= 'f')
			d = b[i] - 'a' + 10;
		else if (radix == 16 && b[i] >= 'A' && b[i] <= 'F')
			d = b[i] - 'A' + 10;
		else
			return -1;
		if (x > (UINT64_MAX - d) / radix)
			return -1;
		x = x * radix + d;
	}
	*v = x;
	return 0;
}

enum pp_verb { PP_BAD, PP_PRINT, PP_ENABLE, PP_DISABLE, PP_RESET };

/* profile_points commands (rust/common/profile_point.rs): a verb and, except for print, one
 * name or "all", separated by spaces/tabs; one trailing newline. *target: -1 all, else index;
 * PP_BAD for anything else (EINVAL). */
static enum pp_verb parse_pp(const unsigned char *b, size_t n, int *target)
{
	char w[3][64];
	int nw = 0;
	size_t i = 0;

	if (n && b[n - 1] == '\n')
		n--;
	for (i = 0; i < n; i++)
		if (b[i] == '\n' || b[i] >= 0x80) /* embedded newline; non-ASCII never names a verb or point */
			return PP_BAD;
	i = 0;
	while (i < n) {
		size_t s;

		while (i < n && (b[i] == ' ' || b[i] == '\t'))
			i++;
		if (i == n)
			break;
		s = i;
		while (i < n && b[i] != ' ' && b[i] != '\t')
			i++;
		if (nw == 3 || i - s >= sizeof(w[0]))
			return PP_BAD;
		memcpy(w[nw], b + s, i - s);
		w[nw][i - s] = 0;
		if (memchr(b + s, 0, i - s))
			w[nw][0] = 1; /* an embedded NUL: no verb or name matches */
		nw++;
	}
	if (nw == 1 && !strcmp(w[0], "print"))
		return PP_PRINT;
	if (nw != 2)
		return PP_BAD;
	if (!strcmp(w[1], "all")) {
		*target = -1;
	} else {
		int j;

		*target = -2;
		for (j = 0; j < npoints; j++)
			if (!strcmp(w[1], points[j]))
				*target = j;
		if (*target == -2)
			return PP_BAD;
	}
	if (!strcmp(w[0], "enable"))
		return PP_ENABLE;
	if (!strcmp(w[0], "disable"))
		return PP_DISABLE;
	if (!strcmp(w[0], "reset"))
		return PP_RESET;
	return PP_BAD;
}

/* kpctl: start, stop, startclr, one trailing newline (rust/common/kprof.rs). 0: bad. */
static int parse_kpctl(const unsigned char *b, size_t n)
{
	if (n && b[n - 1] == '\n')
		n--;
	if (n == 5 && !memcmp(b, "start", 5))
		return 1;
	if (n == 4 && !memcmp(b, "stop", 4))
		return 2;
	if (n == 8 && !memcmp(b, "startclr", 8))
		return 3;
	return 0;
}

/* ---------------------------------------------------------------- read-backs */

static void check_value(struct ofile *f, const char *after)
{
	char want[32], got[64];
	ssize_t n = slurp_fd(f->rfd, got, sizeof(got));

	snprintf(want, sizeof(want), "%" PRIu64 "\n", f->value);
	if (n < 0 || strcmp(got, want)) {
		cat[f->kind].mismatch++;
		mismatch("%s reads '%.*s' after %s, want %" PRIu64, f->rel, (int)(n < 0 ? 0 : strcspn(got, "\n")), got,
			 after, f->value);
	}
}

static struct ofile *find(const char *rel)
{
	for (int i = 0; i < nfiles; i++)
		if (!strcmp(files[i].rel, rel))
			return &files[i];
	return NULL;
}

/* The profile point table: each point's status and nr; -1 if unparsable. */
static int read_points(int on[], long long nr[], char total[][24])
{
	static char t[8192];
	struct ofile *f = find("profile_points");
	char *line, *save;
	int found = 0;

	if (!f || slurp_fd(f->rfd, t, sizeof(t)) < 0)
		return -1;
	for (line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char st[8], name[64], tot[32];
		long long n;

		if (sscanf(line, "%7s %63s %31s %lld", st, name, tot, &n) != 4)
			continue;
		for (int j = 0; j < npoints; j++)
			if (!strcmp(name, points[j])) {
				on[j] = !strcmp(st, "on");
				nr[j] = n;
				snprintf(total[j], 24, "%.23s", tot);
				found++;
			}
	}
	return found == npoints ? 0 : -1;
}

static void check_points(const char *after)
{
	int on[MAX_POINTS];
	long long nr[MAX_POINTS];
	char total[MAX_POINTS][24];

	if (read_points(on, nr, total)) {
		cat[K_PP].mismatch++;
		mismatch("profile_points table unreadable after %s", after);
		return;
	}
	for (int j = 0; j < npoints; j++)
		if (on[j] != point_on[j]) {
			cat[K_PP].mismatch++;
			mismatch("profile point %s is %s after %s, want %s", points[j], on[j] ? "on" : "off", after,
				 point_on[j] ? "on" : "off");
		}
}

static void check_reset(int j)
{
	int on[MAX_POINTS];
	long long nr[MAX_POINTS];
	char total[MAX_POINTS][24];

	if (point_on[j] || read_points(on, nr, total))
		return;
	if (nr[j] != 0 || strcmp(total[j], "0.000000000")) {
		cat[K_PP].mismatch++;
		mismatch("disabled point %s after reset: nr %lld total %s", points[j], nr[j], total[j]);
	}
}

static void check_kpctl(const char *after)
{
	char t[512], *s;
	struct ofile *f = find("kprof/kpctl");

	if (!f || slurp_fd(f->rfd, t, sizeof(t)) < 0 || !(s = strstr(t, "state "))) {
		cat[K_KPCTL].mismatch++;
		mismatch("kpctl unreadable after %s", after);
		return;
	}
	if (strncmp(s + 6, kprof_started ? "started" : "stopped", 7)) {
		cat[K_KPCTL].mismatch++;
		mismatch("kpctl state '%.7s' after %s, want %s", s + 6, after, kprof_started ? "started" : "stopped");
	}
}

static void check_enable(const char *after)
{
	char t[16];
	struct ofile *f = find("enable");

	if (!f || slurp_fd(f->rfd, t, sizeof(t)) < 0 || strcmp(t, state == RUNNING ? "1\n" : "0\n")) {
		cat[K_ENABLE].mismatch++;
		mismatch("enable reads '%c' after %s, want %d", t[0], after, state == RUNNING);
	}
}

/* ---------------------------------------------------------------- state transitions */

static void control(const char *what, int want, int got)
{
	if (want != got) {
		mclass = C_CTL;
		ctl_bad++;
		mismatch("control %s: want %s, got %s", what, ename(want), ename(got));
	}
}

static int hw_counters;
static const char *cpu_type_s;

/* Sane settings and one valid counter before each buffer open. */
static void restore(void)
{
	/* In setting_rules' order. */
	static const char *vals[] = { "131072", "32768", "8192", "0", "0", "16384" };
	_Static_assert(sizeof(vals) / sizeof(vals[0]) == sizeof(setting_rules) / sizeof(setting_rules[0]),
		       "a sane value for every setting");

	for (int i = 0; i < nfiles; i++) {
		struct ofile *f = &files[i];
		char v[32];

		if (f->kind == K_SETTING) {
			for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++)
				if (!strcmp(f->rel, setting_rules[k].name))
					snprintf(v, sizeof(v), "%s", vals[k]);
		} else if (f->kind == K_COUNTER) {
			const char *field = strchr(f->rel, '/') + 1;
			int c0 = f->rel[0] == '0' && f->rel[1] == '/';

			if (!strcmp(field, "enabled"))
				snprintf(v, sizeof(v), "%d", c0);
			else if (!strcmp(field, "event")) /* CPU_CYCLES: ARMv7 0xff (CCNT), ARMv8 0x11 */
				snprintf(v, sizeof(v), "%d", !c0 ? 0 : strncmp(cpu_type_s, "arm/armv8", 9) ? 0xff : 0x11);
			else if (!strcmp(field, "count")) /* A8: no PMU IRQ, count only; else sample */
				snprintf(v, sizeof(v), "%d", c0 && strcmp(cpu_type_s, "arm/armv7") ? 1000000 : 0);
			else if (!strcmp(field, "kernel") || !strcmp(field, "user"))
				snprintf(v, sizeof(v), "1");
			else
				snprintf(v, sizeof(v), "0");
		} else {
			continue;
		}
		control(f->rel, 0, put_fd(f->wfd, v));
		f->value = strtoull(v, NULL, 0);
	}
}

static void go(int target)
{
	while (state != target) {
		if (state == RUNNING) {
			control("enable=0", 0, put(OP "/enable", "0"));
			state = SETUP;
		} else if (state == SETUP && target == IDLE) {
			control("close buffer", 0, close(bfd) ? errno : 0);
			bfd = -1;
			state = IDLE;
		} else if (state == SETUP) {
			control("enable=1", 0, put(OP "/enable", "1"));
			state = RUNNING;
		} else {
			restore();
			bfd = open(OP "/buffer", O_RDONLY);
			control("open buffer", 0, bfd < 0 ? errno : 0);
			if (bfd < 0)
				return;
			state = SETUP;
		}
	}
}

/* ---------------------------------------------------------------- payloads */

static const char *words[] = { "start", "stop", "startclr", "enable", "disable", "reset", "print", "all",
			       "Start", "STOP", "enable all", "disable all", "reset all" };

static size_t number_text(char *b, uint64_t v)
{
	switch (below(4)) {
	case 0: return sprintf(b, "%" PRIu64, v);
	case 1: return sprintf(b, "%" PRIu64 "\n", v);
	case 2: return sprintf(b, "0x%" PRIx64, v);
	default: return sprintf(b, "0X%" PRIX64 "\n", v);
	}
}

static uint64_t some_value(struct ofile *f)
{
	uint64_t lo = f->min, hi = f->max;

	switch (below(6)) {
	case 0: return lo;
	case 1: return hi;
	case 2: return hi + 1;                 /* out of range */
	case 3: return lo ? lo - 1 : hi + 2;   /* out of range */
	case 4: return lo + below(hi - lo + 1 > 1000 ? 1000 : hi - lo + 1);
	default: return lo + below(hi - lo + 1);
	}
}

/* A valid-looking payload for f's kind. */
static size_t valid_payload(struct ofile *f, unsigned char *b)
{
	char *c = (char *)b;

	switch (f->kind) {
	case K_SETTING:
	case K_COUNTER:
		return number_text(c, some_value(f));
	case K_ENABLE:
		return number_text(c, below(3) ? below(2) : rnd());
	case K_PP: {
		static const char *verbs[] = { "enable", "disable", "reset" };
		const char *name = below(4) == 0 ? "all" : npoints ? points[below(npoints)] : "x";

		if (below(50) == 0)
			return sprintf(c, "print%s", below(2) ? "\n" : "");
		return sprintf(c, "%s%s%s%s", verbs[below(3)], below(5) ? " " : " \t ", name, below(2) ? "\n" : "");
	}
	case K_KPCTL: {
		static const char *k[] = { "start", "stop", "startclr" };

		return sprintf(c, "%s%s", k[below(3)], below(2) ? "\n" : "");
	}
	default:
		return sprintf(c, "%d\n", (int)below(3));
	}
}

/* Adversarial payloads: returns the length; *off set for the partial cases, *bad to the
 * faulting pointer's class (enum ptr_class; P_GOOD: the data) for the fault cases. */
static size_t payload(struct ofile *f, unsigned char *b, long long *off, int *bad)
{
	static const long long offsets[] = { 1, 2, 3, 48, 49, 4096, 1LL << 31, 1LL << 32, (1LL << 32) + 1, 1LL << 62, -1 };
#define S(x) { x, sizeof(x) - 1 }
	static const struct { const char *s; size_t n; } odd[] = {
		S("-1"), S("-0"), S("+5"), S(" 5"), S("5 "), S("\t5"), S("5\r\n"), S("5\n\n"), S("\n"), S("0x"), S("0X"),
		S("0xg"), S("0x-1"), S("1e3"), S("1.5"), S("010"), S("0010\n"), S("0x0000000000000000001"),
		S("18446744073709551615"), S("18446744073709551616"), S("0xffffffffffffffff"), S("0x10000000000000000"),
		S("99999999999999999999999"), S("4294967295"), S("4294967296"), S("0xffffffff"), S("-4294967296"),
		S("1 2"), S("5\0"), S("\0"), S("1\0\n"), S("\0\n"), S("start\0"), S("stop\n\n"), S("enable all\0"),
	};
#undef S
	char *c = (char *)b;
	size_t n;

	*off = 0;
	*bad = 0;
	switch (below(20)) {
	case 0: case 1: case 2: case 3: case 4: case 5:
		return valid_payload(f, b);
	case 6: case 7: { /* documented-odd strings */
		size_t i = below(sizeof(odd) / sizeof(odd[0]));

		memcpy(b, odd[i].s, odd[i].n);
		return odd[i].n;
	}
	case 8: case 9: { /* a valid payload, one byte changed or inserted */
		unsigned char junk[] = { ' ', '\t', '\n', '\r', 0, '+', '-', 'x', 'X', 'g', '9', 0xff, 0x80 };
		size_t pos;

		n = valid_payload(f, b);
		pos = below(n + 1);
		if (below(2) && n < MAX_WRITE) {
			memmove(b + pos + 1, b + pos, n - pos);
			n++;
		} else if (pos == n) {
			n++;
		}
		b[pos] = junk[below(sizeof(junk))];
		return n;
	}
	case 10: /* command words in any kind's file */
		return sprintf(c, "%s%s", words[below(sizeof(words) / sizeof(words[0]))], below(2) ? "\n" : "");
	case 11: case 12: /* random bytes */
		n = below(61);
		for (size_t i = 0; i < n; i++)
			b[i] = rnd();
		return n;
	case 13: /* a 64 KiB blob: random bytes or digits */
		if (below(2))
			for (size_t i = 0; i < BLOB; i++)
				b[i] = rnd();
		else
			memset(b, '0' + below(10), BLOB);
		return BLOB;
	case 14: /* at the 49-byte limit: leading zeros */
		n = MAX_WRITE + below(2);
		memset(b, '0', n);
		b[n - 1] = '1';
		return n;
	case 15:
		return 0;
	case 16: case 17: /* a partial write at an offset */
		*off = offsets[below(sizeof(offsets) / sizeof(offsets[0]))];
		return valid_payload(f, b);
	case 18: /* the data behind a pointer that faults */
		*bad = pick_bad();
		return below(4) ? valid_payload(f, b) : below(BLOB);
	default: /* digits of any length */
		n = 1 + below(70);
		for (size_t i = 0; i < n; i++)
			b[i] = '0' + below(10);
		return n;
	}
}

/* ---------------------------------------------------------------- one write */

static unsigned char data[BLOB + 64];

static void count_result(enum kind k, int e)
{
	cat[k].n++;
	cat[k].res[bucket(e)]++;
}

static void fuzz_buffer(struct ofile *f)
{
	unsigned char b[64];
	size_t n = valid_payload(f, b);
	int want, got, fd;
	char before[4096], after[4096];

	switch (state == IDLE ? below(2) : below(5)) {
	case 0:
	case 1: { /* opened for writing: EINVAL, nothing set up (images kept) */
		int flags = below(2) ? O_WRONLY : O_RDWR;
		ssize_t l1 = slurp(OP "/images", before, sizeof(before));

		fd = open(f->path, flags);
		got = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		want = EINVAL;
		/* Idle, the table cannot change. While profiling runs, buffer_sync may give a new
		 * image its id between the two reads: lines may be added, none changed or dropped
		 * (a set-up would have emptied it). */
		ssize_t l2 = slurp(OP "/images", after, sizeof(after));
		if (state == IDLE ? l2 != l1 : l2 < l1)
			l2 = -1;
		if (l2 < 0 || memcmp(before, after, l1 > 0 ? l1 : 0)) {
			cat[K_BUFFER].mismatch++;
			mismatch("images changed by a refused open(buffer, %s)", flags == O_WRONLY ? "O_WRONLY" : "O_RDWR");
		}
		break;
	}
	case 2: /* a second reader */
		fd = open(f->path, O_RDONLY);
		got = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		want = EBUSY;
		break;
	case 3:
		got = write(bfd, b, n) < 0 ? errno : 0;
		want = EBADF;
		break;
	default:
		got = pwrite(bfd, b, n, below(2) ? 0 : 4) < 0 ? errno : 0;
		want = ESPIPE;
		break;
	}
	count_result(K_BUFFER, got);
	if (got != want) {
		cat[K_BUFFER].mismatch++;
		mismatch("buffer: want %s, got %s", ename(want), ename(got));
	}
	if (state != IDLE)
		check_enable("a buffer write");
}

static void fuzz_write(struct ofile *f)
{
	long long off;
	int bad, want = 0, got, tgt = 0;
	size_t n;
	ssize_t r;
	uint64_t v = 0;
	enum pp_verb pv = PP_BAD;
	int kc = 0, num_ok = -1;
	const unsigned char *src;
	char h[64];

	nstate[state]++;
	mclass = f->kind;
	if (f->kind == K_BUFFER) {
		fuzz_buffer(f);
		return;
	}
	n = payload(f, data, &off, &bad);
	if (f->kind == K_PP && n && (pv = parse_pp(data, n, &tgt)) == PP_PRINT && ++prints > 5)
		data[0] = 'P'; /* keep the kernel log short: at most 5 tables */

	src = bad ? (const unsigned char *)bad_ptr(bad, n) : data;
	/* The documented outcome (Documentation/oprofilefs.rst, VFS order of checks). */
	if (off < 0 || f->kind == K_RO) {
		want = EINVAL; /* pwrite at a negative offset; no write operation */
	} else if (bad && vfs_refuses(src, n)) {
		want = EFAULT; /* access_ok in vfs_write, before the file's write: dump's too */
	} else if (f->kind == K_DUMP) {
		want = 0;       /* anything, any length, any offset; not read */
	} else if (off != 0 || n > MAX_WRITE) {
		want = EINVAL;
	} else if (n == 0) {
		want = 0;
	} else if (bad) {
		want = EFAULT;
	} else {
		switch (f->kind) {
		case K_SETTING:
		case K_COUNTER:
			num_ok = !parse_num(data, n, &v) && v >= f->min && v <= f->max;
			want = !num_ok ? EINVAL : state == RUNNING ? EBUSY : 0;
			break;
		case K_ENABLE:
			num_ok = !parse_num(data, n, &v);
			want = !num_ok ? EINVAL : v == 0 || state != IDLE ? 0 : EINVAL;
			break;
		case K_PP:
			pv = parse_pp(data, n, &tgt);
			want = pv == PP_BAD ? EINVAL : 0;
			break;
		case K_KPCTL:
			kc = parse_kpctl(data, n);
			want = kc ? 0 : EINVAL;
			break;
		default:
			break;
		}
	}

	/* write() at f_pos, which stays 0: no oprofilefs write moves it */
	r = off ? pwrite(f->wfd, src, n, off) : (below(2) ? pwrite(f->wfd, src, n, 0) : write(f->wfd, src, n));
	got = r < 0 ? errno : 0;
	count_result(f->kind, got);
	if (bad && off >= 0 && f->kind != K_RO) {
		int refused = vfs_refuses(src, n);

		if (refused)
			ptr_refused[bad]++;
		else
			ptr_reached[bad]++;
		if (f->kind == K_DUMP && refused)
			dump_refused++;
		else if (f->kind == K_DUMP)
			dump_reached++;
	}
	if (got != want || (!got && r != (ssize_t)n)) {
		char how[96] = "";

		if (bad)
			snprintf(how, sizeof(how), " (faulting pointer %p, %s)", (const void *)src, ptr_name[bad]);
		hex(h, data, n);
		cat[f->kind].mismatch++;
		ptr_bad += bad != P_GOOD;
		mismatch("write %s len %zu off %lld%s data %s: want %s, got %s (ret %zd)", f->rel, n, off, how, h,
			 ename(want), ename(got), r);
	}

	/* Apply the documented effect to the model, then read back. */
	if (!want && n && !off && !bad) {
		switch (f->kind) {
		case K_SETTING:
		case K_COUNTER:
			f->value = v;
			break;
		case K_ENABLE:
			if (v && state == SETUP)
				state = RUNNING;
			else if (!v && state == RUNNING)
				state = SETUP;
			break;
		case K_PP:
			for (int j = 0; j < npoints; j++)
				if (tgt == -1 || tgt == j) {
					if (pv == PP_ENABLE)
						point_on[j] = 1;
					if (pv == PP_DISABLE)
						point_on[j] = 0;
				}
			break;
		case K_KPCTL:
			kprof_started = kc != 2;
			break;
		default:
			break;
		}
	}
	switch (f->kind) {
	case K_SETTING:
	case K_COUNTER:
		check_value(f, "a write");
		break;
	case K_ENABLE:
		check_enable("a write");
		break;
	case K_PP:
		check_points("a write");
		if (!want && pv == PP_RESET && n && !off && !bad)
			for (int j = 0; j < npoints; j++)
				if (tgt == -1 || tgt == j)
					check_reset(j);
		break;
	case K_KPCTL:
		check_kpctl("a write");
		break;
	default:
		break;
	}
}

/* ---------------------------------------------------------------- reads */

static char rbuf[2][BLOB + 64], pbuf[BLOB + 64];

static void read_mismatch(int *bad_flag, const char *fmt, ...)
{
	va_list ap;
	char msg[256];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	*bad_flag = 1;
	mismatch("%s", msg);
}

/* pread(size, off) of an ordinary file, compared with two whole reads around it (or, for
 * kpdata, two reads of a window): when those agree, the odd read must be their slice. badptr:
 * the class of the faulting buffer read into (P_GOOD: none). */
static void fuzz_read_at(struct ofile *f, size_t size, long long off, int badptr)
{
	ssize_t r, a, b;
	int e, bad = 0;
	char *dst = badptr ? bad_ptr(badptr, size) : pbuf;

	if (f->kind == K_BUFFER)
		return;
	mclass = C_READ;
	reads_n++;
	if (f->big) {
		a = off >= 0 ? pread(f->rfd, rbuf[0], size + 16, off) : 0;
		a = a < 0 ? -errno : a;
		r = pread(f->rfd, dst, size, off);
		e = errno;
		b = off >= 0 ? pread(f->rfd, rbuf[1], size + 16, off) : 0;
		b = b < 0 ? -errno : b;
	} else {
		a = slurp_fd(f->rfd, rbuf[0], sizeof(rbuf[0]));
		r = pread(f->rfd, dst, size, off);
		e = errno;
		b = slurp_fd(f->rfd, rbuf[1], sizeof(rbuf[1]));
	}
	if (f->kind == K_DUMP) {
		if (r >= 0 || e != EINVAL)
			read_mismatch(&bad, "read %s: want EINVAL, got %zd %s", f->rel, r, r < 0 ? ename(e) : "");
	} else if (off < 0) {
		if (r >= 0 || e != EINVAL)
			read_mismatch(&bad, "pread %s off %lld: want EINVAL, got %zd", f->rel, off, r);
	} else if (badptr && vfs_refuses(dst, size)) {
		/* access_ok in vfs_read, before the file's read: at EOF and for 0 bytes too */
		ptr_reads[badptr]++;
		if (r >= 0 || e != EFAULT)
			read_mismatch(&bad, "pread %s size %zu off %lld into %p (%s): want EFAULT, got %zd %s", f->rel, size, off,
				      (void *)dst, ptr_name[badptr], r, r < 0 ? ename(e) : "");
	} else if (a < 0 || b < 0) {
		read_mismatch(&bad, "read %s failed: %s", f->rel, ename((int)-(a < 0 ? a : b)));
	} else if (size == 0) {
		if (r != 0)
			read_mismatch(&bad, "pread %s size 0 off %lld: got %zd %s", f->rel, off, r, r < 0 ? ename(e) : "");
	} else if (off >= (1LL << 32)) {
		if (r != 0)
			read_mismatch(&bad, "pread %s size %zu off %lld (>= 4 GiB): want 0 (EOF), got %zd %s", f->rel, size, off,
				      r, r < 0 ? ename(e) : "");
	} else if (a == b && !memcmp(rbuf[0], rbuf[1], a)) {
		/* stable content: exact */
		size_t base = f->big ? 0 : (size_t)off;
		size_t avail = (size_t)a > base ? (size_t)a - base : 0;
		size_t want = avail < size ? avail : size;

		if (badptr) {
			ptr_reads[badptr]++;
			if (want ? (r >= 0 || e != EFAULT) : r != 0)
				read_mismatch(&bad, "pread %s size %zu off %lld into %p (%s): want %s, got %zd %s", f->rel, size,
					      off, (void *)dst, ptr_name[badptr], want ? "EFAULT" : "0", r, r < 0 ? ename(e) : "");
		} else if (r != (ssize_t)want || memcmp(pbuf, rbuf[0] + base, want)) {
			read_mismatch(&bad, "pread %s size %zu off %lld: got %zd %s, want %zu bytes of the content", f->rel, size,
				      off, r, r < 0 ? ename(e) : "", want);
		}
	} else if (!badptr && (r < 0 || (size_t)r > size)) {
		read_mismatch(&bad, "pread %s size %zu off %lld (changing content): got %zd %s", f->rel, size, off, r,
			      r < 0 ? ename(e) : "");
	}
	reads_bad += bad;
	ptr_bad += bad && badptr;
}

static void fuzz_read(struct ofile *f)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 5, 7, 13, 64, 100, 4095, 4096, 4097, BLOB };
	static const long long offs[] = { 0, 1, 2, 3, 5, 21, 4096, 65537, 1LL << 31, 1LL << 32, (1LL << 32) + 1,
					  1LL << 40, 1LL << 62, -1 };
	size_t size = sizes[below(sizeof(sizes) / sizeof(sizes[0]))];
	long long off = below(3) ? (long long)below(64) : offs[below(sizeof(offs) / sizeof(offs[0]))];

	fuzz_read_at(f, size, off, below(20) == 0 ? pick_bad() : P_GOOD);
}

/* Reads of buffer: multiples of the kernel's word only (sizeof(long): the guest programs are
 * built for the kernel's architecture, 4 bytes on ARMv7, 8 on arm64), unseekable; dump first so a
 * read never blocks. Sizes are drawn as multiples of 4, so on arm64 half of those are no word
 * multiple. */
static void fuzz_buffer_read(void)
{
	size_t size = below(4) ? 4 * below(1025) : below(4097);
	int pread_it = below(6) == 0, badptr = below(20) == 0 ? pick_bad() : P_GOOD;
	char *dst = badptr ? bad_ptr(badptr, size) : pbuf;
	int refused = badptr && vfs_refuses(dst, size);
	ssize_t r;
	int e, want;

	if (state == IDLE)
		return;
	mclass = C_BREAD;
	breads_n++;
	if (badptr)
		ptr_reads[badptr]++;
	if (size % sizeof(long) == 0 && !pread_it && size && !refused)
		control("dump before a buffer read", 0, put(OP "/dump", "1"));
	alarm_every(2000000);
	r = pread_it ? pread(bfd, dst, size, 0) : read(bfd, dst, size);
	e = errno;
	alarm_off();
	/* VFS order: pread on a stream (ksys_pread64), then access_ok (vfs_read), then the module */
	want = pread_it ? ESPIPE : refused ? EFAULT : size % sizeof(long) ? EINVAL : 0;
	if (want && (r >= 0 || e != want)) {
		breads_bad++;
		ptr_bad += badptr != P_GOOD;
		mismatch("buffer read size %zu%s into %p (%s): want %s, got %zd %s", size, pread_it ? " (pread)" : "",
			 (void *)dst, ptr_name[badptr], ename(want), r, r < 0 ? ename(e) : "");
	} else if (!want && badptr && (r > 0 || (r < 0 && e != EFAULT))) {
		/* a faulting buffer the module reached: EFAULT (the words stay queued), or 0 when
		 * there was nothing to copy */
		breads_bad++;
		ptr_bad++;
		mismatch("buffer read size %zu into %p (%s): want EFAULT or 0, got %zd %s", size, (void *)dst,
			 ptr_name[badptr], r, r < 0 ? ename(e) : "");
	} else if (!want && !badptr && (r < 0 || (size_t)r > size || r % sizeof(long))) {
		breads_bad++;
		mismatch("buffer read size %zu: got %zd %s", size, r, r < 0 ? ename(e) : "");
	}
}

/* ---------------------------------------------------------------- fuzz main */

static void result(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("RESULT %s ", ok ? "ok" : "fail");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static int fuzz(uint64_t seed, long writes, long reads)
{
	char t[8192], *line, *save;
	long total = writes + reads;
	int swept = 0;
	double t0 = now(), tr = 0;

	rng = seed;
	printf("SEED %" PRIu64 "\n", seed);
	badpage = mmap(NULL, BLOB + 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (badpage == MAP_FAILED)
		return 1;
	/* Free unless the stack's random offset is 0 (its top is then the limit). */
	limitpage = mmap((void *)(uintptr_t)(USER_LIMIT - (BLOB + 4096)), BLOB + 4096, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (limitpage == MAP_FAILED) {
		printf("note: the %d bytes below the user address limit %#lx are in use (%s): no buffer %s\n",
		       BLOB + 4096, (unsigned long)USER_LIMIT, ename(errno), ptr_name[P_AT_LIMIT]);
		limitpage = NULL;
	} else if (limitpage != (char *)(uintptr_t)(USER_LIMIT - (BLOB + 4096))) {
		printf("ERR mmap at the limit gave %p\n", (void *)limitpage);
		return 1;
	}
	if (nftw(OP, add_file, 16, FTW_PHYS))
		return 1;
	for (int i = 0; i < nfiles; i++) {
		files[i].wfd = files[i].kind == K_BUFFER ? -1 : open(files[i].path, O_WRONLY);
		files[i].rfd = files[i].kind == K_BUFFER ? -1 : open(files[i].path, O_RDONLY);
		if (files[i].kind != K_BUFFER && (files[i].wfd < 0 || files[i].rfd < 0)) {
			printf("ERR open %s: %s\n", files[i].path, ename(errno));
			return 1;
		}
		if (files[i].kind == K_SETTING || files[i].kind == K_COUNTER) {
			slurp_fd(files[i].rfd, t, sizeof(t));
			files[i].value = strtoull(t, NULL, 10);
		}
	}
	if (slurp(OP "/cpu_type", t, sizeof(t)) < 0)
		return 1;
	cpu_type_s = strdup(t);
	hw_counters = cat[K_COUNTER].files > 0;
	if (slurp(OP "/profile_points", t, sizeof(t)) < 0)
		return 1;
	for (line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char st[8], name[64];

		if (sscanf(line, "%7s %63s", st, name) == 2 && (!strcmp(st, "on") || !strcmp(st, "off")) &&
		    npoints < MAX_POINTS) {
			snprintf(points[npoints], sizeof(points[0]), "%.31s", name);
			point_on[npoints++] = !strcmp(st, "on");
		}
	}
	check_kpctl("the start");

	for (op = 0; op < total; op++) {
		/*
		 * Visit idle, set up, running, set up, running, idle, ... every 1/24 of the run. A
		 * write that moved the state (a valid one to enable) is undone before the next
		 * operation, so each state gets its third of the writes whatever the seed (one seed
		 * left set up 999 of 10500 when such writes stood for the rest of a block).
		 */
		static const int plan[] = { IDLE, SETUP, RUNNING, SETUP, RUNNING, IDLE };
		int target = plan[(op * 24 / total) % 6];

		go(target);
		if (op % (total / 24 + 1) == 0) {
			if (!(swept & (1 << state))) { /* every readable file at fixed odd sizes and offsets */
				static const struct { size_t size; long long off; } sweep[] = {
					{ 1, 0 }, { 3, 1 }, { 7, 2 }, { 4096, 0 }, { 5, 4 }, { 5, 5 }, { 5, 6 }, { 4096, 1LL << 32 },
					{ 4096, (1LL << 32) + 1 }, { 4096, 1LL << 40 }, { 1, 1LL << 62 }, { 0, 0 }, { 8, -1 },
				};

				swept |= 1 << state;
				for (int i = 0; i < nfiles; i++)
					for (size_t k = 0; k < sizeof(sweep) / sizeof(sweep[0]); k++)
						fuzz_read_at(&files[i], sweep[k].size, sweep[k].off, 0);
			}
		}
		if ((op + 1) * reads / total != op * reads / total) { /* reads spread evenly */
			double t = now();

			if (state != IDLE && below(10) == 0)
				fuzz_buffer_read();
			else
				fuzz_read(&files[below(nfiles)]);
			tr += now() - t;
		} else {
			/* Weighted by kind, so each kind gets a share whatever its number of files. */
			static const enum kind pick[] = { K_SETTING, K_SETTING, K_SETTING, K_COUNTER, K_COUNTER, K_COUNTER,
							  K_ENABLE, K_DUMP, K_PP, K_PP, K_KPCTL, K_KPCTL, K_RO, K_RO,
							  K_BUFFER };
			enum kind k = pick[below(sizeof(pick) / sizeof(pick[0]))];
			int cand[MAX_FILES], nc = 0;

			for (int i = 0; i < nfiles; i++)
				if (files[i].kind == k)
					cand[nc++] = i;
			if (!nc) /* no counter files in timer mode */
				for (int i = 0; i < nfiles; i++)
					if (files[i].kind == K_SETTING)
						cand[nc++] = i;
			fuzz_write(&files[cand[below(nc)]]);
		}
	}
	go(IDLE);
	restore();
	control("kprof stop", 0, put(OP "/kprof/kpctl", "stop"));
	control("profile points off", 0, put(OP "/profile_points", "disable all"));
	for (int i = 0; i < nfiles; i++) {
		if (files[i].wfd >= 0)
			close(files[i].wfd);
		if (files[i].rfd >= 0)
			close(files[i].rfd);
	}

	{
		long w = 0;

		for (int k = 0; k < NKINDS; k++)
			w += cat[k].n;
		/* All but 1/21 of the writes asked for, each state 2/21 of them (10000 and 1000 of 10500). */
		long least = writes * 2 / 21;

		result(w >= writes - writes / 21 && nstate[IDLE] >= least && nstate[SETUP] >= least &&
			       nstate[RUNNING] >= least,
		       "fuzz: seed %" PRIu64 ", %ld writes (idle %ld, set up %ld, running %ld), %ld reads, %d files (%s), %.0f s (random reads %.0f s)",
		       seed, w, nstate[IDLE], nstate[SETUP], nstate[RUNNING], reads_n + breads_n, nfiles, cpu_type_s, now() - t0, tr);
	}
	for (int k = 0; k < NKINDS; k++) {
		char r[200] = "";
		int len = 0;

		for (int b = 0; b < NRES; b++)
			if (cat[k].res[b])
				len += snprintf(r + len, sizeof(r) - len, "%s%s %ld", len ? ", " : "", res_name[b], cat[k].res[b]);
		/* counter files exist with a hardware model only */
		result(!cat[k].mismatch && (cat[k].n > 0 || (k == K_COUNTER && !hw_counters)),
		       "fuzz writes to %s (%d files): %ld, %ld not as documented (%s)", kind_name[k], cat[k].files, cat[k].n,
		       cat[k].mismatch, r);
	}
	result(!reads_bad && reads_n > 0, "fuzz reads of every readable file at odd sizes and offsets: %ld, %ld not as documented",
	       reads_n, reads_bad);
	result(!breads_bad && breads_n > 0, "fuzz reads of buffer (word multiples, pread, faulting buffers): %ld, %ld not as documented",
	       breads_n, breads_bad);
	result(!ctl_bad, "fuzz state changes (restore settings, open/close buffer, enable): %ld failed", ctl_bad);
	{
		char w[400] = "";
		int len = 0, every = 1;

		for (int c = P_GOOD + 1; c < NPTR; c++) {
			len += snprintf(w + len, sizeof(w) - len, "%s%s: %ld refused, %ld reached the file, %ld reads", len ? "; " : "",
					ptr_name[c], ptr_refused[c], ptr_reached[c], ptr_reads[c]);
			every &= ptr_refused[c] + ptr_reached[c] > 0 || (c == P_AT_LIMIT && !limitpage);
		}
		result(!ptr_bad && every && dump_refused > 0 && dump_reached > 0,
		       "fuzz faulting buffers by class (the VFS refuses those not ending at or below %#lx with EFAULT before the file, dump's writes too: dump %ld refused, %ld reached it): %s; %ld not as documented",
		       (unsigned long)USER_LIMIT, dump_refused, dump_reached, w, ptr_bad);
	}
	return 0;
}

/* ---------------------------------------------------------------- stress workers */

struct tally { long ok, bad; int last_bad; };

static int report_tally(const char *what, struct tally *t, const char *extra)
{
	if (t->bad) {
		printf("ERR %s: %ld unexpected results (last %s), %ld ok%s\n", what, t->bad, ename(t->last_bad), t->ok, extra);
		return 1;
	}
	printf("ok %s: %ld%s\n", what, t->ok, extra);
	return 0;
}

static void tally(struct tally *t, int e, int allowed)
{
	if (!e || e == allowed) {
		t->ok++;
	} else {
		t->bad++;
		t->last_bad = e;
	}
}

/* enable=1/0 while another process holds buffer open: always accepted. */
static int toggle(double secs)
{
	int fd = open(OP "/enable", O_WRONLY);
	struct tally t = { 0 };
	double end = now() + secs;

	if (fd < 0)
		return printf("ERR open enable: %s\n", ename(errno)), 1;
	while (now() < end) {
		tally(&t, put_fd(fd, "1\n"), 0);
		tally(&t, put_fd(fd, "0\n"), 0);
	}
	close(fd);
	return report_tally("toggles", &t, "");
}

/* Valid settings (EBUSY allowed while running), counter values, dump, profile point and kprof
 * commands. */
static int settings(double secs)
{
	static const char *cmds[][2] = {
		{ OP "/buffer_watershed", "32768" }, { OP "/cpu_buffer_size", "4096" }, { OP "/cpu_buffer_size", "8192" },
		{ OP "/backtrace_depth", "0" }, { OP "/buffer_size", "131072" }, { OP "/dump", "1" },
		{ OP "/backtrace_depth", "16" }, { OP "/user_stack_size", "2048" }, { OP "/user_stack_size", "0" },
		{ OP "/image_ids_max", "4" }, { OP "/image_ids_max", "16384" },
		{ OP "/profile_points", "enable all" }, { OP "/profile_points", "disable all" },
		{ OP "/profile_points", "reset all" }, { OP "/kprof/kpctl", "startclr" }, { OP "/kprof/kpctl", "stop" },
		{ OP "/0/count", "1000000" }, { OP "/0/user", "1" }, { OP "/1/enabled", "0" },
	};
	struct tally t = { 0 };
	double end = now() + secs;
	unsigned i = 0;

	while (now() < end) {
		const char **c = cmds[i++ % (sizeof(cmds) / sizeof(cmds[0]))];
		int e = put(c[0], c[1]);

		if (e == ENOENT && c[0][strlen(OP) + 1] >= '0' && c[0][strlen(OP) + 1] <= '9')
			continue; /* no counter files in timer mode */
		tally(&t, e, EBUSY);
	}
	put(OP "/kprof/kpctl", "stop");
	put(OP "/profile_points", "disable all");
	return report_tally("settings writes", &t, "");
}

/* Reads buffer until secs passed: data or EINTR (the alarm that lets it look at the clock). */
static int reader(double secs, const char *stop)
{
	static char buf[512 * 1024];
	int fd = open(OP "/buffer", O_RDONLY);
	struct tally t = { 0 };
	double end = now() + secs;
	long long bytes = 0;
	char extra[64];

	if (fd < 0)
		return printf("ERR open buffer: %s\n", ename(errno)), 1;
	printf("reading\n");
	alarm_every(200000);
	while (now() < end && !(stop && access(stop, F_OK) == 0)) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n > 0)
			bytes += n;
		tally(&t, n < 0 ? errno : 0, EINTR);
	}
	alarm_off();
	close(fd);
	snprintf(extra, sizeof(extra), " reads, %lld bytes", bytes);
	if (!bytes)
		return printf("ERR reader: no data in %.0f s\n", secs), 1;
	return report_tally("reader", &t, extra);
}

static int hold(int en)
{
	static char buf[64 * 1024];
	int fd = open(OP "/buffer", O_RDONLY);

	if (fd < 0)
		return printf("ERR open buffer: %s\n", ename(errno)), 1;
	if (en && put(OP "/enable", "1"))
		return printf("ERR enable: %s\n", ename(errno)), 1;
	printf("holding\n");
	for (;;)
		if (read(fd, buf, sizeof(buf)) < 0 && errno != EINTR)
			return printf("ERR read: %s\n", ename(errno)), 1;
}

static volatile unsigned long spin_sink;

static int exitopen(double ms, int killself)
{
	int fd = open(OP "/buffer", O_RDONLY), e;
	double end = now() + ms / 1000;
	unsigned long x = 1;

	if (fd < 0)
		return printf("ERR open buffer: %s\n", ename(errno)), 1;
	if ((e = put(OP "/enable", "1")))
		return printf("ERR enable: %s\n", ename(e)), 1;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			spin_sink = x = x * 6364136223846793005UL + 1;
	printf("ok exiting with buffer open and profiling enabled\n");
	if (killself)
		kill(getpid(), SIGKILL);
	_exit(0);
}

static int race_fd;
static volatile int race_done;
static ssize_t race_n;
static int race_errno;

static void *race_reader(void *arg)
{
	static char buf[4096];

	(void)arg;
	race_n = read(race_fd, buf, sizeof(buf));
	race_errno = errno;
	race_done = 1;
	return NULL;
}

static int closerace(int en)
{
	pthread_t th;
	int fd2, e;

	race_fd = open(OP "/buffer", O_RDONLY);
	if (race_fd < 0)
		return printf("ERR open buffer: %s\n", ename(errno)), 1;
	if (en && (e = put(OP "/enable", "1")))
		return printf("ERR enable: %s\n", ename(e)), 1;
	if (pthread_create(&th, NULL, race_reader, NULL))
		return printf("ERR pthread_create\n"), 1;
	usleep(300000);
	if (race_done)
		return printf("ERR the reader did not block (%zd %s)\n", race_n, ename(race_errno)), 1;
	if (close(race_fd))
		return printf("ERR close: %s\n", ename(errno)), 1;
	usleep(300000);
	if (race_done)
		return printf("ERR close woke the reader (%zd %s)\n", race_n, ename(race_errno)), 1;
	fd2 = open(OP "/buffer", O_RDONLY);
	if (fd2 >= 0 || errno != EBUSY)
		return printf("ERR buffer reopened while a read was in progress on the closed descriptor: %s\n",
			      fd2 >= 0 ? "ok" : ename(errno)), 1;
	if ((e = put(OP "/dump", "1")))
		return printf("ERR dump: %s\n", ename(e)), 1;
	pthread_join(th, NULL);
	if (race_n < 0)
		return printf("ERR the woken read failed: %s\n", ename(race_errno)), 1;
	/* The last reference went with the read: released (and stopped). */
	fd2 = open(OP "/buffer", O_RDONLY);
	if (fd2 < 0)
		return printf("ERR buffer not released after the read returned: %s\n", ename(errno)), 1;
	close(fd2);
	{
		char t[8];

		if (slurp(OP "/enable", t, sizeof(t)) < 0 || strcmp(t, "0\n"))
			return printf("ERR profiling still enabled after the release\n"), 1;
	}
	printf("ok closed while reading: the read returned %zd bytes after dump, then buffer was released\n", race_n);
	return 0;
}

static int delmod(const char *name)
{
	if (syscall(SYS_delete_module, name, O_NONBLOCK))
		return printf("ERR %s\n", ename(errno)), 1;
	printf("ok\n");
	return 0;
}

static int nocap(char *list, char **cmd)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	char *tok, *save;

	if (syscall(SYS_capget, &h, d))
		return printf("ERR capget: %s\n", ename(errno)), 1;
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int cap = !strcmp(tok, "sys_admin") ? CAP_SYS_ADMIN : !strcmp(tok, "syslog") ? CAP_SYSLOG : -1;

		if (cap < 0)
			return printf("ERR unknown capability %s\n", tok), 1;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
			return printf("ERR PR_CAPBSET_DROP: %s\n", ename(errno)), 1;
		d[cap >> 5].effective &= ~(1u << (cap & 31));
		d[cap >> 5].permitted &= ~(1u << (cap & 31));
		d[cap >> 5].inheritable &= ~(1u << (cap & 31));
	}
	if (syscall(SYS_capset, &h, d))
		return printf("ERR capset: %s\n", ename(errno)), 1;
	execvp(cmd[0], cmd);
	return printf("ERR exec %s: %s\n", cmd[0], ename(errno)), 1;
}

static int access_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char buf[64];
	int fd;

	(void)st;
	(void)ftw;
	if (type != FTW_F)
		return 0;
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("- %s %s\n", path + strlen(OP) + 1, ename(errno));
		return 0;
	}
	if (!strcmp(path, OP "/buffer")) /* (a privileged opener) reading it would block */
		printf("R %s\n", path + strlen(OP) + 1);
	else if (read(fd, buf, sizeof(buf)) < 0)
		printf("- %s %s (read)\n", path + strlen(OP) + 1, ename(errno));
	else
		printf("R %s\n", path + strlen(OP) + 1);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 5 && !strcmp(argv[1], "fuzz"))
		return fuzz(strtoull(argv[2], NULL, 0), atol(argv[3]), atol(argv[4]));
	if (argc >= 3 && !strcmp(argv[1], "toggle"))
		return toggle(atof(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "settings"))
		return settings(atof(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "reader"))
		return reader(atof(argv[2]), argc > 3 ? argv[3] : NULL);
	if (argc >= 3 && !strcmp(argv[1], "hold"))
		return hold(atoi(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "exitopen"))
		return exitopen(atof(argv[2]), argc > 3 && !strcmp(argv[3], "kill"));
	if (argc >= 3 && !strcmp(argv[1], "closerace"))
		return closerace(atoi(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "delmod"))
		return delmod(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "nocap"))
		return nocap(argv[2], argv + 3);
	if (argc >= 2 && !strcmp(argv[1], "access"))
		return nftw(OP, access_one, 16, FTW_PHYS) ? 1 : 0;
	fprintf(stderr, "usage: see the comment at the top of opfuzz.c\n");
	return 2;
}
