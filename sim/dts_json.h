/* dts_json.h: the typed JSON getters that sim/hw.c (hardware files) and
 * sim/scenario.c (config files) share. Internal to libdtsim.
 *
 * The getters check one value and say whether it is what was asked for;
 * the callers word their own expectations (a hardware file says "an integer
 * from 1 to 1048576", a config "an integer in 1..1024"), and
 * dts__json_expected records them in the one shape both use:
 *   WHAT: "KEY": expected WANT, got VALUE */
#ifndef DTS_JSON_H
#define DTS_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

/* The largest JSON file the simulator reads whole (a hardware file, a
 * config or summary, `dtbench allreduce --json`): larger is refused with
 * one line rather than read into memory (dt_file_read_whole). */
#define DTS_JSON_FILE_MAX ((size_t)256 << 20)

/* A JSON value in a message: its compact text ("?" for NULL), cut to fit
 * n bytes with "..." at the end. Returns buf. */
const char *dts__json_show(const json_t *v, char *buf, size_t n);

/* Records "WHAT: \"KEY\": expected WANT, got VALUE" (VALUE by
 * dts__json_show) as the last error and returns code. */
dt_status dts__json_expected(dt_status code, const char *what, const char *key, const char *want, const json_t *v);

/* v as an integer in [min, max]; an integral real (1.41e11) counts.
 * 1 and *out set, or 0 (*out untouched). */
int dts__json_int(const json_t *v, int64_t min, int64_t max, int64_t *out);

/* v as a finite number: 1 and *out set, or 0 (*out untouched). */
int dts__json_num(const json_t *v, double *out);

/* v as a string of min_len to cap - 1 bytes, copied with its terminator
 * into out: 1, or 0 (out untouched). */
int dts__json_str_copy(const json_t *v, size_t min_len, char *out, size_t cap);

/* o[key] = v (v's reference taken); *bad = 1 if v is NULL or the set fails. */
void dts__json_set(json_t *o, const char *key, json_t *v, int *bad);

/* A precision as dtrain's configs write it (f32, f16, bf16) or as dtsim's
 * flags do (fp32, fp16, bf16), as dtsim names it ("fp32", "fp16",
 * "bf16"); NULL for anything else (sim/scenario.c). */
const char *dts__precision_parse(const char *s);

#endif
