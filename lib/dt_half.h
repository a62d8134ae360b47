/* dt_half.h: placeholder while the module is written. */
#ifndef DT_HALF_H
#define DT_HALF_H
#endif
