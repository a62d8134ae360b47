/* comm_mpi.c: placeholder */
typedef int dt__placeholder_comm_mpi;
