/* comm.c: placeholder while the communicator is written. */
typedef int dt__placeholder_comm;
