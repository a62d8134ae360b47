/* hf.h: the one table between dtrain's GPT tensor names and GPT-2's in
 * Hugging Face's GPT2LMHeadModel (export_hf.c writes with it, import_hf.c
 * reads with it). */
#ifndef DT_TRAIN_HF_H
#define DT_TRAIN_HF_H

#include <stddef.h>

/* dtrain's name (lib/model/gpt.c's layout: "wte", "h.3.qkv.w", ...) ->
 * GPT-2's under GPT2LMHeadModel ("transformer.h.3.attn.c_attn.weight");
 * *transpose: the weight is a Conv1D's, stored (in, out). 0: no such name. */
int dt__hf_name(const char *in, char *out, size_t n, int *transpose);

#endif
