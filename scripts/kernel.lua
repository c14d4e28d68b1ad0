-- kernel.lua: srgeo as a Jupyter kernel: `srgeo kernel install --user`
-- writes the kernelspec "srgeo (Lua 5.4)"; Jupyter then runs
-- `srgeo kernel -f CONNECTION.json` (lua/srgeo/kernel.lua).
--
--   srgeo kernel -f CONNECTION.json       serve one connection (Jupyter starts this)
--   srgeo kernel install [--user] [--prefix DIR] [--name NAME] [--exe PATH]
--                                         write kernels/NAME/kernel.json and its logo
--                                         (--user, the default: the user's Jupyter
--                                         folder; --prefix: DIR/share/jupyter)
local kernel = require "srgeo.kernel"

local USAGE = [[
usage: srgeo kernel -f CONNECTION.json
       srgeo kernel install [--user] [--prefix DIR] [--name NAME] [--exe PATH]
A Jupyter kernel (messaging protocol 5.3) running Lua 5.4 with the srgeo
library.  `srgeo kernel install --user` writes the kernelspec "srgeo (Lua 5.4)"
to ~/.local/share/jupyter/kernels/srgeo ($JUPYTER_DATA_DIR/kernels/srgeo when
set); --prefix DIR writes DIR/share/jupyter/kernels/srgeo instead (make install
does this for its PREFIX); --exe names the shell the kernelspec runs (default:
this one).  Jupyter then starts `srgeo kernel -f CONNECTION.json` itself.
]]

local function usage_error(msg)
  io.stderr:write("srgeo kernel: ", msg, "\n", USAGE)
  os.exit(2)
end

local a = { ... }
if a[1] == nil or a[1] == "--help" or a[1] == "-h" then
  io.write(USAGE)
  os.exit(a[1] == nil and 2 or 0)
end
if a[1] == "install" then
  local o, i = {}, 2
  while a[i] do
    local k, v = a[i]:match("^(%-%-[%w-]+)=(.*)$")
    k = k or a[i]
    local function value()
      if v then return v end
      i = i + 1
      if not a[i] then usage_error(k .. " needs a value") end
      return a[i]
    end
    if k == "--user" then o.user = true
    elseif k == "--prefix" then o.prefix = value()
    elseif k == "--name" then o.name = value()
    elseif k == "--exe" then o.exe = value()
    elseif k == "--help" or k == "-h" then io.write(USAGE) os.exit(0)
    else usage_error("unknown option " .. a[i]) end
    i = i + 1
  end
  if o.user and o.prefix then usage_error("--user and --prefix exclude each other") end
  print("srgeo kernel: installed the kernelspec in " .. kernel.install(o))
  return
end
local file = a[1]:match("^%-%-?f=(.+)$") or a[1]:match("^%-%-connection%-file=(.+)$")
if not file and (a[1] == "-f" or a[1] == "--connection-file") then file = a[2] end
if not file then usage_error("expected -f CONNECTION.json or install, got " .. a[1]) end
kernel.serve(file)
