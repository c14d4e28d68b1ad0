-- srgeo.kernel: srgeo as a Jupyter kernel (messaging protocol 5.3), the
-- protocol half of `srgeo kernel` (scripts/kernel.lua).  The wire -- the
-- ZeroMQ sockets, HMAC-SHA256 signing, the heartbeat and control threads --
-- and the running of a cell under Ctrl-C are C (core/jupyter/wire.c,
-- core/shell/kernel.c, reached as require "srgeo.kernel_shell", which only
-- the srgeo shell offers); this file says what each message means.
--
--   kernel.serve(connection_file)   answer until shutdown_request
--   kernel.install{user=, prefix=, exe=, name=} -> the kernelspec folder
--
-- A cell runs as a block of a Markdown notebook does (srgeo.notebook's
-- compile): its last expression, the shortest tail of lines that loads as
-- `return TAIL`, is returned unless it ends in ";" (IPython's rule; the
-- REPL's "return LINE" for a one-line cell), and the results are the
-- execute_result, printed by srgeo.repl's printer (text/plain), with
-- srgeo.html.rich's text/html for a tensor, model, profile, comparison or
-- srgeo.report table.  print,
-- io.write, io.stdout and io.stderr become `stream` messages while a cell
-- runs.  An error is the message at the cell's line (srgeo.repl's
-- user_error when the REPL has one), no traceback: a cell `:tb` shows it,
-- as in the REPL, and SRGEO_TRACEBACK=1 shows every one.  complete_request
-- is the REPL's completion, inspect_request the text help(NAME) prints,
-- is_complete_request the REPL's continuation rule.  srgeo.plot.* shows
-- its figure in the notebook (srgeo.plot.display): without opts.out as
-- display_data with image/png and image/svg+xml, with opts.out the file it
-- wrote.  Progress (srgeo.util.live: a profile's bar, srgeo.train's line)
-- is one display_data updated in place (update_display_data, one
-- display_id), not a stream of lines.
local srgeo = require "srgeo"
local json = require "srgeo.json"
local repl = require "srgeo.repl"

local M = {}

-- A user's mistake (a missing connection file, a bad option): the message
-- alone, no traceback (srgeo.util's user errors).
local function fail(msg) require("srgeo.util").raise { msg = msg } end

M.PROTOCOL = "5.3"
M.DISPLAY_NAME = "srgeo (Lua 5.4)"

local function shell()
  local ok, k = pcall(require, "srgeo.kernel_shell")
  if not ok then fail("kernel: srgeo kernel runs inside the srgeo shell (srgeo kernel -f FILE), not a stock lua5.4") end
  return k
end

local function read_file(path)
  local f, err = io.open(path, "rb")
  if not f then fail("kernel: cannot read " .. tostring(err)) end
  local s = f:read("a")
  f:close()
  return s
end

-- 16 random bytes as hex: the session id (msg_ids are SESSION_N).
local function session_id()
  local f = io.open("/dev/urandom", "rb")
  local b = f and f:read(16) or tostring(os.time()) .. tostring({})
  if f then f:close() end
  return (b:gsub(".", function(c) return string.format("%02x", c:byte()) end)):sub(1, 32)
end

-- ---------------------------------------------------------------------------
-- Output capture: print / io.write / io.stdout / io.stderr go to sink(name, text)
-- ---------------------------------------------------------------------------

local function capture(sink)
  local saved = { print = print, write = io.write, read = io.read, stdout = io.stdout, stderr = io.stderr,
                  output = io.output }
  local function file(name)
    local f = {}
    local methods = {
      write = function(self, ...)
        for i = 1, select("#", ...) do
          local v = select(i, ...)
          if type(v) ~= "string" and type(v) ~= "number" then
            error(string.format("bad argument #%d to 'write' (string expected, got %s)", i, type(v)), 2)
          end
          sink(name, tostring(v))
        end
        return self
      end,
      flush = function(self) sink(name, nil) return self end,
      setvbuf = function() return true end,
      close = function() return nil, "cannot close standard file" end,
      lines = function() error("kernel: " .. name .. " is not readable", 2) end,
      read = function() return nil end,
      seek = function() return nil, "not seekable" end,
    }
    return setmetatable(f, { __index = methods, __name = "FILE*",
      __tostring = function() return "file (Jupyter " .. name .. ")" end })
  end
  local out, err = file("stdout"), file("stderr")
  _G.print = function(...)
    local t = {}
    for i = 1, select("#", ...) do t[i] = tostring((select(i, ...))) end
    sink("stdout", table.concat(t, "\t") .. "\n")
  end
  io.write = function(...) return out:write(...) end
  io.stdout, io.stderr = out, err
  io.output = function(f) if f == nil then return out end return saved.output(f) end
  -- the kernel's stdin is not the notebook's (Jupyter's input_request is not
  -- implemented): reading it would wait on whatever started Jupyter
  io.read = function() error("io.read: a kernel cell has no input (read a file instead)", 2) end
  return function()
    _G.print, io.write, io.read, io.stdout, io.stderr, io.output =
      saved.print, saved.write, saved.read, saved.stdout, saved.stderr, saved.output
  end
end

-- What code prints, as one string (help text for inspect_request).
local function printed(f, ...)
  local parts = {}
  local restore = capture(function(_, s) if s then parts[#parts + 1] = s end end)
  local ok, err = pcall(f, ...)
  restore()
  if not ok then return nil, err end
  return table.concat(parts)
end

-- ---------------------------------------------------------------------------
-- Cells
-- ---------------------------------------------------------------------------

--- kernel.compile(code, name) -> function, shows_value, tail_line | nil,
--- message: the cell as srgeo.notebook compiles a block (its last
--- expression returned, unless it ends in ";"), over the globals.
function M.compile(code, name) return require("srgeo.notebook").compile(code, name, _G, 1) end

local function pack(...) return { n = select("#", ...), ... } end

-- A cell's results as execute_result text (the REPL's printer).
local function result_text(r)
  local ok, s = pcall(repl.repr, table.unpack(r, 2, r.n))
  return ok and s or "(error printing the result: " .. tostring(s) .. ")"
end

local function lines_of(s)
  local t = {}
  for l in (s .. "\n"):gmatch("(.-)\n") do t[#t + 1] = l end
  if t[#t] == "" and #t > 1 then t[#t] = nil end
  return t
end

-- ---------------------------------------------------------------------------
-- The kernel
-- ---------------------------------------------------------------------------

--- kernel.kernel_info() -> the content of kernel_info_reply.
function M.kernel_info()
  return {
    status = "ok", protocol_version = M.PROTOCOL, implementation = "srgeo",
    implementation_version = tostring(srgeo.version),
    language_info = { name = "lua", version = "5.4", mimetype = "text/x-lua", file_extension = ".lua",
                      pygments_lexer = "lua", codemirror_mode = "lua" },
    banner = "srgeo " .. tostring(srgeo.version) .. " (Lua 5.4): the srgeo library is the global 'srgeo'; help() for topics",
    help_links = json.array {},
  }
end

--- kernel.serve(connection_file): the kernel's loop, until shutdown_request.
function M.serve(path)
  local k = shell()
  local okj, cfg = pcall(json.decode, read_file(path))
  if not okj then fail("kernel: " .. path .. ": " .. tostring(cfg)) end
  if type(cfg) ~= "table" then fail("kernel: " .. path .. " is not a connection file (a JSON object)") end
  local session = session_id()
  cfg.session = session
  local okw, w = pcall(k.open, cfg)
  if not okw then fail(tostring(w):gsub("^[^\n]-:%d+: ", "")) end
  local nmsg, count, last_tb = 0, 0, nil

  local function header(msg_type)
    nmsg = nmsg + 1
    return json.encode { msg_id = session .. "_" .. nmsg, session = session, username = "kernel",
                         date = os.date("!%Y-%m-%dT%H:%M:%SZ"), msg_type = msg_type, version = M.PROTOCOL }
  end
  local function send(channel, ids, msg_type, parent, content)
    w:send(channel, ids, header(msg_type), parent, "{}", json.encode(content))
  end
  local function pub(msg_type, parent, content) send("iopub", { "kernel." .. session .. "." .. msg_type }, msg_type, parent, content) end
  local function status(parent, s) pub("status", parent, { execution_state = s }) end

  -- srgeo.plot.*: the figure as display_data of the running cell (without
  -- out: PNG and SVG of temporary files; with out: the file written, whose
  -- path is then no execute_result, as in srgeo notebook's report)
  local current -- {parent = header, flush = function, shown = {path = true}} while a cell runs
  local MIME = { png = "image/png", svg = "image/svg+xml", pdf = "application/pdf" }
  local html = require "srgeo.html"
  local plot = require "srgeo.plot"
  plot.display = function(files, kept)
    if not current then
      if kept then return end
      error("kernel: a figure outside a cell", 0)
    end
    local data, name = {}, nil
    for term, path in pairs(files) do
      local bytes = read_file(path)
      name = name or path:match("([^/]+)$") or path
      data[MIME[term] or "application/octet-stream"] = term == "svg" and bytes or html.base64(bytes)
      if kept then current.shown[path] = true end
    end
    data["text/plain"] = kept and next(files) and select(2, next(files)) or "<figure " .. tostring(name) .. ">"
    current.flush()
    pub("display_data", current.parent, { data = data, metadata = {}, transient = {} })
  end

  -- Progress (util.progress, srgeo.train) in place: one display_data, then
  -- update_display_data on its display_id, instead of a line a second.
  local util = require "srgeo.util"
  local nlive = 0
  util.live = function()
    if not current then return nil end
    local cell = current
    nlive = nlive + 1
    local id, shown = session .. "_live_" .. nlive, false
    return {
      show = function(text)
        cell.flush()
        pub(shown and "update_display_data" or "display_data", cell.parent,
            { data = { ["text/plain"] = text }, metadata = {}, transient = { display_id = id } })
        shown = true
      end,
      done = function() end, -- the last state stays in the notebook
    }
  end

  local handlers = {}

  function handlers.kernel_info_request() return "kernel_info_reply", M.kernel_info() end

  function handlers.execute_request(c, parent)
    local code, silent = tostring(c.code or ""), c.silent == true
    local store = c.store_history ~= false and not silent
    if store then count = count + 1 end
    if not silent then pub("execute_input", parent, { code = code, execution_count = count }) end
    local bufs = { stdout = {}, stderr = {} }
    local function flush(name)
      if #bufs[name] > 0 then
        local text = table.concat(bufs[name])
        bufs[name] = {}
        if not silent then pub("stream", parent, { name = name, text = text }) end
      end
    end
    local function sink(name, s)
      if s == nil then return flush(name) end
      local b = bufs[name]
      b[#b + 1] = s
      if s:find("\n", 1, true) then flush(name) end -- a line at a time: progress keeps talking
    end
    local f, err
    if code:match("^%s*:tb%s*$") then -- the REPL's :tb: the last error's traceback
      f = function()
        if type(rawget(srgeo, "traceback")) == "function" then srgeo.traceback() return end
        io.write((last_tb or "no error yet") .. "\n")
      end
    else
      local tail_line
      f, err, tail_line = M.compile(code, "=In[" .. count .. "]")
      -- an error in the call the cell returns unwinds no frame of the cell: it is put at that line
      repl.set_tail_place(tail_line and string.format("In[%d]:%d", count, tail_line) or nil)
    end
    local r, shown
    if not f then r = { false, err, err, n = 3 }
    else
      local restore = capture(sink)
      current = { parent = parent, flush = function() flush("stdout") flush("stderr") end, shown = {} }
      r = pack(k.run(f))
      shown = current.shown
      current = nil
      restore()
    end
    flush("stdout")
    flush("stderr")
    if not r[1] then
      last_tb = r[3]
      local msg = tostring(r[2])
      local tb = lines_of(msg)
      local e = { ename = msg:find("interrupted", 1, true) and "interrupted" or "error", evalue = tb[1] or msg,
                  traceback = json.array(tb) }
      if not silent then pub("error", parent, e) end
      e.status, e.execution_count = "error", count
      return "execute_reply", e
    end
    -- the value, less the paths of figures the cell showed (trailing nils
    -- go too, so a plot's path alone is no result)
    local vals = { n = 1, true }
    for i = 2, r.n do
      if not (type(r[i]) == "string" and shown and shown[r[i]]) then vals.n = vals.n + 1; vals[vals.n] = r[i] end
    end
    while vals.n > 1 and vals[vals.n] == nil and vals.n < r.n do vals.n = vals.n - 1 end
    if vals.n > 1 and not silent then
      local data = { ["text/plain"] = result_text(vals) }
      if vals.n == 2 then data["text/html"] = html.rich(vals[2]) end
      pub("execute_result", parent, { execution_count = count, data = data, metadata = {} })
    end
    return "execute_reply", { status = "ok", execution_count = count, user_expressions = {}, payload = json.array {} }
  end

  function handlers.complete_request(c)
    local code = tostring(c.code or "")
    local cursor = math.tointeger(c.cursor_pos) or utf8.len(code) or #code
    local byte = utf8.offset(code, cursor + 1) or #code + 1
    local word = code:sub(1, byte - 1):match("[%w_%.:]*$")
    local ok, cands, prefix = pcall(k.complete, word)
    local matches = {}
    if ok and type(cands) == "table" then
      for name in pairs(cands) do matches[#matches + 1] = (prefix or "") .. name end
      table.sort(matches)
    end
    return "complete_reply", { status = "ok", matches = json.array(matches), cursor_start = cursor - #word,
                               cursor_end = cursor, metadata = {} }
  end

  function handlers.inspect_request(c)
    local code = tostring(c.code or "")
    local cursor = math.tointeger(c.cursor_pos) or #code
    local byte = utf8.offset(code, cursor + 1) or #code + 1
    local name = code:sub(1, byte - 1):match("[%w_%.:]*$") .. code:sub(byte):match("^[%w_]*")
    name = name:gsub("[%.:]+$", "")
    local v, found = _G, name:match("^[%a_]") ~= nil
    for part in name:gmatch("[^%.:]+") do
      if not found then break end
      local ok, x = pcall(function() return v[part] end)
      if not ok or x == nil then found = false else v = x end
    end
    local text
    if found then
      local h = rawget(_G, "help") or repl.help
      text = printed(h, v)
      if not text or text == "" then text = name .. " = " .. result_text(pack(true, v)) end
    end
    return "inspect_reply", { status = "ok", found = text ~= nil, data = text and { ["text/plain"] = text } or {},
                              metadata = {} }
  end

  function handlers.is_complete_request(c)
    local s = k.is_complete(tostring(c.code or ""))
    return "is_complete_reply", s == "incomplete" and { status = s, indent = "" } or { status = s }
  end

  function handlers.comm_info_request() return "comm_info_reply", { status = "ok", comms = {} } end
  function handlers.history_request() return "history_reply", { status = "ok", history = json.array {} } end

  local done, restart = false, false
  function handlers.shutdown_request(c)
    done, restart = true, c.restart == true
    return "shutdown_reply", { status = "ok", restart = restart }
  end

  io.stderr:write(string.format("srgeo kernel: %s (session %s)\n", path, session))
  while not done do
    local m = w:recv(200)
    if m then
      local okh, hdr = pcall(json.decode, m.header)
      local okc, content = pcall(json.decode, m.content)
      local msg_type = okh and type(hdr) == "table" and hdr.msg_type
      local h = msg_type and handlers[msg_type]
      if not h or not okc or type(content) ~= "table" then
        io.stderr:write(string.format("srgeo kernel: ignored a %s message on %s\n", tostring(msg_type), m.channel))
      else
        status(m.header, "busy")
        local ok, rtype, rcontent = pcall(h, content, m.header)
        if not ok then
          io.stderr:write("srgeo kernel: " .. tostring(rtype) .. "\n")
          rtype, rcontent = msg_type:gsub("_request$", "_reply"), { status = "error", ename = "error",
            evalue = tostring(rtype), traceback = json.array { tostring(rtype) } }
        end
        send(m.channel, m.ids, rtype, m.header, rcontent)
        status(m.header, "idle")
      end
    end
  end
  w:close()
  io.stderr:write(string.format("srgeo kernel: shut down%s\n", restart and " for a restart" or ""))
end

-- ---------------------------------------------------------------------------
-- The kernelspec
-- ---------------------------------------------------------------------------

-- The logo: a 64x64 PNG drawn here (a bump over a baseline, srgeo's r_eta
-- profile), so no binary file is kept in the repository.
local function write_logo(path)
  local n, rows = 64, {}
  for c = 1, 3 do
    local plane = {}
    for y = 1, n do
      local row = {}
      for x = 1, n do
        local t = (x - 0.5) / n
        local curve = 0.78 - 0.5 * math.exp(-((t - 0.45) / 0.13) ^ 2) -- the bump (y grows downwards)
        local d = math.abs((y - 0.5) / n - curve)
        local base = math.abs((y - 0.5) / n - 0.78) < 0.012
        local bg = ({ 0.10, 0.16, 0.30 })[c]
        local fg = ({ 1.00, 0.62, 0.15 })[c]
        local a = math.max(0, 1 - d / 0.035)
        local v = bg + (fg - bg) * a
        if base and a == 0 then v = ({ 0.55, 0.62, 0.75 })[c] end
        row[x] = v
      end
      plane[y] = row
    end
    rows[c] = plane
  end
  srgeo.image.save(path, srgeo.tensor(rows, "float32"))
end

--- kernel.kernelspec(exe) -> the kernel.json table for the shell at exe.
function M.kernelspec(exe)
  return { argv = json.array { exe, "kernel", "-f", "{connection_file}" }, display_name = M.DISPLAY_NAME,
           language = "lua", interrupt_mode = "signal", metadata = {} }
end

--- kernel.install{user=, prefix=, exe=, name=} -> the folder written:
--- PREFIX/share/jupyter/kernels/NAME, or with user the user's Jupyter data
--- folder ($JUPYTER_DATA_DIR, $XDG_DATA_HOME/jupyter or ~/.local/share/jupyter).
function M.install(o)
  local util = require "srgeo.util"
  local name = o.name or "srgeo"
  if not name:match("^[%w_%.%-]+$") then fail("kernel install: --name must be letters, digits, _ . -, got '" .. name .. "'") end
  local base
  if o.prefix then
    base = o.prefix .. "/share/jupyter"
  else
    local home = os.getenv("HOME")
    base = os.getenv("JUPYTER_DATA_DIR")
    if not base or base == "" then
      local xdg = os.getenv("XDG_DATA_HOME")
      if xdg and xdg ~= "" then base = xdg .. "/jupyter"
      elseif home and home ~= "" then base = home .. "/.local/share/jupyter"
      else fail("kernel install: neither HOME nor JUPYTER_DATA_DIR is set; pass --prefix DIR") end
    end
  end
  local dir = base .. "/kernels/" .. name
  local ok = os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
  if not ok then fail("kernel install: cannot create " .. dir) end
  local exe = o.exe or shell().exe()
  util.write_atomic(dir .. "/kernel.json", json.encode(M.kernelspec(exe), { indent = true }) .. "\n")
  write_logo(dir .. "/logo-64x64.png")
  return dir
end

return M
