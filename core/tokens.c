/* tokens.c - placeholder until the layer lands. */
#include "layers.h"
sr_module *sr_to_tokens_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_cls_pos_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_token_select_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
sr_module *sr_layer_scale_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
