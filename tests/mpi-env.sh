# mpi-env.sh: sourced by the multi-rank tests (comm.sh, dp.sh).
#
# Open MPI settings, each only if the caller has not set it:
#   btl_vader_single_copy_mechanism=none  containers often forbid the
#       cross-memory attach (ptrace) that shared memory uses for large
#       messages; it fails with "Read -1, expected ..., errno = 1"
#   plm=isolated  one-node launch without ssh/rsh (absent in containers;
#       a missing agent makes mpirun abort before starting anything)
#   pml=ob1, btl=self,vader  this host only: no UCX/OFI/openib probing,
#       which warns or stalls where there is no such hardware
#   rmaps_base_oversubscribe=1, mpi_yield_when_idle=1  more ranks than
#       cores (CI machines have 2): waiting ranks yield their core
#   PMIX_MCA_gds=hash  avoids the shared-memory datastore of PMIx, which
#       fails in some containers
# We may run as root (containers, CI): --allow-run-as-root, and the
# OMPI_ALLOW_RUN_AS_ROOT variables for launchers that read those.

: "${OMPI_MCA_btl_vader_single_copy_mechanism:=none}"
: "${OMPI_MCA_plm:=isolated}"
: "${OMPI_MCA_pml:=ob1}"
: "${OMPI_MCA_btl:=self,vader}"
: "${OMPI_MCA_rmaps_base_oversubscribe:=1}"
: "${OMPI_MCA_mpi_yield_when_idle:=1}"
: "${PMIX_MCA_gds:=hash}"
: "${OMPI_ALLOW_RUN_AS_ROOT:=1}"
: "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
export OMPI_MCA_btl_vader_single_copy_mechanism OMPI_MCA_plm OMPI_MCA_pml OMPI_MCA_btl \
    OMPI_MCA_rmaps_base_oversubscribe OMPI_MCA_mpi_yield_when_idle PMIX_MCA_gds \
    OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
