-- notebook.lua: run a Markdown notebook (```lua blocks) into a self-contained HTML report and a Markdown copy with outputs.
--
--   srgeo notebook notebooks/trained_vs_init.md [--out DIR]
--   (the library call: srgeo.notebook.run(path, {out = DIR}))
local srgeo = require "srgeo"
local cli = require "srgeo.cli"
local N = require "srgeo.notebook"

local o = cli.run({
  name = "notebook.lua",
  about = "Runs every ```lua block of FILE.md in one Lua state (print output captured per block,\n"
       .. "figures written by srgeo.plot embedded) and writes DIR/NAME.html (self-contained: CSS\n"
       .. "inline, images as data URIs) and DIR/NAME.md.  An error stops the run, names the block\n"
       .. "and its first line, and exits with status 1 (the report shows the error).",
  positional = { { "file", "the notebook (Markdown with ```lua blocks)" } },
  options = {
    { "out", type = "string", help = "output folder (default out/notebooks/NAME)", metavar = "DIR" },
    { "threads", 0, "threads (0: SRGEO_THREADS or the default)" },
    { "quiet", false, "no per-block progress on stderr" },
  },
  examples = {
    "srgeo notebook notebooks/trained_vs_init.md",
    "srgeo notebook notebooks/robustness.md --out /tmp/report",
  },
}, { ... })

if o.threads > 0 then srgeo.threads(o.threads) end
local ok, r = pcall(N.run, o.file, { out = o.out, quiet = o.quiet })
if not ok then
  io.stderr:write(tostring(r), "\n")
  os.exit(1)
end
print(string.format("notebook: %s ran in %.1f s -> %s, %s", o.file, r.seconds, r.html, r.md))
