/* dt_mlp.h: placeholder while the module is written. */
#ifndef DT_MLP_H
#define DT_MLP_H
#endif
