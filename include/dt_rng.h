/* dt_rng.h: a small deterministic random number generator (xoshiro256**
 * seeded through splitmix64). Same seed, same stream, on every platform. */
#ifndef DT_RNG_H
#define DT_RNG_H

#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_rng {
    uint64_t s[4];
} dt_rng;

DT_API void dt_rng_seed(dt_rng *r, uint64_t seed);
/* Seed from several words (e.g. seed, stream id, index): independent streams. */
DT_API void dt_rng_seed3(dt_rng *r, uint64_t a, uint64_t b, uint64_t c);
DT_API uint64_t dt_rng_u64(dt_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
DT_API uint64_t dt_rng_below(dt_rng *r, uint64_t n);
/* Uniform float in [0, 1). */
DT_API float dt_rng_uniform(dt_rng *r);
/* Standard normal (Box-Muller, double precision). */
DT_API double dt_rng_normal(dt_rng *r);

#ifdef __cplusplus
}
#endif
#endif
