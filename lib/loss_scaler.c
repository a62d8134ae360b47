/* loss_scaler.c: placeholder while the module is written. */
typedef int dt__placeholder_loss_scaler;
