-- kernel_spec.lua: `srgeo kernel`, the Jupyter kernel, driven by Jupyter's
-- own client (tests/kernel_check.py on Debian's python3-jupyter-client):
-- execute with stdout and a trailing value, errors, complete, inspect,
-- is_complete, a bad signature refused, interrupts (SIGINT during a
-- profile, interrupt_request during a Lua loop), restart and shutdown, the
-- rich forms (text/html of tensors, models, profiles, comparisons, tables),
-- figures (image/png + image/svg+xml) and progress updated in place; and
-- the kernelspec `srgeo kernel install` writes.  Skipped, with the reason,
-- where the shell or jupyter_client is missing.
local T = ...
local json = require "srgeo.json"

local SHELL = T.shell() or "build/srgeo"
local PYTHON = "/usr/bin/python3"
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function need_jupyter()
  if not T.shell() then T.skip("skipped: the kernel runs in the srgeo shell (run the specs with build/srgeo)") end
  if os.execute(PYTHON .. " -c 'import jupyter_client' >/dev/null 2>&1") ~= true then
    T.skip("skipped: python3-jupyter-client is not installed (scripts/install-deps.sh --test)")
  end
end

-- The checks kernel_check.py reports, in its order: each must be there and ok.
local CHECKS = {
  "kernel_info: lua 5.4, srgeo", "heartbeat",
  "execute: stdout stream", "execute: trailing expression is execute_result", "execute: status busy then idle",
  "execute: a table prints with the REPL's printer", "execute: a statement has no result", "execute: stderr stream",
  "error: reply names the cell line", "error: no Lua traceback", "error: a failing returned call is put at its cell line",
  "error: :tb shows the traceback",
  "error: a syntax error is an error reply",
  "rich: a tensor has text/plain and an HTML table", "rich: a model has text/plain and HTML (its tree, escaped)",
  "rich: a profile has text/plain and HTML (rungs, descriptors; its label escaped)",
  "rich: a comparison has text/plain and HTML (p-values)", "rich: a descriptor table has text/plain and HTML",
  "rich: a plain table has text/plain only",
  "figure: a plot without out is display_data with image/png and image/svg+xml",
  "figure: a plot with out shows the file written, its path is no execute_result",
  "complete: srgeo.pro -> srgeo.profile", "inspect: help text",
  "is_complete: incomplete, complete, invalid, incomplete",
  "bad signature: refused", "bad signature: kernel alive, the message did not run", "bad signature: logged",
  "interrupt: a running profile stops within 2 s", "interrupt: kernel alive, the next cell runs",
  "progress: display_data then update_display_data on one display_id",
  "interrupt_request: interrupt_reply, the loop stops within 2 s",
  "interrupt at idle: kernel alive; io.read fails", "restart: a new kernel with a fresh state", "shutdown: the kernel exits",
}

local report -- kernel_check.py's output, run once for all the checks
local function result(name)
  need_jupyter()
  if not report then
    report = T.sh(string.format("timeout 600 %s tests/kernel_check.py %s", PYTHON, q(SHELL)))
  end
  for line in report:gmatch("[^\n]+") do
    local status, rest = line:match("^(%a+)%s+(.*)$")
    if rest and (rest == name or rest:sub(1, #name + 1) == name .. ":") then return status, line end
  end
  return nil, "no line for '" .. name .. "' in:\n" .. report
end

for _, name in ipairs(CHECKS) do
  T.test("kernel: " .. name, function()
    local status, line = result(name)
    T.eq(status, "ok", line)
  end)
end

T.test("kernel: install writes kernel.json (argv, display name, lua, signal) and a 64x64 PNG logo", function()
  if not T.shell() then T.skip("skipped: the kernel runs in the srgeo shell") end
  local dir = os.tmpname()
  os.remove(dir)
  local out, code = T.sh(string.format("%s kernel install --prefix %s --exe /opt/x/bin/srgeo", q(SHELL), q(dir)))
  T.eq(code, 0, out)
  local spec = json.decode(T.read(dir .. "/share/jupyter/kernels/srgeo/kernel.json"))
  T.same(spec.argv, { "/opt/x/bin/srgeo", "kernel", "-f", "{connection_file}" })
  T.eq(spec.display_name, "srgeo (Lua 5.4)")
  T.eq(spec.language, "lua")
  T.eq(spec.interrupt_mode, "signal")
  local png = T.read(dir .. "/share/jupyter/kernels/srgeo/logo-64x64.png")
  T.eq(png:sub(1, 8), "\137PNG\r\n\26\n")
  T.eq(string.unpack(">I4I4", png, 17), 64) -- IHDR width
  T.eq(select(2, string.unpack(">I4I4", png, 17)), 64)
  -- --user honours JUPYTER_DATA_DIR; a bad option is a usage error
  out, code = T.sh(string.format("JUPYTER_DATA_DIR=%s/user %s kernel install --user", q(dir), q(SHELL)))
  T.eq(code, 0, out)
  T.truthy(T.read(dir .. "/user/kernels/srgeo/kernel.json"):find('"kernel"', 1, true))
  out, code = T.sh(string.format("%s kernel install --bogus", q(SHELL)))
  T.eq(code, 2, out)
  T.truthy(out:find("unknown option --bogus", 1, true), out)
  os.execute("rm -rf " .. q(dir))
end)

T.test("kernel: a cell's trailing expression (kernel.compile)", function()
  local k = require "srgeo.kernel"
  local function run(code)
    local f, expr = k.compile(code, "=cell")
    if not f then return nil, expr end
    return expr, table.pack(f())
  end
  local expr, r = run("x = 6 * 7\nx")
  T.eq(expr, true); T.eq(r[1], 42)
  expr, r = run("local t = {\n  a = 1 }\nt.a + 1")
  T.eq(r[1], 2)
  expr, r = run("y = 1")
  T.truthy(not expr); T.eq(r.n, 0)
  expr, r = run("tostring('x')\n'next'") -- the last line, not tostring(...)'next'
  T.eq(r[1], "next")
  expr, r = run("y = 2\ntostring(y);") -- ";" keeps it quiet, as in a notebook
  T.truthy(not expr); T.eq(r.n, 0)
  expr, r = run("for i = 1, 2 do\nend")
  T.truthy(not expr); T.eq(r.n, 0)
  local f, err = k.compile("x = = 1", "=In[3]")
  T.eq(f, nil); T.truthy(err:find("In[3]:1:", 1, true), err)
  f = k.compile("local a = 1\n\nerror('boom')", "=In[4]") -- line numbers are the cell's
  local ok, e = pcall(f)
  T.truthy(not ok and e:find("In[4]:3: boom", 1, true), e)
end)

-- A notebook executed by nbconvert on the srgeo kernel: no error, stdout,
-- a value, and srgeo.plot.profile without out as an inline image/png.
T.test("kernel: jupyter nbconvert --execute runs a notebook: no error, a plot without out is an image/png output", function()
  need_jupyter()
  if os.execute("command -v jupyter-nbconvert >/dev/null 2>&1") ~= true then
    T.skip("skipped: jupyter-nbconvert is not installed (scripts/install-deps.sh --test)")
  end
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. q(dir)))
  local out, code = T.sh(string.format("%s kernel install --prefix %s", q(SHELL), q(dir)))
  T.eq(code, 0, out)
  local function cell(src)
    return { cell_type = "code", execution_count = "NULL", metadata = {}, outputs = json.array {}, source = src }
  end
  local nb = {
    nbformat = 4, nbformat_minor = 5,
    metadata = { kernelspec = { name = "srgeo", display_name = "srgeo (Lua 5.4)", language = "lua" } },
    cells = {
      cell("print('hello from srgeo')\n1 + 1"),
      cell("local nn = srgeo.nn\n" ..
           "m = nn.sequential { nn.linear { in_features = 16, out_features = 16 }, nn.relu {},\n" ..
           "  nn.linear { in_features = 16, out_features = 4 } }\n" ..
           "X = {}\nfor i = 1, 3 do X[i] = srgeo.rand({ 1, 16 }, i) end\n" ..
           "p = srgeo.profile(m, X, { preset = 'quick', progress = false })"),
      cell("srgeo.plot.profile(p)"),
    },
  }
  T.write(dir .. "/in.ipynb", (json.encode(nb):gsub('"NULL"', "null"))) -- nbformat wants null
  out, code = T.sh(string.format("cd %s && JUPYTER_PATH=%s/share/jupyter JUPYTER_DATA_DIR=%s/data timeout 300 " ..
    "jupyter-nbconvert --to notebook --execute --ExecutePreprocessor.timeout=240 --output out.ipynb in.ipynb",
    q(dir), q(dir), q(dir)))
  T.eq(code, 0, out)
  local done = json.decode(T.read(dir .. "/out.ipynb"))
  local kinds, png, text = {}, nil, {}
  for _, c in ipairs(done.cells) do
    for _, o in ipairs(c.outputs or {}) do
      kinds[#kinds + 1] = o.output_type
      if o.output_type == "error" then T.truthy(false, "an error output: " .. json.encode(o)) end
      if o.output_type == "stream" then text[#text + 1] = type(o.text) == "table" and table.concat(o.text) or o.text end
      if o.data and o.data["image/png"] then png = o.data["image/png"] end
    end
  end
  T.truthy(table.concat(text):find("hello from srgeo", 1, true), table.concat(kinds, " "))
  T.truthy(png, "no image/png output: " .. table.concat(kinds, " "))
  T.truthy(type(png) == "string" and #png > 1000, "a PNG of " .. #tostring(png) .. " base64 characters")
  T.truthy(png:gsub("%s", ""):sub(1, 8) == "iVBORw0K", "base64 of a PNG signature") -- "\137PNG\r\n\26\n"
  os.execute("rm -rf " .. q(dir))
end)

T.test("kernel: a bad connection file or command line is a clear error, no traceback", function()
  if not T.shell() then T.skip("skipped: the kernel runs in the srgeo shell") end
  local f = os.tmpname()
  local function run(args)
    local out, code = T.sh(string.format("%s kernel %s", q(SHELL), args))
    T.truthy(not out:find("stack traceback", 1, true), out)
    return out, code
  end
  local out, code = run("-f /nonexistent/conn.json")
  T.eq(code, 1); T.truthy(out:find("kernel: cannot read /nonexistent/conn.json", 1, true), out)
  T.write(f, "nope")
  out, code = run("-f " .. q(f))
  T.eq(code, 1); T.truthy(out:find("json.decode", 1, true), out)
  T.write(f, '{"ip": "127.0.0.1", "shell_port": 5, "key": "k"}')
  out, code = run("-f " .. q(f))
  T.eq(code, 1); T.truthy(out:find("control_port must be a port number", 1, true), out)
  T.write(f, '{"ip": "127.0.0.1", "shell_port": 1, "control_port": 2, "iopub_port": 3, "stdin_port": 4, "hb_port": 6,'
    .. ' "key": "k", "signature_scheme": "hmac-md5"}')
  out, code = run("-f " .. q(f))
  T.eq(code, 1); T.truthy(out:find("signature_scheme must be hmac-sha256, got 'hmac-md5'", 1, true), out)
  out, code = run("--bogus")
  T.eq(code, 2); T.truthy(out:find("usage: srgeo kernel", 1, true), out)
  os.remove(f)
end)

-- srgeo.html.rich, the text/html the kernel sends beside text/plain (no
-- Jupyter needed): each kind, and every string of the object escaped.
T.test("kernel: srgeo.html.rich forms tensors, models, profiles, comparisons and tables, escaping what they hold", function()
  local H = require "srgeo.html"
  local nn = srgeo.nn
  local t = H.rich(srgeo.rand({ 30, 40 }, 1))
  T.truthy(t:find("tensor(30,40) float32, 1200 values", 1, true), t)
  T.eq(select(2, t:gsub("<tr>", "")), 12, "a large matrix: the header, 5 + a gap + 5 rows") -- 1 + 11
  T.truthy(H.rich(srgeo.rand({ 2, 2, 2 }, 1)):find("<pre>tensor(2,2,2)", 1, true), "3-D: the text form")
  local m = nn.sequential { { "a<b>", nn.linear { in_features = 4, out_features = 4 } }, nn.relu {} }
  local mh = H.rich(m)
  T.truthy(mh:find("a&lt;b&gt;", 1, true) and not mh:find("<b>", 1, true), mh)
  local X = {}
  for i = 1, 3 do X[i] = srgeo.rand({ 1, 4 }, i) end
  local p = srgeo.profile(m, X, { preset = "quick", nscales = 5, directions = 16, progress = false, label = '<img src=x onerror="y">' })
  local p2 = srgeo.profile(m, X, { preset = "quick", nscales = 5, directions = 16, progress = false, seed = 2, label = "b&c" })
  for _, h in ipairs { H.rich(p), H.rich(srgeo.profile.compare(p, p2, { permutations = 10 })),
                       H.rich(srgeo.experiment.descriptor_table { p, p2 }) } do
    T.truthy(h:find("&lt;img src=x onerror=&quot;y&quot;&gt;", 1, true), h)
    T.truthy(not h:find("<img", 1, true), "no tag from a label: " .. h)
  end
  T.truthy(H.rich(srgeo.experiment.descriptor_table { p, p2 }):find("b&amp;c", 1, true))
  T.eq(select(2, H.rich(p):gsub("<tr>", "")), 1 + 5 + 1 + #srgeo.profile.descriptor_names, "rungs and descriptors")
  T.eq(H.rich({ a = 1 }), nil)
  T.eq(H.rich("<x>"), nil)
  -- the descriptor table still reads as text
  local dt = srgeo.experiment.descriptor_table { p, p2 }
  T.truthy(dt:find("peak r [95% CI]", 1, true) and tostring(dt):find("b&c", 1, true) and ("" .. dt):find("\n", 1, true))
end)
