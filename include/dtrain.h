/* dtrain.h: the umbrella public header of the dtrain library.
 * Everything a program needs: status codes, tensors and flat parameter
 * buffers, backends, the GPT model, optimizers, data, traces, trainer. */
#ifndef DTRAIN_H
#define DTRAIN_H

#include "dt_status.h"
#include "dt_tensor.h"
#include "dt_rng.h"
#include "dt_time.h"
#include "dt_backend.h"
#include "dt_gpt.h"
#include "dt_sample.h"
#include "dt_optim.h"
#include "dt_data.h"
#include "dt_bpe.h"
#include "dt_trace.h"
#include "dt_trace_merge.h"
#include "dt_trace_stats.h"
#include "dt_trace_breakdown.h"
#include "dt_train.h"
#include "dt_half.h"
#include "dt_fp8.h"
#include "dt_safetensors.h"
#include "dt_loss_scaler.h"
#include "dt_mlp.h"
#include "dt_blobs.h"
#include "dt_comm.h"
#include "dt_grid.h"
#include "dt_schedule.h"
#include "dt_checkpoint.h"
#include "dt_file.h"

#define DT_VERSION_STRING "0.1.0"

#endif
