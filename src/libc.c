/* libc.c - (in progress) */
#include "config.h"
#include "rlb.h"
