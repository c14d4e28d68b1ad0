-- report.lua: an HTML index of an output folder tree: every run with figure thumbnails, descriptors, command line and identity.
--
--   srgeo scripts/report.lua out/          (with subcommands: srgeo report out/)
--   (the library call: srgeo.index.write("out"))
local srgeo = require "srgeo"
local cli = require "srgeo.cli"
local index = require "srgeo.index"

local o = cli.run({
  name = "report.lua",
  usage = "usage: srgeo scripts/report.lua DIR [options]   (with subcommands: srgeo report DIR)",
  about = "Writes DIR/index.html: every run below DIR (a folder with results.json, as the experiment\n"
       .. "scripts write them) with its command line, settings, figure thumbnails linking to the full\n"
       .. "figures, each unit's identity (model, weights hash, evaluation set, tap) and descriptors\n"
       .. "with their 95% CIs, links to all its files; and every notebook report below DIR.\n"
       .. "Self-contained apart from the files it links: no scripts, nothing loaded from elsewhere.",
  positional = { { "dir", "the output folder (e.g. out/)" } },
  options = {
    { "title", type = "string", help = "the page title (default: srgeo results in DIR)" },
  },
  examples = {
    "srgeo scripts/report.lua out/",
    "srgeo scripts/report.lua out/robustness --title 'Robustness sweep'",
  },
}, { ... })

local ok, r = pcall(index.write, o.dir, { title = o.title })
if not ok then
  io.stderr:write(tostring(r), "\n")
  os.exit(1)
end
print(string.format("report: %s — %d run%s%s, %d notebook report%s", r.path, r.runs, r.runs == 1 and "" or "s",
  r.skipped > 0 and string.format(" (%d skipped)", r.skipped) or "", r.notebooks,
  r.notebooks == 1 and "" or "s"))
for _, n in ipairs(r.notes) do print("  left out: " .. n) end
