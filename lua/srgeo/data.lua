-- srgeo.data: datasets as small Lua objects over C readers.
--
--   ds = srgeo.data.fashion_mnist{split = "test"}        -- 10000 x (1,28,28)
--   ds = srgeo.data.cifar10{root = "~/data", split = "train"}
--   ds = srgeo.data.folder("photos/", {size = 224})      -- ImageFolder or a flat folder
--   ds = srgeo.data.images{"a.jpg", "b.png"}             -- a list of files
--   ds = srgeo.data.noise{n = 1000, shape = {3, 32, 32}, seed = 1, kind = "uniform"}
--   ds = srgeo.data.tensor(X, labels)                     -- a (N,C,H,W) tensor
--
--   #ds ; x, label = ds:get(i) ; X, labels = ds:batch{i, j, ...} or ds:batch(first, last)
--   ds.labels (0-based class ids) ; ds.classes (names: ds.classes[label + 1]) ; ds.shape {C,H,W}
--   ds:sample(n, seed)       seeded draw without replacement (a prefix of the n+1 draw)
--   ds:subset{i, j, ...}     ds:random_labels(seed)   ds:blurred(sigma)
--   for X, labels, idx in ds:batches(128 [, {shuffle = seed}]) do ... end
--   sets = srgeo.data.eval_set{n = 100, seed = 0}        -- test/train draws, blurred copies, noise
--
-- Indices are 1-based (Lua); labels are 0-based class ids because they index
-- classifier outputs (as in torchvision and srgeo's trainer).  Pixels are raw
-- [0, 1] float32 (normalisation belongs to the model).  IDX and CIFAR sets
-- stay uint8 in memory and are converted per batch; folders decode per batch
-- (in parallel, libvips); noise sets generate per batch from (seed, index).
local srgeo = require "srgeo"
local util = require "srgeo.util"
local C = srgeo._data

local D = {}
-- The low-level readers, for scripts that want them: D._idx_images(path) ...
for k, v in pairs(C) do D["_" .. k] = v end

local Dataset = {}
Dataset.__index = Dataset
D.Dataset = Dataset

local function fail(fn, fmt, ...) error("srgeo.data." .. fn .. ": " .. string.format(fmt, ...), 3) end

local function check_opts(fn, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(fn, "options must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      fail(fn, "unknown option '%s' (known: %s)", tostring(k), table.concat(names, ", "))
    end
  end
  return opts
end

local function is_int(v) return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v)) end

-- A new dataset: fields n, labels, classes, shape, name and a fetch(idx)
-- function returning the (b,C,H,W) tensor of its items idx (1-based).
local function new(t)
  assert(t.n and t.fetch)
  t.labels = t.labels or {}
  t.classes = t.classes or {}
  return setmetatable(t, Dataset)
end
D.new = new

function Dataset.__len(self) return self.n end

function Dataset.__tostring(self)
  local shape = self.shape and table.concat(self.shape, "x") or "?"
  return string.format("dataset(%s: %d items of %s, %d classes)", self.name or "?", self.n, shape,
    #self.classes)
end

local function check_index(self, fn, i)
  if not is_int(i) or i < 1 or i > self.n then
    error(string.format("dataset:%s: index %s out of range 1..%d", fn, tostring(i), self.n), 3)
  end
  return math.tointeger(i)
end

--- x, label = ds:get(i): item i as a (1, C, H, W) tensor.
function Dataset:get(i)
  i = check_index(self, "get", i)
  return self.fetch({ i }), self.labels[i]
end

--- X, labels = ds:batch(indices) or ds:batch(first, last): a (B,C,H,W)
--- tensor and the list of their labels.
function Dataset:batch(a, b)
  local idx
  if type(a) == "table" then
    idx = a
  elseif a ~= nil then
    local first, last = check_index(self, "batch", a), check_index(self, "batch", b or self.n)
    idx = {}
    for i = first, last do idx[#idx + 1] = i end
  else
    error("dataset:batch: give a list of indices or first, last", 2)
  end
  if #idx == 0 then error("dataset:batch: empty list of indices", 2) end
  local labels = {}
  for k, i in ipairs(idx) do labels[k] = self.labels[check_index(self, "batch", i)] end
  return self.fetch(idx), labels
end

--- for X, labels, idx in ds:batches(size [, {shuffle = seed, drop_last = false}]) do
function Dataset:batches(size, opts)
  opts = check_opts("batches", opts, { shuffle = true, drop_last = true })
  if not is_int(size) or size < 1 then error("dataset:batches: batch size must be a positive integer", 2) end
  local order
  if opts.shuffle then order = C.permutation(self.n, self.n, opts.shuffle) end
  local at = 1
  return function()
    local last = math.min(at + size - 1, self.n)
    if at > self.n or (opts.drop_last and last - at + 1 < size) then return nil end
    local idx = {}
    for i = at, last do idx[#idx + 1] = order and order[i] or i end
    at = last + 1
    local X, labels = self:batch(idx)
    return X, labels, idx
  end
end

--- A view of items idx (a list of indices into ds).
function Dataset:subset(idx, name)
  if type(idx) ~= "table" then error("dataset:subset: indices must be a list", 2) end
  local map, labels = {}, {}
  for k, i in ipairs(idx) do
    map[k] = check_index(self, "subset", i)
    labels[k] = self.labels[map[k]]
  end
  local parent = self
  return new {
    n = #map, labels = labels, classes = self.classes, shape = self.shape, parent = self, indices = map,
    name = name or ((self.name or "?") .. "[subset]"),
    fetch = function(ix)
      local p = {}
      for k, i in ipairs(ix) do p[k] = map[i] end
      return parent.fetch(p)
    end,
  }
end

--- ds:sample(n, seed): n distinct items drawn uniformly with a seeded
--- Fisher-Yates; the same (n, seed) gives the same items on any machine, and
--- sample(n, s) is the first n of sample(n + 1, s).
function Dataset:sample(n, seed)
  if not is_int(n) or n < 0 or n > self.n then
    error(string.format("dataset:sample: cannot draw %s of %d items without replacement", tostring(n), self.n), 2)
  end
  seed = seed or srgeo.seed()
  local idx = C.permutation(self.n, math.tointeger(n), seed)
  local s = self:subset(idx, string.format("%s[sample %d, seed %s]", self.name or "?", n, tostring(seed)))
  s.seed = seed
  return s
end

--- ds:random_labels(seed): the same images with the labels permuted across
--- the set (so class counts are preserved), seeded.
function Dataset:random_labels(seed)
  seed = seed or srgeo.seed()
  local perm = C.permutation(self.n, self.n, seed)
  local labels = {}
  for i = 1, self.n do labels[i] = self.labels[perm[i]] end
  local parent = self
  return new {
    n = self.n, labels = labels, classes = self.classes, shape = self.shape, parent = self,
    name = string.format("%s[random labels, seed %s]", self.name or "?", tostring(seed)),
    fetch = function(ix) return parent.fetch(ix) end,
  }
end

--- ds:blurred(sigma [, ksize]): every image Gaussian-blurred (srgeo.image.blur:
--- torchvision GaussianBlur with reflect padding, kernel 2*ceil(3 sigma)+1).
function Dataset:blurred(sigma, ksize)
  if type(sigma) ~= "number" or sigma < 0 then error("dataset:blurred: sigma must be a number >= 0", 2) end
  local parent = self
  local opts = ksize and { ksize = ksize } or nil
  return new {
    n = self.n, labels = self.labels, classes = self.classes, shape = self.shape, parent = self,
    sigma = sigma, name = string.format("%s[blur %g]", self.name or "?", sigma),
    fetch = function(ix) return srgeo.image.blur(parent.fetch(ix), sigma, opts) end,
  }
end

--- Class counts {[label] = count}.
function Dataset:class_counts()
  local c = {}
  for i = 1, self.n do
    local l = self.labels[i]
    c[l] = (c[l] or 0) + 1
  end
  return c
end

--- The whole set as one tensor (careful with big sets) and its labels.
function Dataset:all() return self:batch(1, self.n) end

-- ---------------------------------------------------------------------------
-- uint8 stores (IDX, CIFAR) are cached by path, size and mtime: a script that
-- builds its train set and several evaluation sets reads each file once, and
-- a rewritten file is read again.

local cache = setmetatable({}, { __mode = "v" })

-- Returns the cache entry {values...}: a dataset keeps its entry alive (the
-- cache holds it weakly, so dropping every dataset frees the memory).
local function file_key(paths)
  local parts = {}
  for _, p in ipairs(paths) do
    local st, err = srgeo._stat(p)
    parts[#parts + 1] = st and string.format("%s:%d:%d.%09d", p, st.size, st.mtime, st.mtime_nsec) or p .. ":" .. err
  end
  return table.concat(parts, "|")
end

local function cached(key, load)
  local v = cache[key]
  if v == nil then
    v = { load() }
    cache[key] = v
  end
  return v
end

local function isdir(path)
  local st = srgeo._stat(path)
  return st ~= nil and st.dir
end

local function expand(path)
  if path and path:sub(1, 2) == "~/" then return (os.getenv("HOME") or "") .. path:sub(2) end
  return path
end

local function store_dataset(store, labels, classes, name)
  local n, c, h, w = store:size()
  if labels and #labels ~= n then
    error(string.format("srgeo.data: %s has %d images but %d labels", name, n, #labels), 3)
  end
  return new {
    n = n, labels = labels, classes = classes, shape = { c, h, w }, store = store, name = name,
    fetch = function(ix) return store:gather(ix) end,
  }
end

-- ---------------------------------------------------------------------------
-- Fashion-MNIST / MNIST (IDX)

D.FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist"
D.FASHION_MNIST_CLASSES = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
  "Sneaker", "Bag", "Ankle boot" }

local function find_idx(root, base)
  for _, p in ipairs { root .. "/" .. base .. ".gz", root .. "/" .. base } do
    if util.exists(p) then return p end
  end
end

--- srgeo.data.idx{images = path, labels = path [, classes = {...}, name = ...]}
function D.idx(opts)
  opts = check_opts("idx", opts, { images = true, labels = true, classes = true, name = true })
  if type(opts.images) ~= "string" then fail("idx", "images = path is required") end
  local se = cached("idx:" .. file_key { opts.images }, function() return C.idx_images(opts.images) end)
  local store, le = se[1], nil
  local labels
  if opts.labels then
    le = cached("idxl:" .. file_key { opts.labels }, function() return C.idx_labels(opts.labels) end)
    labels = le[1]
  else
    labels = {}
    for i = 1, #store do labels[i] = 0 end
  end
  local classes = opts.classes
  if not classes then
    local mx = -1
    for _, l in ipairs(labels) do if l > mx then mx = l end end
    classes = {}
    for k = 0, mx do classes[k + 1] = tostring(k) end
  end
  local ds = store_dataset(store, labels, classes, opts.name or opts.images)
  ds._entries = { se, le }
  return ds
end

--- srgeo.data.fashion_mnist{split = "train" | "test", root = dir}: the
--- Debian package dataset-fashion-mnist's files by default.
function D.fashion_mnist(opts)
  opts = check_opts("fashion_mnist", opts, { split = true, root = true })
  local split = opts.split or "train"
  if split ~= "train" and split ~= "test" then fail("fashion_mnist", "split must be \"train\" or \"test\", got %s", tostring(split)) end
  local root = expand(opts.root or os.getenv("SRGEO_FASHION_MNIST") or D.FASHION_MNIST_ROOT)
  local prefix = split == "train" and "train" or "t10k"
  local im = find_idx(root, prefix .. "-images-idx3-ubyte")
  local lb = find_idx(root, prefix .. "-labels-idx1-ubyte")
  if not im or not lb then
    fail("fashion_mnist", "cannot find %s-images-idx3-ubyte[.gz] and %s-labels-idx1-ubyte[.gz] in %s "
      .. "(install the Debian package dataset-fashion-mnist with `make deps`, or %s)", prefix, prefix, root,
      util.option_hint("root", "DIR", "SRGEO_FASHION_MNIST"))
  end
  return D.idx { images = im, labels = lb, classes = D.FASHION_MNIST_CLASSES, name = "fashion_mnist/" .. split }
end

-- ---------------------------------------------------------------------------
-- CIFAR-10 binary

D.CIFAR10_CLASSES = { "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck" }

local function cifar_dir(root)
  local cands = {}
  if root then
    cands = { root .. "/cifar-10-batches-bin", root }
  else
    local env = os.getenv("SRGEO_CIFAR10")
    if env then cands[#cands + 1] = expand(env) end
    for _, r in ipairs { "data", expand("~/data"), expand("~/.cache/srgeo"), "/usr/share/datasets/cifar10" } do
      cands[#cands + 1] = r .. "/cifar-10-batches-bin"
      cands[#cands + 1] = r
    end
  end
  for _, d in ipairs(cands) do
    if util.exists(d .. "/test_batch.bin") or util.exists(d .. "/data_batch_1.bin") then return d end
  end
  return nil, table.concat(cands, ", ")
end

--- srgeo.data.cifar10{root = dir, split = "train" | "test"}: the binary
--- version (cifar-10-binary.tar.gz, unpacked).  root may be the
--- cifar-10-batches-bin directory or its parent; default search: $SRGEO_CIFAR10,
--- ./data, ~/data, ~/.cache/srgeo.
function D.cifar10(opts)
  opts = check_opts("cifar10", opts, { split = true, root = true })
  local split = opts.split or "train"
  if split ~= "train" and split ~= "test" then fail("cifar10", "split must be \"train\" or \"test\", got %s", tostring(split)) end
  local dir, tried = cifar_dir(expand(opts.root))
  if not dir then
    fail("cifar10", "no CIFAR-10 binary batches found (looked in %s); %s", tried or opts.root,
      util.option_hint("root", "DIR", "SRGEO_CIFAR10"))
  end
  local files = {}
  if split == "train" then
    for k = 1, 5 do files[k] = dir .. "/data_batch_" .. k .. ".bin" end
  else
    files[1] = dir .. "/test_batch.bin"
  end
  for _, f in ipairs(files) do
    if not util.exists(f) then fail("cifar10", "%s is missing (the %s split needs %s)", f, split, table.concat(files, ", ")) end
  end
  local entry = cached("cifar:" .. file_key(files), function() return C.cifar(files) end)
  local store, labels = entry[1], entry[2]
  local classes = D.CIFAR10_CLASSES
  local meta = io.open(dir .. "/batches.meta.txt")
  if meta then
    local names = {}
    for line in meta:lines() do
      line = line:gsub("%s+$", "")
      if line ~= "" then names[#names + 1] = line end
    end
    meta:close()
    if #names == 10 then classes = names end
  end
  local ds = store_dataset(store, labels, classes, "cifar10/" .. split)
  ds._entries = { entry }
  return ds
end

-- ---------------------------------------------------------------------------
-- Image files: folders (ImageFolder layout or flat) and lists

-- torchvision's IMG_EXTENSIONS plus gif; matched case-insensitively.
D.IMAGE_EXTENSIONS = { "jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp", "gif" }

local function has_image_ext(name, exts)
  local e = name:match("%.([^./]+)$")
  if not e then return false end
  e = e:lower()
  for _, x in ipairs(exts) do if x == e then return true end end
  return false
end

-- Image files under dir (recursively when deep), ordered like sorted(os.walk):
-- directories by path, files by name within each.  Hidden entries are skipped.
local function walk(dir, deep, exts, out)
  out = out or {}
  local dirs = { dir }
  local lists = {}
  local k = 1
  while dirs[k] do
    local d = dirs[k]
    local files = {}
    for _, e in ipairs(C.listdir(d)) do
      if e.name:sub(1, 1) ~= "." then
        local p = d .. "/" .. e.name
        if e.dir then
          if deep then dirs[#dirs + 1] = p end
        elseif has_image_ext(e.name, exts) then
          files[#files + 1] = p
        end
      end
    end
    lists[#lists + 1] = { dir = d, files = files }
    k = k + 1
  end
  table.sort(lists, function(a, b) return a.dir < b.dir end)
  for _, l in ipairs(lists) do
    for _, f in ipairs(l.files) do out[#out + 1] = f end
  end
  return out
end

local LOAD_KEYS = { size = true, resize = true, channels = true, max_pixels = true }

-- Validate files, keep the good ones, report the bad ones.
local function screen(fn, paths, labels, opts)
  local check = opts.check or "full"
  if check ~= "full" and check ~= "header" and check ~= "none" then
    fail(fn, "check must be \"full\", \"header\" or \"none\", got %s", tostring(check))
  end
  local on_error = opts.on_error or "skip"
  if on_error ~= "skip" and on_error ~= "fail" then fail(fn, "on_error must be \"skip\" or \"fail\"") end
  local good, glabels, skipped = {}, {}, {}
  for i, p in ipairs(paths) do
    local ok, err = true, nil
    if check == "full" then
      ok, err = srgeo.image.check(p)
    elseif check == "header" then
      ok, err = pcall(srgeo.image.info, p)
      if not ok then err = tostring(err) end
    end
    if ok then
      good[#good + 1] = p
      glabels[#glabels + 1] = labels and labels[i] or 0
    elseif on_error == "fail" then
      error("srgeo.data." .. fn .. ": " .. err, 3)
    else
      skipped[#skipped + 1] = { path = p, error = err }
    end
  end
  if #skipped > 0 and not opts.quiet then
    io.stderr:write(string.format("srgeo.data.%s: skipped %d of %d files (unreadable images), first: %s\n",
      fn, #skipped, #paths, skipped[1].error))
  end
  return good, glabels, skipped
end

local function files_dataset(fn, paths, labels, classes, opts, name)
  local good, glabels, skipped = screen(fn, paths, labels, opts)
  if #good == 0 then fail(fn, "no readable images in %s (%d skipped)", name, #skipped) end
  local lopts = {}
  for k in pairs(LOAD_KEYS) do lopts[k] = opts[k] end
  local shape
  if opts.size ~= false and opts.size ~= 0 then
    local s = opts.size or 224
    local h, w = s, s
    if type(s) == "table" then h, w = s[1], s[2] end
    local ch = opts.channels
    if ch == nil then ch = 3 end
    if ch ~= false and ch ~= 0 then shape = { ch, h, w } end
  end
  return new {
    n = #good, labels = glabels, classes = classes, shape = shape, paths = good, skipped = skipped,
    n_skipped = #skipped, name = name, load_opts = lopts,
    fetch = function(ix)
      local ps = {}
      for k, i in ipairs(ix) do ps[k] = good[i] end
      return (srgeo.image.load_batch(ps, lopts))
    end,
  }
end

local FOLDER_KEYS = { size = true, resize = true, channels = true, max_pixels = true, recursive = true, on_error = true,
  check = true, extensions = true, classes = true, quiet = true }

--- srgeo.data.folder(dir, opts): an ImageFolder tree (one sub-folder per
--- class, class ids in sorted folder order, files found recursively inside a
--- class folder) when dir has sub-folders, else a flat folder of one class.
--- opts: size/resize/channels/max_pixels (srgeo.image.load; default 224
--- crops of 256 resizes, RGB); recursive (flat folders: also walk sub-folders);
--- classes = false (treat a tree as flat); check = "full" (decode each file
--- once at 1/8 scale: truncated files are caught now) | "header" | "none";
--- on_error = "skip" (default: bad files are reported on stderr, counted in
--- ds.n_skipped and listed in ds.skipped) | "fail"; extensions; quiet.
function D.folder(dir, opts)
  opts = check_opts("folder", opts, FOLDER_KEYS)
  if type(dir) ~= "string" then fail("folder", "dir must be a path") end
  dir = expand(dir):gsub("/+$", "")
  local ok, entries = pcall(C.listdir, dir)
  if not ok then fail("folder", "%s", entries) end
  local exts = opts.extensions or D.IMAGE_EXTENSIONS
  local subdirs = {}
  for _, e in ipairs(entries) do
    if e.dir and e.name:sub(1, 1) ~= "." then subdirs[#subdirs + 1] = e.name end
  end
  local paths, labels, classes = {}, {}, {}
  if #subdirs > 0 and opts.classes ~= false then
    for k, cname in ipairs(subdirs) do
      classes[k] = cname
      local before = #paths
      walk(dir .. "/" .. cname, opts.recursive ~= false, exts, paths)
      for i = before + 1, #paths do labels[i] = k - 1 end
    end
  else
    walk(dir, opts.recursive or (opts.classes == false), exts, paths)
    classes = { dir:match("([^/]+)$") or dir }
    for i = 1, #paths do labels[i] = 0 end
  end
  if #paths == 0 then fail("folder", "no image files (%s) in %s", table.concat(exts, ", "), dir) end
  return files_dataset("folder", paths, labels, classes, opts, "folder:" .. dir)
end

--- srgeo.data.images(paths [, opts]): a list of image files as a dataset
--- (opts as for folder, plus labels = {...} and classes = {...}).
function D.images(paths, opts)
  local keys = { labels = true }
  for k in pairs(FOLDER_KEYS) do keys[k] = true end
  opts = check_opts("images", opts, keys)
  if type(paths) ~= "table" or #paths == 0 then fail("images", "need a non-empty list of paths") end
  local labels = opts.labels
  if labels and #labels ~= #paths then fail("images", "%d labels for %d paths", #labels, #paths) end
  local classes = opts.classes
  if type(classes) ~= "table" then
    classes = {}
    local mx = 0
    for _, l in ipairs(labels or {}) do if l > mx then mx = l end end
    for k = 0, mx do classes[k + 1] = tostring(k) end
  end
  return files_dataset("images", paths, labels, classes, opts, "images")
end

-- ---------------------------------------------------------------------------
-- Synthetic sets

local NOISE_KEYS = { n = true, shape = true, seed = true, kind = true, classes = true, mean = true, std = true,
  alpha = true, rmin = true, rmax = true }

--- srgeo.data.noise{n =, shape = {3, 32, 32}, seed =, kind = "uniform" |
--- "gaussian" | "pink" | "dead_leaves", classes = 10, mean, std, alpha,
--- rmin, rmax}: item i is a pure function of (kind, seed, i) (core/data/synth.h),
--- so subsets, batch order and threads never change pixels; the uniform kind
--- is exactly the trainer's noise data set (augment.h).  Labels: i.i.d.
--- uniform over `classes`, seeded.
function D.noise(opts)
  opts = check_opts("noise", opts, NOISE_KEYS)
  local n = opts.n
  if not is_int(n) or n < 1 then fail("noise", "n must be a positive integer") end
  local shape = opts.shape or { 3, 32, 32 }
  if type(shape) ~= "table" or #shape ~= 3 then fail("noise", "shape must be {C, H, W}") end
  local seed = opts.seed or srgeo.seed()
  local kind = opts.kind or "uniform"
  local k = opts.classes or 10
  local params = { mean = opts.mean, std = opts.std, alpha = opts.alpha, rmin = opts.rmin, rmax = opts.rmax }
  C.synth(kind, seed, { 1 }, shape, params) -- validate now, not at the first batch
  local classes = {}
  for c = 0, k - 1 do classes[c + 1] = tostring(c) end
  return new {
    n = math.tointeger(n), labels = C.synth_labels(seed, n, k), classes = classes, shape = shape,
    seed = seed, kind = kind, name = string.format("noise/%s(seed %s)", kind, tostring(seed)),
    fetch = function(ix) return C.synth(kind, seed, ix, shape, params) end,
  }
end

--- srgeo.data.tensor(X [, labels [, classes]]): a (N, C, H, W) tensor as a dataset.
function D.tensor(X, labels, classes)
  local shape = X:shape()
  if #shape < 2 then fail("tensor", "need a (N, ...) tensor") end
  local n = shape[1]
  if labels == nil then
    labels = {}
    for i = 1, n do labels[i] = 0 end
  end
  if #labels ~= n then fail("tensor", "%d labels for %d rows", #labels, n) end
  if not classes then
    local mx = 0
    for _, l in ipairs(labels) do if l > mx then mx = l end end
    classes = {}
    for k = 0, mx do classes[k + 1] = tostring(k) end
  end
  local item = {}
  for d = 2, #shape do item[d - 1] = shape[d] end
  return new {
    n = n, labels = labels, classes = classes, shape = item, name = "tensor", tensor = X,
    fetch = function(ix) return C.gather(X, ix) end,
  }
end

-- ---------------------------------------------------------------------------
-- Evaluation sets

--- srgeo.data.eval_set{data = "fashion_mnist" | {train = ds, test = ds},
--- n = 100, seed = 0, blur = {1, 2}, noise = true}: the published evaluation
--- sets at any resolution, one call.  Returns a table of datasets keyed by
--- name, and .order listing them: "test" and "train" (seeded n-draws),
--- "test_blur1", "test_blur2" (the test draw blurred), "uniform" (n i.i.d.
--- uniform-noise images of the test shape, seeded).  For a model trained on
--- a noise set, pass data = {train = that set, test = ...}: "train" is then
--- the regenerated training inputs (same seed stream).
function D.eval_set(opts)
  opts = check_opts("eval_set", opts, { data = true, n = true, seed = true, blur = true, noise = true })
  local n, seed = opts.n or 100, opts.seed or 0
  local data = opts.data or "fashion_mnist"
  local train, test
  if data == "fashion_mnist" then
    train, test = D.fashion_mnist { split = "train" }, D.fashion_mnist { split = "test" }
  elseif data == "cifar10" then
    train, test = D.cifar10 { split = "train" }, D.cifar10 { split = "test" }
  elseif type(data) == "table" and getmetatable(data) == Dataset then
    test = data
  elseif type(data) == "table" then
    train, test = data.train, data.test
  else
    fail("eval_set", "data must be \"fashion_mnist\", \"cifar10\", a dataset or {train =, test =}")
  end
  local out, order = {}, {}
  local function add(name, ds) out[name] = ds; order[#order + 1] = name end
  if test then add("test", test:sample(math.min(n, test.n), seed)) end
  if train then add("train", train:sample(math.min(n, train.n), seed)) end
  local base = out.test or out.train
  for _, s in ipairs(opts.blur or { 1, 2 }) do
    add(string.format("%s_blur%g", out.test and "test" or "train", s), base:blurred(s))
  end
  if opts.noise ~= false then
    add("uniform", D.noise { n = n, shape = base.shape, seed = seed, kind = "uniform",
      classes = math.max(1, #base.classes) })
  end
  out.order = order
  return out
end

-- ---------------------------------------------------------------------------
-- Sample images installed by Debian packages (found at run time)

D.SAMPLE_DIRS = {
  "/usr/lib/python3/dist-packages/skimage/data", -- python3-skimage
  "/usr/share/backgrounds",                    -- gnome-backgrounds, desktop-base
  "/usr/share/wallpapers",
  "/usr/share/images/desktop-base",
  "/usr/share/pixmaps",
}

--- srgeo.data.sample_images{min_size = 64, max = 100}: paths of readable
--- images (shorter side >= min_size) under D.SAMPLE_DIRS, in a stable order.
function D.sample_images(opts)
  opts = check_opts("sample_images", opts, { min_size = true, max = true, dirs = true })
  local min_size, max = opts.min_size or 64, opts.max or 100
  local out = {}
  for _, d in ipairs(opts.dirs or D.SAMPLE_DIRS) do
    if isdir(d) then
      for _, p in ipairs(walk(d, true, { "jpg", "jpeg", "png", "webp", "tif", "tiff" })) do
        local ok, info = pcall(srgeo.image.info, p)
        if ok and math.min(info.width, info.height) >= min_size then
          out[#out + 1] = p
          if #out >= max then return out end
        end
      end
    end
  end
  return out
end

return D
