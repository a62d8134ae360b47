/* dt_safetensors.h: the safetensors file format (Hugging Face), read and
 * written: the format models leave and enter the PyTorch / transformers
 * ecosystem in.
 *
 * A file is: 8 bytes, the little-endian length N of the header; N bytes of
 * a JSON object (its end may be padded with spaces) mapping each tensor's
 * name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into
 * the byte buffer that follows the header), plus an optional
 * "__metadata__" object of strings; then the byte buffer, each tensor
 * row-major and little-endian.
 *
 * Reading is strict, every problem refused with one line naming the file
 * and the key or tensor: a header longer than 100 MB (DT_SAFETENSORS_MAX_HEADER)
 * or than the file, a header that is not a JSON object (duplicate keys
 * included), an entry without or with other keys, a dtype other than F32,
 * F16 or BF16, a shape that is not a list of at most 8 non-negative
 * integers, offsets whose span is not the shape's bytes, that run past
 * the end, overlap, or leave a hole (the format forbids holes).
 * Writing produces F32 tensors in name order, the header padded to a
 * multiple of 8 bytes, through lib/core/file.c (whole or not at all). */
#ifndef DT_SAFETENSORS_H
#define DT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dt_gpt.h"
#include "dt_status.h"
#include "dt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_SAFETENSORS_MAX_HEADER ((uint64_t)100 << 20)
#define DT_SAFETENSORS_MAX_DIMS 8

typedef struct dt_st_tensor {
    const char *name;                        /* owned by the file */
    dt_dtype dtype;                          /* DT_F32, DT_F16 or DT_BF16 */
    int ndim;                                /* 0 (a scalar) .. DT_SAFETENSORS_MAX_DIMS */
    int64_t shape[DT_SAFETENSORS_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end; /* bytes of the buffer after the header */
} dt_st_tensor;

typedef struct dt_safetensors dt_safetensors;

/* Open and validate PATH (the whole header; the data is read on demand). */
DT_API dt_status dt_safetensors_open(const char *path, dt_safetensors **out);
DT_API void dt_safetensors_close(dt_safetensors *st);
DT_API int dt_safetensors_count(const dt_safetensors *st);
DT_API const dt_st_tensor *dt_safetensors_tensor(const dt_safetensors *st, int i); /* name order */
DT_API const dt_st_tensor *dt_safetensors_find(const dt_safetensors *st, const char *name); /* NULL: none */
/* The "__metadata__" value of key, or NULL. */
DT_API const char *dt_safetensors_metadata(const dt_safetensors *st, const char *key);
/* t's values as floats into out (t->numel; F16 and BF16 widened exactly).
 * A short read (the file changed underneath) is refused naming the tensor. */
DT_API dt_status dt_safetensors_read_f32(const dt_safetensors *st, const dt_st_tensor *t, float *out);

/* One tensor to write: F32 data of shape (ndim dims). */
typedef struct dt_st_out {
    const char *name;
    int ndim;
    int64_t shape[DT_SAFETENSORS_MAX_DIMS];
    const float *data;
} dt_st_out;
/* PATH = the n tensors (names distinct, not "__metadata__") as F32, with
 * metadata {"format": "pt"} (what transformers expects of a PyTorch
 * checkpoint). Whole or not at all. */
DT_API dt_status dt_safetensors_write(const char *path, const dt_st_out *t, int n);

/* ---- GPT-2 interop (lib/train/export_hf.c) ---- */
/* DIR (made if missing) = m as a Hugging Face GPT-2 directory:
 * config.json (model_type gpt2, gelu_new, layer_norm_epsilon 1e-5, tied
 * or not) and model.safetensors (GPT2LMHeadModel's names, Conv1D weights
 * transposed to (in, out)), what transformers' from_pretrained loads. */
DT_API dt_status dt_gpt_export_hf(dt_gpt *m, const char *dir);

/* ---- GPT-2 in (lib/train/import_hf.c) ---- */
typedef struct dt_hf_model dt_hf_model;
/* DIR/config.json as dtrain's GPT (n_positions: the context), refused with
 * one line naming the key when dtrain cannot compute that model exactly
 * (an activation other than GELU's tanh form, another LayerNorm epsilon,
 * an MLP not 4 n_embd wide, cross-attention, ...). */
DT_API dt_status dt_hf_read_config(const char *dir, dt_gpt_config *out);
/* Open DIR (config.json, model.safetensors) and check every tensor's name,
 * dtype and shape against the configuration before any weight is read:
 * a missing, misshapen or unknown tensor is refused naming it. */
DT_API dt_status dt_hf_open(const char *dir, dt_hf_model **out);
DT_API const dt_gpt_config *dt_hf_config(const dt_hf_model *h);
/* The model's weights as an initialisation source (dt_gpt.h): any layout
 * reads its tensors whole from the file (F16/BF16 widened, Conv1D weights
 * transposed to (out, in)) and keeps its part. h must outlive its use. */
DT_API dt_gpt_init dt_hf_init(dt_hf_model *h);
DT_API void dt_hf_close(dt_hf_model *h);

#ifdef __cplusplus
}
#endif
#endif
