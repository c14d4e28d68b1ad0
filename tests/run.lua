-- tests/run.lua: run every tests/lua/*_spec.lua (or those named on the
-- command line; "-k NAME" filters test names).
package.path = "./?.lua;" .. package.path
local T = require "tests.lua.harness"
local files, filter = {}, nil
local i = 1
while arg[i] do
  if arg[i] == "-k" then filter = arg[i + 1]; i = i + 2
  else files[#files + 1] = arg[i]; i = i + 1 end
end
if #files == 0 then
  local p = io.popen("ls tests/lua/*_spec.lua 2>/dev/null")
  for f in p:lines() do files[#files + 1] = f end
  p:close()
end
os.exit(T.run(files, filter) and 0 or 1)
