/* comm_internal.h: placeholder */
