/* norm.c - placeholder until the layer lands. */
#include "layers.h"
sr_module *sr_batchnorm2d_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_layernorm_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_normalize_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
