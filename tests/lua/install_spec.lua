-- install_spec.lua: `make install` into a temporary prefix (and a DESTDIR
-- staging), then srgeo used from there as a user would: the shell from
-- another folder, a subcommand's real run, srgeo.so under a stock lua5.4,
-- a C program built with srgeo.pc; a copied shell or srgeo.so without its
-- library must fail loudly; srgeo.1 documents what --help lists.
local T = ...
local srgeo = require "srgeo"

local SHELL = T.shell() or "build/srgeo"
local BUILD = SHELL:match("^(.*)/srgeo$") or "build"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

local function has(s, needle, what)
  T.truthy(s and s:find(needle, 1, true), (what or "output") .. " should contain '" .. needle .. "', got:\n" .. tostring(s))
end

local tmp = os.tmpname()
os.remove(tmp)
assert(os.execute("mkdir -p " .. q(tmp)))
tmp = sh("cd " .. q(tmp) .. " && pwd -P"):gsub("\n$", "")

-- No variables of the make running `make test` (its jobserver is not ours),
-- nor a library root from the environment.
local CLEAN_ENV = "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SRGEO_ROOT"

local function install(vars)
  local out, code = sh(string.format("%s make -s --no-print-directory BUILD=%s %s install", CLEAN_ENV, q(BUILD), vars))
  T.eq(code, 0, "make install " .. vars .. ":\n" .. out)
  return out
end

local installed, install_out
local function prefix()
  if not installed then
    installed = tmp .. "/prefix"
    install_out = install("PREFIX=" .. q(installed))
  end
  return installed
end

local function exists(path) return os.execute("test -e " .. q(path)) == true end

-- A stock lua5.4 for srgeo.so: under `make sanitize` the module wants the
-- ASan runtime loaded first, which lua5.4 does not link.
local function lua54()
  if not BUILD:find("san", 1, true) then return "lua5.4" end
  local lib = io.popen("cc -print-file-name=libasan.so"):read("l")
  return "LD_PRELOAD=" .. q(lib) .. " lua5.4"
end

T.test("install: make install PREFIX= puts the shell, srgeo.so, the library root, the core, srgeo.pc and srgeo.1 there", function()
  local P = prefix()
  for _, f in ipairs { "bin/srgeo", "lib/lua/5.4/srgeo.so", "share/srgeo/lua/srgeo/init.lua", "share/srgeo/lua/srgeo/cli.lua",
                       "share/srgeo/models/resnet.lua", "share/srgeo/models/shipped/small_resnet.safetensors",
                       "share/srgeo/scripts/bump.lua", "share/srgeo/notebooks", "share/man/man1/srgeo.1",
                       "lib/pkgconfig/srgeo.pc", "lib/libsrgeo_core.a", "include/srgeo/nn/module.h",
                       "include/srgeo/base/error.h" } do
    T.truthy(exists(P .. "/" .. f), "installed: " .. f)
  end
  T.truthy(os.execute("test -x " .. q(P .. "/bin/srgeo")), "the shell is executable")
  -- installing again over it works (an upgrade)
  install("PREFIX=" .. q(P))
end)

T.test("install: the installed shell finds its library from any folder and runs a subcommand for real", function()
  local P = prefix()
  local out, code = sh(string.format("cd / && %s %s -e %s", CLEAN_ENV, q(P .. "/bin/srgeo"),
    q("print(srgeo.root); print(type(srgeo.models.load), type(srgeo.profile), type(srgeo.plot.profile))")))
  T.eq(code, 0, out)
  T.eq(out, P .. "/share/srgeo\nfunction\ttable\tfunction\n")
  out, code = sh(string.format("cd / && %s %s bump --help", CLEAN_ENV, q(P .. "/bin/srgeo")))
  T.eq(code, 0, out)
  has(out, "usage: srgeo bump [options]")
  -- a real unit from the installed scripts, models and library, in a scratch folder
  out, code = sh(string.format("cd %s && %s %s bump --model 'mlp{hidden={8}}@init' --eval noise:2 --directions 4 "
    .. "--jvp-directions all --nscales 3 --bootstrap 10 --out run", q(tmp), CLEAN_ENV, q(P .. "/bin/srgeo")))
  T.eq(code, 0, out)
  T.truthy(exists(tmp .. "/run/results.json") and exists(tmp .. "/run/summary.txt"), "results written:\n" .. out)
  -- the shipped default model loads from the installed root
  out, code = sh(string.format("cd / && %s %s -e %s", CLEAN_ENV, q(P .. "/bin/srgeo"),
    q("local m = srgeo.models.load(srgeo.models.shipped_path('small_resnet')); print(m:forward(srgeo.rand({1,1,28,28}, 1)):dim())")))
  T.eq(code, 0, out)
  T.eq(out, "2\n")
end)

T.test("install: srgeo.so from the prefix loads in a stock lua5.4 with its library", function()
  if os.execute("command -v lua5.4 >/dev/null 2>&1") ~= true then T.skip("lua5.4 is not installed") end
  local P = prefix()
  local out, code = sh(string.format("cd / && %s LUA_CPATH=%s %s -e %s", CLEAN_ENV, q(P .. "/lib/lua/5.4/?.so"), lua54(),
    q("local s = require 'srgeo'; print(s.root, type(s.models.list), type(s.profile.compare))")))
  T.eq(code, 0, out)
  T.eq(out, P .. "/share/srgeo\tfunction\tfunction\n")
end)

T.test("install: make install says how stock Lua finds a prefix off its paths; srgeo --lua-path prints the exports", function()
  if os.execute("command -v lua5.4 >/dev/null 2>&1") ~= true then T.skip("lua5.4 is not installed") end
  local P = prefix()
  has(install_out, "srgeo: " .. P .. "/lib/lua/5.4 is not on stock lua5.4's package.cpath", "make install's output")
  has(install_out, 'export LUA_CPATH="' .. P .. '/lib/lua/5.4/?.so;;"', "make install's output")
  has(install_out, P .. "/bin/srgeo --lua-path", "make install's output")
  local lines, code = sh(string.format("cd / && %s %s --lua-path", CLEAN_ENV, q(P .. "/bin/srgeo")))
  T.eq(code, 0, lines)
  T.eq(lines, string.format('export LUA_PATH="%s/share/srgeo/lua/?.lua;;"\nexport LUA_CPATH="%s/lib/lua/5.4/?.so;;"\n', P, P))
  has(install_out, lines:match("[^\n]+"), "the same lines in make install's output")
  local out
  out, code = sh(string.format("cd / && eval \"$(%s %s --lua-path)\" && %s %s -l srgeo -e %s", CLEAN_ENV, q(P .. "/bin/srgeo"),
    CLEAN_ENV, lua54(), q("print(srgeo.root)")))
  T.eq(code, 0, out)
  T.eq(out, P .. "/share/srgeo\n")
end)

T.test("install: DESTDIR stages the install; the staged tree runs where it is, srgeo.pc names the final prefix", function()
  local stage = tmp .. "/stage"
  install("DESTDIR=" .. q(stage) .. " PREFIX=/opt/srgeo")
  local P = stage .. "/opt/srgeo"
  T.truthy(exists(P .. "/bin/srgeo") and exists(P .. "/share/srgeo/lua/srgeo/init.lua"), "staged under DESTDIR")
  local out, code = sh(string.format("cd / && %s %s -e 'print(srgeo.root)'", CLEAN_ENV, q(P .. "/bin/srgeo")))
  T.eq(code, 0, out)
  T.eq(out, P .. "/share/srgeo\n", "relocatable: the root is found beside the shell, not compiled in")
  local pc = T.read(P .. "/lib/pkgconfig/srgeo.pc")
  has(pc, "prefix=/opt/srgeo\n", "srgeo.pc")
  has(pc, "root=/opt/srgeo/share/srgeo\n", "srgeo.pc")
  has(pc, "Version: " .. srgeo.version .. "\n", "srgeo.pc")
  T.truthy(not pc:find(stage, 1, true), "DESTDIR does not leak into srgeo.pc")
  -- uninstall removes what install put there
  out, code = sh(string.format("%s make -s --no-print-directory BUILD=%s DESTDIR=%s PREFIX=/opt/srgeo uninstall", CLEAN_ENV,
    q(BUILD), q(stage)))
  T.eq(code, 0, out)
  T.eq(sh("find " .. q(stage) .. " -type f | wc -l"), "0\n", "no file left after uninstall")
end)

T.test("install: a C program compiles and links against the installed core with pkg-config srgeo", function()
  if os.execute("command -v pkg-config >/dev/null 2>&1 && command -v cc >/dev/null 2>&1") ~= true then
    T.skip("pkg-config or cc missing")
  end
  local P = prefix()
  T.write(tmp .. "/prog.c", [[
#include <stdio.h>
#include "base/error.h"
#include "tensor/tensor.h"
int main(void)
{
    sr_tensor t = SR_TENSOR_INIT;
    int64_t shape[2] = {2, 3}, bad[2] = {2, -3};
    char buf[64];
    if (sr_tensor_zeros(&t, SR_F32, 2, shape) != 0)
        return 1;
    sr_tensor_fill(&t, 1.5);
    printf("%s %lld %g\n", sr_shape_str(&t, buf, sizeof buf), (long long)sr_numel(&t), sr_get_flat(&t, 5));
    sr_tensor_free(&t);
    if (sr_tensor_zeros(&t, SR_F32, 2, bad) == 0)
        return 1;
    printf("error: %s\n", sr_errmsg());
    return 0;
}
]])
  -- objects of `make sanitize` need the sanitizers' runtimes at link time
  local san = BUILD:find("san", 1, true) and "-fsanitize=address,undefined" or ""
  local out, code = sh(string.format("cd %s && PKG_CONFIG_PATH=%s cc %s -o prog prog.c $(PKG_CONFIG_PATH=%s pkg-config --cflags --libs srgeo) && ./prog",
    q(tmp), q(P .. "/lib/pkgconfig"), san, q(P .. "/lib/pkgconfig")))
  T.eq(code, 0, out)
  has(out, "(2,3) 6 1.5\nerror: ")
  out = sh(string.format("PKG_CONFIG_PATH=%s pkg-config --variable=root srgeo", q(P .. "/lib/pkgconfig")))
  T.eq(out, P .. "/share/srgeo\n")
end)

T.test("install: the rockspec builds with the Makefile and installs a working rock (skipped without luarocks)", function()
  if os.execute("command -v luarocks >/dev/null 2>&1") ~= true then T.skip("luarocks is not installed") end
  if BUILD ~= "build" then T.skip("the rockspec builds the default tree (build/), not " .. BUILD) end
  local specs = io.popen("ls " .. q(srgeo.root) .. "/srgeo-*.rockspec"):read("a")
  local rockspec = specs:match("[^\n]+")
  T.truthy(rockspec, "a rockspec in the source tree")
  T.truthy(rockspec:find("srgeo%-" .. srgeo.version:gsub("%p", "%%%0") .. "%-%d+%.rockspec$"), "its version is srgeo.version: " .. rockspec)
  local tree = tmp .. "/rocks"
  local out, code = sh(string.format("%s luarocks --lua-version 5.4 --tree %s make %s", CLEAN_ENV, q(tree), q(rockspec)))
  T.eq(code, 0, out)
  out, code = sh(string.format("cd / && %s %s -e 'print(srgeo.root, type(srgeo.models.list))'", CLEAN_ENV, q(tree .. "/bin/srgeo")))
  T.eq(code, 0, out)
  T.eq(out, tree .. "/share/lua/5.4/srgeo-root\tfunction\n")
  out, code = sh(string.format("cd / && %s LUA_CPATH=%s lua5.4 -e %s", CLEAN_ENV, q(tree .. "/lib/lua/5.4/?.so"),
    q("local s = require 'srgeo'; print(type(s.profile.compare))")))
  T.eq(code, 0, out)
  T.eq(out, "function\n")
  out, code = sh(string.format("%s luarocks --lua-version 5.4 --tree %s remove srgeo", CLEAN_ENV, q(tree)))
  T.eq(code, 0, out)
  T.truthy(not exists(tree .. "/bin/srgeo") and not exists(tree .. "/lib/lua/5.4/srgeo.so"), "removed")
end)

T.test("install: a copied shell or srgeo.so without its library fails loudly; SRGEO_ROOT names a root", function()
  local lonely = tmp .. "/lonely"
  os.execute("mkdir -p " .. q(lonely) .. " && cp " .. q(SHELL) .. " " .. q(BUILD .. "/srgeo.so") .. " " .. q(lonely))
  local out, code = sh(string.format("cd / && %s %s -e 'print(1)'", CLEAN_ENV, q(lonely .. "/srgeo")))
  T.eq(code, 1, out)
  has(out, "cannot find srgeo's Lua library (lua/srgeo/init.lua) in the folders above " .. lonely .. "/srgeo")
  has(out, "SRGEO_ROOT")
  T.truthy(not out:find("\n1\n", 1, true), "nothing ran")
  if os.execute("command -v lua5.4 >/dev/null 2>&1") == true then
    out, code = sh(string.format("cd / && %s LUA_CPATH=%s %s -e 'require \"srgeo\"'", CLEAN_ENV, q(lonely .. "/?.so"), lua54()))
    T.truthy(code ~= 0, "require fails")
    has(out, "cannot find srgeo's Lua library (lua/srgeo/init.lua) in the folders above " .. lonely .. "/srgeo.so")
  end
  -- SRGEO_ROOT: the copied shell runs with the source tree's library
  local root = srgeo.root
  out, code = sh(string.format("cd / && %s SRGEO_ROOT=%s %s -e 'print(srgeo.root, type(srgeo.models.list))'", CLEAN_ENV, q(root),
    q(lonely .. "/srgeo")))
  T.eq(code, 0, out)
  T.eq(out, root .. "\tfunction\n")
  -- a SRGEO_ROOT without the library is named in the error
  out, code = sh(string.format("%s SRGEO_ROOT=%s %s -e 'print(1)'", CLEAN_ENV, q(tmp), q(SHELL)))
  T.eq(code, 1, out)
  has(out, "in SRGEO_ROOT=" .. tmp)
end)

T.test("install: srgeo.1 names every option and subcommand srgeo --help lists, and renders cleanly", function()
  local page = T.read(srgeo.root .. "/srgeo.1")
  T.truthy(page, "srgeo.1 exists")
  local text = page:gsub("\\%-", "-")
  has(text, '"srgeo ' .. srgeo.version .. '"', "srgeo.1's version")
  local help = sh(q(SHELL) .. " --help")
  local n = 0
  for opt in help:gmatch("\n  (%-%-?%a[%w%-]*)") do
    T.truthy(text:find("\n.B " .. opt, 1, true) or text:find("\n.BI " .. opt, 1, true) or text:find("\n.BR " .. opt, 1, true)
      or text:find(", " .. opt, 1, true), "srgeo.1 documents option " .. opt)
    n = n + 1
  end
  T.truthy(n >= 8, "options found in --help: " .. n)
  local cmds = help:match("\nSubcommands:[^\n]*\n(.*)$")
  T.truthy(cmds, "--help lists the subcommands:\n" .. help)
  n = 0
  for name in cmds:gmatch("\n?  ([%w_%-]+)  ") do
    T.truthy(text:find("\n.B " .. name .. "\n", 1, true), "srgeo.1 documents subcommand " .. name)
    n = n + 1
  end
  T.truthy(n >= 10, "subcommands found in --help: " .. n)
  if os.execute("command -v groff >/dev/null 2>&1") == true then
    local out, code = sh("groff -man -Tutf8 -ww -z " .. q(srgeo.root .. "/srgeo.1"))
    T.eq(code, 0, out)
    T.eq(out, "", "groff warnings")
  end
end)

T.test("install: (remove the scratch folder)", function()
  T.truthy(os.execute("rm -rf " .. q(tmp)))
end)

-- README's first command on a machine without the packages: make reads the
-- Makefile before `make deps` has installed pkg-config or any .pc file, so
-- (make -n deps reads the whole Makefile and runs nothing that needs them)
-- no variable expanded while reading it may ask pkg-config (a `:=` that
-- named $(PKG_CFLAGS) stopped `make demo` at once on a fresh machine).
T.test("install: make reads its Makefile without pkg-config (make demo's first step on a fresh machine)", function()
  local bin = tmp .. "/nopkg"
  assert(os.execute("mkdir -p " .. q(bin)))
  T.write(bin .. "/pkg-config", "#!/bin/sh\necho 'pkg-config: not installed' >&2\nexit 127\n")
  assert(os.execute("chmod +x " .. q(bin .. "/pkg-config")))
  for _, target in ipairs { "deps", "clean" } do
    local out, code = sh(string.format("%s PATH=%s:\"$PATH\" make -n --no-print-directory BUILD=%s %s", CLEAN_ENV, q(bin),
      q(tmp .. "/nobuild"), target))
    T.truthy(not out:find("pkg-config cannot find", 1, true), "make -n " .. target .. " asked pkg-config while reading the Makefile:\n" .. out)
    T.eq(code, 0, "make -n " .. target .. ":\n" .. out)
  end
end)
