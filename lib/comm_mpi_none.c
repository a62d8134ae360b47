/* comm_mpi_none.c: placeholder */
typedef int dt__placeholder_comm_mpi_none;
