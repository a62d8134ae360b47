/* dt_internal.h: helpers shared inside the library (never installed). */
#ifndef DT_INTERNAL_H
#define DT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define DT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DT_UNUSED(x) ((void)(x))

#endif
