/* replicalbctl.c - (in progress) */
#include "config.h"
#include "rlb.h"
int main(void) { return 0; }
