-- demo.lua: the `make demo` headline: bump.lua on the shipped default encoder and its random-init twin (a seeded Fashion-MNIST draw).
--
-- Writes out/demo/bump.png (+ .svg, CSV, JSON, summary.txt) and prints the
-- descriptor table.  Until models/shipped/small_resnet.safetensors exists
-- (`make models`), it says so and runs a random-init stand-in instead.
local srgeo = require "srgeo"
local E = require "srgeo.experiment"
local cli = require "srgeo.cli"

local o = cli.run({
  name = "demo.lua",
  about = "The headline experiment: the r_η profile of the shipped default encoder and its\n"
       .. "random-init twin on a seeded draw of Fashion-MNIST test images (scripts/bump.lua).",
  options = {
    { "model", "small_resnet", "the shipped encoder", metavar = "NAME" },
    { "images", 16, "test images in the seeded draw" },
    { "seed", 0, "seed of the draw and the directions" },
    { "preset", "quick", "estimator preset", choices = E.PRESETS },
    { "out", "out/demo", "output folder" },
    { "threads", 0, "threads (0: SRGEO_THREADS or the default)" },
  },
  examples = { "make demo", "srgeo demo --images 64 --preset paper --out out/demo-paper" },
}, { ... })

print(string.format("srgeo %s, %d threads", srgeo.version, o.threads > 0 and o.threads or srgeo.threads()))
local shipped = E.shipped_dir() .. "/" .. o.model .. ".safetensors"
local have = io.open(shipped, "rb")
if have then have:close() end
local eval = string.format("fmnist-test:%d@%d", o.images, o.seed)
local ok_data = pcall(srgeo.data.fashion_mnist, { split = "test" })
if not ok_data then
  print("NOTICE: Fashion-MNIST is not installed (Debian package dataset-fashion-mnist; `make deps`);"
    .. " using uniform-noise images instead.")
  eval = string.format("noise:%d@%d", o.images, o.seed)
end
local args = { "--out", o.out, "--eval", eval, "--preset", o.preset, "--seed", tostring(o.seed),
               "--threads", tostring(o.threads) }
if have then
  print(string.format("Profiling %s (%s) and its random-init twin on %s, %s preset.", o.model, shipped, eval, o.preset))
  -- bump.lua titles it "MODEL: trained vs random init" with the images the profiles hold
  for _, a in ipairs { "--model", o.model, "--twin" } do args[#args + 1] = a end
else
  print(string.rep("=", 78))
  print(string.format("NOTICE: %s does not exist yet (`make models` trains the shipped encoders).", shipped))
  print("Running a RANDOM-INIT stand-in with the quick preset instead: no bump is expected;")
  print("this shows the pipeline end to end, not the published finding.")
  print(string.rep("=", 78))
  local n = math.min(o.images, 8)
  args[4] = eval:gsub(":%d+@", ":" .. n .. "@")
  args[6] = "quick"
  for _, a in ipairs { "--model", o.model .. "@init", "--label", o.model .. " (random init, stand-in)", "--title",
                       string.format("%s at random init (stand-in: no shipped model yet)", o.model) } do
    args[#args + 1] = a
  end
end
local t0 = srgeo._clock()
E.run_script("bump", args)
print(string.format("demo: done in %.1f s; figure: %s/bump.png", srgeo._clock() - t0, o.out))
