-- srgeo.help: help() in the REPL.
--
--   help()                    the topics
--   help("profile")           a topic (tensors, nn, models, profile, plot, data, train, scripts, shell, ...)
--   help(srgeo.profile)       the topic of a library table or function
--   help(srgeo.nn.conv2d)     a layer's constructor options (srgeo.nn.options)
--   help(srgeo.profile.compare), help(srgeo.data.noise) ...   the doc comment above a Lua function
--   help("small_resnet")      an architecture of the zoo ; help(m) a model ; help(t) a tensor
--   srgeo.examples()          the scripts in scripts/ with their one-line descriptions
--
-- Text goes to stdout and is also returned (so tests and notebooks can use it).
local srgeo = require "srgeo"

local H = {}

local TOPICS = {
  { "tensors", "srgeo.tensor, zeros, rand, randn: NCHW float32/float64 tensors and their methods" },
  { "nn", "srgeo.nn: layers and containers with forward / jvp / vjp" },
  { "models", "srgeo.models: the encoder zoo, checkpoints (safetensors, PyTorch .pth), taps" },
  { "onnx", "srgeo.onnx: any encoder as an ONNX graph (exact JVP / VJP), normalisation, taps, supported ops" },
  { "profile", "srgeo.profile: the scale-resolved statistic r_η, descriptors, comparisons" },
  { "plot", "srgeo.plot: gnuplot figures (profiles, heatmaps, multiples, descriptor charts, text)" },
  { "data", "srgeo.data: Fashion-MNIST, CIFAR-10, image folders, noise sets, evaluation sets" },
  { "train", "srgeo.train: training runs with checkpoints, controls, adversarial objectives" },
  { "metrics", "srgeo.metrics: activation flips, local linearity, trajectory length" },
  { "experiment", "srgeo.experiment and srgeo.cli: what the scripts share (specs, caching, outputs)" },
  { "scripts", "scripts/*.lua: runnable experiments, also subcommands: srgeo bump --help (srgeo.examples() lists them)" },
  { "notebook", "srgeo notebook FILE.md: run a Markdown notebook into an HTML report (--images, --preset; --to ipynb)" },
  { "mpi", "srgeo.mpi: mpirun -np N srgeo ...: sweeps, profiles and training spread over processes and machines" },
  { "shell", "the srgeo shell: REPL keys, command line, environment" },
  { "library", "the helpers under it all: srgeo.stats, util, json, markdown, html, identity, index" },
}

local TEXT = {}

TEXT.tensors = [[
Tensors: contiguous, refcounted, float32 (default) or float64, images as (N,C,H,W) in raw [0,1].
  t = srgeo.tensor{{1, 2}, {3, 4}}      srgeo.zeros{2, 3}   srgeo.ones{2, 3}   srgeo.full({2, 3}, 7)
  srgeo.rand({2, 3}, seed)  uniform [0,1)      srgeo.randn({2, 3}, seed)  standard normal
  srgeo.hashrand({2, 3}, seed [, offset, scale])  offset + scale * v, v in (-1,1): element i from (seed, i) alone
    (v = (2 (h >> 40) + 1 - 2^24) / 2^24, h = splitmix64 finaliser of seed + (i+1) * 0x9e3779b97f4a7c15; NumPy can redo it)
  srgeo.arange(n)   srgeo.cat({a, b}, dim)   srgeo.stack({a, b})
  t:shape() -> (2,3)   t:dim()   t:numel()   #t (size of dim 1)   t:dtype()   t:float()   t:double()
  t:get(i, j)  t:set(v, i, j)   t:totable()   t:narrow(dim, start, len)   t:slice(...)   t:row(i)
  t:reshape{...}  t:view{...}  t:transpose(a, b)  t:t()  t:squeeze()  t:unsqueeze(d)  t:clone()  t:copy(src)
  arithmetic: t + u, t - u, t * 2, t / u, -t ; t:add/sub/mul/div  t:matmul(u)  t:dot(u)
  reductions: t:sum()  t:mean()  t:max()  t:min()  t:norm()  t:argmax()   elementwise: abs exp log sqrt pow clamp
  files: srgeo.npy.load(path) / srgeo.npy.save(path, t) ; srgeo.image.load(path, {size = 224, dtype = "float64"}) -> (1,3,224,224)
Indices are 1-based like Lua and Torch7 (narrow(dim, start, len) in Torch7's order; PyTorch's is 0-based).
Kernels serve both float32 and float64.]]

TEXT.nn = [[
Layers (srgeo.nn): each constructor takes one options table; help(srgeo.nn.NAME) shows its options.
  m = srgeo.nn.sequential{ {"fc1", srgeo.nn.linear{in_features = 12, out_features = 16}}, {"act", srgeo.nn.relu{}} }
  y = m:forward(x [, {tap = "fc1"}])       y, jv = m:jvp(x, v)   (v: k directions per input)   g = m:vjp(x, w)
  m:jvp(x, v, {directional = true}): at kinks and ties (ReLU input 0, tied maxima) the one-sided directional
    derivative of each row of v (−v needs its own row); default PyTorch's subgradient (mask x > 0, first maximum), as vjp
  m:parameters()  m:buffers()  m:state_dict()  m:param_names()  m:get(name)  m:set(name, t)  m:init(seed)  m:children()  m:find(path)
  m:train() / m:eval()   m:double() / m:float()   m:load(path)  m:save(path)  m:summary({C, H, W})
Leaves: %s.
Containers: sequential (named children), residual, graph (a DAG: {name, module, inputs}).  Module paths and parameter names follow
torchvision's state_dict keys, so converted checkpoints load as they are.]]

TEXT.models = [[
The zoo (srgeo.models): architectures in models/*.lua, trained checkpoints in models/shipped/.
  m = srgeo.models.small_resnet{seed = 1}     -- random init (any NAME below; options per help("NAME"))
  m = srgeo.models.load("small_resnet")       -- a shipped model by name (or a path): architecture + config
  t = srgeo.models.twin(m, {init = "torch-default" | "he" | "xavier", seed = 0})   -- its random-init twin
                                              -- (an ONNX graph too: m:roles() lists its learned constants)
  m = srgeo.models.load("resnet50.pth")   -- a torch.save checkpoint, no Python: architecture and config from its keys
  m = srgeo.models.load("resnet50", {weights = "r50.pth"})   -- named architecture (+ config=, prefix=, strict=)
  m = srgeo.models.load("resnet18", {weights = "imagenet"})  -- published weights (or a URL), fetched once into the
                        cache $SRGEO_CACHE and checked by SHA-256; srgeo.weights.known("resnet18") lists the names
  obj = srgeo.torch.load("x.pth")   -- the saved object: tables, arrays, tensors (restricted unpickler: runs nothing)
  srgeo.models.list()   -- {name, family, doc, input, options, params}
  srgeo.models.info(m)  -- {arch, config}   m:save(path, meta) / m:load(path)
Files: f = srgeo.safetensors.open(path); f:keys() f:info() f:metadata(); f:get(name [, dtype])
  -> new tensor; f:get(name, t) reads into t in place.  srgeo.safetensors.save(path, {name = t}, meta).
Taps: every zoo model answers to "features" (pooled penultimate embedding, the default) and "logits";
any module path works too: m:forward(x, {tap = "layer2"}), srgeo.profile(m, X, {tap = "layer2"}).
Architectures: %s.
Shipped models here: %s.]]

TEXT.onnx = [[
ONNX graphs (srgeo.onnx; the usual way in is srgeo.models.load): exact forward, stacked JVP and VJP for every op.
  m, info = srgeo.models.load("effnet.onnx")     -- raw [0,1] pixels in; info.tap = the default tap
  m = srgeo.models.load("x.onnx", {mean = {0.5, 0.5, 0.5}, std = {0.5, 0.5, 0.5}})   -- normalisation folded in
  m = srgeo.models.load("x.onnx", {normalize = false, input_size = {3, 160, 160}, dtype = "float64"})
  options: tap ("output", "embedding" or an ONNX value name), mean/std, normalize, input_size (symbolic
  sizes, C,H,W), dtype, input, output (a value name: only the nodes it depends on are imported)
Normalisation: mean/std given, else the file's srgeo.mean/srgeo.std metadata, else the graph's own first ops
(Mul/Add/Sub/Div by constants: x*255, (x-mean)/std; info.preprocess); otherwise an error asks for it.
Taps: "output" the graph's output, "embedding" the last linear layer's input; the default is "embedding" when
that layer makes class scores (a Softmax/LogSoftmax/Sigmoid after it, or 10, 100, 1000, 11221, 21841, 21843
outputs), else "output" (a face embedding's descriptor).  An NHWC input (tf2onnx) takes NCHW images.
Command line: --model x.onnx --input-size 3,224,224 --mean ... --std ... (or --no-normalize) --tap --output.
  srgeo.onnx.info(path)           -- opset, producer, ops, inputs/outputs with shapes, metadata (no import)
  srgeo.onnx.supported(op)        -- "values", "constants" (folded only) or false
  srgeo.onnx.evaluate(path, {constants = {name = t}})   srgeo.onnx.read_tensor(path)  (ONNX test data)
Export from PyTorch: /usr/bin/python3 scripts/convert_torch.py --onnx --torchvision NAME [weights.pth] out.onnx
Unsupported ops or forms are errors naming the node, its op and the reason; README lists what is not supported.]]

TEXT.library = [[
Helpers the library is built from (each a table; help(f) shows a function's doc comment):
  srgeo.stats     median, quantile, mean, sd, robust_sd, bootstrap(rows, stat, B, seed), qnorm, column, rng
  srgeo.util      write_atomic(path, s), read_file, exists, mkdir, relpath, progress(label, n), live, wrap, logspace
  srgeo.json      encode(v), decode(s) (cJSON: exact numbers, {} vs []), array(t) / object(t) mark empty tables
  srgeo.markdown  html(text) (cmark-gfm with tables), code_blocks(text)
  srgeo.html      escape, data_uri, markdown, page (notebook, index pages), rich(v) (text/html)
  srgeo.identity  of(model, X, opts): a profile's identity (model name + weights hash, evaluation set, preset)
  srgeo.index     the HTML index of an output folder (srgeo report DIR)
  srgeo.augment   crops, flips and noise for training (help("train"))   srgeo.optim  sgd{...}, adamw{...}]]

TEXT.profile = [[
r_η = E_u ‖Φ(x+ηu) − Φ(x)‖² / (η² E_u ‖J(x)u‖²): 1 where Φ is locally linear, > 1 at a bump.
  p = srgeo.profile(model, X, {preset = "paper"})     -- X: a (N,C,H,W) tensor, a list of tensors or a dataset
  presets: "paper" (1024 directions ±, JVPs on the first 256: its plateau sits off 1 by their sampling error),
           "sequential" (directions per image and rung until precise enough for the median over images), "quick";
           outside paper every direction has its own exact JVP (paired: plateau = 1) and blocks are orthonormal
  range = "auto": extend the ladder until a bump's decay is seen or the per-pixel RMS reaches 1 (p.range says why)
  options: directions, antipodal, jvp_directions (n or "all"), nscales, scales, rms_scales, seed, tap,
           precision ("float32", p.noise[i][s] a 95% upper bound on r's float32 error from noise_directions
           re-run in float64; or "float64"), bootstrap, ci, family ("gaussian",
           "lowpass", "toward", "jacobian_top", "gradient", "user"), label, exact_relu,
           progress (true: one bar with the whole profile's ETA over every stage; false; or a function(info),
           info = {done, total, stage, elapsed} in passes, total the forecast),
           share_prefix (default true: leading affine layers once per direction, p.shared_layers),
           directional (default true: JVPs take the one-sided derivative at kinks and ties, u and −u each their own,
           so r → 1 as η → 0 on every input; false: PyTorch's subgradient); p.ties[i], p.near_ties[i],
           p.singular[i]: the image's tied units/windows and points without a one-sided derivative (summary warns)
  fields: p.scales  p.median  p.lo  p.hi  p.mean  p.per_image  p.descriptors  p.jacobian_fro  p.forwards
  sequential: seq_between (1/4), seq_paper (1/2), or target_ci; p.rung_directions[i][s], p.closed_by[i][s]
  p.shape.class: "bump" | "rise" | "fall" | "edge" | "flat" | "undetermined" (srgeo.bump: tests at alpha 0.05
    against the plateau, r at the lowest valid rung; every bound widened by the float64 check: p.noise and
    p.fd_jvp[i], the JVP energy vs a float64 one-sided forward difference), p.shape.text (the numbers that
    decided it), p.image_shapes (each image's call)
  print(p:summary())   p:save_csv(path)   p:save_json(path)   q = srgeo.profile.load(path)
  descriptors (each {value, lo, hi}, NaN with a reason where the shape leaves them undefined): plateau (r at
    the lowest valid rung), onset, peak_eta, peak_height, half_width, decay_slope, area; peak_eta is parabolic: the vertex of a
    parabola in log η through the median profile's highest rung and its neighbours, while the shape
    text's "peak rung" is that rung itself (p.shape.peak)
  c = srgeo.profile.compare(p1, p2, {permutations = 1000})   -- c.p.curve, c.p.peak_eta, ...; prints as a table
  srgeo.plot.profile({p1, p2}, {out = "bump.png", labels = {"trained", "init"}})   srgeo.plot.show(p)]]

TEXT.plot = [[
Figures through gnuplot; beside every OUT go OUT's .dat (data) and .gp (script: `gnuplot x.gp` redraws).
The terminal follows the extension: .png, .svg, .pdf, .txt (text).  Titles, labels and names are literal text
(single-quoted gnuplot strings: no enhanced-text markup, never run as commands).
  srgeo.plot.profile(p_or_list, {out = "bump.png", labels = {...}, title =, per_image =, band =, logy =})
  srgeo.plot.show(p)                                 -- text rendering in the terminal
  srgeo.plot.multiples({{p1, p2}, {p3, p4}}, {out =, titles = {...}, labels = {...}})   -- one panel each
  srgeo.plot.heatmap(rows, {out =, rows = steps, cols = p.scales, from = ps})          -- e.g. step × η
  srgeo.plot.descriptors(ps, {out =, field = "peak_eta"})                              -- bars/points with CIs
  srgeo.plot.lines(xs, {ys1, ys2}, {out =, labels =, logx =, logy =, hline =, lo =, hi =, from = ps})   -- lo/hi: intervals
Without out a figure is shown (plot.view_mode(); SRGEO_PLOT_VIEW=window|kitty|iterm|sixel|file forces one):
in Jupyter inline; in the shell a gnuplot window when $DISPLAY is set and gnuplot has qt, wxt or x11
(Debian gnuplot-qt; gnuplot-nox has none), else a terminal image (kitty, iTerm2 or sixel, when the
terminal says it supports one and no tmux is between), else a PNG in $TMPDIR/srgeo-plot.XXXXXX whose
path is printed and returned (the path alone; the REPL echoes it).  Every title ends with the models,
evaluation set and image count of its data (plot.about; lines and heatmap: of from = profiles;
about = false: the title alone).  In Jupyter (srgeo kernel) a figure shows in the notebook as PNG and
SVG, and a figure written to out shows too.
Rules: overlays go on a log y axis when the curves' highest medians differ by more than 3x
(plot.LOGY_RATIO; logy = false keeps it linear); bars of a ratio (plateau, peak height: r) grow from
r = 1; ‖J‖_F is an axis label with a subscript F (plot.field_label("jacobian_fro")), plot.JF in titles;
experiment figures of a descriptor with fewer than two defined values become a table in summary.txt.]]

TEXT.data = [[
Datasets: #ds, x, label = ds:get(i) (1,C,H,W), X, labels = ds:batch{i, j} or ds:batch(first, last).
  ds = srgeo.data.fashion_mnist{split = "test"}        (Debian package dataset-fashion-mnist)
  ds = srgeo.data.cifar10{root = dir, split = "train"} ; srgeo.data.folder(dir, {size = 224}) ; srgeo.data.images{...}
  ds = srgeo.data.noise{n = 64, shape = {1, 28, 28}, seed = 1, kind = "uniform" | "gaussian" | "pink" | "dead_leaves"}
  ds = srgeo.data.tensor(X, labels)
  ds:sample(n, seed)   ds:subset{...}   ds:random_labels(seed)   ds:blurred(sigma)   ds:batches(128)
  sets = srgeo.data.eval_set{n = 100, seed = 0}   -- test, train, test_blur1, test_blur2, uniform (sets.order)]]

TEXT.train = [[
  run = srgeo.train{model = m, data = train_ds, test_data = test_ds, epochs = 20, batch = 128, lr = 0.1,
                    optimizer = "sgd" | "adamw", schedule = "cosine", augment = {crop = 4, flip = true} | false,
                    labels = "random", objective = "pgd" (pgd = {eps = 0.5, norm = "l2"}) | "gaussian" | "llr",
                    checkpoints = "log", out = "runs/x", seed = 1, resume = true}
  run.checkpoints  run.history  run.final.test_acc   -- out/ckpt_SSSSSSSS.safetensors + log.csv
  srgeo.train.evaluate(m, ds)   srgeo.train.attack(m, X, labels, {eps =})   srgeo.train.robust_accuracy(m, ds, {...})
  srgeo.train.latest(out) -> path, step
Checkpoints load with srgeo.models.load(path); scripts/dynamics.lua profiles a whole run.]]

TEXT.metrics = [[
Related finite-scale metrics on the same inputs and directions (srgeo.metrics):
  relu_flips (activation-pattern change along x → x+ηu), boundary (exact distance to the first ReLU boundary),
  local_linearity (Qin et al.'s γ(ε)), trajectory_length, unit_directions.
  p.jacobian_fro: per image Hutchinson ‖J‖_F with a 95% CI (from the profile's JVPs).]]

TEXT.experiment = [[
What the scripts share (lua/srgeo/experiment.lua, composing spec.lua: model and evaluation-set specs,
cache.lua: the unit cache, report.lua: tables and result files; options parsing in cli.lua):
  local E = srgeo.experiment
  m, info = E.load_model("small_resnet")           -- shipped name | NAME@init | ARCH{cfg}@init | path.safetensors | x.pth | ARCH:x.pth | ARCH:imagenet | ARCH:URL
  ds = E.load_eval("fmnist-test:64@0", {model = m}) -- fmnist-test|train, blurσ, noise[-kind], cifar10-*; :N @SEED
  ex = E.new{out = "out/x", preset = "quick", seed = 0}
  p = ex:profile("small_resnet", "fmnist-test:64")  -- cached in out/x/units/ (rerun = resume)
  ex:figure("bump", srgeo.plot.profile, {p}) ; ex:finish()   -- results.json, CSVs, summary.txt
  print(E.descriptor_table({p1, p2}))  E.jacobian_fro(p)  E.checkpoints(dir)  E.twin(spec)]]

TEXT.notebook = [[
Notebooks are Markdown files with ```lua blocks (notebooks/*.md):
  srgeo notebook notebooks/trained_vs_init.md [--out DIR]    (the same: srgeo scripts/notebook.lua FILE.md)
  srgeo.notebook.run("notebooks/x.md", {out = "out/notebooks/x"})   -- from Lua
Top-level ```lua blocks run in one Lua state, like Jupyter cells: print output is captured per block,
a block ending in an expression shows its value (a call ending in ';' stays quiet), figures drawn by
srgeo.plot are embedded (without opts.out they go to DIR/figures/).  Markdown by cmark-gfm.  Writes
DIR/NAME.html (self-contained: images inlined, CSS inline) and DIR/NAME.md (outputs included); an
error stops the run naming the block.  srgeo scripts/report.lua out/ indexes a results tree (index.html).
Parameters: the ```lua {parameters} block's `name = value -- help` lines are defaults; run small with
  srgeo notebook notebooks/trained_vs_init.md --images 4 --preset quick    (FILE.md --help lists them)
srgeo.notebook.expect{...} prints the expected run time; the runner prints per cell the time so far and left.
Jupyter: srgeo notebook --to ipynb FILE.md [-o OUT.ipynb]; --to md FILE.ipynb converts back (outputs dropped).]]

TEXT.mpi = [[
Under mpirun every rank runs the same script (Open MPI; README "Running on a cluster"):
  mpirun -np 8 srgeo bump --model small_resnet --eval fmnist-test:1000 --preset paper --out out/b
  mpirun -np 4 srgeo train --model small_resnet --epochs 4 --out runs/r      (sbatch: scripts/srgeo.sbatch)
srgeo.profile, ex:run and srgeo.train spread their work over the ranks by themselves: the images of each
stage of a profile, unit after unit (half handed out in turn, the rest to whichever rank asks first), or each rank a shard
of every training batch (gradients summed in buckets after backward; overlap = true starts each while backward
goes on, with the same bits; sync_bn = true for BatchNorm over the whole batch).
Rank 0 writes the files and prints; every rank returns the same results.  Outputs are those of one
process with the same seed and threads per process; a rerun resumes from the unit cache with any N.
  mpi = srgeo.mpi      mpi.rank()  mpi.size()  mpi.root()  mpi.active()  mpi.barrier()
  v = mpi.bcast(v [, root])   list = mpi.gather(v [, root])   x = mpi.allreduce(x [, "sum"|"max"|"min"])
  results = mpi.map(n, function(i) ... end [, {on_result = f, static = 0.5, root_only = false}])
Values travel exactly (numbers, strings, tables, tensors; functions and other userdata are refused,
in one process too).  Without mpirun: rank 0 of 1,
the collectives return their argument and MPI is never loaded.  Threads per rank: the cores the rank
may use (SRGEO_THREADS overrides); ranks asking for different counts all use the smallest (rank 0 says
so), as results depend on it; SRGEO_MPI=0 keeps a launched process alone.]]

TEXT.shell = [[
srgeo shell: Lua 5.4 with the srgeo library as the global 'srgeo'.
  expressions print their value       srgeo.version   1 + 1   p.median
  Tab completes names, fields and methods (srgeo.nn.<Tab>, x:<Tab>); history in ~/.srgeo_history
  Ctrl-C stops a running computation (a profile keeps the images done and returns at once: when its
    bootstrap would take long, quick preset over 52 images, it says so and srgeo.profile.aggregate(p) runs it);
  Ctrl-D or os.exit() quits
  srgeo.plot.* without out shows the figure: a window, a terminal image or a temporary PNG (help("plot"))
  tables print nested (depth 3, keys sorted, cycles as <cycle>); lists of records as rows
  an error prints its message at your line; :tb or srgeo.traceback() shows its traceback
    (srgeo --traceback or SRGEO_TRACEBACK=1: every traceback, for scripts)
  srgeo FILE.lua [args] (args in arg and ...)   srgeo -e 'chunk'   srgeo -i FILE.lua   srgeo --version
  srgeo NAME [args] runs scripts/NAME.lua (srgeo bump --help), even with a file NAME in the folder
    (srgeo run NAME or srgeo ./NAME runs the file); srgeo --help lists them
  srgeo --lua-path: the LUA_PATH / LUA_CPATH exports for a stock lua5.4 -l srgeo
  srgeo.threads(n) or SRGEO_THREADS sets the thread count (at most the CPUs srgeo may run on: more is
  clamped with a notice); SRGEO_ROOT the library root
  srgeo.config(): the CPU, its vector features, the BLAS kernels in use (cfg.summary), threads, OpenMP
  help(x) for any library table or function; srgeo.examples() lists the scripts]]

-- The text is built by H.text_of(x); help(x) prints it and returns nothing
-- (so the REPL does not print it twice).
local function write(s) return s end

local function names_of(t, pred)
  local out = {}
  for k, v in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and (not pred or pred(k, v)) then out[#out + 1] = k end
  end
  table.sort(out)
  return out
end

local function topic_text(name)
  local t = TEXT[name]
  if name == "nn" then
    return t:format(table.concat(names_of(srgeo.nn.options or {}), ", "))
  elseif name == "models" then
    local archs = {}
    for _, r in ipairs(srgeo.models.list { params = false }) do archs[#archs + 1] = r.name end
    local shipped = srgeo.models.shipped()
    return t:format(table.concat(archs, ", "), #shipped > 0 and table.concat(shipped, ", ") or "none yet (make models)")
  elseif name == "scripts" then
    return H.examples_text()
  end
  return t
end

-- The "---" doc comment right above a Lua function's definition.
local function doc_comment(f)
  local info = debug.getinfo(f, "S")
  if not info or info.what ~= "Lua" or info.source:sub(1, 1) ~= "@" then return nil end
  local path = info.source:sub(2)
  local fh = io.open(path, "r")
  if not fh then return nil end
  local lines = {}
  for l in fh:lines() do lines[#lines + 1] = l end
  fh:close()
  local def = info.linedefined
  local out = {}
  local i = def - 1
  while i >= 1 and lines[i]:match("^%s*%-%-%-") do
    table.insert(out, 1, (lines[i]:gsub("^%s*%-%-%-%s?", "")))
    i = i - 1
  end
  local args = lines[def] and lines[def]:match("function%s*[%w_%.:]*(%b())")
  if #out == 0 then return nil, args end
  return table.concat(out, "\n"), args
end

-- Which library table/function is v, as a dotted path (searched one and two
-- levels down the loaded parts of srgeo; lazy parts are not loaded for this).
local TOPIC_OF_MODULE = { nn = "nn", models = "models", profile = "profile", plot = "plot", data = "data",
  train = "train", metrics = "metrics", experiment = "experiment", cli = "experiment", spec = "experiment",
  cache = "experiment", report = "experiment", notebook = "notebook", mpi = "mpi",
  image = "data", npy = "tensors", safetensors = "models", torch = "models", torchkeys = "models", weights = "models", onnx = "onnx",
  bump = "profile",
  stats = "library", util = "library", json = "library", markdown = "library", html = "library", identity = "library",
  index = "library", augment = "train", optim = "train" }

local function find_path(v)
  if v == srgeo then return "srgeo" end
  for k, sub in pairs(srgeo) do
    if sub == v then return "srgeo." .. k, k end
  end
  for k, sub in pairs(package.loaded) do
    if type(k) == "string" and k:match("^srgeo%.") and sub == v then return k, k:match("^srgeo%.(.+)$") end
  end
  for k, sub in pairs(srgeo) do
    if type(sub) == "table" and type(k) == "string" then
      for k2, x in pairs(sub) do
        if x == v and type(k2) == "string" then return "srgeo." .. k .. "." .. k2, k, k2 end
      end
    end
  end
  return nil
end

local function topics_text()
  local lines = { "srgeo " .. srgeo.version .. " — help(topic) with one of:" }
  for _, t in ipairs(TOPICS) do lines[#lines + 1] = string.format("  %-11s %s", t[1], t[2]) end
  lines[#lines + 1] = "help(x) also takes a library table or function (help(srgeo.profile), help(srgeo.nn.conv2d)),"
  lines[#lines + 1] = "a model or tensor, or an architecture name (help(\"small_resnet\")).  srgeo.examples() lists the scripts."
  return table.concat(lines, "\n")
end

local function arch_text(name)
  for _, r in ipairs(srgeo.models.list { params = false }) do
    if r.name == name then
      return string.format("srgeo.models.%s{...}: %s\n  input %s; options: %s\n  e.g. m = srgeo.models.%s{seed = 1}",
        name, r.doc or "", r.input and table.concat(r.input, "x") or "?", table.concat(r.options or {}, ", "), name)
    end
  end
end

--- help([topic]): print help on a topic name, a library table or function,
--- a layer, a model, a tensor or an architecture name.
function H.help(...)
  local s = H.text_of(...)
  io.write(s, s:sub(-1) == "\n" and "" or "\n")
  io.flush()
end

--- H.text_of([topic]) -> the text help(topic) prints.
function H.text_of(x)
  if x == nil or x == H then return write(topics_text()) end
  if type(x) == "string" then
    local key = x:gsub("^srgeo%.", "")
    if key == "tensor" then key = "tensors" end
    if key == "examples" then key = "scripts" end
    if TEXT[key] or key == "scripts" then return write(topic_text(key)) end
    if srgeo.nn.options and srgeo.nn.options[key] then
      return write(string.format("srgeo.nn.%s{...}: %s", key, srgeo.nn.options[key]))
    end
    local a = arch_text(key)
    if a then return write(a) end
    -- a dotted path: srgeo.profile.compare
    local v = srgeo
    for part in key:gmatch("[^%.]+") do
      v = type(v) == "table" and v[part] or nil
    end
    if v ~= nil and v ~= srgeo then return H.text_of(v) end
    return write(string.format("help: no topic '%s'.\n%s", x, topics_text()))
  end
  local ty = type(x)
  if ty == "userdata" then
    local ok, kind = pcall(function() return x:kind() end)
    if ok and kind then
      local mi = srgeo.models.info(x)
      local head = mi and string.format("a %s model (srgeo.models.%s)", mi.arch, mi.arch) or ("a module: " .. kind)
      return write(head .. "\n" .. tostring(x) .. "\nMethods: forward jvp vjp parameters param_names get set init load save"
        .. " summary train eval double float children find aliases (help(\"nn\"), help(\"models\"))")
    end
    local sok, shape = pcall(function() return x:shape() end)
    if sok and shape then
      return write(string.format("a %s tensor of shape %s\n%s", x:dtype(), tostring(shape), TEXT.tensors))
    end
  end
  if ty == "table" and x.scales and x.median then return write(topic_text("profile")) end
  local path, mod, field = find_path(x)
  if path then
    if mod == "nn" and field and srgeo.nn.options and srgeo.nn.options[field] then
      return write(string.format("srgeo.nn.%s{...}: %s", field, srgeo.nn.options[field]))
    end
    if ty == "function" and field then
      local d, args = doc_comment(x)
      if d then return write(path .. (args or "") .. "\n" .. d) end
    end
    if mod and TOPIC_OF_MODULE[mod] and not field then return write(topic_text(TOPIC_OF_MODULE[mod])) end
    if mod and TOPIC_OF_MODULE[mod] then
      return write(path .. " (no doc comment); see help(\"" .. TOPIC_OF_MODULE[mod] .. "\")\n" .. topic_text(TOPIC_OF_MODULE[mod]))
    end
    if ty == "function" then
      local d, args = doc_comment(x)
      if d then return write(path .. (args or "") .. "\n" .. d) end
      if mod == "tensor" or ({ zeros = 1, ones = 1, rand = 1, randn = 1, hashrand = 1, full = 1, arange = 1, cat = 1, stack = 1 })[mod] then
        return write(TEXT.tensors)
      end
      return write(path .. ": a C function; see help() for the topics")
    end
  end
  if ty == "function" then
    local d = doc_comment(x)
    if d then return write(d) end
  end
  return write("help: nothing known about this " .. (path and path .. " (" .. ty .. ")" or ty) .. ".\n" .. topics_text())
end

--- srgeo.examples(): print the scripts, which are also the shell's
--- subcommands (`srgeo bump --help`), with their descriptions (H.scripts()
--- returns them as a list of {name, path, description}; srgeo.cli has them).
function H.scripts()
  local out = {}
  for _, c in ipairs(require("srgeo.cli").commands()) do
    out[#out + 1] = { name = c.name, path = c.path, description = c.about }
  end
  return out
end

function H.examples()
  io.write(H.examples_text(), "\n")
  io.flush()
end

function H.examples_text() return require("srgeo.cli").commands_text() end

H.topics = TOPICS
H.text = TEXT

return setmetatable(H, { __call = function(_, ...) return H.help(...) end })
