-- srgeo/init.lua: the Lua half of the library.  luaopen_srgeo (C) builds the
-- core table and calls this chunk with it; submodules under lua/srgeo/ load
-- lazily on first use (srgeo.plot, srgeo.profile, ...), so `require "srgeo"`
-- stays fast.
local srgeo = ...

local lazy = {}
for _, name in ipairs { "plot", "util", "profile", "stats", "models", "data", "train", "metrics",
                           "help", "cli", "experiment", "spec", "cache", "report", "notebook", "identity", "html", "index", "bump", "mpi", "weights" } do
  lazy[name] = "srgeo." .. name
end
function srgeo.examples(...) return require("srgeo.help").examples(...) end -- the scripts, listed by help.lua

setmetatable(srgeo, {
  __index = function(t, k)
    local mod = lazy[k]
    if mod then
      local v = require(mod)
      rawset(t, k, v)
      return v
    end
  end,
})

-- Module methods implemented in Lua (load/save/summary).
assert(loadfile(srgeo.root .. "/lua/srgeo/module.lua"))(srgeo)

--- srgeo.register(name, modname): make srgeo.NAME load lua module MODNAME on
--- first use (for library parts added later).
function srgeo.register(name, modname) lazy[name] = modname end

return srgeo
