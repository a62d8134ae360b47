/* fuzz/trace_read.c: libFuzzer harness for the trace reader (lib/trace/trace_read.c):
 * the input is a whole trace file's bytes, read by dt_trace_read_mem (the
 * code dt_trace_read runs after reading the file). Any input must give
 * either a trace (freed here) or DT_ERR_FORMAT with a message and *out NULL;
 * the sanitizers catch everything else. Built and run by `make fuzz`
 * (fuzz/local.mk); seeds in fuzz/corpus/trace_read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "dt_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy: reading one byte past the input is then an ASan error */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    for (size_t i = 0; i < size; i++) copy[i] = data[i];
    dt_trace *t = NULL;
    dt_status st = dt_trace_read_mem("fuzz.json", copy, size, &t);
    if (st == DT_OK) {
        if (!t) abort();
        /* touch every event so a bad count or pointer shows */
        volatile uint64_t sum = 0;
        for (size_t i = 0; i < t->n_events; i++)
            sum += (uint64_t)t->events[i].ts_ns + (unsigned char)t->events[i].name[0];
        (void)sum;
        dt_trace_free(t);
    } else {
        if (t || (st != DT_ERR_FORMAT && st != DT_ERR_NOMEM) || !dt_last_error()[0]) abort();
    }
    free(copy);
    return 0;
}
