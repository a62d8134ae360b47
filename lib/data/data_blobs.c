/* data_blobs.c: the "blobs" classification task (see dt_blobs.h).
 *
 * Invariants:
 *  - centers (K, D) are drawn at open from one RNG seeded with
 *    (DT__BLOBS_CENTER_SEED, K, D), never from the user's seed;
 *  - example j of a split is drawn from its own RNG seeded with (seed,
 *    split stream, j): first the label (dt_rng_below(K)), then the D noise
 *    values in dimension order. Nothing else is drawn, so a batch is a pure
 *    function of (seed, split, first example, n) and any partition of a
 *    range of examples into batches gives the same examples. */
#include <math.h>
#include <stdlib.h>

#include "dt_blobs.h"
#include "dt_rng.h"

#define DT__BLOBS_MAX_CLASSES 1024
#define DT__BLOBS_MAX_DIMS 65536
#define DT__BLOBS_CENTER_SEED 0x626c6f6263656e74ULL /* "blobcent" */
#define DT__BLOBS_STREAM_TRAIN 0x626c6f6274726e00ULL
#define DT__BLOBS_STREAM_VAL 0x626c6f6276616c00ULL

struct dt_blobs {
    dt_blobs_config cfg;
    float *centers; /* (K, D) */
};

void dt_blobs_config_default(dt_blobs_config *cfg)
{
    cfg->seed = 0;
    cfg->classes = 4;
    cfg->dims = 8;
    cfg->separation = 1.0f;
}

dt_status dt_blobs_config_validate(const dt_blobs_config *cfg)
{
    if (cfg->classes < 2 || cfg->classes > DT__BLOBS_MAX_CLASSES)
        return DT_FAIL(DT_ERR_INVALID, "--blobs-classes %d: expected 2..%d", cfg->classes, DT__BLOBS_MAX_CLASSES);
    if (cfg->dims < 1 || cfg->dims > DT__BLOBS_MAX_DIMS)
        return DT_FAIL(DT_ERR_INVALID, "--blobs-dims %d: expected 1..%d", cfg->dims, DT__BLOBS_MAX_DIMS);
    if (!(cfg->separation > 0.0f) || !isfinite(cfg->separation))
        return DT_FAIL(DT_ERR_INVALID, "--blobs-separation %g: expected a finite value > 0 (center std / noise std)",
                       (double)cfg->separation);
    return DT_OK;
}

dt_status dt_blobs_open(const dt_blobs_config *cfg, dt_blobs **out)
{
    *out = NULL;
    DT_CHECK(dt_blobs_config_validate(cfg));
    dt_blobs *ds = calloc(1, sizeof *ds);
    size_t n = (size_t)cfg->classes * cfg->dims;
    float *c = ds ? malloc(n * sizeof *c) : NULL;
    if (!c) {
        free(ds);
        return DT_FAIL(DT_ERR_NOMEM, "blobs: out of memory for %d x %d centers", cfg->classes, cfg->dims);
    }
    ds->cfg = *cfg;
    ds->centers = c;
    dt_rng r;
    dt_rng_seed3(&r, DT__BLOBS_CENTER_SEED, (uint64_t)cfg->classes, (uint64_t)cfg->dims);
    for (size_t i = 0; i < n; i++) c[i] = (float)(cfg->separation * dt_rng_normal(&r));
    *out = ds;
    return DT_OK;
}

void dt_blobs_close(dt_blobs *ds)
{
    if (!ds) return;
    free(ds->centers);
    free(ds);
}

int dt_blobs_dims(const dt_blobs *ds) { return ds->cfg.dims; }
int dt_blobs_classes(const dt_blobs *ds) { return ds->cfg.classes; }
const float *dt_blobs_centers(const dt_blobs *ds) { return ds->centers; }

dt_status dt_blobs_examples(const dt_blobs *ds, dt_split split, uint64_t first, int n, float *x, int32_t *y)
{
    if (n < 1) return DT_FAIL(DT_ERR_INVALID, "blobs: %d examples requested (expected >= 1)", n);
    if (split != DT_SPLIT_TRAIN && split != DT_SPLIT_VAL)
        return DT_FAIL(DT_ERR_INVALID, "blobs: split %d (expected train or validation)", (int)split);
    if (first > UINT64_MAX - (uint64_t)n)
        return DT_FAIL(DT_ERR_INVALID, "blobs: examples %llu + %d past the end of the stream",
                       (unsigned long long)first, n);
    const int D = ds->cfg.dims, K = ds->cfg.classes;
    const uint64_t stream = split == DT_SPLIT_VAL ? DT__BLOBS_STREAM_VAL : DT__BLOBS_STREAM_TRAIN;
    for (int i = 0; i < n; i++) {
        dt_rng r;
        dt_rng_seed3(&r, ds->cfg.seed, stream, first + (uint64_t)i);
        int k = (int)dt_rng_below(&r, (uint64_t)K);
        const float *mu = ds->centers + (size_t)k * D;
        float *xi = x + (size_t)i * D;
        for (int d = 0; d < D; d++) xi[d] = mu[d] + (float)dt_rng_normal(&r);
        y[i] = k;
    }
    return DT_OK;
}

dt_status dt_blobs_batch(const dt_blobs *ds, dt_split split, uint64_t index, int B, float *x, int32_t *y)
{
    if (B < 1) return DT_FAIL(DT_ERR_INVALID, "blobs: batch size %d (expected >= 1)", B);
    if (index > (UINT64_MAX - (uint64_t)B) / (uint64_t)B)
        return DT_FAIL(DT_ERR_INVALID, "blobs: batch %llu of size %d past the end of the stream",
                       (unsigned long long)index, B);
    return dt_blobs_examples(ds, split, index * (uint64_t)B, B, x, y);
}
