/* time.c: monotonic nanosecond clock (see dt_time.h). */
#define _POSIX_C_SOURCE 200809L
#include "dt_time.h"

#include <time.h>

int64_t dt_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
