/* dt_internal.h: helpers shared inside the library (never installed). */
#ifndef DT_INTERNAL_H
#define DT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define DT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DT_UNUSED(x) ((void)(x))

/* The weights fingerprint (summary key param_probe) is sum_i w_i u(i) over
 * the whole model's flat buffer, with u(i) in [-1, 1) a hash of the element
 * index i (splitmix64), so any rank can add up its own elements wherever
 * they sit in the whole model (pipeline stages, tensor-parallel shards). */
static inline double dt__probe_u(uint64_t i)
{
    uint64_t z = i + 0x9e3779b97f4a7c15ull * 0x9e0beull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return 2.0 * ((double)(z >> 11) * (1.0 / 9007199254740992.0)) - 1.0;
}

#endif
