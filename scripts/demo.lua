-- demo.lua: the end-to-end check behind `make demo` (grows into the headline
-- experiment as the profile engine and shipped models land).
local srgeo = require "srgeo"
local nn = srgeo.nn
print("srgeo " .. srgeo.version .. ", " .. srgeo.threads() .. " threads")
local m = nn.sequential {
  { "fc1", nn.linear { in_features = 12, out_features = 16, seed = 1 } },
  { "fc2", nn.linear { in_features = 16, out_features = 4, seed = 2 } },
}
print(m)
local x = srgeo.rand({ 1, 12 }, 1)
local y = m:forward(x)
local _, jv = m:jvp(x, srgeo.randn({ 8, 12 }, 2))
print("features", y)
print("jvp", jv)
