// ort_run.js: one run of an ONNX model by onnxruntime-node, for
// tests/lua/onnx_spec.lua's cross-check (node ort_run.js ORT_MODULE MODEL
// IN.npy OUT.npy): the model's first input from a float32 .npy file, its
// first output written as one.  Not needed by srgeo; the test skips
// without it (npm install --ignore-scripts onnxruntime-node in build/ort).
const fs = require("fs");
const path = require("path");
const [ortPath, model, inFile, outFile] = process.argv.slice(2);
const ort = require(path.resolve(ortPath));

function readNpy(path) {
  const b = fs.readFileSync(path);
  const hlen = b.readUInt16LE(8);
  const header = b.toString("latin1", 10, 10 + hlen);
  if (!header.includes("'<f4'")) throw new Error(path + ": not float32");
  const dims = header.match(/\(([^)]*)\)/)[1].split(",").filter((s) => s.trim()).map(Number);
  const data = new Float32Array(b.buffer.slice(b.byteOffset + 10 + hlen, b.byteOffset + b.length));
  return { dims, data };
}

function writeNpy(path, dims, data) {
  let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims.join(", ") + (dims.length === 1 ? "," : "") + "), }";
  while ((10 + h.length + 1) % 64) h += " ";
  h += "\n";
  const head = Buffer.alloc(10);
  head.write("\x93NUMPY", 0, "latin1");
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(h.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(h, "latin1"), Buffer.from(Float32Array.from(data).buffer)]));
}

(async () => {
  const s = await ort.InferenceSession.create(model);
  const x = readNpy(inFile);
  const out = await s.run({ [s.inputNames[0]]: new ort.Tensor("float32", x.data, x.dims) });
  const y = out[s.outputNames[0]];
  writeNpy(outFile, y.dims, y.data);
})().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
