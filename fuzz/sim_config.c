/* fuzz/sim_config.c: libFuzzer harness for the simulator's config reader
 * (dts_scenario_from_config, sim/scenario.c): the input is a config file's
 * text (a dtsim config, dtrain's run config, a trace or summary object).
 * An accepted config is checked (dts_scenario_check), and when it passes,
 * its stages are listed and it is written back as JSON and read again.
 * "hardware" and "profile" name files: the fuzzer may reach files of this
 * machine through them (read only). Seeds: fuzz/corpus/sim_config. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dts_scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static dts_scenario sc, sc2; /* large (the cost table): not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    dts_scenario_default(&sc);
    dt_status st = dts_scenario_from_config(&sc, text, "fuzz.json");
    free(text);
    if (st != DT_OK) {
        if (!dt_last_error()[0]) abort();
        return 0;
    }
    if (dts_scenario_check(&sc) != DT_OK) return 0;
    (void)dts_scenario_world(&sc);
    for (int s = 0; s < sc.p; s++) {
        int first, last;
        if (dts_scenario_stage_layers(&sc, s, &first, &last) != DT_OK) abort();
    }
    char *json = dts_scenario_json(&sc);
    if (!json) abort();
    dts_scenario_default(&sc2);
    if (dts_scenario_from_config(&sc2, json, "round trip") != DT_OK) abort();
    free(json);
    return 0;
}
