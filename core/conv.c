/* conv.c - placeholder until the layer lands. */
#include "layers.h"
sr_module *sr_conv2d_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
