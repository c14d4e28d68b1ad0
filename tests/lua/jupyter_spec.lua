-- jupyter_spec.lua: every shipped notebook in Jupyter.  notebooks/*.md are
-- converted with `srgeo notebook --to ipynb`, given a small size (a cell
-- tagged injected-parameters after the parameters cell, as papermill adds
-- one), and run by `jupyter nbconvert --to notebook --execute` on the srgeo
-- kernel: no error output, and an image/png output for every srgeo.plot
-- call of the notebook.  One executed notebook, rendered by `nbconvert --to
-- html`, is checked in headless Chromium: its figures are <img> data URIs
-- that decode, and the screenshot's pixels inside each figure's box are not
-- blank.  Skipped, with the reason, where the srgeo shell, jupyter_client,
-- jupyter-nbconvert or Chromium is missing (scripts/install-deps.sh --test
-- installs them).
local T = ...
local srgeo = require "srgeo"
local util = require "srgeo.util"

local SHELL = T.shell() or "build/srgeo"
local PYTHON = "/usr/bin/python3"
local ROOT = "build/test-jupyter"
local function q(s) return util.shell_quote(s) end
local browser = dofile("tests/lua/chromium.lua")(T, ROOT)

-- The smallest size that still draws every figure: images per evaluation
-- set, the quick preset, two checkpoints for formation.md (parameters a
-- notebook does not have are left out).  All five at this size (AMD EPYC
-- Zen 5, 2 cores, Dec 2026): 34 s in nbconvert, 46 s wall and 38 s CPU
-- for this spec (218 s in nbconvert at a load average of 13); the run
-- prints its own seconds as a note line.
local SIZE = { { "images", "1" }, { "preset", '"quick"' }, { "checkpoints", "2" } }

local function need_jupyter()
  if not T.shell() then T.skip("skipped: the kernel runs in the srgeo shell (run the specs with build/srgeo)") end
  if os.execute(PYTHON .. " -c 'import jupyter_client, nbformat' >/dev/null 2>&1") ~= true then
    T.skip("skipped: python3-jupyter-client or python3-nbformat is not installed (scripts/install-deps.sh --test)")
  end
  if os.execute("command -v jupyter-nbconvert >/dev/null 2>&1") ~= true then
    T.skip("skipped: jupyter-nbconvert is not installed (scripts/install-deps.sh --test)")
  end
end

local NOTEBOOKS = {}
for f in T.sh("ls notebooks/*.md"):gmatch("[^\n]+") do NOTEBOOKS[#NOTEBOOKS + 1] = f:match("([^/]+)%.md$") end

-- The figures a notebook draws: its srgeo.plot calls.
local function plot_calls(name)
  local _, n = T.read("notebooks/" .. name .. ".md"):gsub("srgeo%.plot%.%a+%(", "")
  return n
end

-- Inject the size after the parameters cell (Python's json keeps the
-- notebook's nulls and empty lists as nbformat wants them).
local INJECT = [[
import json, sys
path, code = sys.argv[1], sys.argv[2]
nb = json.load(open(path))
at = next(i for i, c in enumerate(nb["cells"]) if "parameters" in c.get("metadata", {}).get("tags", []))
names = {l.split("=")[0].strip() for l in "".join(nb["cells"][at]["source"]).splitlines() if "=" in l}
src = "".join(l + "\n" for l in code.splitlines() if l.split("=")[0].strip() in names)
nb["cells"].insert(at + 1, {"cell_type": "code", "execution_count": None, "id": "injected-parameters",
                            "metadata": {"tags": ["injected-parameters"]}, "outputs": [], "source": src})
json.dump(nb, open(path, "w"), indent=1)
]]

-- What every executed notebook holds: per notebook, its error outputs and
-- image/png outputs (counted by Python from the executed .ipynb).
local COUNT = [[
import json, sys
for path in sys.argv[1:]:
    nb = json.load(open(path))
    errors, pngs = [], 0
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            if o["output_type"] == "error":
                errors.append((o.get("ename", "") + ": " + o.get("evalue", "")).replace("\n", " ")[:300])
            if "image/png" in o.get("data", {}) and "".join(o["data"]["image/png"]).startswith("iVBORw0K"):
                pngs += 1
    print("%s %d %d %s" % (path.rsplit("/", 1)[-1][:-6], pngs, len(errors), " | ".join(errors)))
]]

local ran -- {seconds =, log =, [name] = {pngs =, errors =, text =}}, once for all the tests
local function run_all()
  need_jupyter()
  if ran then return ran end
  os.execute("rm -rf " .. q(ROOT))
  util.mkdir(ROOT .. "/executed")
  local out, code = T.sh(string.format("%s kernel install --prefix %s/k", q(SHELL), q(ROOT)))
  T.eq(code, 0, out)
  local size = {}
  for _, s in ipairs(SIZE) do size[#size + 1] = s[1] .. " = " .. s[2] end
  T.write(ROOT .. "/inject.py", INJECT)
  T.write(ROOT .. "/count.py", COUNT)
  local files = {}
  for _, name in ipairs(NOTEBOOKS) do
    local nb = ROOT .. "/" .. name .. ".ipynb"
    out, code = T.sh(string.format("%s notebook --to ipynb notebooks/%s.md -o %s", q(SHELL), name, q(nb)))
    T.eq(code, 0, out)
    out, code = T.sh(string.format("%s %s/inject.py %s %s", PYTHON, q(ROOT), q(nb), q(table.concat(size, "\n"))))
    T.eq(code, 0, out)
    files[#files + 1] = name .. ".ipynb"
  end
  -- --allow-errors: every notebook runs to its end and an error is an
  -- output, which the tests below name per notebook
  local t0 = os.time()
  local log
  log, code = T.sh(string.format("cd %s && JUPYTER_PATH=$PWD/k/share/jupyter JUPYTER_DATA_DIR=$PWD/data "
    .. "JUPYTER_RUNTIME_DIR=$PWD/runtime timeout 1200 nice jupyter-nbconvert --to notebook --execute --allow-errors "
    .. "--ExecutePreprocessor.timeout=900 --output-dir executed %s", q(ROOT), table.concat(files, " ")))
  ran = { seconds = os.time() - t0, log = log }
  T.eq(code, 0, log)
  local paths = {}
  for _, f in ipairs(files) do paths[#paths + 1] = q(ROOT .. "/executed/" .. f) end
  local counts = T.sh(string.format("%s %s/count.py %s", PYTHON, q(ROOT), table.concat(paths, " ")))
  for line in counts:gmatch("[^\n]+") do
    local name, pngs, nerr, text = line:match("^(%S+) (%d+) (%d+) ?(.*)$")
    if name then ran[name] = { pngs = tonumber(pngs), errors = tonumber(nerr), text = text } end
  end
  print(string.format("note jupyter: %d notebooks executed by nbconvert in %d s (%s)", #files, ran.seconds,
    table.concat(size, ", ")))
  return ran
end

for _, name in ipairs(NOTEBOOKS) do
  T.test("jupyter: nbconvert --execute runs notebooks/" .. name .. ".md: no error, an image/png per figure", function()
    local r = run_all()
    local nb = r[name]
    T.truthy(nb, "no executed notebook " .. name .. ":\n" .. r.log)
    T.eq(nb.errors, 0, "error outputs in " .. name .. ": " .. nb.text)
    local want = plot_calls(name)
    T.truthy(want >= 1, name .. " draws no figure")
    T.truthy(nb.pngs >= want, string.format("%s: %d image/png outputs for %d srgeo.plot calls", name, nb.pngs, want))
  end)
end

-- nbconvert --to html of one executed notebook, in Chromium.  The page
-- nbconvert writes loads require.js and MathJax from a CDN; there is no
-- network here, so those two <script src=http...> are removed (the figures
-- are data URIs and need neither).
T.test("jupyter: an executed notebook rendered by nbconvert --to html shows its figures inline in Chromium", function()
  local r = run_all()
  browser.or_skip()
  local name = "robustness"
  T.truthy(r[name] and r[name].errors == 0, "the notebook ran")
  local out, code = T.sh(string.format("cd %s/executed && timeout 300 jupyter-nbconvert --to html %s.ipynb", q(ROOT), name))
  T.eq(code, 0, out)
  local path = ROOT .. "/executed/" .. name .. ".html"
  local html = T.read(path)
  local _, imgs = html:gsub('<img src="data:image/png;base64,', "")
  local want = plot_calls(name)
  T.truthy(imgs >= want, string.format("%d <img> data:image/png in the HTML for %d figures", imgs, want))
  html = html:gsub('<script src="https?://[^"]*">%s*</script>', "")
  T.write(path, html)
  local lay = browser.layout(path, 1000, 30000)
  local rects = {}
  for i, w in ipairs(lay.imgs) do
    if lay.srcs[i]:match("^data:image/png") then
      T.truthy(w > 100, "figure " .. i .. " decodes (natural width " .. w .. ")")
      rects[#rects + 1] = lay.rects[i]
    end
  end
  T.truthy(#rects >= want, #rects .. " figures laid out")
  local height = math.min(30000, math.ceil(lay.height) + 20)
  local shot = ROOT .. "/" .. name .. ".png"
  browser.screenshot(path, shot, "1000," .. height)
  -- the screenshot's pixels inside each figure's box (2 px in): not blank,
  -- as the page around a figure is (white: ink 0, one tone), but a
  -- figure's ink (its lines and text, a few thousandths of the box even
  -- for a chart of three points) and its range of tones
  local px = srgeo.image.load(shot, { size = false, channels = 3 })
  local H, W = px:shape()[3], px:shape()[4]
  for i, b in ipairs(rects) do
    local x0, y0, w, h = math.floor(b.x) + 2, math.floor(b.y) + 2, math.floor(b.w) - 4, math.floor(b.h) - 4
    T.truthy(w > 100 and h > 100 and x0 + w <= W and y0 + h <= H,
      string.format("figure %d's box %d,%d %dx%d inside the %dx%d screenshot", i, x0, y0, w, h, W, H))
    local region = px:narrow(3, y0 + 1, h):narrow(4, x0 + 1, w)
    local ink, lo, hi = 1 - region:mean(), (region:min()), (region:max())
    print(string.format("note jupyter: figure %d at %d,%d (%dx%d): ink %.4f, tones %.2f..%.2f", i, x0, y0, w, h, ink, lo, hi))
    T.truthy(ink > 0.002 and hi - lo > 0.5, string.format("figure %d is blank in the screenshot (ink %.4f, tones %.2f..%.2f)",
      i, ink, lo, hi))
  end
end)
