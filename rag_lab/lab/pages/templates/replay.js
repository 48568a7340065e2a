// The fold below mirrors rag_lab.lab.replay.stream_state / display_answer.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("capture-data").textContent);
  var events = data.events, N = events.length;
  var KB_TAG = /<kb(?![0-9A-Za-z_])[^>]*>/gi;
  var PARTIAL = /<(?:k(?:b(?![0-9A-Za-z_])[^>]*)?)?$/i;
  var CHUNK = /(?<![0-9A-Za-z_])chunk_id[\t\n\f\r ]*=[\t\n\f\r ]*"([^"]+)"/i;
  function unescapeAttr(s) {
    return s.replace(/&quot;|&#34;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  }
  function displayAnswer(answer, refs, partial) {
    var ids = refs.map(function (r) { return r.id || ""; });
    var text = answer.replace(KB_TAG, function (tag) {
      var m = CHUNK.exec(tag), id = m ? unescapeAttr(m[1]) : "", i = ids.indexOf(id);
      return i >= 0 ? "[" + (i + 1) + "]" : "[?]";
    });
    return partial ? text.replace(PARTIAL, "") : text;
  }
  function fold(n) {
    var st = {position: n, windows: [], references: [], thinking: "", answer: "", errors: [],
              complete: false, answerDone: false, elapsed: 0}, byCall = {};
    var t0 = N ? events[0].t : 0;
    for (var i = 0; i < n; i++) {
      var ev = events[i], d = ev.data || {}, t = ev.type;
      st.elapsed = Math.max(0, ev.t - t0);
      if (t === "tool_call") {
        var w = {id: String(d.tool_call_id || ""), tool: String(d.tool_name || ""), status: "running",
                 duration: null, output: "", error: "", details: {}};
        st.windows.push(w); byCall[w.id] = w;
      } else if ((t === "tool_result" || t === "error") && byCall.hasOwnProperty(d.tool_call_id)) {
        var win = byCall[d.tool_call_id];
        win.status = (t === "tool_result" && d.success !== false) ? "done" : "failed";
        win.duration = typeof d.duration_ms === "number" ? Math.trunc(d.duration_ms) : null;
        win.output = String(d.output || ev.content || "");
        win.error = String(d.error || (t === "error" ? ev.content : "") || "");
        win.details = d;
        if (t === "error") st.errors.push(win.error);
      } else if (t === "error") {
        st.errors.push(ev.content || String(d.error || ""));
      } else if (t === "references") {
        st.references = d.references || [];
      } else if (t === "thinking") {
        st.thinking += ev.content;
      } else if (t === "answer") {
        st.answer += ev.content;
        if (ev.done) st.answerDone = true;
      } else if (t === "complete") {
        st.complete = true;
      }
    }
    return st;
  }
  function windowLine(w) {
    var label = w.tool.replace(/_/g, " ");
    if (w.status === "running") return "\u2026 " + label;
    var took = w.duration !== null ? " (" + w.duration + " ms)" : "";
    if (w.status === "failed") return "\u2717 " + label + took + ": " + w.error;
    var bits = [];
    ["rewrite_query", "intent", "count", "doc_count"].forEach(function (k) {
      var v = w.details[k];
      if (v !== undefined && v !== null && v !== "") bits.push(k + "=" + v);
    });
    if (w.output) bits.push(w.output);
    return "\u2713 " + label + took + (bits.length ? ": " + bits.join(", ") : "");
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  var $ = function (id) { return document.getElementById(id); };
  var pos = N, timer = null;
  function render(n) {
    pos = n;
    var st = fold(n);
    var prog = $("progress"); prog.textContent = "";
    st.windows.forEach(function (w) { prog.appendChild(el("li", w.status, windowLine(w))); });
    st.errors.forEach(function (e) {
      if (!st.windows.some(function (w) { return w.error === e; })) prog.appendChild(el("li", "failed", "\u2717 " + e));
    });
    $("thinking").textContent = st.thinking;
    $("thinking-section").style.display = st.thinking ? "" : "none";
    $("answer").textContent = displayAnswer(st.answer, st.references, !st.answerDone);
    var refs = $("references"); refs.textContent = "";
    st.references.forEach(function (r, i) {
      var li = el("li");
      li.setAttribute("data-id", r.id || "");
      li.appendChild(el("b", "ref-title", "[" + (i + 1) + "] " + (r.knowledge_title || r.knowledge_filename || r.id || "")));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "ref-id", (r.id || "") + " \u00b7 score " + Number(r.score || 0).toFixed(3)));
      var body = String(r.content || "");
      li.appendChild(el("span", "ref-body", body.length > 300 ? body.slice(0, 300) + "\u2026" : body));
      refs.appendChild(li);
    });
    $("scrub").value = String(n);
    $("status").textContent = "event " + n + "/" + N + " \u00b7 +" + Math.round(st.elapsed * 1000) + " ms" + (st.complete ? " \u00b7 complete" : "");
    document.body.setAttribute("data-position", String(n));
  }
  function stop() { if (timer !== null) { clearTimeout(timer); timer = null; } $("play").textContent = "\u25b6 Play"; }
  function step() {
    if (pos >= N) { stop(); return; }
    render(pos + 1);
    if (pos >= N) { stop(); return; }
    var speed = Number($("speed").value) || 1;
    var gap = Math.min(Math.max(0, events[pos].t - events[pos - 1].t) / speed, 2.0);
    timer = setTimeout(step, gap * 1000);
  }
  $("play").addEventListener("click", function () {
    if (timer !== null) { stop(); return; }
    if (pos >= N) render(0);
    $("play").textContent = "\u275a\u275a Pause";
    timer = setTimeout(step, 0);
  });
  $("scrub").max = String(N);
  $("scrub").addEventListener("input", function () { stop(); render(Number($("scrub").value)); });
  var m = /pos=(\d+)/.exec(location.hash || "");
  render(m ? Math.min(N, Number(m[1])) : N);
  document.body.setAttribute("data-rendered", "js");
})();
