/* dt_tensor.h: tensors are views (dtype, shape, strides, element offset) into
 * buffers owned by a backend. A dt_paramset lays out many named tensors in one
 * flat buffer, so parameters, gradients and optimizer state of a model shard
 * are each one allocation with the same layout (allreduce, sharding and
 * checkpoints then act on one pointer and one length).
 *
 * Invariants: a view never owns memory; offset + extent of a view lies inside
 * its buffer; shapes have at most DT_MAX_DIMS dimensions, row-major strides
 * counted in elements. */
#ifndef DT_TENSOR_H
#define DT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_MAX_DIMS 4
#define DT_NAME_MAX 48

typedef enum dt_dtype { DT_F32 = 0, DT_F16, DT_BF16, DT_I32 } dt_dtype;
typedef enum dt_device { DT_DEVICE_CPU = 0, DT_DEVICE_CUDA } dt_device;

struct dt_backend;

DT_API size_t dt_dtype_size(dt_dtype t);
DT_API const char *dt_dtype_name(dt_dtype t);

/* A block of memory on one device, allocated through a backend. */
typedef struct dt_buffer {
    void *data;
    size_t bytes;
    struct dt_backend *backend;
} dt_buffer;

DT_API dt_status dt_buffer_alloc(dt_buffer *buf, struct dt_backend *be, size_t bytes);
DT_API void dt_buffer_free(dt_buffer *buf);

typedef struct dt_tensor {
    const dt_buffer *buf;
    size_t offset; /* in elements from buf->data */
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    int64_t strides[DT_MAX_DIMS]; /* in elements */
} dt_tensor;

/* A contiguous row-major view of ndim dims at element offset `offset`. */
DT_API dt_status dt_tensor_view(dt_tensor *t, const dt_buffer *buf, size_t offset, dt_dtype dtype, int ndim,
                                const int64_t *shape);
DT_API int64_t dt_tensor_numel(const dt_tensor *t);
DT_API int dt_tensor_is_contiguous(const dt_tensor *t);
/* Pointer to the first element of the view. */
DT_API void *dt_tensor_data(const dt_tensor *t);

/* One named tensor inside a paramset. */
typedef struct dt_param_info {
    char name[DT_NAME_MAX];
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    size_t offset; /* in elements within the flat buffer */
    size_t numel;
    int decay; /* 1: weight decay applies (matrices); 0: biases, LayerNorm gains */
} dt_param_info;

/* The layout of a flat buffer: an ordered list of named tensors. */
typedef struct dt_paramset {
    dt_param_info *info;
    int count;
    int capacity;
    size_t numel; /* total elements */
} dt_paramset;

DT_API void dt_paramset_init(dt_paramset *ps);
DT_API void dt_paramset_free(dt_paramset *ps);
/* Append a tensor; offsets are assigned in order, aligned to 16 elements. */
DT_API dt_status dt_paramset_add(dt_paramset *ps, const char *name, int ndim, const int64_t *shape, int decay);
/* Index of the tensor named `name`, or -1. */
DT_API int dt_paramset_find(const dt_paramset *ps, const char *name);

#ifdef __cplusplus
}
#endif
#endif
