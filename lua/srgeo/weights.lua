-- srgeo.weights: pretrained weights by name or URL, kept in a cache folder
-- and checked by SHA-256.
--
--   path = W.resolve("resnet18", "imagenet")      -- the cache file, downloaded when missing
--   path = W.resolve("resnet50", "IMAGENET1K_V2") -- a torchvision weights name
--   path = W.resolve("resnet18", "https://host/x/resnet18-f37072fd.pth")
--   path = W.fetch(url [, {name =, sha256 =, progress =}])
--   W.dir()        the cache folder: $SRGEO_CACHE, else $XDG_CACHE_HOME/srgeo, else ~/.cache/srgeo
--   W.known(arch)  the weight names srgeo knows for a zoo architecture ("imagenet" first), or {}
--   W.hash_prefix(name)   the SHA-256 prefix a torchvision-style name carries, or nil
--
-- The cache holds files by name.  A name of torchvision's form STEM-HEX.EXT
-- (resnet18-f37072fd.pth: HEX, 8 or more lower-case hex digits after the last
-- '-', is the start of the file's SHA-256, as torch.hub checks it) is
-- checked against its bytes on first use and after every download; a
-- mismatch is an error naming both digests.  A file downloaded from a URL
-- whose name carries no digest is kept under a name made of the URL's host
-- and path (huggingface.co_timm_..._model.safetensors), so two URLs never
-- share a file; its digest is recorded when it arrives.  Beside each file:
--
--   NAME.sha256   its digest and the file status (device, inode, size,
--                 mtime, ctime) it was computed for: a file unchanged since
--                 is not read again; anything that rewrote it is
--   NAME.part     an unfinished download (resumed by the next one)
--   NAME.lock     the download lock (flock; left in place)
--
-- Downloads (core/io/download.c, libcurl) are resumable, atomic (the file
-- appears by rename once checked), locked (a second process waits, then
-- uses the file), bounded (http/https only, 5 redirects, 8 GiB) and show
-- progress as srgeo's other reports do (redrawn on a terminal, else a line
-- every SRGEO_PROGRESS seconds).  SRGEO_OFFLINE=1 forbids them: a missing file is
-- an error saying which URL to fetch and where to put it.
local srgeo = require "srgeo"
local util = require "srgeo.util"

local W = {}

local TV = "https://download.pytorch.org/models/"
local HF = "https://huggingface.co/timm/"

-- torchvision's published weights for the zoo's architectures (torchvision
-- 0.14's Weights enums: the URL, whose file name carries the SHA-256
-- prefix), DEFAULT first; timm's default pretrained tag of the three timm
-- ViTs, from the Hugging Face hub (no digest published in the name).
local function tv(...)
  local e = {}
  for i, s in ipairs { ... } do
    local tag, file = s:match("^([%w_]+)=(.+)$")
    e[i] = { tag = tag, url = TV .. file }
  end
  return e
end
local function timm(model, tag)
  return { { tag = tag, url = HF .. model .. "." .. tag .. "/resolve/main/model.safetensors",
             name = model .. "." .. tag .. ".safetensors" } }
end
local KNOWN = {
  resnet18 = tv("IMAGENET1K_V1=resnet18-f37072fd.pth"),
  resnet34 = tv("IMAGENET1K_V1=resnet34-b627a593.pth"),
  resnet50 = tv("IMAGENET1K_V2=resnet50-11ad3fa6.pth", "IMAGENET1K_V1=resnet50-0676ba61.pth"),
  resnet101 = tv("IMAGENET1K_V2=resnet101-cd907fc2.pth", "IMAGENET1K_V1=resnet101-63fe2227.pth"),
  wide_resnet50_2 = tv("IMAGENET1K_V2=wide_resnet50_2-9ba9bcbe.pth", "IMAGENET1K_V1=wide_resnet50_2-95faca4d.pth"),
  vgg11 = tv("IMAGENET1K_V1=vgg11-8a719046.pth"),
  vgg11_bn = tv("IMAGENET1K_V1=vgg11_bn-6002323d.pth"),
  vgg13 = tv("IMAGENET1K_V1=vgg13-19584684.pth"),
  vgg13_bn = tv("IMAGENET1K_V1=vgg13_bn-abd245e5.pth"),
  vgg16 = tv("IMAGENET1K_V1=vgg16-397923af.pth"),
  vgg16_bn = tv("IMAGENET1K_V1=vgg16_bn-6c64b313.pth"),
  vgg19 = tv("IMAGENET1K_V1=vgg19-dcbb9e9d.pth"),
  vgg19_bn = tv("IMAGENET1K_V1=vgg19_bn-c79401a0.pth"),
  vit_b_16 = tv("IMAGENET1K_V1=vit_b_16-c867db91.pth", "IMAGENET1K_SWAG_E2E_V1=vit_b_16_swag-9ac1b537.pth",
                "IMAGENET1K_SWAG_LINEAR_V1=vit_b_16_lc_swag-4e70ced5.pth"),
  convnext_tiny = tv("IMAGENET1K_V1=convnext_tiny-983f1562.pth"),
  convnext_small = tv("IMAGENET1K_V1=convnext_small-0c510722.pth"),
  vit_s_16 = timm("vit_small_patch16_224", "augreg_in21k_ft_in1k"),
  vit_ti_16 = timm("vit_tiny_patch16_224", "augreg_in21k_ft_in1k"),
  vit_b_16_timm = timm("vit_base_patch16_224", "augreg2_in21k_ft_in1k"),
}

local fail = function(fmt, ...) util.raise { msg = string.format("srgeo.weights: " .. fmt, ...) } end

--- The cache folder.
function W.dir()
  local d = os.getenv("SRGEO_CACHE")
  if d and d ~= "" then return d end
  local x = os.getenv("XDG_CACHE_HOME")
  if x and x ~= "" then return x .. "/srgeo" end
  return (os.getenv("HOME") or ".") .. "/.cache/srgeo"
end

--- The names srgeo knows for arch's weights: "imagenet" (the default: torchvision's
--- DEFAULT, timm's default tag) and each source's own names.
function W.known(arch)
  local e = KNOWN[arch]
  if not e then return {} end
  local out = { "imagenet" }
  for _, w in ipairs(e) do out[#out + 1] = w.tag end
  return out
end

--- {arch = {{tag =, url =}, ...}} for listings.
function W.table()
  local out = {}
  for arch, e in pairs(KNOWN) do out[arch] = util.copy(e) end
  return out
end

--- The SHA-256 prefix in a torchvision-style file name (STEM-HEX.EXT), or nil.
function W.hash_prefix(name)
  local hex = name:match("%-([0-9a-f]+)%.[^-]*$")
  if hex and #hex >= 8 and #hex <= 64 then return hex end
end

--- Whether s is an http:// or https:// URL.
function W.is_url(s) return type(s) == "string" and s:match("^[hH][tT][tT][pP][sS]?://") ~= nil end
local is_url = W.is_url

--- An error of this module as a reason for the caller's own message (the
--- "srgeo.weights: " prefix dropped).
function W.reason(err) return (tostring(err):gsub("^srgeo%.weights: ", "")) end

--- The cache file name of a URL: its last path component when that carries
--- a digest, else host and path joined by '_'.
function W.cache_name(url)
  local rest = url:gsub("^%a+://", ""):gsub("[?#].*$", "")
  local base = rest:match("([^/]+)$") or ""
  if W.hash_prefix(base) and base:match("^[%w_][%w%.%-_]*$") then return base end
  local name = rest:gsub("^[^/]*@", ""):gsub("[^%w%.%-_]+", "_"):gsub("^[_.]+", "")
  if name == "" then fail("%s names no file", url) end
  if #name > 200 then name = name:sub(1, 60) .. "_" .. name:sub(-139) end
  return name
end

local status_key = util.status_key

local function read_record(path)
  local s = util.try_read(path .. ".sha256")
  if not s then return nil end
  local hex, status = s:match("^(%x+)\n([^\n]*)\n?$")
  if hex and #hex == 64 then return { hex = hex, status = status } end
end

-- Record a file's digest for the status it was computed on; a cache folder
-- one may not write to only costs a re-read next time.
local function write_record(path, hex, st)
  pcall(util.write_atomic, path .. ".sha256", hex .. "\n" .. status_key(st) .. "\n")
end

--- The SHA-256 of a cache file (read once per change of the file), checked
--- against want (a prefix) when given.
function W.verify(path, want, url)
  local st = srgeo._stat(path)
  if not st then fail("%s: no such file", path) end
  local rec = read_record(path)
  local hex
  if rec and rec.status == status_key(st) then
    hex = rec.hex
  else
    local h, st2 = srgeo._file_hash(path, "sha256")
    hex = h
    write_record(path, hex, st2)
  end
  if want and hex:sub(1, #want) ~= want:lower() then
    fail("%s: sha256 mismatch: expected a digest starting %s, got %s; remove the file%s", path, want, hex,
      url and " (it is downloaded again from " .. url .. ")" or "")
  end
  return hex
end

local function offline() return os.getenv("SRGEO_OFFLINE") == "1" end

--- Download url into the cache (or find it there) and return its path.
--- opts: name (the cache file name; default W.cache_name(url)), sha256 (an
--- expected digest or prefix; default the name's), progress (nil: redrawn on a terminal,
--- else a line every SRGEO_PROGRESS seconds, none for a short download; false: none; true:
--- a closing line always);
--- the download's limits max_bytes (8 GiB), max_redirects (5), connect_timeout (30 s),
--- stall_timeout (60 s without a byte).
function W.fetch(url, opts)
  opts = opts or {}
  if not is_url(url) then fail("'%s' is not an http:// or https:// URL", tostring(url)) end
  local name = opts.name or W.cache_name(url)
  local want = opts.sha256 or W.hash_prefix(name)
  local dir = W.dir()
  local path = dir .. "/" .. name
  if util.exists(path) then
    W.verify(path, want, url)
    return path
  end
  if offline() then
    fail("%s is not in the weights cache and SRGEO_OFFLINE=1 forbids downloading it: fetch %s and put it at %s%s",
      name, url, path, want and " (its sha256 starts " .. want .. ")" or "")
  end
  util.mkdir(dir)
  -- progress as srgeo's other reports: redrawn on a terminal, else a line
  -- every SRGEO_PROGRESS seconds (default 10; 0: none); true: a closing line always
  local progress = opts.progress == false and 0 or opts.progress == true and 2 or 1
  if srgeo._mpi.rank() ~= 0 then progress = 0 end -- under mpirun rank 0 reports (the others wait on the lock)
  local every = tonumber(os.getenv("SRGEO_PROGRESS") or "") or 10
  local ok, hex = pcall(srgeo._download, url, path, { sha256 = want, progress = progress,
    progress_every = math.max(every, 0), max_bytes = opts.max_bytes,
    max_redirects = opts.max_redirects, connect_timeout = opts.connect_timeout, stall_timeout = opts.stall_timeout })
  if not ok then fail("%s", tostring(hex):gsub("^[^:]*:%d+: ", "")) end
  local st = srgeo._stat(path)
  if st then write_record(path, hex, st) end
  return path
end

--- The local file of arch's weights ref: a file that exists (as it is), a
--- URL, a name W.known(arch) lists, or a file name in the cache.
function W.resolve(arch, ref, opts)
  if type(ref) ~= "string" or ref == "" then fail("weights must be a file name, a URL or a weights name") end
  if util.exists(ref) then return ref end
  if is_url(ref) then return W.fetch(ref, opts) end
  local e = KNOWN[arch]
  if e then
    for i, w in ipairs(e) do
      if w.tag == ref or (i == 1 and ref == "imagenet") then
        local o = util.copy(opts or {})
        o.name = w.name
        return W.fetch(w.url, o)
      end
    end
  end
  if not ref:find("/", 1, true) then
    local path = W.dir() .. "/" .. ref
    if util.exists(path) then
      W.verify(path, W.hash_prefix(ref))
      return path
    end
  end
  local names = W.known(arch)
  fail("weights '%s' are not a file, a URL%s, nor a file in the weights cache %s", ref,
    #names > 0 and ", nor one of " .. arch .. "'s weights names (" .. table.concat(names, ", ") .. ")"
      or " (srgeo knows no published weights for " .. arch .. ")", W.dir())
end

--- Whether ref names weights W.resolve finds without a local path (a URL
--- or a known name), i.e. a model spec ARCH:REF that is not a file.
function W.is_ref(arch, ref)
  if is_url(ref) then return true end
  for _, n in ipairs(W.known(arch)) do if n == ref then return true end end
  return false
end

return W
