/* fuzz/hw.c: libFuzzer harness for the hardware reader (sim/hw.c): the
 * input is a hardware file's bytes, parsed as jansson does in dts_hw_load
 * and read by dts_hw_from_json. A description that is accepted must pass
 * dts_hw_validate and survive a round trip through dts_hw_to_json; a
 * refused one must leave *out untouched. Seeds: fuzz/corpus/hw. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dts_hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return 0; /* dts_hw_load's "line L, column C" error */
    dts_hw hw, before;
    memset(&hw, 0x5a, sizeof hw);
    before = hw;
    dt_status st = dts_hw_from_json(root, "fuzz.json", &hw);
    json_decref(root);
    if (st != DT_OK) {
        if (memcmp(&hw, &before, sizeof hw) != 0 || !dt_last_error()[0]) abort();
        return 0;
    }
    if (dts_hw_validate(&hw, "fuzz.json") != DT_OK) abort();
    json_t *back = dts_hw_to_json(&hw);
    if (!back) abort();
    dts_hw again;
    if (dts_hw_from_json(back, "round trip", &again) != DT_OK || !dts_hw_equal(&hw, &again)) abort();
    json_decref(back);
    (void)dts_hw_link(&hw, 0, 1);
    return 0;
}
