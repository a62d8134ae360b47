/* schedule.c: in progress */
