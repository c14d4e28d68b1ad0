-- Run by mpi_spec.lua with and without mpirun: a few steps of srgeo.train
-- on a tiny CNN (with or without BatchNorm); rank 0 writes the final
-- parameters and buffers (packed) to OUT.bin and the run's log rows to
-- OUT.rows.  Every rank must end with the same bits, checked here.
--   srgeo train.lua OUT KIND(plain|bn) DTYPE(float32|float64) [key=value ...]
-- keys: sync_bn, objective (ce|gaussian|pgd), steps, stop_at, out (a run folder), batch, overlap, bucket
local srgeo = require "srgeo"
local nn = srgeo.nn
local path, kind, dtype = arg[1], arg[2], arg[3]
local o = {}
for i = 4, #arg do
  local k, v = arg[i]:match("^([%w_]+)=(.*)$")
  if v == "false" then o[k] = false else o[k] = tonumber(v) or v == "true" or v end
end
local layers = { { "conv1", nn.conv2d { in_channels = 1, out_channels = 6, kernel_size = 3, padding = 1 } } }
if kind == "bn" then layers[#layers + 1] = { "bn1", nn.batchnorm2d { num_features = 6 } } end
for _, l in ipairs {
  { "relu", nn.relu {} }, { "pool", nn.adaptive_avgpool2d { output_size = 2 } }, { "flatten", nn.flatten {} },
  { "fc", nn.linear { in_features = 24, out_features = 10 } } } do layers[#layers + 1] = l end
local m = nn.sequential(layers)
m:init(5)
if dtype == "float64" then m:double() end
local ds = srgeo.data.noise { n = 48, shape = { 1, 8, 8 }, seed = 3, kind = "uniform" }
local objective = o.objective or "ce"
local run = srgeo.train {
  model = m, data = ds, steps = o.steps or 6, stop_at = o.stop_at, batch = o.batch or 12, lr = 0.1,
  augment = { crop = 1, flip = true }, progress = false, eval_train = 20, seed = 2, sync_bn = o.sync_bn,
  overlap = o.overlap, bucket = o.bucket,
  objective = objective, pgd = objective == "pgd" and { eps = 0.3, steps = 2 } or nil,
  gaussian = objective == "gaussian" and { sigma = 0.1 } or nil,
  out = o.out, checkpoints = o.out and { 2 } or nil, log_every = 1, eval_every = 2,
}
local mpi = srgeo.mpi
local state = {}
for k, t in pairs(m:state_dict()) do state[k] = t end
-- the same bits on every rank
local mine = srgeo._mpi.pack(state)
local all = mpi.gather(state)
if mpi.root() then
  for r = 2, #all do
    for k, t in pairs(state) do
      local a, b = t:reshape({ t:numel() }), all[r][k]:reshape({ t:numel() })
      for i = 1, #a do
        if a:get(i) ~= b:get(i) then error(string.format("rank %d's %s[%d] differs from rank 0's", r - 1, k, i)) end
      end
    end
  end
  local f = assert(io.open(path .. ".bin", "wb"))
  f:write(mine)
  f:close()
  local rows = {}
  for _, r in ipairs(run.history) do rows[#rows + 1] = { step = r.step, loss = r.loss, acc = r.acc, train_acc = r.train_acc } end
  f = assert(io.open(path .. ".rows", "wb"))
  f:write(srgeo._mpi.pack(rows))
  f:close()
end
