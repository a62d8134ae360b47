/* args.h: placeholder */
