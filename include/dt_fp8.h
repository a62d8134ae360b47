/* dt_fp8.h: the two 8-bit floating-point formats of FP8 training, their
 * conversions, and the scaling rules of its recipes, in one place that
 * the runtime (lib/model/fp8.c), every backend and the simulator's FP8
 * numerics (sim/fp8.c) share.
 *
 *   format  sign exp mantissa bias  max     smallest normal  smallest subnormal
 *   E4M3    1    4   3        7     448     2^-6             2^-9
 *   E5M2    1    5   2        15    57344   2^-14            2^-16
 *
 * E4M3 is the OCP "FN" variant (no infinities; S.1111.111 is NaN), E5M2
 * is IEEE-like (infinities and NaNs in its top exponent). Every FP8 value
 * is exactly a bf16 and a float.
 *
 * Conversion from float, the rules of Transformer Engine's casts:
 *  - round to nearest, ties to even, with subnormal results;
 *  - saturate: a magnitude above the format's max (inf included) becomes
 *    the max, with the sign kept; such a value is "saturated";
 *  - a non-zero magnitude at or below half the smallest subnormal becomes a
 *    zero of the same sign; such a value is "flushed";
 *  - NaN stays NaN (E4M3 0x7f, E5M2 0x7e, the sign kept).
 *
 * Scaling. A GEMM input x is multiplied by a scale s before conversion
 * and the GEMM's result divided by the product of its inputs' scales:
 *  - delayed (Transformer Engine's DelayedScaling): s from the history of
 *    x's amax (max |x|) over the last H steps, s = (max / amax) / 2^margin,
 *    amax the history's max ("max") or its latest entry ("most_recent");
 *    while the history holds no positive finite amax s stays as it was
 *    (1 at the start); dtrain's first step, with no history, scales each
 *    tensor from its own amax (as torchao initialises the amax);
 *  - tensorwise ("current scaling"): the same formula from x's own amax;
 *  - blockwise: a scale per tile (1 x 128 for activations and gradients,
 *    128 x 128 for weights, as DeepSeek-V3 and Transformer Engine's
 *    Float8BlockScaling), from the tile's own amax, rounded down to a
 *    power of two (Float8BlockScaling's default and MXFP8's E8M0 scales):
 *    then q / s is exact in bf16, so a backend may run blockwise GEMMs on
 *    the dequantized values with bf16 inputs.
 * A computed scale is lowered by one float ulp where amax * s would
 * exceed max in float arithmetic, so that a tensor's own amax never
 * counts as saturated. */
#ifndef DT_FP8_H
#define DT_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_fp8_format { DT_FP8_E4M3 = 0, DT_FP8_E5M2 = 1 } dt_fp8_format;
/* --fp8-format: e4m3 everywhere, or hybrid (E4M3 forward, E5M2 gradients) */
typedef enum dt_fp8_mode { DT_FP8_OFF = 0, DT_FP8_MODE_E4M3, DT_FP8_MODE_HYBRID } dt_fp8_mode;
typedef enum dt_fp8_recipe { DT_FP8_DELAYED = 0, DT_FP8_TENSORWISE, DT_FP8_BLOCKWISE } dt_fp8_recipe;
typedef enum dt_fp8_amax_algo { DT_FP8_AMAX_MAX = 0, DT_FP8_AMAX_MOST_RECENT } dt_fp8_amax_algo;

/* Blockwise tiles: activations and gradients 1 x 128, weights 128 x 128. */
#define DT_FP8_TILE 128
/* Histogram of |x| by binade: bucket b counts the non-zero values with
 * float biased exponent b (2^(b-127) <= |x| < 2^(b-126); b 0 the float
 * subnormals, 255 inf and NaN). */
#define DT_FP8_HIST 256

DT_API float dt_fp8_max(dt_fp8_format f);          /* 448, 57344 */
DT_API float dt_fp8_min_subnormal(dt_fp8_format f); /* 2^-9, 2^-16 */
DT_API const char *dt_fp8_format_name(dt_fp8_format f);

/* Conversions (scalar reference; the backends' kernels must agree bit for
 * bit, tests/check_fp8.c). *sat / *flush (may be NULL) are set to 1 when
 * the conversion saturated / flushed x, else left alone. */
DT_API uint8_t dt_fp8_from_float(float x, dt_fp8_format f, int *sat, int *flush);
DT_API float dt_fp8_to_float(uint8_t v, dt_fp8_format f);
/* x rounded to the format and widened back (dt_fp8_to_float of
 * dt_fp8_from_float), with the same counts. */
DT_API float dt_fp8_round(float x, dt_fp8_format f, int *sat, int *flush);

/* The scale of current scaling from amax (positive, finite): (max / amax)
 * / 2^margin, lowered so that amax * s <= max; pow2: rounded down to a
 * power of two. amax 0 or not finite: returns 0 (no scale: the caller
 * keeps its previous one, or uses 1). */
DT_API float dt_fp8_scale_from_amax(float amax, dt_fp8_format f, int margin, int pow2);
/* Delayed scaling: the amax a history (n entries, any order) stands for
 * under algo, with latest its most recent entry. */
DT_API float dt_fp8_history_amax(const float *hist, int n, float latest, dt_fp8_amax_algo algo);

/* Flags and names: "e4m3" | "hybrid"; "delayed" | "tensorwise" |
 * "blockwise"; "max" | "most_recent". Errors name the flag. */
DT_API dt_status dt_fp8_mode_parse(const char *s, dt_fp8_mode *out);
DT_API const char *dt_fp8_mode_name(dt_fp8_mode m);
DT_API dt_status dt_fp8_recipe_parse(const char *s, dt_fp8_recipe *out);
DT_API const char *dt_fp8_recipe_name(dt_fp8_recipe r);
DT_API dt_status dt_fp8_amax_algo_parse(const char *s, dt_fp8_amax_algo *out);
DT_API const char *dt_fp8_amax_algo_name(dt_fp8_amax_algo a);

/* The format of a GEMM input: role 0 an activation, 1 a weight, 2 a
 * gradient; hybrid gives gradients E5M2. */
static inline dt_fp8_format dt_fp8_role_format(dt_fp8_mode m, int role)
{
    return (m == DT_FP8_MODE_HYBRID && role == 2) ? DT_FP8_E5M2 : DT_FP8_E4M3;
}

#ifdef __cplusplus
}
#endif
#endif
