-- srgeo.util: files, formatting and progress shared by the library.
local M = {}

-- User errors (a bad command line, spec or notebook, a missing model) are
-- error objects with a __tostring: the shell then prints the message
-- without a traceback.  One metatable for the whole library.
M.Error = { __tostring = function(e) return e.msg end }

--- Raise t (a table with msg and any fields a caller may want) as a user error.
function M.raise(t) error(setmetatable(t, M.Error), 0) end

--- A function fail(fmt, ...) that raises the user error PREFIX .. fmt:format(...).
function M.failer(prefix)
  return function(fmt, ...) M.raise { msg = prefix .. string.format(fmt, ...) } end
end

-- How messages name an option.  The library is called from Lua (options
-- are table fields: root=) and from command lines (flags: --data-root).
-- cli.run records, for the command line it parsed, which flag sets which
-- Lua option (M.flags[lua name] = "--flag": an option's own name, or its
-- `sets =`); messages name options through M.option / M.option_hint /
-- M.flag_message, so a command-line user reads the flag to type and a Lua
-- user the field to set.
M.flags = nil

--- util.option(name) -> "--flag" on a command line that has a flag for Lua
--- option NAME, else "name=".
function M.option(name)
  local f = M.flags and M.flags[name]
  return f or name .. "="
end

--- util.option_hint(name, value [, env]) -> how to set option NAME to
--- VALUE: "pass --data-root DIR" (a command line with a flag for it), "set
--- ENV=DIR" (a command line without one, when the library reads ENV too),
--- else "pass root = DIR" (Lua).
function M.option_hint(name, value, env)
  local f = M.flags and M.flags[name]
  if f then return "pass " .. f .. " " .. value end
  if M.flags and env then return "set " .. env .. "=" .. value end
  return "pass " .. name .. " = " .. value
end

--- util.flag_message(msg [, rename]) -> msg with the option it starts
--- with ("OP: NAME must be ...", the core's declared-option messages, or
--- "NAME must ...") named as its flag on a command line; rename maps a
--- declared name to the Lua name the flags know (steps -> attack_steps).
function M.flag_message(msg, rename)
  if not M.flags then return msg end
  local head, name, rest = msg:match("^(.-)([%a_][%w_]*)( must .*)$")
  if not name or head:find(" ", 1, true) and not head:match(": $") then return msg end
  local f = M.flags[(rename and rename[name]) or name]
  if not f then return msg end
  return head .. f .. rest
end

--- Write `content` to `path` atomically: a temporary file beside it, then
--- rename, so a crash never leaves a truncated result behind.
function M.write_atomic(path, content)
  -- Under mpirun every rank holds the same results (srgeo.mpi) and rank 0
  -- writes them: N ranks never race on one file.
  if require("srgeo")._mpi.rank() ~= 0 then return path end
  local tmp = M.tmp_name(path)
  local f, err = io.open(tmp, "wb")
  if not f then error("write " .. path .. ": " .. tostring(err), 2) end
  local ok, werr = f:write(content)
  local cok, cerr = f:close()
  if not ok or not cok then
    os.remove(tmp)
    error("write " .. path .. ": " .. tostring(werr or cerr), 2)
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    error("write " .. path .. ": " .. tostring(rerr), 2)
  end
  return path
end

--- The temporary a writer of path uses: PATH.tmp.PID, as the C writers'
--- (core/base/fsutil.h), so that the temporaries a killed writer leaves can
--- be told from a live one's and removed: the first write into a folder
--- removes the dead writers' ones (srgeo._clean_tmp).  From stock Lua
--- without the srgeo module: PATH.tmp.TIME+RANDOM, not cleaned.
function M.tmp_name(path)
  local ok, srgeo = pcall(require, "srgeo")
  if ok and type(srgeo) == "table" and srgeo._pid then
    srgeo._clean_tmp(path)
    return path .. ".tmp." .. srgeo._pid()
  end
  return path .. ".tmp." .. tostring(os.time()) .. tostring(math.random(1 << 30))
end

-- "PATH is a FIFO, not a regular file" when opening path could block (a
-- FIFO without a writer blocks io.open forever; a device or socket is no
-- file a user means), else nil.  Needs the srgeo module (stock Lua: nil).
local function blocking_kind(path)
  local ok, srgeo = pcall(require, "srgeo")
  local st = ok and type(srgeo) == "table" and srgeo._stat and srgeo._stat(path)
  if st and st.kind ~= "file" and st.kind ~= "directory" then
    return string.format("%s is %s %s, not a regular file", path, st.kind:match("^[aeiou]") and "an" or "a", st.kind)
  end
end
M.blocking_kind = blocking_kind

--- A file's contents, or nil and the reason when it cannot be opened (or is
--- a FIFO, a device or a socket: never blocks on one).
function M.try_read(path)
  local bad = blocking_kind(path)
  if bad then return nil, bad end
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s = f:read("a")
  f:close()
  return s
end

--- A file's contents; an error when it cannot be read.
function M.read_file(path)
  local s, err = M.try_read(path)
  if not s then error("read " .. path .. ": " .. tostring(err), 2) end
  return s
end

--- A file's status (srgeo._stat) as a key: what changes whenever its bytes
--- may have (content written, copied over, renamed onto: a new ctime or
--- inode, which no user can set back, unlike the mtime `touch -d` or `cp -p`
--- set).  The unit cache and the weights cache skip re-reading a file whose
--- key is unchanged.
function M.status_key(st)
  return string.format("%d:%d:%d:%d.%09d:%d.%09d", st.dev, st.ino, st.size, st.mtime, st.mtime_nsec, st.ctime,
    st.ctime_nsec)
end

--- Can `path` be opened for reading?  (A FIFO, device or socket counts as
--- existing without being opened: reading it fails in M.try_read.)
function M.exists(path)
  if blocking_kind(path) then return true end
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

--- A deep copy of a table of plain values (anything else is returned as is).
function M.copy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = M.copy(v) end
  return c
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.shell_quote = shell_quote

--- mkdir -p
function M.mkdir(dir)
  local ok = os.execute("mkdir -p " .. shell_quote(dir))
  if not ok then error("cannot create directory " .. dir, 2) end
  return dir
end

function M.dirname(path) return path:match("^(.*)/[^/]*$") or "." end

local cwd
-- An absolute path with ".", ".." and repeated slashes resolved lexically
-- (relative paths against the working directory; links are not followed).
local function absolute(path)
  if path:sub(1, 1) ~= "/" then
    if not cwd then
      cwd = os.getenv("PWD")
      if not (cwd and cwd:sub(1, 1) == "/") then
        local p = io.popen("pwd")
        cwd = p:read("l") or "/"
        p:close()
      end
    end
    path = cwd .. "/" .. path
  end
  local parts = {}
  for c in path:gmatch("[^/]+") do
    if c == ".." then parts[#parts] = nil elseif c ~= "." then parts[#parts + 1] = c end
  end
  return "/" .. table.concat(parts, "/")
end
M.absolute = absolute

--- path relative to base when it lies inside base ("out/units/a.json",
--- "out" -> "units/a.json"; base itself -> "."), else path unchanged.
function M.relpath(path, base)
  if type(path) ~= "string" or type(base) ~= "string" then return path end
  local p, b = absolute(path), absolute(base)
  if p == b then return "." end
  if b == "/" then return p:sub(2) end
  if p:sub(1, #b + 1) == b .. "/" then return p:sub(#b + 2) end
  return path
end

--- util.live: nil, or function(label) -> {show = function(text), done =
--- function(keep)} or nil: a front end that shows a line redrawn in place
--- its own way.  `srgeo kernel` sets it: in Jupyter a progress report is
--- one display_data, then update_display_data on its display_id (nil
--- outside a running cell).  util.progress and srgeo.train's progress line
--- go through util.live_line, so every progress report honours it.
M.live = nil

--- util.live_line(label [, force]) -> {show(text), done(keep)} or nil: a
--- line redrawn in place: the front end's (util.live), else on a terminal
--- (or with force, on any stderr) "\r TEXT" on stderr, cleared by done() or
--- ended with a newline by done(true); nil when stderr is not a terminal.
function M.live_line(label, force)
  local hooked = M.live and M.live(label)
  if hooked then return hooked end
  if not force and not require("srgeo")._isatty(2) then return nil end
  return {
    show = function(text) io.stderr:write("\r", text, "\27[K") io.stderr:flush() end,
    done = function(keep) io.stderr:write(keep and "\n" or "\r\27[K") io.stderr:flush() end,
  }
end

--- A progress report on stderr: on a terminal a bar redrawn in place (count,
--- elapsed, ETA); otherwise (piped, nohup, a log file) a plain line every
--- SRGEO_PROGRESS seconds (default 10; 0: none), so a long run still says
--- where it is; in Jupyter (util.live) the bar is one display updated in
--- place.  p.update(done [, extra [, total]]): total, when given,
--- replaces the forecast (srgeo.profile's stages refine it as they go).
--- opts.percent: show a percentage, not done/total (work in units a user
--- does not count, such as passes).
function M.progress(label, total, opts)
  local srgeo = require "srgeo"
  if srgeo._mpi.rank() ~= 0 then return { update = function() end, done = function() end } end -- mpirun: rank 0 reports
  local live = M.live_line(label)
  local every = tonumber(os.getenv("SRGEO_PROGRESS") or "") or 10
  local percent = opts and opts.percent
  local t0 = srgeo._clock()
  local last = live and -1 or t0
  local pending -- a bar not shown yet (drawn at most every 0.1 s): done() shows it
  local p = {}
  local function count(done)
    if percent then return string.format("%d%%", total > 0 and math.floor(100 * math.min(done / total, 1)) or 100) end
    return string.format("%d/%d", done, total)
  end
  function p.update(done, extra, new_total)
    if new_total then total = new_total end
    local now = srgeo._clock()
    local el = now - t0
    local eta = done > 0 and el * math.max(total - done, 0) / done or 0 / 0
    if not live then
      if every <= 0 or now - last < every or (done >= total and not new_total) then return end
      last = now
      io.stderr:write(string.format("%s: %s%s, %s elapsed, ETA %s%s\n", label, count(done),
        percent and "" or string.format(" (%d%%)", total > 0 and math.floor(100 * done / total) or 100),
        M.duration(el), M.duration(eta), extra and " " .. extra or ""))
      io.stderr:flush()
      return
    end
    local frac = total > 0 and math.min(done / total, 1) or 1
    local width = 24
    local fill = math.floor(frac * width + 0.5)
    pending = string.format("%s [%s%s] %s  %s elapsed, %s left %s", label,
      string.rep("#", fill), string.rep(".", width - fill), count(done), M.duration(el), M.duration(eta), extra or "")
    if now - last < 0.1 and done < total then return end
    last = now
    live.show(pending)
    pending = nil
  end
  -- p.done([outcome]): the bar ends; in Jupyter its last line stays, so it
  -- says the outcome ("profile: done in 4.2s") rather than a forecast's
  -- percentage (a terminal clears it)
  function p.done(outcome)
    if not live then return end
    if outcome then live.show(string.format("%s: %s in %s", label, outcome, M.duration(srgeo._clock() - t0)))
    elseif pending then live.show(pending) end
    live.done()
  end
  return p
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64T = {}
for i = 1, 64 do B64T[i - 1] = B64:sub(i, i) end

--- Base64 of a byte string.
function M.base64(s)
  local out = {}
  local n = #s
  for i = 1, n - 2, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = (a << 16) | (b << 8) | c
    out[#out + 1] = B64T[(v >> 18) & 63] .. B64T[(v >> 12) & 63] .. B64T[(v >> 6) & 63] .. B64T[v & 63]
  end
  local r = n % 3
  if r == 1 then
    local v = s:byte(n) << 16
    out[#out + 1] = B64T[(v >> 18) & 63] .. B64T[(v >> 12) & 63] .. "=="
  elseif r == 2 then
    local a, b = s:byte(n - 1, n)
    local v = (a << 16) | (b << 8)
    out[#out + 1] = B64T[(v >> 18) & 63] .. B64T[(v >> 12) & 63] .. B64T[(v >> 6) & 63] .. "="
  end
  return table.concat(out)
end

--- util.images_text(list) -> "8 images", or "8–32 images" when they
--- differ: the images each entry (a profile, or a results.json unit) holds
--- (n_images: what was computed, never the count asked for); nil if none says.
function M.images_text(list)
  local lo, hi
  for _, p in pairs(list or {}) do
    local n = type(p) == "table" and math.type(p.n_images) and p.n_images
    if n then lo, hi = math.min(lo or n, n), math.max(hi or n, n) end
  end
  if not lo then return nil end
  if lo == hi then return string.format("%d image%s", lo, lo == 1 and "" or "s") end
  return string.format("%d–%d images", lo, hi)
end

function M.duration(s)
  if s ~= s or s == math.huge then return "?" end
  if s < 60 then return string.format("%.1fs", s) end
  if s < 3600 then return string.format("%dm%02ds", s // 60, math.floor(s % 60)) end
  return string.format("%dh%02dm", s // 3600, math.floor(s % 3600 / 60))
end

--- util.wrap(text, width [, first, indent]) -> text broken at spaces into
--- lines of at most width columns (counted in UTF-8 characters; a longer
--- word stands alone on its line), the first line starting with the prefix
--- first, the others with indent (both default "").
function M.wrap(text, width, first, indent)
  local function len(x) return utf8.len(x) or #x end
  local lines, line, empty = {}, first or "", true
  for word in text:gmatch("%S+") do
    if not empty and len(line) + 1 + len(word) > width then
      lines[#lines + 1] = line
      line, empty = indent or "", true
    end
    line = line .. (empty and "" or " ") .. word
    empty = false
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

--- Log-spaced values: n points from 10^a to 10^b.
function M.logspace(a, b, n)
  local t = {}
  for i = 1, n do t[i] = 10 ^ (a + (b - a) * (n == 1 and 0 or (i - 1) / (n - 1))) end
  return t
end

return M
