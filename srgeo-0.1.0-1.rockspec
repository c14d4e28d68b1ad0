-- LuaRocks: `luarocks --lua-version 5.4 make` in the source tree builds with
-- the Makefile (the Debian packages of scripts/install-deps.sh first) and
-- installs a whole prefix (make install) into the rock's folder; LuaRocks
-- then puts srgeo.so on package.cpath and the shell in its bin/.  The
-- library root (lua/, models/, scripts/, notebooks/) goes with the Lua files,
-- where the module finds it (core/lua/srgeo.c).
rockspec_format = "3.0"
package = "srgeo"
version = "0.1.0-1"
source = { url = "git+file://." }
description = {
  summary = "Scale-resolved geometry of image encoders: r_eta profiles with exact JVPs",
  detailed = [[
A C core (tensors, encoder layers with exact forward / JVP / VJP, the r_eta
profile engine, image and weight I/O, training) bound to Lua 5.4, a shell,
experiment scripts and small trained models.]],
  license = "see the source tree",
}
dependencies = { "lua >= 5.4, < 5.5" }
build = {
  type = "make",
  build_target = "all",
  install_target = "install",
  -- the Makefile finds Lua with pkg-config; CFLAGS from LuaRocks would replace its own
  build_variables = {},
  install_variables = {
    PREFIX = "$(PREFIX)",
    BINDIR = "$(BINDIR)",
    LUA_CMOD = "$(LIBDIR)",
    DATADIR = "$(LUADIR)/srgeo-root",
    LIBDIR = "$(PREFIX)/clib",
  },
}
