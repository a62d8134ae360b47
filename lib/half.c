/* half.c: placeholder while the module is written. */
typedef int dt__placeholder_half;
