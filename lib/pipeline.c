/* pipeline.c: in progress */
