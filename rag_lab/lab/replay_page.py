"""The standalone HTML replay page (:func:`export_replay_html`): one self-contained file with the
final answer, the references and a small JavaScript player over the stored stream events (the
same fold as :func:`rag_lab.lab.replay.stream_state`); no network, no server, no kernel. See
:mod:`rag_lab.lab.widgets` for why it is not an ipywidgets embed."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_lab.lab.replay import display_answer

__all__ = ["export_replay_html", "replay_page_data"]


def replay_page_data(capture: Any) -> dict[str, Any]:
    """The JSON the exported page embeds: question, answer, references and the stream events."""
    events = []
    for ev in capture.events:
        events.append(
            {"type": str(ev.type), "content": ev.content, "done": ev.done, "t": ev.timestamp, "data": ev.data}
        )
    return {
        "question": getattr(capture, "question", ""),
        "answer": getattr(capture, "answer", ""),
        "references": [r.to_dict() for r in getattr(capture, "references", [])],
        "created_at": getattr(capture, "created_at", "") or datetime.now(UTC).isoformat(timespec="seconds"),
        "rag_lab_version": getattr(capture, "rag_lab_version", ""),
        "events": events,
    }


def _script_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:16px 24px;color:#1f2328;max-width:1100px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:14px;margin:0 0 6px;color:#57606a;text-transform:uppercase;letter-spacing:.04em}
.meta{color:#57606a;font-size:12px;margin:0 0 10px} .question{font-size:16px;margin:6px 0 12px}
#controls{display:flex;gap:10px;align-items:center;margin:8px 0 14px;font-size:13px}
#scrub{flex:1} button{font-size:13px;padding:3px 12px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
section{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px}
section.wide{grid-column:1 / span 2}
#answer{white-space:pre-wrap;font-size:15px;line-height:1.45}
#thinking{white-space:pre-wrap;color:#57606a;margin:0;font-size:12px}
#progress{margin:0;padding-left:18px;font-size:13px} .running{color:#9a6700}.done{color:#1a7f37}.failed{color:#cf222e}
#references{margin:0;padding-left:0;list-style:none;font-size:13px} #references li{margin:0 0 8px}
.ref-id{color:#57606a;font-size:11px} .ref-body{color:#57606a;display:block;margin-top:2px}
sup.cite{color:#0969da}
"""

# The fold below mirrors rag_lab.lab.replay.stream_state / display_answer.
_JS = r"""
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
"""


def export_replay_html(capture: Any, path: str | Path, title: str | None = None) -> Path:
    """Write a standalone HTML replay of ``capture`` (a Capture or a Run) to ``path``.

    The page opens on the final state (answer with ``[n]`` citation marks, references, progress
    windows); Play replays the stream with its recorded timing, the slider scrubs, and
    ``page.html#pos=K`` opens it after K events. It needs no network and no server.
    """
    esc = html.escape
    data = replay_page_data(capture)
    refs = getattr(capture, "references", [])
    final = display_answer(data["answer"], refs, partial=False)
    static_refs = "".join(
        f"<li>[{n}] {esc(r.knowledge_title or r.knowledge_filename or r.id)} ({esc(r.id)})</li>"
        for n, r in enumerate(refs, 1)
    )
    heading = title or "rag_lab replay"
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rag_lab {esc(data["rag_lab_version"])}">
<title>{esc(heading)}: {esc(data["question"][:80])}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{esc(heading)}</h1>
<p class="meta">captured {esc(str(data["created_at"]))} · {len(data["events"])} stream events · rag_lab {esc(data["rag_lab_version"])}</p>
<p class="question"><b>Q:</b> <span id="question">{esc(data["question"])}</span></p>
<div id="controls"><button id="play" type="button">&#9654; Play</button>
<input id="scrub" type="range" min="0" max="{len(data["events"])}" value="{len(data["events"])}" aria-label="stream position">
<label>speed <select id="speed"><option value="0.5">0.5×</option><option value="1" selected>1×</option><option value="2">2×</option><option value="5">5×</option></select></label>
<span id="status"></span></div>
<div class="grid">
<section class="wide"><h2>Answer</h2><div id="answer"></div></section>
<section><h2>Progress</h2><ul id="progress"></ul></section>
<section><h2>References</h2><ol id="references"></ol></section>
<section class="wide" id="thinking-section"><h2>Thinking</h2><pre id="thinking"></pre></section>
</div>
<noscript><section><h2>Final answer</h2><div style="white-space:pre-wrap">{esc(final)}</div>
<h2>References</h2><ol>{static_refs}</ol></section></noscript>
<script id="capture-data" type="application/json">{_script_json(data)}</script>
<script>{_JS}</script>
</body>
</html>
"""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(page, encoding="utf-8")
    return p
