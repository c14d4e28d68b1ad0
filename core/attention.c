/* attention.c - placeholder until the layer lands. */
#include "layers.h"
sr_module *sr_attention_create(const sr_opts *o) { sr_fail("%s: not implemented yet", o->op); return NULL; }
