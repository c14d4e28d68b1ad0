#!/usr/bin/python3
"""kernel_check.py SRGEO: drive `srgeo kernel` with jupyter_client, as Jupyter
does, and print one line per check ("ok NAME" or "FAIL NAME: why"), then
"kernel_check: N passed, M failed".  tests/lua/kernel_spec.lua runs this
with Debian's /usr/bin/python3 and asserts every line.

The kernelspec is installed into a temporary JUPYTER_PATH (`srgeo kernel
install --prefix`), so the user's own Jupyter folders are never touched.
"""
import os
import queue
import subprocess
import sys
import tempfile
import time

SRGEO = os.path.abspath(sys.argv[1])
tmp = tempfile.mkdtemp(prefix="srgeo-kernel-")
subprocess.run([SRGEO, "kernel", "install", "--prefix", tmp], check=True, stdout=subprocess.DEVNULL)
os.environ["JUPYTER_PATH"] = os.path.join(tmp, "share", "jupyter")
os.environ["JUPYTER_DATA_DIR"] = os.path.join(tmp, "data")
os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(tmp, "runtime")

from jupyter_client import KernelManager  # noqa: E402  (after JUPYTER_PATH)
from jupyter_client.session import Session  # noqa: E402

results = []


def check(name, cond, why=""):
    results.append(bool(cond))
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(why)), flush=True)


def run(kc, code, timeout=30):
    """Execute code: (reply content, [iopub messages for it])."""
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    out = []
    while True:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        out.append(m)
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
    return reply["content"], out


def of_type(msgs, t):
    return [m["content"] for m in msgs if m["msg_type"] == t]


def stdout_of(msgs):
    return "".join(c["text"] for c in of_type(msgs, "stream") if c["name"] == "stdout")


errlog = open(os.path.join(tmp, "kernel.err"), "w+")
km = KernelManager(kernel_name="srgeo")
km.start_kernel(stderr=errlog)
kc = km.client()
kc.start_channels()
try:
    kc.wait_for_ready(timeout=60)

    # kernel_info
    kc.kernel_info()
    info = kc.get_shell_msg(timeout=10)["content"]
    li = info.get("language_info", {})
    check("kernel_info: lua 5.4, srgeo", li.get("name") == "lua" and li.get("version") == "5.4"
          and li.get("mimetype") == "text/x-lua" and li.get("file_extension") == ".lua"
          and info.get("implementation") == "srgeo" and info.get("protocol_version") == "5.3", info)
    t0 = time.time()
    while not kc.hb_channel.is_beating() and time.time() - t0 < 10:
        time.sleep(0.1)  # the first beat takes a round trip
    check("heartbeat", kc.hb_channel.is_beating(), "not beating after 10 s")

    # execute: stdout as a stream, a trailing expression as execute_result
    c, msgs = run(kc, "print('hello')\nio.write('a', 1, '\\n')\nx = 6 * 7\nx")
    res = of_type(msgs, "execute_result")
    check("execute: stdout stream", stdout_of(msgs) == "hello\na1\n", repr(stdout_of(msgs)))
    check("execute: trailing expression is execute_result",
          c["status"] == "ok" and len(res) == 1 and res[0]["data"]["text/plain"] == "42"
          and res[0]["execution_count"] == c["execution_count"], (c, res))
    states = [m["content"]["execution_state"] for m in msgs if m["msg_type"] == "status"]
    check("execute: status busy then idle", states == ["busy", "idle"], states)
    c, msgs = run(kc, "local t = {b = 2, a = 1}\nt")
    res = of_type(msgs, "execute_result")
    check("execute: a table prints with the REPL's printer", res and res[0]["data"]["text/plain"] == "{a=1, b=2}", res)
    c, msgs = run(kc, "y = 1")
    check("execute: a statement has no result", c["status"] == "ok" and not of_type(msgs, "execute_result"), msgs)
    c, msgs = run(kc, "io.stderr:write('warn\\n')")
    errs = [s["text"] for s in of_type(msgs, "stream") if s["name"] == "stderr"]
    check("execute: stderr stream", errs == ["warn\n"], errs)

    # an error: the message at the cell's line, no traceback
    c, msgs = run(kc, "local a = 1\nerror('boom')")
    e = of_type(msgs, "error")
    text = "\n".join(c.get("traceback", []))
    check("error: reply names the cell line", c["status"] == "error" and ":2: boom" in c.get("evalue", "")
          and "In[" in c.get("evalue", ""), c)
    check("error: no Lua traceback", "stack traceback" not in text and len(e) == 1, text)
    c, msgs = run(kc, "local a = 1\nsrgeo.plot.profile(nil)")  # a library error in the returned (tail) call
    check("error: a failing returned call is put at its cell line", c["status"] == "error"
          and ":2: srgeo.plot.profile" in c.get("evalue", "") and "In[" in c.get("evalue", "")
          and "stdin" not in c.get("evalue", ""), c.get("evalue"))
    c, msgs = run(kc, ":tb")
    check("error: :tb shows the traceback", "stack traceback" in stdout_of(msgs), stdout_of(msgs))
    c, msgs = run(kc, "x = = 1")
    check("error: a syntax error is an error reply", c["status"] == "error" and "In[" in c.get("evalue", ""), c)

    # rich display: text/plain and text/html (srgeo.html.rich) of a tensor,
    # a model, a profile, a comparison and a descriptor table; labels escaped
    def html_of(code):
        c, msgs = run(kc, code, timeout=120)
        res = of_type(msgs, "execute_result")
        d = res[0]["data"] if res else {}
        return d.get("text/plain", ""), d.get("text/html", ""), c
    plain, html, c = html_of("srgeo.rand({ 3, 4 }, 1)")
    check("rich: a tensor has text/plain and an HTML table", plain.startswith("tensor(3,4) float32")
          and html.count("<tr>") == 4 and "<table" in html and "float32" in html, (plain, html, c))
    plain, html, c = html_of("local nn = srgeo.nn\n"
                             "small = nn.sequential { nn.linear { in_features = 16, out_features = 16 }, nn.relu {},\n"
                             "  nn.linear { in_features = 16, out_features = 4 } }\nsmall")
    check("rich: a model has text/plain and HTML (its tree, escaped)", "total: 340 trainable parameters" in plain
          and "linear(16 -&gt; 16)" in html and "<pre" in html, (plain, html, c))
    plain, html, c = html_of("XS = {}\nfor i = 1, 3 do XS[i] = srgeo.rand({ 1, 16 }, i) end\n"
                             "pa = srgeo.profile(small, XS, { preset = 'quick', progress = false, label = '<b>a&b</b>' })\n"
                             "pb = srgeo.profile(small, XS, { preset = 'quick', progress = false, seed = 2, label = 'b' })\npa")
    check("rich: a profile has text/plain and HTML (rungs, descriptors; its label escaped)",
          "3 images" in plain and "&lt;b&gt;a&amp;b&lt;/b&gt;" in html and "<b>a&b</b>" not in html
          and html.count("<table") == 2 and "median r" in html and "peak_height" in html, (plain, html[:400], c))
    plain, html, c = html_of("srgeo.profile.compare(pa, pb, { permutations = 20 })")
    check("rich: a comparison has text/plain and HTML (p-values)", plain.startswith("profile comparison")
          and "<table" in html and "observed difference" in html and "curve" in html, (plain, html[:400], c))
    plain, html, c = html_of("srgeo.experiment.descriptor_table({ pa, pb })")
    check("rich: a descriptor table has text/plain and HTML", "peak r [95% CI]" in plain and "<th>peak r [95% CI]</th>" in html
          and html.count("<tr>") == 3 and "&lt;b&gt;" in html, (plain, html[:400], c))
    c, msgs = run(kc, "({ a = 1 })")
    res = of_type(msgs, "execute_result")
    check("rich: a plain table has text/plain only", res and set(res[0]["data"]) == {"text/plain"}, res)

    # figures: without out image/png and image/svg+xml; with out the file shown, its path no result
    c, msgs = run(kc, "srgeo.plot.profile({ pa, pb })", timeout=120)
    dd = of_type(msgs, "display_data")
    ok = (len(dd) == 1 and dd[0]["data"].get("image/png", "").replace("\n", "").startswith("iVBORw0K")
          and "</svg>" in dd[0]["data"].get("image/svg+xml", "") and not of_type(msgs, "execute_result"))
    check("figure: a plot without out is display_data with image/png and image/svg+xml", ok,
          (c, [sorted(d["data"]) for d in dd]))
    figpath = os.path.join(tmp, "fig.png")
    c, msgs = run(kc, "srgeo.plot.profile({ pa, pb }, { out = %r })" % figpath, timeout=120)
    dd = of_type(msgs, "display_data")
    check("figure: a plot with out shows the file written, its path is no execute_result",
          len(dd) == 1 and "image/png" in dd[0]["data"] and os.path.exists(figpath)
          and not of_type(msgs, "execute_result"), (c, [sorted(d["data"]) for d in dd], of_type(msgs, "execute_result")))

    # complete: the REPL's completion
    kc.complete("x = srgeo.pro", 13)
    r = kc.get_shell_msg(timeout=10)["content"]
    check("complete: srgeo.pro -> srgeo.profile", "srgeo.profile" in r.get("matches", [])
          and r.get("cursor_start") == 4 and r.get("cursor_end") == 13, r)

    # inspect: help()'s text
    kc.inspect("srgeo.profile", 8)
    r = kc.get_shell_msg(timeout=10)["content"]
    check("inspect: help text", r.get("found") is True and len(r["data"].get("text/plain", "")) > 20, r)

    # is_complete: the REPL's continuation rule
    got = []
    for code in ["for i = 1, 3 do", "x = 1", "x = = 1", "x = 1 +"]:
        kc.is_complete(code)
        got.append(kc.get_shell_msg(timeout=10)["content"]["status"])
    check("is_complete: incomplete, complete, invalid, incomplete",
          got == ["incomplete", "complete", "invalid", "incomplete"], got)

    # a bad signature: no reply, the kernel lives
    bad = Session(key=b"not-the-key", username="intruder")
    bad.send(kc.shell_channel.socket, bad.msg("execute_request", {"code": "intruded = true", "silent": False}))
    try:
        m = kc.get_shell_msg(timeout=2)
        check("bad signature: refused", False, m["msg_type"])
    except queue.Empty:
        check("bad signature: refused", True)
    c, msgs = run(kc, "intruded == nil")
    res = of_type(msgs, "execute_result")
    check("bad signature: kernel alive, the message did not run", km.is_alive() and res
          and res[0]["data"]["text/plain"] == "true", res)
    errlog.seek(0)
    check("bad signature: logged", "bad signature" in errlog.read(), "no log line")

    # interrupt during a running profile: SIGINT (interrupt_mode signal).  A
    # model slow per image, so the images kept are few: an interrupted
    # profile still summarises what it kept (its bump test: ~9 ms an image)
    run(kc, "local nn = srgeo.nn\n"
            "m = nn.sequential { nn.linear { in_features = 1024, out_features = 1024 }, nn.relu {},\n"
            "  nn.linear { in_features = 1024, out_features = 1024 }, nn.relu {},\n"
            "  nn.linear { in_features = 1024, out_features = 8 } }\n"
            "X = {}\nfor i = 1, 2000 do X[i] = srgeo.rand({ 1, 1024 }, i) end", timeout=120)
    msg_id = kc.execute("p = srgeo.profile(m, X, { preset = 'quick', progress = false })\np.n_images")
    time.sleep(1.5)
    t0 = time.time()
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=30)
    dt = time.time() - t0
    print("note interrupt (SIGINT) during a profile: reply after %.2f s" % dt, flush=True)
    check("interrupt: a running profile stops within 2 s", reply["parent_header"]["msg_id"] == msg_id and dt < 2.0,
          "%.2f s, %s" % (dt, reply["content"].get("status")))
    c, msgs = run(kc, "print(p and p.interrupted, srgeo.interrupted())\n'next'")  # the tail, not print(...)'next'

    res = of_type(msgs, "execute_result")
    check("interrupt: kernel alive, the next cell runs", km.is_alive() and res and res[0]["data"]["text/plain"] == "next",
          (reply["content"].get("evalue"), stdout_of(msgs), res))

    # progress in place: one display_data with a display_id, then
    # update_display_data on that id; no progress lines on stderr
    c, msgs = run(kc, "local nn = srgeo.nn\n"
                      "mp = nn.sequential { nn.linear { in_features = 256, out_features = 256 }, nn.relu {},\n"
                      "  nn.linear { in_features = 256, out_features = 8 } }\n"
                      "XP = {}\nfor i = 1, 40 do XP[i] = srgeo.rand({ 1, 256 }, i) end\n"
                      "pp = srgeo.profile(mp, XP, { preset = 'quick' });", timeout=240)
    dd = [m["content"] for m in msgs if m["msg_type"] in ("display_data", "update_display_data")]
    kinds = [m["msg_type"] for m in msgs if m["msg_type"] in ("display_data", "update_display_data")]
    ids = {d.get("transient", {}).get("display_id") for d in dd}
    errs = "".join(s["text"] for s in of_type(msgs, "stream") if s["name"] == "stderr")
    last = dd[-1]["data"].get("text/plain", "") if dd else ""
    print("note progress: %d display messages for a profile of 40 images" % len(dd), flush=True)
    check("progress: display_data then update_display_data on one display_id",
          c["status"] == "ok" and kinds[:1] == ["display_data"] and kinds.count("update_display_data") >= 1
          and kinds.count("display_data") == 1 and len(ids) == 1 and None not in ids and last.startswith("profile: done in")
          and "profile" not in errs, (c.get("evalue"), kinds, ids, last, errs))

    # interrupt_request on the control channel, while a Lua loop runs
    import zmq
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect("%s://%s:%d" % (km.transport, km.ip, km.control_port))
    msg_id = kc.execute("while true do end")
    time.sleep(1)
    kc.session.send(sock, kc.session.msg("interrupt_request", {}))
    t0 = time.time()
    reply = kc.get_shell_msg(timeout=30)
    dt = time.time() - t0
    ir = kc.session.recv(sock, mode=0)[1] if sock.poll(5000) else {"msg_type": "none"}
    print("note interrupt_request during a Lua loop: execute_reply after %.2f s" % dt, flush=True)
    check("interrupt_request: interrupt_reply, the loop stops within 2 s",
          ir["msg_type"] == "interrupt_reply" and reply["content"]["status"] == "error" and dt < 2.0,
          "%.2f s %s" % (dt, reply["content"].get("evalue")))

    # SIGINT between cells does nothing; io.read is an error, not a wait
    km.interrupt_kernel()
    time.sleep(0.5)
    c, msgs = run(kc, "ok = pcall(io.read)\nok")
    res = of_type(msgs, "execute_result")
    check("interrupt at idle: kernel alive; io.read fails", km.is_alive() and res and res[0]["data"]["text/plain"] == "false",
          (c, res))

    # restart: shutdown_request(restart=True), a new process, a fresh state
    pid = km.provisioner.process.pid if km.provisioner and km.provisioner.process else None
    km.restart_kernel(now=False)
    kc.wait_for_ready(timeout=60)
    c, msgs = run(kc, "x == nil")
    res = of_type(msgs, "execute_result")
    newpid = km.provisioner.process.pid if km.provisioner and km.provisioner.process else None
    check("restart: a new kernel with a fresh state", res and res[0]["data"]["text/plain"] == "true"
          and c["execution_count"] == 1 and pid != newpid, (c, res, pid, newpid))
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=False)
    check("shutdown: the kernel exits", not km.is_alive(), "still alive")

print("kernel_check: %d passed, %d failed" % (sum(results), len(results) - sum(results)), flush=True)
sys.exit(0 if all(results) else 1)
