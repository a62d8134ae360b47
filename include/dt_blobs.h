/* dt_blobs.h: "blobs", a built-in synthetic classification task: K classes,
 * each a Gaussian blob in D dimensions, for the mlp-bn model (dt_mlp.h).
 *
 * The task: class k has center mu_k (D); an example of class k is
 * x = mu_k + n, n ~ N(0, I_D) (unit noise in every dimension). The centers
 * are drawn once, coordinate by coordinate, from N(0, separation^2) with a
 * FIXED seed (a constant of the library mixed with K and D), so every run
 * with the same --blobs-classes/--blobs-dims/--blobs-separation learns the
 * same task whatever its --seed; separation is the signal-to-noise ratio
 * (the typical distance between two centers is separation * sqrt(2D)).
 * Labels are uniform over the K classes.
 *
 * Defaults: K = 4, D = 8, separation = 1. With these the six center
 * distances are 3.1 to 5.0 noise std, and the nearest-center rule (Bayes-
 * optimal, since the blobs share one covariance) scores 0.93 (on 20000
 * validation examples; 0.84 at separation 0.75, 0.97 at 1.25): a model's
 * accuracy has room to show, and a small MLP gets close to it in a few
 * hundred steps.
 *
 * Examples: each split (train, validation) is an endless, numbered stream;
 * example j of a split is a pure function of (seed, split, j): one RNG
 * seeded with dt_rng_seed3(seed, split stream, j) draws its label, then its
 * D noise values. Batch `index` of size B holds examples index*B ...
 * index*B + B - 1, so micro-batches k = 0..N-1 of size b hold exactly the
 * examples of batch 0 of size N*b: gradient accumulation and one large
 * batch see the same data. Train and validation streams never share an RNG
 * stream (points are continuous: no example repeats across splits). */
#ifndef DT_BLOBS_H
#define DT_BLOBS_H

#include <stddef.h>
#include <stdint.h>

#include "dt_data.h"
#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_blobs_config {
    uint64_t seed;    /* examples (not centers) */
    int classes;      /* K, --blobs-classes (default 4; 2..1024) */
    int dims;         /* D, --blobs-dims (default 8; 1..65536) */
    float separation; /* center std in units of the noise std, --blobs-separation (default 1; > 0) */
} dt_blobs_config;

typedef struct dt_blobs dt_blobs;

/* The defaults above, seed 0. */
DT_API void dt_blobs_config_default(dt_blobs_config *cfg);
/* Check ranges; the message names the flag and the expected range. */
DT_API dt_status dt_blobs_config_validate(const dt_blobs_config *cfg);

DT_API dt_status dt_blobs_open(const dt_blobs_config *cfg, dt_blobs **out);
DT_API void dt_blobs_close(dt_blobs *ds);

DT_API int dt_blobs_dims(const dt_blobs *ds);    /* D */
DT_API int dt_blobs_classes(const dt_blobs *ds); /* K */
/* Class centers, (K, D) row-major (host memory owned by ds). */
DT_API const float *dt_blobs_centers(const dt_blobs *ds);

/* Examples first .. first+n-1 of a split: x (n, D), y (n), host memory. */
DT_API dt_status dt_blobs_examples(const dt_blobs *ds, dt_split split, uint64_t first, int n, float *x, int32_t *y);
/* Batch `index` of size B: examples index*B .. index*B + B - 1;
 * x (B, D), y (B), host memory. */
DT_API dt_status dt_blobs_batch(const dt_blobs *ds, dt_split split, uint64_t index, int B, float *x, int32_t *y);

#ifdef __cplusplus
}
#endif
#endif
