/* dt_time.h: the monotonic clock used for traces and throughput. */
#ifndef DT_TIME_H
#define DT_TIME_H

#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds from an arbitrary fixed point (CLOCK_MONOTONIC). */
DT_API int64_t dt_time_ns(void);

#ifdef __cplusplus
}
#endif
#endif
