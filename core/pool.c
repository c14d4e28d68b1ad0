/* pool.c - placeholder until the layer lands. */
#include "layers.h"
sr_module *sr_maxpool2d_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_avgpool2d_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_adaptive_avgpool2d_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_flatten_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_permute_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
