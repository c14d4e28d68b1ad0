/* test_fsutil.c - opening user-named files (a FIFO is refused at once, not
 * waited on) and the weight files' content hash (FNV-1a 64 test vectors). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "test.h"

/* The published FNV-1a 64 vectors: a hash that drifts would silently keep
 * every cached unit or recompute them all. */
TEST(fsutil_hash_file_fnv1a64_vectors)
{
    static const struct {
        const char *text;
        unsigned long long hash;
    } v[] = {{"", 0xcbf29ce484222325ull}, {"a", 0xaf63dc4c8601ec8cull}, {"foobar", 0x85944171f73967e8ull}};
    const char *path = "build/test_fsutil.bin";
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        FILE *f = fopen(path, "wb");
        fputs(v[i].text, f);
        fclose(f);
        uint64_t h = 0;
        struct stat st;
        CHECK_OK(sr_fs_hash_file(path, "hash", &h, &st));
        CHECK(h == v[i].hash, "'%s': %016llx, want %016llx", v[i].text, (unsigned long long)h, v[i].hash);
        CHECK(st.st_size == (off_t)strlen(v[i].text), "status of the file read");
    }
    remove(path);
    uint64_t h;
    CHECK_ERR(sr_fs_hash_file("build/does-not-exist.bin", "hash", &h, NULL), "No such file");
}

/* A FIFO without a writer: fopen would wait forever; these return at once
 * (a regression hangs test_core rather than failing: tests/lua/hardening_spec
 * runs the loaders under timeout). */
TEST(fsutil_open_regular_refuses_fifo_and_folder)
{
    const char *fifo = "build/test_fsutil.fifo";
    remove(fifo);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    CHECK(sr_fs_open_regular(fifo, "npy") == NULL, "a FIFO opened");
    CHECK(strstr(sr_errmsg(), "npy: build/test_fsutil.fifo is a FIFO, not a regular file") != NULL, "%s", sr_errmsg());
    CHECK_ERR(sr_fs_check_regular(fifo, "image"), "image: build/test_fsutil.fifo is a FIFO, not a regular file");
    uint64_t h;
    CHECK_ERR(sr_fs_hash_file(fifo, "hash", &h, NULL), "is a FIFO");
    remove(fifo);
    CHECK(sr_fs_open_regular("build", "idx") == NULL, "a folder opened");
    CHECK(strstr(sr_errmsg(), "idx: build is a directory, not a regular file") != NULL, "%s", sr_errmsg());
    FILE *f = sr_fs_open_regular("Makefile", "any");
    CHECK(f != NULL, "a regular file: %s", sr_errmsg());
    if (f) {
        char c;
        CHECK(fread(&c, 1, 1, f) == 1, "reads (blocking again)");
        fclose(f);
    }
}
