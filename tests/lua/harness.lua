-- harness.lua: a small spec harness for the Lua tests.
--   local T = require "tests.lua.harness"   (run from the repository root)
--   T.test("name", function() T.close(a, b, 1e-6) end)
local T = {}

local cases = {}

function T.test(name, fn) cases[#cases + 1] = { name = name, fn = fn, file = T.current_file } end

local function fmt(v)
  if type(v) == "number" then return string.format("%.17g", v) end
  return tostring(v)
end

function T.eq(a, b, msg)
  if a ~= b then error((msg and msg .. ": " or "") .. "expected " .. fmt(b) .. ", got " .. fmt(a), 2) end
end

function T.truthy(v, msg)
  if not v then error(msg or "expected a true value", 2) end
  return v
end

-- |a-b| <= tol * max(1, |b|)
function T.close(a, b, tol, msg)
  tol = tol or 1e-12
  if type(a) ~= "number" or type(b) ~= "number" or a ~= a or math.abs(a - b) > tol * math.max(1, math.abs(b)) then
    error((msg and msg .. ": " or "") .. "expected " .. fmt(b) .. " +- " .. fmt(tol) .. ", got " .. fmt(a), 2)
  end
end

-- a and b equal field by field (recursively; NaN equals NaN, integers
-- equal floats of the same value); the first difference names its path.
function T.same(a, b, path)
  path = path or "value"
  if type(a) == "number" and type(b) == "number" then
    if not (a == b or (a ~= a and b ~= b)) then error(string.format("%s: %s vs %s", path, fmt(a), fmt(b)), 2) end
    return
  end
  if type(a) ~= type(b) then error(string.format("%s: a %s vs a %s", path, type(a), type(b)), 2) end
  if type(a) ~= "table" then
    if a ~= b then error(string.format("%s: %s vs %s", path, fmt(a), fmt(b)), 2) end
    return
  end
  for k, v in pairs(a) do
    if b[k] == nil then error(string.format("%s.%s: present vs missing", path, tostring(k)), 2) end
    local ok, err = pcall(T.same, v, b[k], path .. "." .. tostring(k))
    if not ok then error(err, 2) end
  end
  for k in pairs(b) do
    if a[k] == nil then error(string.format("%s.%s: missing vs present", path, tostring(k)), 2) end
  end
end

-- T.skip(reason): end the current test as skipped (neither passed nor
-- failed), e.g. when an optional tool such as torch is missing.  The runner
-- prints "skip NAME: reason" and counts it in its final line.
local SKIP = {}
function T.skip(reason) error(setmetatable({ reason = reason }, SKIP), 0) end

-- fn must raise an error whose message contains `needle` (plain find).
function T.raises(fn, needle)
  local ok, err = pcall(fn)
  if ok then error("expected an error containing '" .. needle .. "', got none", 2) end
  if not tostring(err):find(needle, 1, true) then
    error("expected an error containing '" .. needle .. "', got: " .. tostring(err), 2)
  end
  return err
end

-- Helpers the specs share.

-- A file's contents, or nil when it cannot be read.
function T.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function T.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- Run a shell command: its output (stdout and stderr) and exit status.
function T.sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

-- Whether this process runs under AddressSanitizer (make sanitize): RSS
-- then measures its quarantine, and huge requests abort unless it was told
-- to return NULL.
function T.under_asan()
  local f = io.open("/proc/self/maps")
  if not f then return false end
  local maps = f:read("a")
  f:close()
  return maps:find("libasan", 1, true) ~= nil
end

-- The srgeo shell running these specs (`build/X/srgeo tests/run.lua`): the
-- interpreter, at the lowest index of arg, when its name ends in srgeo;
-- nil otherwise (the specs then fall back or skip).
function T.shell()
  local i = 0
  while arg and arg[i - 1] do i = i - 1 end
  local exe = arg and arg[i]
  if exe and exe:match("srgeo$") then return exe end
  return nil
end

function T.run(files, filter)
  local passed, failed, skipped = 0, 0, 0
  for _, f in ipairs(files) do
    T.current_file = f
    local chunk, err = loadfile(f)
    if not chunk then
      print("FAIL load " .. f .. ": " .. err)
      failed = failed + 1
    else
      local ok, e = pcall(chunk, T)
      if not ok then
        print("FAIL load " .. f .. ": " .. tostring(e))
        failed = failed + 1
      end
    end
  end
  for _, c in ipairs(cases) do
    if not filter or c.name:find(filter, 1, true) then
      -- debug.traceback returns a non-string message (a skip) unchanged
      local ok, err = xpcall(c.fn, debug.traceback)
      if ok then
        passed = passed + 1
        print("ok   " .. c.name)
      elseif getmetatable(err) == SKIP then
        skipped = skipped + 1
        print("skip " .. c.name .. ": " .. tostring(err.reason))
      else
        failed = failed + 1
        print("FAIL " .. c.name .. " (" .. c.file .. ")\n" .. tostring(err))
      end
      io.stdout:flush()
      collectgarbage()
    end
  end
  print(string.format("lua: %d passed, %d failed", passed, failed) ..
        (skipped > 0 and string.format(", %d skipped", skipped) or ""))
  return failed == 0
end

return T
