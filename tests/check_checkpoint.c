/* check_checkpoint.c: checkpoint files and directories (lib/train/checkpoint.c,
 * lib/core/crc32c.c; docs/checkpoints.md).
 *
 * CRC32C: the check value 0xE3069283 of "123456789", the empty string,
 * incremental updates at every split point equal the whole, and one bit
 * flipped anywhere changes it.
 * Round trip: a shard with f32, i64 and bytes records (empty ones too)
 * written and read back bit-identical; find refuses a missing record, the
 * wrong kind and the wrong size, naming the file and the record.
 * Corruption, each with its message: a byte flipped in the magic, the
 * header, a record header, a record name, tensor data (the tensor named),
 * the footer and the file checksum; another format version (with a valid
 * header checksum); truncation at bytes 0, 5, 63, 64, 100, the middle and
 * one before the end; trailing bytes; the manifest's checksum, truncation,
 * version, a shard missing from the list, a shard file missing, a shard of
 * another save; world and iteration.
 * Directories: save with --save-keep (only the newest K stay, latest names
 * the newest), a stale iter_X.tmp ignored by readers and removed by the
 * next save, saving the same iteration again; find_latest: latest valid,
 * latest pointing to a missing or a corrupt directory (fallback to the
 * newest valid, with a note naming what was skipped and why), latest
 * missing, garbage in latest, nothing valid (an error naming each),
 * nothing at all, and an exact iter_X directory (no fallback).
 * Links (issue 34): a save never writes, truncates or removes through a
 * symbolic link in the save directory: a linked iter_X.tmp (a failed
 * save's leftover), a linked iter_X being pruned or saved again, a linked
 * latest or .latest.tmp.* are each refused with a message naming the
 * entry, and the victim they point to is intact afterwards; the no-follow
 * primitives (dt_dir.h) refuse links themselves, not only the check before
 * a save. Leftover .latest.tmp.* files of a killed commit are removed by
 * the next save. A checkpoint a reader holds (dt_checkpoint_verify's
 * manifest) is not pruned until the reader lets it go. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dt_dir.h"
#include "testutil.h"

static char root[256];

static void make_root(void)
{
    snprintf(root, sizeof root, "%s/ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void rm_rf(const char *p)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void)
{
    if (root[0]) rm_rf(root);
    root[0] = 0;
}

static long file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

static unsigned char *slurp(const char *p, long *n)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)*n + 1);
    ck_assert_int_eq((long)fread(b, 1, (size_t)*n, f), *n);
    fclose(f);
    b[*n] = 0;
    return b;
}

static void spit(const char *p, const void *b, long n)
{
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq((long)fwrite(b, 1, (size_t)n, f), n);
    fclose(f);
}

static void flip(const char *p, long at)
{
    long n;
    unsigned char *b = slurp(p, &n);
    ck_assert_int_lt(at, n);
    b[at] ^= 0x10;
    spit(p, b, n);
    free(b);
}

static void truncate_to(const char *p, long n) { ck_assert_int_eq(truncate(p, n), 0); }

static void copy_file(const char *from, const char *to)
{
    long n;
    unsigned char *b = slurp(from, &n);
    spit(to, b, n);
    free(b);
}

/* The test shard: "param/w" f32 (37 values), "optim.step" i64, "note" bytes, "empty" f32 (0). */
static float W[37];
static void fill_shard(dt_checkpoint_shard *s, int64_t it)
{
    dt_checkpoint_shard_init(s, 0, 1, it);
    for (int i = 0; i < 37; i++) W[i] = (float)i * 0.25f - 3.0f + (float)it;
    const int64_t step = it * 10;
    ck_dt(dt_checkpoint_shard_add(s, "param/w", DT_CKPT_F32, W, 37, NULL));
    ck_dt(dt_checkpoint_shard_add(s, "optim.step", DT_CKPT_I64, &step, 1, NULL));
    ck_dt(dt_checkpoint_shard_add(s, "note", DT_CKPT_BYTES, "hello", 5, NULL));
    ck_dt(dt_checkpoint_shard_add(s, "empty", DT_CKPT_F32, NULL, 0, NULL));
}

/* Save iteration `it` under root (one process), keeping `keep`. */
static void save(int64_t it, int keep)
{
    dt_checkpoint_shard s;
    fill_shard(&s, it);
    const dt_checkpoint_save a = {.dir = root,
                                  .iteration = it,
                                  .shard = &s,
                                  .layout_json = "{\"kind\":\"test\"}",
                                  .config_json = "{\"hidden_size\":64,\"lr\":0.1}",
                                  .keep = keep};
    char path[512];
    ck_dt(dt_checkpoint_write(&a, path, sizeof path));
    char want[512];
    snprintf(want, sizeof want, "%s/iter_%08lld", root, (long long)it);
    ck_assert_str_eq(path, want);
    dt_checkpoint_shard_free(&s);
}

/* A save that must fail, with want in its message. */
static void save_fails(int64_t it, int keep, const char *want)
{
    dt_checkpoint_shard s;
    fill_shard(&s, it);
    const dt_checkpoint_save a = {.dir = root, .iteration = it, .shard = &s, .keep = keep};
    char path[512];
    ck_assert_int_ne(dt_checkpoint_write(&a, path, sizeof path), DT_OK);
    ck_assert_msg(strstr(dt_last_error(), want) != NULL, "expected '%s' in: %s", want, dt_last_error());
    dt_checkpoint_shard_free(&s);
}

static void shard_path(char *p, size_t cap, int64_t it)
{
    snprintf(p, cap, "%s/iter_%08lld/shard-00000.bin", root, (long long)it);
}

/* dt_checkpoint_shard_read_file must fail with a message containing want. */
static void expect_read_fails(const char *path, const char *want)
{
    dt_checkpoint_shard s;
    dt_status st = dt_checkpoint_shard_read_file(path, &s);
    ck_assert_msg(st != DT_OK, "%s: read succeeded, expected '%s'", path, want);
    ck_assert_msg(strstr(dt_last_error(), want) != NULL, "expected '%s' in: %s", want, dt_last_error());
    ck_assert_msg(strstr(dt_last_error(), path) != NULL, "the message does not name the file: %s", dt_last_error());
}

static void expect_verify_fails(int64_t it, const char *want)
{
    char d[512];
    snprintf(d, sizeof d, "%s/iter_%08lld", root, (long long)it);
    dt_status st = dt_checkpoint_verify(d, NULL);
    ck_assert_msg(st != DT_OK, "%s: verify succeeded, expected '%s'", d, want);
    ck_assert_msg(strstr(dt_last_error(), want) != NULL, "expected '%s' in: %s", want, dt_last_error());
}

/* ---- CRC32C ------------------------------------------------------------- */

START_TEST(test_crc32c)
{
    ck_assert_uint_eq(dt_crc32c("123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(dt_crc32c("", 0), 0u);
    /* 32 zero bytes: the iSCSI test vector (RFC 3720 B.4) */
    unsigned char z[32] = {0};
    ck_assert_uint_eq(dt_crc32c(z, 32), 0x8A9136AAu);
    unsigned char ff[32];
    memset(ff, 0xff, sizeof ff);
    ck_assert_uint_eq(dt_crc32c(ff, 32), 0x62A8AB43u);
    unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 7 + 3);
    const uint32_t whole = dt_crc32c(buf, 300);
    for (int k = 0; k <= 300; k += 1) /* every split, through the 8-byte and byte loops */
        ck_assert_uint_eq(dt_crc32c_update(dt_crc32c(buf, (size_t)k), buf + k, 300 - (size_t)k), whole);
    for (int i = 0; i < 300; i += 13) {
        buf[i] ^= 1;
        ck_assert_uint_ne(dt_crc32c(buf, 300), whole);
        buf[i] ^= 1;
    }
}
END_TEST

/* ---- shard round trip --------------------------------------------------- */

START_TEST(test_round_trip)
{
    make_root();
    char p[512];
    snprintf(p, sizeof p, "%s/one.bin", root);
    dt_checkpoint_shard s, r;
    fill_shard(&s, 7);
    uint64_t bytes = 0;
    uint32_t crc = 0;
    ck_dt(dt_checkpoint_shard_write_file(p, &s, &bytes, &crc));
    ck_assert_int_eq((long)bytes, file_size(p));
    long n;
    unsigned char *b = slurp(p, &n);
    ck_assert_uint_eq(dt_crc32c(b, (size_t)n - 4), crc); /* the footer's checksum */
    free(b);
    ck_dt(dt_checkpoint_shard_read_file(p, &r));
    ck_assert_int_eq(r.count, 4);
    ck_assert_int_eq((int)r.iteration, 7);
    ck_assert_int_eq(r.rank, 0);
    ck_assert_int_eq(r.world, 1);
    const void *d = NULL;
    ck_dt(dt_checkpoint_shard_find(&r, "param/w", DT_CKPT_F32, 37, &d));
    float w[37];
    memcpy(w, d, sizeof w);
    ck_assert_int_eq(memcmp(w, W, sizeof w), 0);
    ck_dt(dt_checkpoint_shard_find(&r, "optim.step", DT_CKPT_I64, 1, &d));
    int64_t step;
    memcpy(&step, d, sizeof step);
    ck_assert_int_eq((int)step, 70);
    ck_dt(dt_checkpoint_shard_find(&r, "note", DT_CKPT_BYTES, 5, &d));
    ck_assert_int_eq(memcmp(d, "hello", 5), 0);
    ck_dt(dt_checkpoint_shard_find(&r, "empty", DT_CKPT_F32, 0, &d));
    /* find's refusals */
    ck_assert_int_ne(dt_checkpoint_shard_find(&r, "param/v", DT_CKPT_F32, 37, &d), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "no record param/v"));
    ck_assert_ptr_nonnull(strstr(dt_last_error(), p));
    ck_assert_int_ne(dt_checkpoint_shard_find(&r, "param/w", DT_CKPT_I64, 37, &d), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "holds f32, expected i64"));
    ck_assert_int_ne(dt_checkpoint_shard_find(&r, "param/w", DT_CKPT_F32, 36, &d), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "param/w has 37 elements, this run expects 36"));
    /* duplicate names are refused when adding */
    ck_assert_int_ne(dt_checkpoint_shard_add(&s, "param/w", DT_CKPT_F32, W, 1, NULL), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "added twice"));
    dt_checkpoint_shard_free(&r);
    dt_checkpoint_shard_free(&s);
}
END_TEST

/* ---- one file's corruptions --------------------------------------------- */

START_TEST(test_shard_corruption)
{
    make_root();
    char p[512], q[512];
    snprintf(p, sizeof p, "%s/good.bin", root);
    snprintf(q, sizeof q, "%s/bad.bin", root);
    dt_checkpoint_shard s;
    fill_shard(&s, 3);
    ck_dt(dt_checkpoint_shard_write_file(p, &s, NULL, NULL));
    dt_checkpoint_shard_free(&s);
    const long size = file_size(p);
    /* where things are: header 0..63, record 0 header at 64 (32 bytes), its
     * name "param/w" (7) at 96, its data (37 floats) at 103 */
    const long rec0 = 64, name0 = 96, data0 = 103, footer = size - 16;
    struct {
        long at;
        const char *want;
    } flips[] = {
        {0, "bad magic"},
        {7, "bad magic"},
        {8, "format version 17, this build reads version 1"}, /* the version is read before the header CRC */
        {20, "header checksum mismatch"},
        {30, "header checksum mismatch"},
        {61, "header checksum mismatch"},
        {rec0, "record 0 at byte 64: bad record magic"},
        {rec0 + 5, "record header checksum mismatch"},
        {rec0 + 17, "record header checksum mismatch"},
        {rec0 + 25, "record header checksum mismatch"},
        {name0 + 2, "record header checksum mismatch"},
        {data0, "checksum mismatch of tensor param/w"},
        {data0 + 77, "checksum mismatch of tensor param/w"},
        {data0 + 37 * 4 + 44, "checksum mismatch of tensor optim.step"},
        {footer, "bad footer"},
        {footer + 9, "bad footer"},
        {footer + 13, "file checksum mismatch"},
    };
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        copy_file(p, q);
        flip(q, flips[i].at);
        expect_read_fails(q, flips[i].want);
    }
    /* another format version, with the header's checksum made valid */
    {
        long n;
        unsigned char *b = slurp(p, &n);
        b[8] = 2;
        const uint32_t c = dt_crc32c(b, 60);
        for (int k = 0; k < 4; k++) b[60 + k] = (unsigned char)(c >> (8 * k));
        spit(q, b, n);
        free(b);
        expect_read_fails(q, "format version 2, this build reads version 1");
    }
    /* truncation at several points */
    const long cuts[] = {0, 5, 63, 64, 100, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        copy_file(p, q);
        truncate_to(q, cuts[i]);
        char want[64];
        snprintf(want, sizeof want, "truncated at byte %ld", cuts[i]);
        expect_read_fails(q, want);
    }
    /* trailing bytes */
    {
        long n;
        unsigned char *b = slurp(p, &n);
        unsigned char *c = malloc((size_t)n + 3);
        memcpy(c, b, (size_t)n);
        memset(c + n, 0, 3);
        spit(q, c, n + 3);
        free(b), free(c);
        expect_read_fails(q, "trailing data");
    }
    /* a missing file */
    snprintf(q, sizeof q, "%s/none.bin", root);
    expect_read_fails(q, "no such file");
}
END_TEST

/* Rewrite a manifest's text through edit (a string replacement), with a valid checksum line. */
static void rewrite_manifest(int64_t it, const char *from, const char *to)
{
    char p[512];
    snprintf(p, sizeof p, "%s/iter_%08lld/manifest.json", root, (long long)it);
    long n;
    char *b = (char *)slurp(p, &n);
    char *k = strstr(b, "  \"manifest_crc32c\"");
    ck_assert_ptr_nonnull(k);
    *k = 0;
    char *at = strstr(b, from);
    ck_assert_msg(at != NULL, "'%s' not in the manifest", from);
    char *out = malloc((size_t)n + strlen(to) + 64);
    size_t m = (size_t)(at - b);
    memcpy(out, b, m);
    strcpy(out + m, to);
    strcat(out, at + strlen(from));
    m = strlen(out);
    sprintf(out + m, "  \"manifest_crc32c\": \"%08x\"\n}\n", dt_crc32c(out, m));
    spit(p, out, (long)strlen(out));
    free(b), free(out);
}

/* ---- whole checkpoints ----------------------------------------------------- */

START_TEST(test_checkpoint_corruption)
{
    make_root();
    save(1, 0);
    save(2, 0);
    char d[512], sp[512], mp[600];
    snprintf(d, sizeof d, "%s/iter_00000002", root);
    shard_path(sp, sizeof sp, 2);
    snprintf(mp, sizeof mp, "%s/manifest.json", d);
    dt_checkpoint_manifest m;
    ck_dt(dt_checkpoint_verify(d, &m));
    ck_assert_int_eq((int)m.iteration, 2);
    ck_assert_int_eq(m.world_size, 1);
    ck_assert_int_eq(m.n_shards, 1);
    ck_assert_ptr_nonnull(strstr(m.config_json, "\"hidden_size\":64"));
    ck_assert_ptr_nonnull(strstr(m.layout_json, "\"kind\":\"test\""));
    dt_checkpoint_shard s;
    ck_dt(dt_checkpoint_read_shard(&m, 0, &s));
    ck_assert_int_eq(s.count, 4);
    dt_checkpoint_shard_free(&s);
    dt_checkpoint_manifest_free(&m);

    /* each test on a fresh copy of iteration 2: save it again */
    flip(sp, 110);
    expect_verify_fails(2, "checksum mismatch of tensor param/w");
    save(2, 0);
    truncate_to(sp, 80);
    expect_verify_fails(2, "truncated at byte 80 (the manifest says");
    save(2, 0);
    unlink(sp);
    expect_verify_fails(2, "missing shard of rank 0");
    save(2, 0);
    char other[512];
    shard_path(other, sizeof other, 1);
    copy_file(other, sp); /* the same size, another save */
    expect_verify_fails(2, "differs from the manifest's");
    save(2, 0);
    flip(mp, 30);
    expect_verify_fails(2, "manifest checksum mismatch");
    save(2, 0);
    truncate_to(mp, file_size(mp) / 2);
    expect_verify_fails(2, "no manifest_crc32c line");
    save(2, 0);
    rewrite_manifest(2, "\"version\": 1", "\"version\": 7");
    expect_verify_fails(2, "format version 7, this build reads version 1");
    save(2, 0);
    rewrite_manifest(2, "\"world_size\": 1", "\"world_size\": 2");
    expect_verify_fails(2, "1 shards listed for a world of 2 ranks (a shard is missing)");
    save(2, 0);
    rewrite_manifest(2, "\"iteration\": 2", "\"iteration\": 3");
    expect_verify_fails(2, "the directory is named for iteration 2, its manifest says 3");
    { /* under a name that is not iter_X, the shard's own iteration still disagrees */
        char best[600];
        snprintf(best, sizeof best, "%s/best", root);
        ck_assert_int_eq(rename(d, best), 0);
        ck_assert_int_ne(dt_checkpoint_verify(best, NULL), DT_OK);
        ck_assert_ptr_nonnull(strstr(dt_last_error(), "the manifest expects rank 0 of 1 at iteration 3"));
        rm_rf(best);
    }
    save(2, 0);
    { /* a duplicate "config" appended after the checksum line (which covers only what is before it) */
        truncate_to(mp, file_size(mp) - 2); /* drop "}\n" */
        static const char tail[] = "  ,\"config\": {\"hidden_size\": 32}\n}\n";
        long n;
        unsigned char *b = slurp(mp, &n);
        b = realloc(b, (size_t)n + sizeof tail);
        memcpy(b + n, tail, sizeof tail - 1);
        spit(mp, b, n + (long)sizeof tail - 1);
        free(b);
        expect_verify_fails(2, "after the manifest_crc32c line");
    }
    save(2, 0);
    rewrite_manifest(2, "\"version\": 1", "\"version\": 1,\n  \"version\": 1"); /* checksummed, but twice */
    expect_verify_fails(2, "duplicate object key");
    save(2, 0);
    rewrite_manifest(2, "\"format\": \"dtrain-checkpoint\"", "\"format\": \"other\"");
    expect_verify_fails(2, "format is not");
    save(2, 0);
    ck_dt(dt_checkpoint_verify(d, NULL));
}
END_TEST

static int count_entries(const char *prefix)
{
    DIR *dd = opendir(root);
    ck_assert_ptr_nonnull(dd);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)) != NULL) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(dd);
    return n;
}

static void read_latest(char *out, size_t cap)
{
    char p[512];
    snprintf(p, sizeof p, "%s/latest", root);
    long n;
    char *b = (char *)slurp(p, &n);
    snprintf(out, cap, "%s", b);
    free(b);
}

START_TEST(test_keep_and_tmp)
{
    make_root();
    for (int it = 1; it <= 5; it++) save(it, 2);
    ck_assert_int_eq(count_entries("iter_"), 2);
    char l[64];
    read_latest(l, sizeof l);
    ck_assert_str_eq(l, "iter_00000005\n");
    char p[512];
    snprintf(p, sizeof p, "%s/iter_00000004/manifest.json", root);
    ck_assert_int_gt(file_size(p), 0);
    /* a crashed save leaves iter_X.tmp: readers ignore it, the next save removes it */
    snprintf(p, sizeof p, "%s/iter_00000006.tmp", root);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    char f[600];
    snprintf(f, sizeof f, "%s/shard-00000.bin", p);
    spit(f, "junk", 4);
    char path[512], note[1024];
    ck_dt(dt_checkpoint_find_latest(root, path, sizeof path, note, sizeof note, NULL));
    ck_assert_ptr_nonnull(strstr(path, "iter_00000005"));
    ck_assert_str_eq(note, "");
    save(7, 2);
    ck_assert_int_eq(file_size(p), -1);
    /* the same iteration again (a resumed run re-saving it) */
    save(7, 2);
    ck_dt(dt_checkpoint_verify(path, NULL));
    ck_assert_int_eq(count_entries("iter_"), 2);
}
END_TEST

static void expect_latest(const char *want_path, const char *want_note)
{
    char path[512], note[2048];
    ck_dt(dt_checkpoint_find_latest(root, path, sizeof path, note, sizeof note, NULL));
    ck_assert_msg(strstr(path, want_path) != NULL, "loaded %s, expected %s (note: %s)", path, want_path, note);
    if (!want_note) ck_assert_str_eq(note, "");
    else ck_assert_msg(strstr(note, want_note) != NULL, "expected '%s' in the note: %s", want_note, note);
    ck_assert_ptr_null(strchr(note, '\n'));
}

START_TEST(test_find_latest)
{
    make_root();
    char path[512], note[2048], p[512];
    /* nothing at all */
    ck_assert_int_ne(dt_checkpoint_find_latest(root, path, sizeof path, note, sizeof note, NULL), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "no checkpoint there"));
    snprintf(p, sizeof p, "%s/none", root);
    ck_assert_int_ne(dt_checkpoint_find_latest(p, path, sizeof path, note, sizeof note, NULL), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "no such directory"));
    save(1, 0);
    save(2, 0);
    save(3, 0);
    expect_latest("iter_00000003", NULL);
    /* latest pointing to a corrupt checkpoint: the newest valid one, said why */
    char sp[512];
    shard_path(sp, sizeof sp, 3);
    flip(sp, 120);
    expect_latest("iter_00000002", "latest -> iter_00000003 is invalid");
    expect_latest("iter_00000002", "checksum mismatch of tensor param/w");
    expect_latest("iter_00000002", "loading iter_00000002, the newest valid checkpoint");
    /* an exact directory: that one or an error, no fallback */
    snprintf(p, sizeof p, "%s/iter_00000003", root);
    ck_assert_int_ne(dt_checkpoint_find_latest(p, path, sizeof path, note, sizeof note, NULL), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "checksum mismatch of tensor param/w"));
    snprintf(p, sizeof p, "%s/iter_00000001", root);
    ck_dt(dt_checkpoint_find_latest(p, path, sizeof path, note, sizeof note, NULL));
    ck_assert_str_eq(path, p);
    /* latest pointing to a missing directory */
    snprintf(p, sizeof p, "%s/iter_00000003", root);
    rm_rf(p);
    expect_latest("iter_00000002", "latest -> iter_00000003 is invalid");
    expect_latest("iter_00000002", "no such file");
    /* two invalid before a valid one: both named */
    save(3, 0);
    shard_path(sp, sizeof sp, 2);
    truncate_to(sp, 70);
    shard_path(sp, sizeof sp, 3);
    flip(sp, 3);
    expect_latest("iter_00000001", "iter_00000002 is invalid (");
    expect_latest("iter_00000001", "truncated at byte 70");
    expect_latest("iter_00000001", "latest -> iter_00000003 is invalid (");
    /* latest missing; garbage in latest */
    save(4, 0);
    snprintf(p, sizeof p, "%s/latest", root);
    unlink(p);
    expect_latest("iter_00000004", "latest is missing");
    spit(p, "../etc\n", 7);
    expect_latest("iter_00000004", "does not name a checkpoint");
    /* nothing valid: an error naming each */
    shard_path(sp, sizeof sp, 4);
    flip(sp, 3);
    shard_path(sp, sizeof sp, 1);
    flip(sp, 3);
    ck_assert_int_ne(dt_checkpoint_find_latest(root, path, sizeof path, note, sizeof note, NULL), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "no valid checkpoint"));
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "iter_00000001 is invalid"));
}
END_TEST

/* root/NAME -> target (a symbolic link). */
static void link_at(const char *name, const char *target)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", root, name);
    ck_assert_int_eq(symlink(target, p), 0);
}

static void unlink_at(const char *name)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", root, name);
    ck_assert_int_eq(unlink(p), 0);
}

START_TEST(test_no_follow)
{
    make_root();
    char victim[512], vfile[600], keep_dir[600];
    snprintf(victim, sizeof victim, "%s/victim", root);
    ck_assert_int_eq(mkdir(victim, 0755), 0);
    snprintf(vfile, sizeof vfile, "%s/a", victim);
    spit(vfile, "precious", 8);
    char save_dir[600];
    snprintf(save_dir, sizeof save_dir, "%s/save", root);
    ck_assert_int_eq(mkdir(save_dir, 0755), 0);
    char top[256];
    snprintf(top, sizeof top, "%s", root);
    snprintf(root, sizeof root, "%s", save_dir); /* save() and the links work in root/save */
    /* a failed save's leftover iter_X.tmp, a link to the victim */
    link_at("iter_00000099.tmp", "../victim");
    save_fails(3, 0, "iter_00000099.tmp: is a symbolic link");
    unlink_at("iter_00000099.tmp");
    /* pruning a linked iter_X */
    link_at("iter_00000000", "../victim");
    save_fails(3, 1, "iter_00000000: is a symbolic link");
    unlink_at("iter_00000000");
    /* saving again over a linked iter_X: a real checkpoint elsewhere */
    save(1, 0);
    snprintf(keep_dir, sizeof keep_dir, "%s/kept", top);
    char p[600];
    snprintf(p, sizeof p, "%s/iter_00000001", root);
    ck_assert_int_eq(rename(p, keep_dir), 0);
    link_at("iter_00000001", "../kept");
    save_fails(1, 0, "iter_00000001: is a symbolic link");
    snprintf(p, sizeof p, "%s/manifest.json", keep_dir);
    ck_assert_int_gt(file_size(p), 0);
    unlink_at("iter_00000001");
    /* a linked latest, and a linked leftover of latest's temporary */
    unlink_at("latest");
    link_at("latest", "../victim/a");
    save_fails(2, 0, "latest: is a symbolic link");
    unlink_at("latest");
    link_at(".latest.tmp.1.0", "../victim/a");
    save_fails(2, 0, ".latest.tmp.1.0: is a symbolic link");
    unlink_at(".latest.tmp.1.0");
    /* a regular leftover of a killed commit is removed by the next save */
    snprintf(p, sizeof p, "%s/.latest.tmp.1.1", root);
    spit(p, "iter_0", 6);
    save(2, 0);
    ck_assert_int_eq(file_size(p), -1);
    /* the victim is intact after all of it */
    long n = 0;
    unsigned char *b = slurp(vfile, &n);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(memcmp(b, "precious", 8), 0);
    free(b);
    /* the primitives refuse links themselves (a link made after the check) */
    int dfd;
    ck_dt(dt_dir_open(root, &dfd));
    link_at("iter_00000007.tmp", "../victim");
    ck_assert_int_ne(dt_dir_remove_tree(dfd, root, "iter_00000007.tmp"), DT_OK);
    ck_assert_int_ne(dt_dir_write_whole(dfd, root, "iter_00000007.tmp", "x", 1), DT_OK);
    int fd = -1;
    ck_assert_int_ne(dt_dir_create(dfd, root, "iter_00000007.tmp", &fd), DT_OK);
    ck_assert_int_ne(dt_dir_open_sub(dfd, root, "iter_00000007.tmp", &fd), DT_OK);
    ck_assert_int_ne(dt_dir_rename(dfd, root, "iter_00000002", "iter_00000007.tmp"), DT_OK);
    unlink_at("iter_00000007.tmp");
    /* a hard link is never truncated: creation is O_EXCL */
    snprintf(p, sizeof p, "%s/hard", root);
    ck_assert_int_eq(link(vfile, p), 0);
    ck_assert_int_ne(dt_dir_create(dfd, root, "hard", &fd), DT_OK);
    close(dfd);
    ck_assert_int_eq(file_size(vfile), 8);
    snprintf(root, sizeof root, "%s", top);
}
END_TEST

/* A checkpoint a reader holds stays through a save's pruning. */
START_TEST(test_prune_held)
{
    make_root();
    save(1, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/iter_00000001", root);
    dt_checkpoint_manifest m;
    ck_dt(dt_checkpoint_verify(p, &m)); /* holds it */
    save(2, 1);
    ck_dt(dt_checkpoint_verify(p, NULL)); /* still there, whole */
    dt_checkpoint_manifest_free(&m);
    save(3, 1);
    ck_assert_int_eq(count_entries("iter_"), 1);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_crc32c);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_shard_corruption);
    tcase_add_test(tc, test_checkpoint_corruption);
    tcase_add_test(tc, test_keep_and_tmp);
    tcase_add_test(tc, test_find_latest);
    tcase_add_test(tc, test_no_follow);
    tcase_add_test(tc, test_prune_held);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(checkpoint_suite()); }
