// SPDX-License-Identifier: GPL-2.0
/*
 * opwork: the `make run` workload, a small but real data job with symbols (built -g, frame
 * pointers): read a file through the page cache, checksum it (CRC-32, table driven), count
 * byte frequencies, sort its 32-bit words with libc qsort(), and write the sorted data back.
 * Its profile spans the program, libc and the kernel.
 *
 *   opwork IN OUT [PASSES]    print "opwork: crc32 0x... sorted N words"
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t crc_table[256];

static void crc32_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

__attribute__((noinline)) uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

__attribute__((noinline)) void histogram(const unsigned char *p, size_t n, unsigned long *h)
{
	while (n--)
		h[*p++]++;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static unsigned char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	unsigned char *buf;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		exit(1);
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		perror("malloc");
		exit(1);
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, 65536);

		if (r <= 0)
			break;
		got += r;
	}
	close(fd);
	*len = got;
	return buf;
}

int main(int argc, char **argv)
{
	unsigned long hist[256] = { 0 };
	int passes = argc > 3 ? atoi(argv[3]) : 1;
	uint32_t crc = 0;
	unsigned char *data = NULL;
	size_t len = 0;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: opwork IN OUT [PASSES]\n");
		return 2;
	}
	crc32_init();
	for (int i = 0; i < passes; i++) {
		free(data);
		data = read_file(argv[1], &len);
		crc = crc32_update(crc, data, len);
		histogram(data, len, hist);
	}
	qsort(data, len / 4, 4, cmp_u32);
	fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
		perror(argv[2]);
		return 1;
	}
	close(fd);
	printf("opwork: crc32 0x%08x sorted %zu words\n", crc, len / 4);
	return 0;
}
