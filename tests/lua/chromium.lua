-- chromium.lua: headless Chromium for the specs that check HTML pages as a
-- browser shows them (notebook_spec: srgeo's reports and index;
-- jupyter_spec: notebooks executed by nbconvert).  Installed by
-- scripts/install-deps.sh --test; a spec skips, with the reason, without it.
--
--   local C = dofile("tests/lua/chromium.lua")(T, "build/test-x")  -- scratch folder for the probe page
--   C.or_skip()                      -- T.skip unless /usr/bin/chromium exists
--   C.run(args) -> log               -- Chromium headless on a fresh profile
--   C.screenshot(html, shot [, size]) -- a PNG at shot; fails on console errors or failed loads
--   C.layout(html, width [, height]) -> {els, imgs, srcs, rects, height, page_wide}   -- the layout probe below
--   C.abspath(path)
local util = require "srgeo.util"
local json = require "srgeo.json"

return function(T, root)
  local C = { PATH = "/usr/bin/chromium" }

  function C.or_skip()
    if not T.read(C.PATH) then
      print("skipped: " .. C.PATH .. " not installed")
      T.skip("skipped: " .. C.PATH .. " not installed")
    end
  end

  local CWD = T.sh("pwd"):gsub("%s+$", "")
  function C.abspath(p) return p:sub(1, 1) == "/" and p or CWD .. "/" .. p end

  -- Run Chromium headless on a fresh profile with args; returns its log.
  function C.run(args)
    local profile_dir = T.sh("mktemp -d"):gsub("%s+$", "")
    local log = T.sh(string.format("timeout 90 %s --headless --no-sandbox --disable-gpu --disable-background-networking "
      .. "--disable-component-update --disable-sync --no-first-run --user-data-dir=%s %s", C.PATH, profile_dir, args))
    os.execute("rm -rf " .. util.shell_quote(profile_dir))
    return log
  end

  --- A screenshot of the page (a PNG at shot), checked for console errors and
  --- failed loads.
  function C.screenshot(html, shot, size)
    os.remove(shot)
    local log = C.run(string.format("--enable-logging=stderr --v=0 --window-size=%s --screenshot=%s file://%s",
      size or "1000,1400", C.abspath(shot), C.abspath(html)))
    local png = T.read(shot)
    T.truthy(png and png:sub(1, 8) == "\137PNG\r\n\26\n" and #png > 10000, "screenshot written:\n" .. log)
    for _, bad in ipairs { ":CONSOLE(", "Failed to load resource", "net::ERR_", "Uncaught" } do
      T.truthy(not log:find(bad, 1, true), "console error in " .. html .. ": " .. bad .. "\n" .. log)
    end
    return log
  end

  -- The layout of a page as Chromium lays it out in a frame `width` pixels
  -- wide: a probe page (scripted; the page itself may have none) loads it
  -- in an iframe and records, for every pre and table, whether its content
  -- is wider than its box, whether the box scrolls, and whether the box stays
  -- inside the page's body; and whether the page itself got wider than the
  -- frame.  Also every image's natural width (0: it did not decode), where
  -- its src starts (30 characters: "data:image/png;base64,") and its box on
  -- the page {x, y, w, h} (CSS pixels; a frame `height` pixels tall, default
  -- 1200, taller than the page keeps them page coordinates, as a
  -- screenshot that tall shows them), and the page's height.
  function C.layout(html, width, height)
    local dir = root .. "/probe"
    util.mkdir(dir)
    local probe = dir .. "/probe.html"
    util.write_atomic(probe, string.format([[<!DOCTYPE html><html><body>
<iframe id="f" src="file://%s" style="width:%dpx;height:%dpx;border:0"></iframe>
<script>
document.getElementById('f').onload = function () {
  var d = this.contentDocument, right = d.body.getBoundingClientRect().right, els = [], imgs = [], srcs = [], rects = [];
  d.querySelectorAll('pre, table').forEach(function (el) {
    var cs = getComputedStyle(el);
    els.push({ tag: el.tagName.toLowerCase(), text: el.textContent.slice(0, 40), wide: el.scrollWidth > el.clientWidth + 1,
               scrolls: cs.overflowX == 'auto' || cs.overflowX == 'scroll',
               inside: el.getBoundingClientRect().right <= right + 1 });
  });
  d.querySelectorAll('img').forEach(function (im) {
    var r = im.getBoundingClientRect();
    imgs.push(im.naturalWidth); srcs.push((im.getAttribute('src') || '').slice(0, 30));
    rects.push({ x: r.left, y: r.top, w: r.width, h: r.height });
  });
  document.body.setAttribute('data-probe', JSON.stringify({ els: els, imgs: imgs, srcs: srcs, rects: rects,
    height: d.body.getBoundingClientRect().bottom, page_wide: d.documentElement.scrollWidth > d.documentElement.clientWidth + 1 }));
};
</script></body></html>]], C.abspath(html), width, height or 1200))
    local dom = C.run("--allow-file-access-from-files --virtual-time-budget=10000 --dump-dom file://" .. C.abspath(probe))
    local attr = dom:match('data%-probe="([^"]*)"')
    T.truthy(attr, "the layout probe ran:\n" .. dom:sub(1, 2000))
    attr = attr:gsub("&quot;", '"'):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&amp;", "&")
    return json.decode(attr)
  end

  return C
end
