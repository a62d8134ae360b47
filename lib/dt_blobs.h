/* dt_blobs.h: placeholder while the module is written. */
#ifndef DT_BLOBS_H
#define DT_BLOBS_H
#endif
