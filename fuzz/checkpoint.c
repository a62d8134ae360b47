/* fuzz/checkpoint.c: libFuzzer harness for the checkpoint reader
 * (lib/train/checkpoint.c). The input is used twice, in a private temporary
 * directory: as one shard file (dt_checkpoint_shard_read_file: magic,
 * header, records, every CRC32C) and as the manifest.json of a checkpoint
 * directory whose shard-00000.bin is the same bytes (dt_checkpoint_verify:
 * the manifest's checksum line and JSON, then the shard against it). The
 * checksums do not stop the fuzzer for long: libFuzzer's comparison
 * tracing puts the value a CRC is compared with into the input. A read
 * shard's records are touched (a wrong pointer or count shows); refusals
 * must carry a message. Seeds: fuzz/corpus/checkpoint (real shards and
 * manifests of dtrain --save). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt_checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char ck_dir[256];

static int ck_put(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = size && fwrite(data, 1, size, f) != size;
    return fclose(f) != 0 || bad ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ck_dir[0]) {
        snprintf(ck_dir, sizeof ck_dir, "%s/dtfuzz-ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(ck_dir)) abort();
    }
    char shard_path[512], manifest_path[512];
    snprintf(shard_path, sizeof shard_path, "%s/shard-00000.bin", ck_dir);
    snprintf(manifest_path, sizeof manifest_path, "%s/manifest.json", ck_dir);
    if (ck_put(shard_path, data, size) != 0 || ck_put(manifest_path, data, size) != 0) abort();

    dt_checkpoint_shard s;
    memset(&s, 0, sizeof s);
    dt_status st = dt_checkpoint_shard_read_file(shard_path, &s);
    if (st == DT_OK) {
        volatile uint64_t sum = 0;
        for (int i = 0; i < s.count; i++) {
            const dt_checkpoint_record *r = &s.rec[i];
            sum += strlen(r->name) + r->count;
            const size_t bytes = r->count * (r->kind == DT_CKPT_F32 ? 4 : r->kind == DT_CKPT_I64 ? 8 : 1);
            if (bytes) sum += ((const unsigned char *)r->data)[0] + ((const unsigned char *)r->data)[bytes - 1];
        }
        (void)sum;
        dt_checkpoint_shard_free(&s);
    } else if (!dt_last_error()[0]) {
        abort();
    }

    dt_checkpoint_manifest m;
    memset(&m, 0, sizeof m);
    st = dt_checkpoint_verify(ck_dir, &m);
    if (st == DT_OK) {
        for (int r = 0; r < m.n_shards; r++) {
            dt_checkpoint_shard rs;
            memset(&rs, 0, sizeof rs);
            if (dt_checkpoint_read_shard(&m, r, &rs) == DT_OK) dt_checkpoint_shard_free(&rs);
        }
        dt_checkpoint_manifest_free(&m);
    } else if (!dt_last_error()[0]) {
        abort();
    }
    return 0;
}
