/* data_blobs.c: placeholder while the module is written. */
typedef int dt__placeholder_data_blobs;
