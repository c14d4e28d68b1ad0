-- weights_spec.lua: the weights cache and its downloads (lua/srgeo/weights.lua,
-- core/io/download.c), only ever against tests/http_server.py on 127.0.0.1,
-- started here.  Every srgeo under test runs as a child process with
-- SRGEO_CACHE set and every proxy variable pointing at a closed local port
-- (127.0.0.1 excepted), so a request that would leave the machine fails at
-- once instead of touching the internet.
--   * a download arrives whole, checked (sha256sum agrees), with its digest
--     recorded, a progress line on stderr, and is not fetched again;
--   * a file whose bytes do not match its name's digest is refused, the
--     download not kept, and a cache file changed after its check is caught;
--   * a connection dropped mid-way is resumed with a Range request; a
--     process killed mid-way leaves a .part the next run resumes; a server
--     that ignores ranges gets a fresh start; Ctrl-C stops with the .part kept;
--   * two processes fetching the same file: one download, both get the file;
--   * SRGEO_OFFLINE=1 names the URL and the place, and requests nothing;
--   * 404, redirects (followed, bounded, no other scheme), a huge
--     Content-Length: clear errors and no file left;
--   * models.load(ARCH, {weights = URL | "imagenet"}), models.load(URL) and
--     ARCH:URL / URL specs resolve to the cache file.
local T = ...
local srgeo = require "srgeo"

local ROOT = "build/test-weights"
local BIN = T.shell() or "build/srgeo"
local q = function(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local S -- the server: {port, log, files, dir}

local function sha256sum(path) return (T.sh("sha256sum " .. q(path)):match("^(%x+)")) end

-- n pseudo-random bytes (seeded): distinct files, nothing compressible
local function bytes(n, seed)
  local t, x = {}, seed * 2654435761 % 4294967296 + 1
  for i = 1, n // 4 do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = string.pack("<I4", x * 2 % 4294967296)
  end
  return table.concat(t)
end

-- A served file: NAME-HASH8.EXT (the hash from sha256sum, not srgeo's).
local function add_file(stem, ext, data)
  local tmp = S.files .. "/" .. stem .. ".tmp"
  T.write(tmp, data)
  local hex = sha256sum(tmp)
  local name = stem .. "-" .. hex:sub(1, 8) .. ext
  os.rename(tmp, S.files .. "/" .. name)
  return name, hex
end

local function server()
  if S then return S end
  os.execute("rm -rf " .. ROOT .. " && mkdir -p " .. ROOT .. "/files")
  local dir = srgeo._realpath(ROOT)
  S = { dir = dir, files = dir .. "/files", log = dir .. "/requests.log", n = 0 }
  T.write(S.log, "")
  os.execute(string.format("/usr/bin/python3 tests/http_server.py %s %s %s %d >%s 2>&1 &", q(S.files),
    q(dir .. "/port"), q(S.log), srgeo._pid(), q(dir .. "/server.out")))
  for _ = 1, 200 do
    local p = T.read(dir .. "/port")
    if p and p:match("^%d+$") then S.port = p break end
    os.execute("sleep 0.05")
  end
  assert(S.port, "the test server did not start: " .. tostring(T.read(dir .. "/server.out")))
  S.blob, S.blob_hex = add_file("blob", ".pth", bytes(3000000, 1))
  return S
end

local function url(kind, name) return string.format("http://127.0.0.1:%s/%s/%s", server().port, kind, name) end

-- A fresh cache folder for one test.
local function cache(tag)
  local d = server().dir .. "/cache-" .. tag
  os.execute("rm -rf " .. q(d))
  return d
end

local function env(dir, extra)
  return string.format("env SRGEO_CACHE=%s http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 "
    .. "HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 ALL_PROXY=http://127.0.0.1:9 "
    .. "NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 SRGEO_OFFLINE=%s %s", q(dir), extra and extra.offline and "1" or "0",
    extra and extra.vars or "")
end

-- srgeo -e CODE in a child process with the cache dir; output, exit code.
local function run(dir, code, extra)
  return T.sh(env(dir, extra) .. " " .. q(BIN) .. " -e " .. q("local W = require 'srgeo.weights' " .. code))
end

local function fetch_code(u, opts) return string.format("print('PATH=' .. W.fetch(%q, %s))", u, opts or "{}") end

-- The request lines logged since the last call.
local function requests()
  local lines = {}
  for l in (T.read(S.log) or ""):gmatch("[^\n]+") do lines[#lines + 1] = l end
  local new = { table.unpack(lines, S.n + 1) }
  S.n = #lines
  return new
end

local function count(list, pat)
  local n = 0
  for _, l in ipairs(list) do if l:find(pat) then n = n + 1 end end
  return n
end

local function exists(p) return srgeo._stat(p) ~= nil end

T.test("weights: a download arrives whole and checked, its digest recorded, progress shown, fetched once", function()
  local d = cache("ok")
  requests()
  local out, code = run(d, fetch_code(url("files", server().blob), "{progress = true}"))
  T.eq(code, 0, out)
  local path = d .. "/" .. S.blob
  T.eq(out:match("PATH=(%S+)"), path, "the cache file by name")
  T.eq(sha256sum(path), S.blob_hex, "sha256sum of the cached file")
  T.truthy(out:find(S.blob .. ": 3.0 of 3.0 MB (100%), ", 1, true), "progress line: " .. out)
  T.truthy(T.read(path .. ".sha256"):find("^" .. S.blob_hex .. "\n"), "digest recorded")
  T.truthy(not exists(path .. ".part"), "no .part left")
  T.eq(#requests(), 1, "one request")
  out, code = run(d, fetch_code(url("files", S.blob)))
  T.eq(code, 0, out)
  T.eq(#requests(), 0, "the second use requests nothing")
  T.truthy(not out:find("MB/s", 1, true), "quiet when stderr is not a terminal and progress is not asked: " .. out)
end)

T.test("weights: on a terminal the progress line is redrawn in place with the rate and the time left", function()
  local d = cache("tty")
  local name = add_file("tty", ".pth", bytes(700000, 7))
  local ts = d .. ".typescript"
  local cmd = env(d) .. " " .. q(BIN) .. " -e " .. q("local W = require 'srgeo.weights' " .. fetch_code(url("slow", name)))
  local _, code = T.sh("script -qec " .. q(cmd) .. " " .. q(ts) .. " </dev/null")
  if code ~= 0 and not T.read(ts) then T.skip("script(1) is not available") end
  local out = T.read(ts) or ""
  T.truthy(out:find("\r" .. "srgeo: " .. name:gsub("%p", "%%%0") .. ": [%d.]+ of 0%.7 MB %(%d+%%%), [%d.]+ MB/s, %d+ s left\27%[K"),
    "a redrawn line with the time left: " .. out)
  T.truthy(out:find("(100%), ", 1, true) and out:find("PATH=", 1, true), out)
end)

T.test("weights: off a terminal a short download says nothing, a long one a line every SRGEO_PROGRESS seconds", function()
  local d = cache("lines")
  local quiet = add_file("quiet", ".pth", bytes(300000, 8))
  local out, code = run(d, fetch_code(url("slow", quiet)))
  T.eq(code, 0, out)
  T.truthy(not out:find("MB", 1, true), "silent: " .. out)
  local long = add_file("long", ".pth", bytes(1000000, 9))
  out, code = run(d, fetch_code(url("slow", long)), { vars = "SRGEO_PROGRESS=0.3" })
  T.eq(code, 0, out)
  local lines = 0
  for l in out:gmatch("srgeo: " .. long:gsub("%p", "%%%0") .. ": [^\n]*") do
    lines = lines + 1
    T.truthy(not l:find("\r", 1, true) and not l:find("\27", 1, true), "plain lines: " .. l)
  end
  T.truthy(lines >= 3, "a line every 0.3 s over about 1.3 s, and a closing one: " .. out)
  T.truthy(out:find(": 1.0 of 1.0 MB (100%), ", 1, true), "the closing line: " .. out)
end)

T.test("weights: a file whose bytes do not match its name's sha256 is refused and not kept", function()
  local d = cache("bad")
  local s = server()
  local wrong = "liar-" .. (S.blob_hex:sub(1, 1) == "0" and "1" or "0") .. S.blob_hex:sub(2, 8) .. ".pth"
  os.execute("cp " .. q(s.files .. "/" .. s.blob) .. " " .. q(s.files .. "/" .. wrong))
  local out, code = run(d, fetch_code(url("files", wrong)))
  T.truthy(code ~= 0, "refused: " .. out)
  T.truthy(out:find("sha256 mismatch: expected a digest starting " .. wrong:match("%-(%x+)%."), 1, true), out)
  T.truthy(out:find("got " .. s.blob_hex, 1, true), "the actual digest named: " .. out)
  T.truthy(out:find("the file was not kept", 1, true), out)
  T.truthy(not exists(d .. "/" .. wrong) and not exists(d .. "/" .. wrong .. ".part"), "neither final file nor .part")
end)

T.test("weights: a cache file is checked on first use, and again once it changed", function()
  local d = cache("first")
  local s = server()
  os.execute("mkdir -p " .. q(d) .. " && cp " .. q(s.files .. "/" .. s.blob) .. " " .. q(d .. "/"))
  requests()
  local code_ok = string.format("print('PATH=' .. W.resolve('resnet18', %q))", s.blob)
  local out, code = run(d, code_ok)
  T.eq(code, 0, out)
  T.eq(out:match("PATH=(%S+)"), d .. "/" .. s.blob)
  T.truthy(T.read(d .. "/" .. s.blob .. ".sha256"), "checked and recorded on first use")
  T.eq(#requests(), 0, "a cache file needs no server")
  -- the same bytes but one: caught although a record exists (the file's status changed)
  local data = T.read(d .. "/" .. s.blob)
  T.write(d .. "/" .. s.blob, data:sub(1, 1000) .. string.char((data:byte(1001) + 1) % 256) .. data:sub(1002))
  out, code = run(d, code_ok)
  T.truthy(code ~= 0 and out:find("sha256 mismatch", 1, true), "a changed file is refused: " .. out)
end)

-- A download from /KIND/ whose first answer breaks after half the bytes
-- (dropped, or stalled): it completes, the second request resuming at the
-- half; the seconds it took.
local function resumes_once(kind, size, seed, opts)
  local d = cache(kind)
  local name = add_file(kind, ".pth", bytes(size, seed))
  requests()
  local t0 = srgeo._clock()
  local out, code = run(d, fetch_code(url(kind, name), opts))
  T.eq(code, 0, out)
  T.eq(sha256sum(d .. "/" .. name), sha256sum(server().files .. "/" .. name))
  local r = requests()
  T.eq(#r, 2, table.concat(r, "\n"))
  T.eq(r[2], "GET /" .. kind .. "/" .. name .. " bytes=" .. size // 2 .. "-", "the second request resumes at the half sent")
  T.truthy(out:find("the connection broke after " .. size // 2 .. " bytes; resuming", 1, true), out)
  return srgeo._clock() - t0
end

T.test("weights: a connection dropped mid-way is resumed with a Range request", function()
  resumes_once("drop", 2000000, 2, "{progress = true}")
end)

T.test("weights: a stalled connection is given up after stall_timeout and resumed", function()
  local t = resumes_once("stall", 800000, 6, "{stall_timeout = 1, progress = true}")
  T.truthy(t < 20, "not waiting for the server's 30 s: " .. t)
end)

T.test("weights: a body without Content-Length is cut at max_bytes", function()
  local d = cache("nolength")
  local s = server()
  local out, code = run(d, fetch_code(url("nolength", s.blob), "{max_bytes = 1000000}"))
  T.truthy(code ~= 0 and out:find("the body grew past the limit of 1000000 bytes (max_bytes)", 1, true), out)
  T.truthy(not exists(d .. "/" .. s.blob), "no final file")
  out, code = run(d, fetch_code(url("nolength", s.blob)))
  T.eq(code, 0, out)
  T.eq(sha256sum(d .. "/" .. s.blob), s.blob_hex, "whole without a length under the default limit")
end)

-- A download from /slow/ in the background: its pid.
local function start_slow(d, name, tag, extra)
  local pidf = d .. "." .. tag .. ".pid"
  os.execute(string.format("%s %s -e %s >%s 2>&1 & echo $! >%s", env(d, extra), q(BIN),
    q("local W = require 'srgeo.weights' " .. fetch_code(url("slow", name), "{progress = true}")),
    q(d .. "." .. tag .. ".out"), q(pidf)))
  return T.read(pidf):match("%d+")
end

local function part_size(p)
  local st = srgeo._stat(p)
  return st and st.size or 0
end

local function wait_until(fn, what)
  for _ = 1, 600 do
    if fn() then return end
    os.execute("sleep 0.02")
  end
  error("timed out waiting for " .. what)
end

-- A /slow/ download stopped by signal sig once its .part holds some bytes:
-- the cache folder, the file's name, what the .part kept.
local function stop_slow(tag, sig, seed)
  local d = cache(tag)
  local name = add_file(tag, ".pth", bytes(1500000, seed))
  os.execute("mkdir -p " .. q(d))
  local part = d .. "/" .. name .. ".part"
  local pid = start_slow(d, name, tag)
  wait_until(function() return part_size(part) >= 200000 end, ".part to grow")
  os.execute("kill -" .. sig .. " " .. pid .. "; while kill -0 " .. pid .. " 2>/dev/null; do sleep 0.01; done")
  local kept = part_size(part)
  T.truthy(kept > 0 and kept < 1500000, "a .part kept: " .. kept)
  T.truthy(not exists(d .. "/" .. name), "no final file from a stopped download")
  return d, name, kept
end

-- The next run asks for the bytes after the .part's and completes the file.
local function resumes_part(d, name, kept)
  requests()
  local out, code = run(d, fetch_code(url("files", name)))
  T.eq(code, 0, out)
  T.eq(requests()[1], "GET /files/" .. name .. " bytes=" .. kept .. "-", "resumed where the stopped one ended")
  T.eq(sha256sum(d .. "/" .. name), sha256sum(server().files .. "/" .. name))
end

T.test("weights: a download killed mid-way (SIGKILL) leaves a .part the next run resumes", function()
  resumes_part(stop_slow("kill", 9, 3))
end)

T.test("weights: Ctrl-C stops a download cleanly and keeps the .part", function()
  local d, name, kept = stop_slow("sigint", "INT", 4)
  local out = T.read(d .. ".sigint.out")
  T.truthy(out:find("interrupted; the " .. kept .. " bytes received are kept in " .. d .. "/" .. name .. ".part", 1, true),
    out)
  resumes_part(d, name, kept)
end)

T.test("weights: a server that ignores Range, or answers another range, gets a fresh start over a stale .part", function()
  local s = server()
  for _, kind in ipairs { "norange", "badrange" } do
    local d = cache(kind)
    os.execute("mkdir -p " .. q(d))
    T.write(d .. "/" .. s.blob .. ".part", ("junk"):rep(1000))
    requests()
    local out, code = run(d, fetch_code(url(kind, s.blob)))
    T.eq(code, 0, out)
    T.eq(sha256sum(d .. "/" .. s.blob), s.blob_hex, kind .. ": the whole file, the stale bytes gone")
    local r = requests()
    T.eq(r[1], "GET /" .. kind .. "/" .. s.blob .. " bytes=4000-", "asked to resume")
    T.eq(#r, kind == "norange" and 1 or 2, kind .. ": " .. table.concat(r, "; "))
  end
end)

T.test("weights: two processes fetching one file: one download, the second waits and uses it", function()
  local d = cache("lock")
  local s = server()
  local name = add_file("shared", ".pth", bytes(3000000, 5)) -- 3.7 s at the slow rate: the second starts well within it
  os.execute("mkdir -p " .. q(d))
  requests()
  local a = start_slow(d, name, "a")
  wait_until(function() return part_size(d .. "/" .. name .. ".part") > 0 end, "the first download to start")
  local b = start_slow(d, name, "b")
  os.execute(string.format("while kill -0 %s 2>/dev/null || kill -0 %s 2>/dev/null; do sleep 0.02; done", a, b))
  local oa, ob = T.read(d .. ".a.out"), T.read(d .. ".b.out")
  T.eq(oa:match("PATH=(%S+)"), d .. "/" .. name, oa)
  T.eq(ob:match("PATH=(%S+)"), d .. "/" .. name, ob)
  T.truthy(ob:find("another process is downloading it; waiting", 1, true), "the second says it waits: " .. ob)
  T.eq(count(requests(), "^GET /slow/" .. name:gsub("%p", "%%%0")), 1, "one download")
  T.eq(sha256sum(d .. "/" .. name), sha256sum(s.files .. "/" .. name))
end)

T.test("weights: SRGEO_OFFLINE=1 names the URL to fetch and where to put it, and requests nothing", function()
  local d = cache("offline")
  local s = server()
  requests()
  local u = url("files", s.blob)
  local out, code = run(d, fetch_code(u), { offline = true })
  T.truthy(code ~= 0, out)
  T.truthy(out:find("SRGEO_OFFLINE=1 forbids downloading it: fetch " .. u .. " and put it at " .. d .. "/" .. s.blob,
    1, true), out)
  T.eq(#requests(), 0, "no request offline")
  -- a published name: the torchvision URL and the cache path, nothing requested from anywhere
  out, code = run(d, "srgeo.models.load('resnet18', {weights = 'imagenet'})", { offline = true })
  T.truthy(code ~= 0 and out:find("fetch https://download.pytorch.org/models/resnet18-f37072fd.pth and put it at "
    .. d .. "/resnet18-f37072fd.pth (its sha256 starts f37072fd)", 1, true), out)
  -- once the file is there, offline is no obstacle
  run(d, fetch_code(u))
  requests()
  out, code = run(d, fetch_code(u), { offline = true })
  T.eq(code, 0, out)
  T.eq(#requests(), 0)
end)

T.test("weights: 404, redirects (followed, at most 5, http/https only), a huge Content-Length", function()
  local d = cache("errors")
  local s = server()
  local out, code = run(d, fetch_code(url("files", "missing-0123abcd.pth")))
  T.truthy(code ~= 0 and out:find("/files/missing-0123abcd.pth: HTTP 404 Not Found", 1, true), out)
  T.truthy(not exists(d .. "/missing-0123abcd.pth") and not exists(d .. "/missing-0123abcd.pth.part"), "nothing kept")
  out, code = run(d, fetch_code(url("redirect/3", s.blob)))
  T.eq(code, 0, out)
  T.eq(sha256sum(d .. "/" .. s.blob), s.blob_hex, "followed three redirects")
  out, code = run(d, fetch_code(url("redirect/9", "x-0123abcd.pth")))
  T.truthy(code ~= 0 and out:find("Maximum (5) redirects followed (max_redirects)", 1, true), out)
  out, code = run(d, fetch_code(url("offsite", "y-0123abcd.pth")))
  T.truthy(code ~= 0 and out:find("(only http and https are fetched)", 1, true), out)
  out, code = run(d, fetch_code("ftp://127.0.0.1/z-0123abcd.pth"))
  T.truthy(code ~= 0 and out:find("is not an http:// or https:// URL", 1, true), out)
  out, code = run(d, fetch_code(url("huge", s.blob), "{name = 'huge.pth'}"))
  T.truthy(code ~= 0 and out:find("the server announces 10000000000000 bytes, more than the limit of 8589934592 "
    .. "(max_bytes); nothing was written", 1, true), out)
  T.truthy(not exists(d .. "/huge.pth") and not exists(d .. "/huge.pth.part"), "nothing kept")
end)

T.test("weights: models.load and ARCH:URL specs load a checkpoint from a URL or a published name via the cache", function()
  local d = cache("models")
  local s = server()
  local fix = srgeo.root .. "/tests/fixtures/pth/resnet18.pth"
  local name = add_file("resnet18", ".pth", T.read(fix))
  requests()
  local probe = "local x = srgeo.randn({1, 3, 32, 32}, 1) print(string.format('Y=%.17g', m:forward(x):sum()))"
  local u = url("files", name)
  local out, code = run(d, string.format("local m = srgeo.models.load('resnet18', {weights = %q}) %s", u, probe))
  T.eq(code, 0, out)
  local ref = run(d, string.format("local m = srgeo.models.load(%q) %s", fix, probe)):match("Y=(%S+)")
  T.eq(out:match("Y=(%S+)"), ref, "the same outputs as the fixture loaded from its path")
  T.eq(#requests(), 1)
  -- the command line's ARCH:URL: the cache file, labelled by its name
  out, code = run(d, string.format("local spec = require 'srgeo.spec' local m, info = spec.load_model(%q) "
    .. "print('LABEL=' .. info.label, 'PATH=' .. info.path)", "resnet18:" .. u))
  T.eq(code, 0, out)
  T.eq(out:match("LABEL=(%S+)"), name:gsub("%.pth$", ""))
  T.eq(out:match("PATH=(%S+)"), d .. "/" .. name)
  -- a URL alone: the architecture from the checkpoint's keys, as for a path
  out, code = run(d, string.format("local m = srgeo.models.load(%q) %s local spec = require 'srgeo.spec' "
    .. "local _, info = spec.load_model(%q) print('LABEL=' .. info.label, 'PATH=' .. info.path)", u, probe, u))
  T.eq(code, 0, out)
  T.eq(out:match("Y=(%S+)"), ref)
  T.eq(out:match("LABEL=(%S+)"), name:gsub("%.pth$", ""))
  T.eq(out:match("PATH=(%S+)"), d .. "/" .. name)
  T.eq(#requests(), 0, "served from the cache")
  -- "imagenet": torchvision's file name in the cache; its recorded digest
  -- (written here for the fixture's bytes, as a check would) stands for the real file's
  local tv = d .. "/resnet18-f37072fd.pth"
  os.execute("cp " .. q(fix) .. " " .. q(tv))
  out, code = run(d, string.format("srgeo.models.load('resnet18', {weights = 'imagenet'})"), { offline = true })
  T.truthy(code ~= 0 and out:find("sha256 mismatch: expected a digest starting f37072fd", 1, true),
    "the name's digest is checked on first use: " .. out)
  out, code = run(d, string.format("require('srgeo.util').write_atomic(%q, 'f37072fd' .. ('0'):rep(56) .. '\\n' .. "
    .. "require('srgeo.util').status_key(srgeo._stat(%q)) .. '\\n') local m = srgeo.models.load('resnet18', "
    .. "{weights = 'imagenet'}) %s local s = require 'srgeo.spec' print('LABEL=' .. s.parse_model('resnet18:imagenet').label)",
    tv .. ".sha256", tv, probe), { offline = true })
  T.eq(code, 0, out)
  T.eq(out:match("Y=(%S+)"), ref, "resnet18:imagenet is the cache's resnet18-f37072fd.pth")
  T.eq(out:match("LABEL=(%S+)"), "resnet18-imagenet")
  T.raises(function() srgeo.models.load("resnet18", { weights = "nonsense" }) end,
    "weights 'nonsense' are not a file, a URL, nor one of resnet18's weights names (imagenet, IMAGENET1K_V1)")
end)

T.test("weights: every published name belongs to a zoo architecture; torchvision's carry their digest prefix", function()
  local W = require "srgeo.weights"
  local n = 0
  for arch, list in pairs(W.table()) do
    T.truthy(srgeo.models.options(arch), arch .. " is a zoo architecture")
    T.eq(W.known(arch)[1], "imagenet")
    for _, w in ipairs(list) do
      n = n + 1
      T.truthy(w.url:match("^https://"), w.url)
      local name = w.name or W.cache_name(w.url)
      if w.url:find("download.pytorch.org", 1, true) then
        T.truthy(W.hash_prefix(name) and #W.hash_prefix(name) == 8, name .. " carries an 8-digit prefix")
        T.eq(name, w.url:match("([^/]+)$"), "torchvision's file name is the cache name")
      end
    end
  end
  T.eq(n, 24, "published weights listed")
  T.eq(W.hash_prefix("vgg16_features-amdegroot-88682ab5.pth"), "88682ab5", "after the last '-'")
  T.eq(W.hash_prefix("model.safetensors"), nil)
  T.eq(W.hash_prefix("resnet18-f3707.pth"), nil, "fewer than 8 digits are no digest")
end)

-- The table against torchvision itself where it is installed (python3-torchvision,
-- install-deps.sh --torch): every URL srgeo lists is the one torchvision publishes
-- under that name, and DEFAULT is srgeo's "imagenet".
T.test("weights: the torchvision URLs and DEFAULTs are torchvision's own", function()
  local W = require "srgeo.weights"
  local archs = {}
  for arch, list in pairs(W.table()) do
    if list[1].url:find("download.pytorch.org", 1, true) then archs[#archs + 1] = arch end
  end
  table.sort(archs)
  local py = "import sys, torchvision.models as M\n"
    .. "for n in sys.argv[1:]:\n"
    .. "    e = M.get_model_weights(n)\n"
    .. "    for w in e: print(n, w.name, w.url, int(w == e.DEFAULT))\n"
  local out, code = T.sh("/usr/bin/python3 -c " .. q(py) .. " " .. table.concat(archs, " "))
  if code ~= 0 then T.skip("torchvision is not installed (install-deps.sh --torch)") end
  local tv = {}
  for arch, tag, u, default in out:gmatch("(%S+) (%S+) (%S+) (%d)\n") do
    tv[arch .. " " .. tag] = u
    if default == "1" then tv[arch .. " imagenet"] = u end
  end
  local n = 0
  for _, arch in ipairs(archs) do
    for i, w in ipairs(W.table()[arch]) do
      T.eq(tv[arch .. " " .. w.tag], w.url, arch .. " " .. w.tag)
      if i == 1 then T.eq(tv[arch .. " imagenet"], w.url, arch .. "'s DEFAULT") end
      n = n + 1
    end
  end
  T.eq(n, 21)
end)
