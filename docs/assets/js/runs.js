// The runs browser and the artifact viewer: plain JS, no library, no network beyond the site.
//
// The browser (an element #almanac-browser) reads the index the build wrote beside the page
// (window.ALMANAC_INDEX, a script loaded before this one) and shows it as a table that can be
// filtered and sorted; the filters live in the URL fragment, so a filtered list is a link.
// The viewer (#almanac-viewer) shows one artifact from its published JSON (data/...).
// Every value from an artifact reaches the page through textContent, never as HTML.
(function () {
  "use strict";
  var PAGE = 100;

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function decode(index) {
    // rows hold indexes into index.values[col] for dictionary-encoded columns
    var cols = index.columns;
    return index.rows.map(function (r) {
      var o = {};
      cols.forEach(function (c, i) { o[c.name] = c.dict ? index.values[c.name][r[i]] : r[i]; });
      return o;
    });
  }

  function parseHash() {
    var out = {};
    (location.hash || "").replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var i = kv.indexOf("=");
      if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }

  function writeHash(state) {
    var parts = [];
    Object.keys(state).forEach(function (k) {
      if (state[k] !== "" && state[k] !== undefined && state[k] !== null)
        parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(state[k]));
    });
    var h = parts.length ? "#" + parts.join("&") : "";
    if (h !== location.hash) history.replaceState(null, "", location.pathname + location.search + (h || ""));
  }

  function fmt(v, c) {
    if (v === null || v === undefined || v === "") return "—";
    if (c.type === "num") return Number(v).toLocaleString("en-US", c.decimals === undefined ? { maximumFractionDigits: 2 }
      : { minimumFractionDigits: c.decimals, maximumFractionDigits: c.decimals });
    return String(v);
  }

  // -- the browser --------------------------------------------------------------------
  function browser(root) {
    var index = window.ALMANAC_INDEX && window.ALMANAC_INDEX[root.dataset.kind];
    if (!index) { root.textContent = "The index of this page did not load."; return; }
    var rows = decode(index);
    var cols = index.columns.filter(function (c) { return !c.hidden; });
    var state = parseHash();
    var sortKey = state.sort || index.default_sort, sortDir = state.dir || "desc";
    var page = 0;

    var form = el("form", { "class": "almanac-filters", role: "search", "aria-label": "filter " + index.title });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    var controls = {};
    index.columns.forEach(function (c) {
      if (!c.filter) return;
      var label = el("label", null, c.label + " ");
      var sel = el("select", { name: c.name, "data-filter": c.name });
      sel.appendChild(el("option", { value: "" }, "all"));
      var counts = {};
      rows.forEach(function (r) { counts[r[c.name]] = (counts[r[c.name]] || 0) + 1; });
      Object.keys(counts).sort().forEach(function (v) {
        if (v === "" || v === "null" || v === "undefined") return;  // no value (e.g. no reference model): "all" covers it
        var o = el("option", { value: v }, v + " (" + counts[v] + ")");
        sel.appendChild(o);
      });
      sel.value = state[c.name] && counts[state[c.name]] ? state[c.name] : "";
      label.appendChild(sel);
      form.appendChild(label);
      controls[c.name] = sel;
    });
    ["from", "to"].forEach(function (k) {
      var label = el("label", null, (k === "from" ? "measured from " : "to "));
      var inp = el("input", { type: "date", name: k, "data-filter": k });
      if (state[k]) inp.value = state[k];
      label.appendChild(inp);
      form.appendChild(label);
      controls[k] = inp;
    });
    var reset = el("button", { type: "button", "class": "md-button" }, "clear filters");
    form.appendChild(reset);
    var count = el("p", { "class": "almanac-count", "aria-live": "polite" });
    var wrap = el("div", { "class": "almanac-table-wrap" });
    var table = el("table", { "class": "almanac-browser-table" });
    var thead = el("thead"), tbody = el("tbody");
    var tr = el("tr");
    cols.forEach(function (c) {
      var th = el("th", { scope: "col", "data-col": c.name });
      var b = el("button", { type: "button", "class": "almanac-sort", "data-sort": c.name }, c.label);
      b.addEventListener("click", function () {
        if (sortKey === c.name) sortDir = sortDir === "asc" ? "desc" : "asc";
        else { sortKey = c.name; sortDir = c.type === "num" ? "desc" : "asc"; }
        page = 0; update();
      });
      th.appendChild(b);
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    table.appendChild(thead);
    table.appendChild(tbody);
    wrap.appendChild(table);
    var nav = el("p", { "class": "almanac-pager" });
    var prev = el("button", { type: "button", "class": "md-button" }, "← previous");
    var next = el("button", { type: "button", "class": "md-button" }, "next →");
    var where = el("span");
    nav.appendChild(prev); nav.appendChild(where); nav.appendChild(next);
    prev.addEventListener("click", function () { page = Math.max(0, page - 1); update(); });
    next.addEventListener("click", function () { page += 1; update(); });
    root.textContent = "";
    root.appendChild(form); root.appendChild(count); root.appendChild(wrap); root.appendChild(nav);

    Object.keys(controls).forEach(function (k) {
      controls[k].addEventListener("change", function () { page = 0; update(); });
    });
    reset.addEventListener("click", function () {
      Object.keys(controls).forEach(function (k) { controls[k].value = ""; });
      page = 0; update();
    });

    function current() {
      var f = {};
      Object.keys(controls).forEach(function (k) { f[k] = controls[k].value; });
      return f;
    }

    function update() {
      var f = current();
      var shown = rows.filter(function (r) {
        for (var k in f) {
          if (!f[k]) continue;
          if (k === "from") { if (String(r.created).slice(0, 10) < f[k]) return false; continue; }
          if (k === "to") { if (String(r.created).slice(0, 10) > f[k]) return false; continue; }
          if (String(r[k]) !== f[k]) return false;
        }
        return true;
      });
      var col = index.columns.filter(function (c) { return c.name === sortKey; })[0] || index.columns[0];
      var sign = sortDir === "asc" ? 1 : -1;
      shown.sort(function (a, b) {
        var x = a[col.name], y = b[col.name];
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        if (col.type === "num") return sign * (x - y);
        return sign * String(x).localeCompare(String(y));
      });
      var pages = Math.max(1, Math.ceil(shown.length / PAGE));
      page = Math.min(page, pages - 1);
      tbody.textContent = "";
      shown.slice(page * PAGE, page * PAGE + PAGE).forEach(function (r) {
        var tr = el("tr", { "data-id": r.id });
        cols.forEach(function (c) {
          var td = el("td", c.type === "num" ? { "class": "almanac-num" } : null);
          if (c.name === "id") {
            td.appendChild(el("a", { href: root.dataset.viewer + "?id=" + encodeURIComponent(r.id) }, r.id));
          } else if (c.name === "json") {
            td.appendChild(el("a", { href: root.dataset.root + r.json, download: "", title: "the artifact's JSON" }, "JSON"));
          } else {
            td.textContent = fmt(r[c.name], c) + (c.unit_col && r[c.unit_col] && r[c.name] !== null ? " " + r[c.unit_col] : "") +
              (c.se_col && r[c.name] !== null && r[c.name] !== undefined && r[c.se_col] !== null && r[c.se_col] !== undefined
                ? " ± " + fmt(r[c.se_col], c) : "");
          }
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
      });
      thead.querySelectorAll("th").forEach(function (th) {
        th.setAttribute("aria-sort", th.dataset.col === sortKey ? (sortDir === "asc" ? "ascending" : "descending") : "none");
      });
      count.textContent = shown.length + " of " + rows.length + " " + index.noun + " match";
      where.textContent = " page " + (page + 1) + " of " + pages + " ";
      prev.disabled = page === 0;
      next.disabled = page >= pages - 1;
      var st = {};
      Object.keys(f).forEach(function (k) { st[k] = f[k]; });
      if (sortKey !== index.default_sort || sortDir !== "desc") { st.sort = sortKey; st.dir = sortDir; }
      writeHash(st);
    }
    update();
  }

  // -- the viewer -----------------------------------------------------------------------
  function kvTable(obj) {
    var t = el("table"), tb = el("tbody");
    t.appendChild(el("thead")).appendChild(el("tr"));
    t.tHead.rows[0].appendChild(el("th", null, "field"));
    t.tHead.rows[0].appendChild(el("th", null, "value"));
    Object.keys(obj || {}).sort().forEach(function (k) {
      var v = obj[k];
      var tr = el("tr");
      tr.appendChild(el("td")).appendChild(el("code", null, k));
      tr.appendChild(el("td", null, typeof v === "string" ? v : JSON.stringify(v)));
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    var w = el("div", { "class": "almanac-table-wrap" });
    w.appendChild(t);
    return w;
  }

  function pre(text) { return el("pre", { "class": "almanac-pre" }, text); }

  function section(parent, id, title, nodes, folded) {
    var h = el("h2", { id: id }, title);
    if (folded) {
      var d = el("details");
      d.appendChild(el("summary", null, "show"));
      nodes.forEach(function (n) { d.appendChild(n); });
      parent.appendChild(h);
      parent.appendChild(d);
    } else {
      parent.appendChild(h);
      nodes.forEach(function (n) { parent.appendChild(n); });
    }
  }

  function table(headers, rows) {
    var t = el("table"), tr = el("tr");
    headers.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    t.appendChild(el("thead")).appendChild(tr);
    var tb = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c) { row.appendChild(el("td", null, c)); });
      tb.appendChild(row);
    });
    t.appendChild(tb);
    var w = el("div", { "class": "almanac-table-wrap" });
    w.appendChild(t);
    return w;
  }

  function num(v, d) {
    if (v === null || v === undefined) return "—";
    return Number(v).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  }

  function pct(v) { return v === null || v === undefined ? "—" : Math.round(100 * v) + "%"; }

  function ci(lo, hi, d) {
    return lo === null || lo === undefined ? "—" : num(lo, d) + " – " + num(hi, d);
  }

  // The CI95 of a mean kept in its domain, as the site's pages show it (core.stats.mean_interval):
  // none below 3 samples; a quantity never negative gets its interval on the log scale. An artifact
  // written before that rule stores the symmetric t interval: it is converted (same half-width).
  function meanCi(x, d) {
    if (x.n === null || x.n === undefined || x.n < 3) return "— (fewer than 3 samples)";
    var lo = x.ci95_low, hi = x.ci95_high, m = x.mean;
    if (lo === null || lo === undefined || m === null || m === undefined) return "—";
    var nonNegative = x.min === null || x.min === undefined || x.min >= 0;
    var symmetric = Math.abs((m - lo) - (hi - m)) <= 1e-9 * Math.max(1, Math.abs(m));
    if (nonNegative && m > 0 && symmetric && hi > lo) {
      var rel = (hi - lo) / 2 / m;
      lo = m * Math.exp(-rel);
      hi = m * Math.exp(rel);
    }
    return ci(lo, hi, d);
  }

  // Outliers (flagged by median ± 3.5 robust sd, kept) and a drift that says the warm-up was not enough.
  function flags(x) {
    var parts = [];
    if (x.outliers && x.outliers.length) {
      parts.push("outlier sample" + (x.outliers.length > 1 ? "s " : " ") +
        x.outliers.map(function (i) { return "#" + (i + 1); }).join(", ") + " (kept)");
    }
    var t = x.trend || {};
    if (t.monotonic) parts.push("drift across repetitions (Kendall τ " + num(t.tau, 2) + ", p " + num(t.p_value, 3) + "): warm-up not enough?");
    else if (t.first_sample_outlier) parts.push("first sample apart: warm-up not enough?");
    return parts.join("; ");
  }

  // How repetition stopped: the target, the half-width reached, met or not, why.
  function precisionLine(p) {
    if (p.target_rel === null || p.target_rel === undefined) return "Repetitions: a fixed count (" + num(p.n, 0) + ").";
    var why = { target_met: "the target was met", max_repetitions: "the count ceiling was hit",
      max_time_s: "the time ceiling was hit" }[p.stop_reason] || String(p.stop_reason);
    var hw = p.half_width_rel === null || p.half_width_rel === undefined ? null : p.half_width_rel * 100;
    return "Precision: target CI95 half-width ±" + num(p.target_rel * 100, 1) + "% of the mean of " + String(p.metric) +
      "; reached ±" + num(hw, 2) + "% with " + num(p.n, 0) + " samples (" + (p.met ? "met" : "not met") +
      "); stopped because " + why + ".";
  }

  // a share is stored as a fraction and shown in % (the metric's display scale, 100)
  function scaled(x, k) {
    if (k === 1) return x;
    var o = {};
    Object.keys(x).forEach(function (key) {
      o[key] = typeof x[key] === "number" && key !== "n" ? x[key] * k : x[key];
    });
    return o;
  }

  function renderRun(out, doc, index) {
    var metrics = index.metrics || {};
    var s = doc.summary || {};
    var names = Object.keys(s).sort();
    if (names.length) {
      var parts = [table(["metric", "mean", "stddev", "n", "CI95", "median", "median CI95", "p95", "p99", "flags"],
        names.map(function (n) {
          var m = metrics[n] || [n, "", 2], x = scaled(s[n] || {}, m[3] || 1), d = m[2];
          return [m[0] + (m[1] ? " (" + m[1] + ")" : ""), num(x.mean, d), num(x.stddev, d), num(x.n, 0),
            meanCi(x, d), num(x.median, d), ci(x.median_ci95_low, x.median_ci95_high, d),
            num(x.p95, d), num(x.p99, d), flags(x)];
        }))];
      var prec = (doc.details || {}).precision;
      if (prec) parts.push(el("p", null, precisionLine(prec)));
      section(out, "summary", "Summary", parts);
    }
    section(out, "test", "Test", [kvTable(doc.test)]);
    var st = doc.settings || {};
    section(out, "settings", "Settings", [el("p", null, "What was asked (defaults included) and what really ran (read back from the backend and its log)."),
      el("h3", null, "Requested"), kvTable(st.requested), el("h3", null, "Effective"), kvTable(st.effective)]);
    var m = doc.model || {}, model = {};
    Object.keys(m).forEach(function (k) { if (k !== "gguf" && k !== "metadata" && k !== "reported") model[k] = m[k]; });
    if (m.kind === "endpoint") {  // no local file: what its server reported instead of GGUF facts
      section(out, "model", "Model", [el("p", null, "An endpoint model, measured through the server that serves it (" +
        (m.server || "unknown") + " at " + m.base_url + "): no local file, so no file name, sha256 or GGUF facts. Its " +
        "identity is computed from what the server reports: " + ((m.identity_basis || []).join(", ") || "the served name only") + "."),
        kvTable(model), el("h3", null, "What the server reported"), kvTable(m.reported)]);
    } else {
      section(out, "model", "Model", [kvTable(model), el("h3", null, "GGUF facts"), kvTable(m.gguf)]);
    }
    section(out, "host", "Host", [kvTable(doc.host)], true);
    section(out, "build", "Build", [kvTable(doc.build)], true);
    section(out, "resources", "Resources", [kvTable(doc.resources)], true);
    section(out, "raw-samples", "Raw samples", [pre(JSON.stringify(doc.samples, null, 1))], true);
    if (doc.details) section(out, "details", "Details", [pre(JSON.stringify(doc.details, null, 1))], true);
    section(out, "log-tail", "Log (tail)", [pre(doc.log_tail || "")], true);
  }

  function renderQuality(out, doc) {
    var s = doc.summary || {};
    var suite = doc.suite || {};
    out.appendChild(el("p", null, "Suite " + suite.name + " v" + suite.version + " (" + suite.category + ", " +
      suite.n_items_in_suite + " items; sample of " + ((suite.sample || {}).ids || []).length + " with seed " +
      (suite.sample || {}).seed + ")"));
    section(out, "summary", "Summary", [table(["scored", "passed", "pass rate", "CI95 (Wilson)", "degenerate", "generation errors"],
      [[num(s.n, 0), num(s.passed, 0), pct(s.pass_rate), pct(s.ci95_low) + " – " + pct(s.ci95_high), num(s.degenerate, 0),
        num(s.generation_errors, 0)]])]);
    var items = doc.items || [];
    var nodes = [table(["item", "tags", "scorer", "verdict", "degeneration", "output tokens"], items.map(function (it) {
      return [it.id, (it.tags || []).join(", ") || "—", it.scorer, it.passed ? "pass" : "fail",
        ((it.degeneration || {}).flags || []).join(", ") || "—", num((it.timing || {}).output_tokens, 0)];
    }))];
    items.forEach(function (it) {
      var d = el("details", { "class": "almanac-item", id: "item-" + String(it.id).toLowerCase().replace(/[^a-z0-9]+/g, "-") });
      d.appendChild(el("summary", null, it.id + ": " + (it.passed ? "pass" : "fail")));
      d.appendChild(el("p", null, "expected: " + it.expected + " · scorer " + it.scorer + " v" + it.scorer_version));
      if (it.error) d.appendChild(el("p", null, "generation error: " + it.error));
      if ((it.degeneration || {}).degenerate) d.appendChild(el("p", null, "degenerate: " + (it.degeneration.reasons || []).join("; ")));
      d.appendChild(el("p", null, "Prompt:")); d.appendChild(pre(it.prompt));
      d.appendChild(el("p", null, "Output:")); d.appendChild(pre(it.output || "(empty)"));
      d.appendChild(el("p", null, "Scorer evidence:")); d.appendChild(pre(JSON.stringify(it.details, null, 1)));
      nodes.push(d);
    });
    section(out, "items", "Items", nodes);
    section(out, "configuration", "Configuration", [pre(JSON.stringify({ settings: doc.settings, generation: doc.generation }, null, 1))], true);
    section(out, "host", "Host and build", [pre(JSON.stringify({ host: doc.host, build: doc.build, resources: doc.resources, sandbox: doc.sandbox }, null, 1))], true);
    section(out, "log-tail", "Log (tail)", [pre(doc.log_tail || "")], true);
  }

  function pm(v, se, d) {
    if (v === null || v === undefined) return "—";
    return num(v, d) + (se === null || se === undefined ? "" : " ± " + num(se, d));
  }

  function pctPm(v, se, d) {
    if (v === null || v === undefined) return "—";
    return num(100 * v, d) + (se === null || se === undefined ? "" : " ± " + num(100 * se, d)) + "%";
  }

  function modelLine(m) {
    if (!m) return "none";
    return m.name + " (" + (m.quantization || "?") + ", sha256 " + String(m.sha256 || "").slice(0, 12) + ", " +
      num(m.size_bytes, 0) + " bytes)";
  }

  // A perplexity artifact: its inputs, the figures with their standard errors, the per-chunk values.
  function renderPerplexity(out, doc) {
    var ref = doc.reference, text = doc.text || {}, method = doc.method || {}, r = doc.results || {};
    var inputs = [["model", modelLine(doc.model)], ["reference model", modelLine(ref)],
      ["text", text.name + (text.description ? ": " + text.description : "")], ["text source", text.source || "—"],
      ["text licence", text.licence || "—"], ["text tokens", num(text.n_tokens, 0)],
      ["method", "n_ctx " + method.n_ctx + ", " + method.n_chunk + " chunks, " + method.scored_per_chunk +
        " scored tokens per chunk; " + (method.anchor || "")],
      ["host", (doc.host || {}).id]];
    var derived = (doc.model || {}).derived;
    if (derived) inputs.splice(1, 0, ["derived from", derived.from + " (" + String(derived.source_sha256 || "").slice(0, 12) + "): " + derived.command]);
    section(out, "inputs", "Inputs", [table(["input", "value"], inputs)]);
    if (doc.status === "ok") {
      var rows = [["PPL", pm(r.ppl, r.ppl_se, 4)], ["mean NLL", pm(r.nll_mean, r.nll_se, 5)], ["scored tokens", num(r.n_scored_tokens, 0)]];
      if (ref) {
        rows.push(["PPL of the reference", pm(r.ppl_reference, r.ppl_reference_se, 4)],
          ["ln(PPL / PPL ref)", pm(r.ln_ppl_ratio, r.ln_ppl_ratio_se, 5)], ["mean KLD", pm(r.kld_mean, r.kld_se, 6)],
          ["median KLD", num(r.kld_median, 6)], ["99th percentile KLD", num(r.kld_p99, 6)], ["maximum KLD", num(r.kld_max, 6)],
          ["same top token", pctPm(r.same_top, r.same_top_se, 2)]);
      }
      var fig = table(["figure", "value"], rows);
      fig.setAttribute("id", "perplexity-figures");
      section(out, "results", "Results", [el("p", null, "± is the standard error of the mean over the scored tokens " +
        "(llama-perplexity's estimate)."), fig]);
      var chunks = doc.chunks || [];
      section(out, "chunks", "Per chunk (" + chunks.length + ")", [table(["chunk", "tokens", "PPL"].concat(ref ? ["mean KLD", "same top"] : []),
        chunks.map(function (c) {
          var row = [num(c.index, 0), num(c.n, 0), num(c.ppl, 3)];
          return ref ? row.concat([num(c.kld_mean, 5), c.same_top === null || c.same_top === undefined ? "—" : num(100 * c.same_top, 1) + "%"]) : row;
        }))], true);
    }
    section(out, "settings", "Settings", [kvTable(doc.settings)], true);
    section(out, "build", "Build", [kvTable(doc.build)], true);
    section(out, "host", "Host", [kvTable(doc.host)], true);
    section(out, "resources", "Resources", [kvTable(doc.resources)], true);
    if (doc.log_tail !== undefined) section(out, "log-tail", "Log (tail)", [pre(doc.log_tail || "")], true);
  }

  var RENDER = { quality: renderQuality, perplexity: renderPerplexity };

  function viewer(root) {
    var index = window.ALMANAC_INDEX && window.ALMANAC_INDEX[root.dataset.kind];
    var id = new URLSearchParams(location.search).get("id");
    var status = el("p", { "class": "almanac-count" });
    root.textContent = "";
    root.appendChild(status);
    if (!index) { status.textContent = "The index of this page did not load."; return; }
    if (!id) { status.textContent = "No artifact chosen: pick one in the list."; return; }
    var row = decode(index).filter(function (r) { return r.id === id; })[0];
    if (!row) { status.textContent = "No artifact with id " + id + " in this site."; return; }
    var url = root.dataset.root + row.json;
    var head = document.querySelector(".md-content h1");
    if (head) head.textContent = row.title;
    else root.insertBefore(el("h1", null, row.title), status);
    var p = el("p", { "class": "almanac-meta" });
    p.appendChild(el("strong", null, "Artifact "));
    p.appendChild(el("code", null, row.id));
    p.appendChild(document.createTextNode(" · status " + row.status + " · created " + row.created + " · file "));
    p.appendChild(el("code", null, row.json));
    p.appendChild(document.createTextNode(" · "));
    p.appendChild(el("a", { href: url, download: "", "class": "almanac-json-link" }, "download JSON"));
    root.insertBefore(p, status);
    document.title = row.title + " - " + document.title;
    status.textContent = "loading " + row.json + " …";
    if (location.protocol === "file:") {
      status.textContent = "Browsers do not let a page opened from disk read files: serve the site (invoke site.serve) or open the JSON above.";
      return;
    }
    fetch(url).then(function (r) {
      if (!r.ok) throw new Error(r.status + " " + r.statusText);
      return r.json();
    }).then(function (doc) {
      status.textContent = "";
      if (doc.synthetic || (doc.model && doc.model.synthetic)) {
        root.insertBefore(el("span", { "class": "almanac-badge synthetic", title: "random weights: the text is noise" }, "synthetic weights, speed only"), status);
      }
      if (doc.error) {
        var a = el("div", { "class": "admonition failure" });
        a.appendChild(el("p", { "class": "admonition-title" }, "Failed: " + (doc.error.kind || "")));
        a.appendChild(el("p", null, doc.error.message || ""));
        root.insertBefore(a, status);
      }
      // a run whose levels store a reservoir sample of their requests: how many, and every record beside it
      var rr = doc.details && doc.details.request_records;
      if (rr && rr.sampled) {
        var s = el("p", { "class": "almanac-meta" });
        s.appendChild(document.createTextNode("Request records: " + rr.kept + " of " + rr.of +
          " stored (a seeded reservoir sample per level; every figure is over all " + rr.of + ")"));
        var full = rr.full && typeof rr.full.file === "string" && /^[^\/.][^\/]*\.requests\.jsonl\.gz$/.test(rr.full.file) ? rr.full.file : null;
        if (full) {
          s.appendChild(document.createTextNode(" · "));
          s.appendChild(el("a", { href: url.replace(/[^\/]*$/, "") + encodeURIComponent(full), download: "" }, "every record (JSON lines, gzip)"));
        }
        root.insertBefore(s, status);
      }
      var out = el("div", { "class": "almanac-artifact" });
      (RENDER[doc.artifact] || renderRun)(out, doc, index);
      root.appendChild(out);
      root.classList.add("almanac-viewer-ready");
    }).catch(function (err) { status.textContent = "could not load " + row.json + ": " + err; console.error(err); });
  }

  function start() {
    document.querySelectorAll("#almanac-browser").forEach(browser);
    document.querySelectorAll("#almanac-viewer").forEach(viewer);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
