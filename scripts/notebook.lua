-- notebook.lua: run a Markdown notebook (```lua blocks) into a self-contained HTML report and a Markdown copy with outputs; convert it to and from Jupyter's .ipynb.
--
--   srgeo notebook notebooks/trained_vs_init.md [--out DIR] [--images 4 --preset quick]
--   srgeo notebook notebooks/trained_vs_init.md --help     (its parameters and their defaults)
--   srgeo notebook --to ipynb FILE.md [-o OUT.ipynb]        srgeo notebook --to md FILE.ipynb [-o OUT.md]
--   (the library calls: srgeo.notebook.run(path, {out = DIR, params = {images = 4}}), srgeo.notebook.convert)
local srgeo = require "srgeo"
local cli = require "srgeo.cli"
local N = require "srgeo.notebook"

local argv = { ... }

local RUNNER = {
  { "out", type = "string", help = "output folder of the report (default out/notebooks/NAME)", metavar = "DIR" },
  { "threads", 0, "threads (0: SRGEO_THREADS or the default)" },
  { "quiet", false, "no per-cell progress on stderr" },
  { "to", type = "string", help = "convert instead of running: FILE.md to ipynb, FILE.ipynb to md", choices = { "ipynb", "md" },
    metavar = "FORMAT" },
  { "output", type = "string", help = "with --to: the file to write (-o; default FILE with the other extension)",
    metavar = "FILE" },
  { "force", false, "with --to md: replace a Markdown file that differs" },
}
local takes_value = { out = true, threads = true, to = true, output = true }

local function fail(msg)
  io.stderr:write(msg, "\n")
  os.exit(2)
end

-- -o is --output (cli options are long).  The notebook is the first argument
-- that is not an option or an option's value; its parameters become options.
local file
for i, a in ipairs(argv) do
  if a == "-o" then argv[i] = "--output" end
end
do
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local key = a:match("^%-%-([^=]+)$")
    if key and takes_value[key:gsub("-", "_")] then
      i = i + 1
    elseif a:sub(1, 1) ~= "-" and not file and (a:match("%.md$") or a:match("%.ipynb$") or a:match("%.markdown$")
      or srgeo._stat(a)) then
      file = a
    end
    i = i + 1
  end
end

local spec = {
  name = "notebook",
  usage = "usage: srgeo notebook [options] FILE.md [--PARAMETER VALUE ...]\n"
       .. "       srgeo notebook --to ipynb FILE.md [-o OUT.ipynb]     srgeo notebook --to md FILE.ipynb [-o OUT.md]",
  about = "Runs every ```lua block of FILE.md in one Lua state (print output captured per block,\n"
       .. "figures written by srgeo.plot embedded) and writes DIR/NAME.html (self-contained: CSS\n"
       .. "inline, images as data URIs) and DIR/NAME.md.  An error stops the run, names the block\n"
       .. "and its first line, and exits with status 1 (the report shows the error).  The values in\n"
       .. "the notebook's ```lua {parameters} block are its defaults; --NAME VALUE overrides one\n"
       .. "(`srgeo notebook FILE.md --help` lists them).  Progress per cell goes to stderr, with the\n"
       .. "time left from the notebook's expected run time.  FILE may be an .ipynb (run as Markdown).",
  positional = { { "file", "the notebook (Markdown with ```lua blocks, or an .ipynb)" } },
  options = {},
  examples = {
    "srgeo notebook notebooks/trained_vs_init.md",
    "srgeo notebook notebooks/trained_vs_init.md --images 4 --preset quick",
    "srgeo notebook notebooks/robustness.md --out /tmp/report",
    "srgeo notebook --to ipynb notebooks/trained_vs_init.md -o /tmp/trained_vs_init.ipynb",
  },
}
for _, o in ipairs(RUNNER) do spec.options[#spec.options + 1] = o end

local params = {}
if file then
  local ok, r = pcall(function() return N.parameters(N.parse(N.read(file)), file) end)
  if not ok then fail(tostring(r)) end
  params = r
  local runner = {}
  for _, o in ipairs(RUNNER) do runner[o[1]] = true end
  for _, p in ipairs(params) do
    if runner[p.name] or p.name == "help" then fail("notebook " .. file .. ": parameter " .. p.name .. " has the name of an option of srgeo notebook") end
    spec.options[#spec.options + 1] = { p.name, p.default, p.help ~= "" and p.help or "parameter" }
  end
  spec.description = #params > 0 and ("Parameters of " .. file .. " (its ```lua {parameters} block; the default in brackets): "
    .. N.parameter_names(params) .. ".") or (file .. " has no parameters block.")
  -- an option that is neither srgeo notebook's nor a parameter: name the parameters
  for _, a in ipairs(argv) do
    local key = a:match("^%-%-([^=]+)")
    if key and a ~= "--help" then
      local k = key:gsub("-", "_")
      local base = k:match("^no_(.+)$")
      if not runner[k] and not params[k] and not (base and (runner[base] or params[base])) then
        fail(string.format("notebook %s: unknown parameter '--%s'; its parameters are %s (the runner's options: --out, "
          .. "--threads, --quiet, --to, -o; see srgeo notebook %s --help)", file, key, N.parameter_names(params), file))
      end
    end
  end
end

local o = cli.run(spec, argv)
if o.threads > 0 then srgeo.threads(o.threads) end

if o.to then
  local ok, r = pcall(N.convert, o.file, o.to, o.output, o.force)
  if not ok then io.stderr:write(tostring(r), "\n"); os.exit(1) end
  print(string.format("notebook: %s -> %s", o.file, r))
  return
end
if o.output then fail("notebook: -o/--output names the file --to writes; a run writes into --out DIR") end

local given = {}
for _, p in ipairs(params) do
  if o._given[p.name] then given[p.name] = o[p.name] end
end
local ok, r = pcall(N.run, o.file, { out = o.out, quiet = o.quiet, params = given })
if not ok then
  io.stderr:write(tostring(r), "\n")
  os.exit(1)
end
print(string.format("notebook: %s ran in %.1f s -> %s, %s", o.file, r.seconds, r.html, r.md))
