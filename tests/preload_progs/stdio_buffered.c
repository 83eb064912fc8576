/* Stream calls the buffer serves alone (see tests/test_preload_counts.py): usage: stdio_buffered FILE N.
 * Writes FILE through a 1 MiB buffer with N fwrites of 64 bytes and N fputcs, then reads it back through another
 * 1 MiB buffer with N freads of 64 bytes and N fgetcs: only each stream's first call and its fclose reach the
 * kernel (N <= 10,000). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "stdio_buffered: line %d: %s failed: %s\n", __LINE__, #x, strerror(errno)); exit(1); } } while (0)
static char wbuf[1 << 20], rbuf[1 << 20];

int main(int argc, char **argv)
{
    CHECK(argc == 3);
    int n = atoi(argv[2]);
    CHECK(n > 0 && n <= 10000);
    char rec[64];
    memset(rec, 'r', sizeof rec);
    FILE *fp = fopen(argv[1], "w");
    CHECK(fp && setvbuf(fp, wbuf, _IOFBF, sizeof wbuf) == 0);
    for (int i = 0; i < n; i++) CHECK(fwrite(rec, 1, sizeof rec, fp) == sizeof rec);
    for (int i = 0; i < n; i++) CHECK(fputc('c', fp) == 'c');
    CHECK(fclose(fp) == 0);
    fp = fopen(argv[1], "r");
    CHECK(fp && setvbuf(fp, rbuf, _IOFBF, sizeof rbuf) == 0);
    for (int i = 0; i < n; i++) CHECK(fread(rec, 1, sizeof rec, fp) == sizeof rec && rec[0] == 'r');
    for (int i = 0; i < n; i++) CHECK(fgetc(fp) == 'c');
    CHECK(fgetc(fp) == EOF);
    CHECK(fclose(fp) == 0);
    return 0;
}
