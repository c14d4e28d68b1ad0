/* act.c - placeholder until the layer lands. */
#include "layers.h"
sr_module *sr_relu_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_gelu_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_softmax_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
