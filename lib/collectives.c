/* collectives.c: placeholder while the collectives is written. */
typedef int dt__placeholder_coll;
