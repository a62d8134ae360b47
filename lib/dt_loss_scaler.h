/* dt_loss_scaler.h: placeholder while the module is written. */
#ifndef DT_LOSS_SCALER_H
#define DT_LOSS_SCALER_H
#endif
