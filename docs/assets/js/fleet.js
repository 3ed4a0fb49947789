// Host vs host: compare any two hosts in the browser, from the data the page carries
// (#almanac-fleet-data, written by pipelines/site/history_pages.py from pipelines.host_vs_fleet.picker_data).
// No network: the data is inline. The run is the unit, as in `invoke compare -b host=A -c host=B`: each
// host's side of a workload is its side estimate (core.stats.side_estimate: the log of the geometric mean
// of its run means, the variance of that log mean and its degrees of freedom), and two sides combine as
// core.stats.combine_sides does: ratio B / A, CI95 on the log scale with the variances added and
// Welch-Satterthwaite degrees of freedom, verdict from B's side (the interval above 1 is a win where
// higher is better). Every value from an artifact reaches the page through textContent.
(function () {
  "use strict";

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // -- Student's t quantile at 0.975 for any df >= 1, fractional ones included (Welch-Satterthwaite gives
  // them): P(T > t) = 0.025 solved by bisection on the regularized incomplete beta (continued fraction).
  // No table, no rounding of df: tests/test_host_vs_fleet.py checks it against scipy within 1e-6 for df
  // from 1 to 1e6, so the picker's interval is core.stats.t_critical's. --
  function lgamma(x) {
    var c = [676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
             12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
    if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lgamma(1 - x);
    x -= 1;
    var a = 0.99999999999980993, t = x + 7.5;
    for (var i = 0; i < 8; i++) a += c[i] / (x + i + 1);
    return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
  }
  function betacf(a, b, x) {
    var qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap, tiny = 1e-300;
    if (Math.abs(d) < tiny) d = tiny;
    d = 1 / d;
    var h = d;
    for (var m = 1; m <= 300; m++) {
      var m2 = 2 * m, aa = m * (b - m) * x / ((qam + m2) * (a + m2));
      d = 1 + aa * d; if (Math.abs(d) < tiny) d = tiny;
      c = 1 + aa / c; if (Math.abs(c) < tiny) c = tiny;
      d = 1 / d; h *= d * c;
      aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
      d = 1 + aa * d; if (Math.abs(d) < tiny) d = tiny;
      c = 1 + aa / c; if (Math.abs(c) < tiny) c = tiny;
      d = 1 / d;
      var del = d * c;
      h *= del;
      if (Math.abs(del - 1) < 1e-15) break;
    }
    return h;
  }
  function ibeta(x, a, b) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    var bt = Math.exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * Math.log(x) + b * Math.log(1 - x));
    return x < (a + 1) / (a + b + 2) ? bt * betacf(a, b, x) / a : 1 - bt * betacf(b, a, 1 - x) / b;
  }
  function tUpper(t, df) { return 0.5 * ibeta(df / (df + t * t), df / 2, 0.5); }  // P(T > t), t >= 0
  function tCritical(df) {  // P(T > t) = 0.025
    var lo = 0, hi = 1;
    while (tUpper(hi, df) > 0.025 && hi < 1e12) hi *= 2;
    for (var i = 0; i < 200; i++) {
      var mid = (lo + hi) / 2;
      if (tUpper(mid, df) > 0.025) lo = mid; else hi = mid;
    }
    return (lo + hi) / 2;
  }

  // a, b: side estimates {lm, v, df, method, why}; the same arithmetic as core.stats.combine_sides
  var NO_POSITIVE = "no positive run means on a side";
  function combine(a, b, hib) {
    if (a.lm === null || b.lm === null) {
      return { ratio: null, lo: null, hi: null, verdict: "insufficient data", method: "runs", note: NO_POSITIVE };
    }
    var ratio = Math.exp(b.lm - a.lm), sides = [a, b];
    for (var i = 0; i < 2; i++) {
      if (sides[i].v === null || sides[i].df === null) {
        return { ratio: ratio, lo: null, hi: null, verdict: "insufficient data", method: "runs", note: sides[i].why || "" };
      }
    }
    var method = a.method === b.method ? a.method : a.method + " / " + b.method;  // core.stats.combined_method
    var se = Math.sqrt(a.v + b.v), lo, hi;
    if (se === 0) { lo = hi = ratio; } else {
      var den = a.v * a.v / a.df + b.v * b.v / b.df;
      var df = den > 0 ? (a.v + b.v) * (a.v + b.v) / den : a.df + b.df;
      var t = tCritical(df);
      lo = ratio * Math.exp(-t * se); hi = ratio * Math.exp(t * se);
    }
    var verdict = lo > 1 ? (hib ? "win" : "loss") : (hi < 1 ? (hib ? "loss" : "win") : "within noise");
    return { ratio: ratio, lo: lo, hi: hi, verdict: verdict, method: method, note: "" };
  }
  // for the tests (tests/test_host_vs_fleet.py checks both against scipy and core.stats)
  window.almanacFleet = { tCritical: tCritical, combine: combine };

  function fmt(v, d) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    return Number(v).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  }

  function readHash() {
    var out = {};
    (location.hash || "").replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }

  function start() {
    var box = document.getElementById("almanac-fleet");
    if (!box || box.dataset.ready) return;
    var dataEl = document.getElementById(box.dataset.spec);
    if (!dataEl) return;
    box.dataset.ready = "1";
    var data = JSON.parse(dataEl.textContent);
    var root = box.dataset.root || "";
    // the data is in columns, repeated strings and tuples once in a table (pipelines.host_vs_fleet.picker_data)
    var hosts = data.hosts.map(function (id, i) {
      var parts = data.labels[i];
      return { id: id, label: parts.length ? parts.map(function (p) { return data.parts[p]; }).join(" · ") : id };
    });
    function runId(run, at) {  // core.records.run.run_id: key prefix, UTC time to the millisecond
      return at === null ? run : run + "-" + new Date(data.at0 + at).toISOString().replace(/[-:]/g, "");
    }
    // per host: workload index -> its side estimate and what the page shows beside it
    var col = data.values, byHost = hosts.map(function () { return {}; }), k = 0;
    data.workloads.forEach(function (w, wi) {
      for (var j = k; j < k + w.size; j++) {
        var s = data.sides[col.side[j]];
        byHost[col.host[j]][wi] = {
          lm: col.log_mean[j], v: s[0], df: s[1], runs: s[2], method: data.methods[s[3]],
          why: s[4] === null ? null : data.why[s[4]], n: col.n[j], id: runId(col.run[j], col.at[j]),
          rank: data.ranks[col.rank[j]]
        };
      }
      k += w.size;
    });
    var MEDIAN = "median";  // host A may be "the median host of each workload": B against the fleet

    var controls = el("div", { "class": "almanac-filters" });
    function picker(name, label) {
      var lab = el("label", null, label + " ");
      var sel = el("select", { "name": name, "aria-label": label });
      if (name === "a") sel.appendChild(el("option", { value: MEDIAN }, "the fleet: each workload's median host"));
      hosts.forEach(function (h, i) {
        sel.appendChild(el("option", { value: String(i) }, (h.label || h.id) + (h.label && h.label !== h.id ? " (" + h.id + ")" : "")));
      });
      lab.appendChild(sel);
      controls.appendChild(lab);
      return sel;
    }
    var selA = picker("a", "Host A (baseline)");
    var selB = picker("b", "Host B");
    var swap = el("button", { type: "button", "class": "md-button" }, "swap");
    controls.appendChild(swap);
    var status = el("p", { "class": "almanac-count", role: "status" });
    // a table without a class gets the theme's table style (Material styles table:not([class]))
    var wrap = el("div", { "class": "almanac-table-wrap almanac-fleet-table" });
    box.appendChild(controls);
    box.appendChild(status);
    box.appendChild(wrap);

    var ids = hosts.map(function (h) { return h.id; });
    var h = readHash();
    selA.value = h.a === MEDIAN ? MEDIAN : String(ids.indexOf(h.a) >= 0 ? ids.indexOf(h.a) : 0);
    selB.value = String(ids.indexOf(h.b) >= 0 ? ids.indexOf(h.b) : Math.min(1, hosts.length - 1));
    if (selA.value === "") selA.value = "0";

    function runLink(id, text) {
      var a = el("a", { href: root + "runs/run/?id=" + encodeURIComponent(id) }, text);
      return a;
    }

    function render() {
      var fleet = selA.value === MEDIAN, ia = fleet ? -1 : +selA.value, ib = +selB.value;
      var names = hosts.map(function (x) { return x.label || x.id; });
      var nameA = fleet ? "each workload's median host" : names[ia];
      wrap.textContent = "";
      if (history.replaceState) history.replaceState(null, "", "#a=" + encodeURIComponent(fleet ? MEDIAN : ids[ia]) + "&b=" + encodeURIComponent(ids[ib]));
      if (ia === ib) { status.textContent = "Pick two different hosts."; return; }
      var rows = [];
      data.workloads.forEach(function (w, wi) {
        var b = byHost[ib][wi], a = fleet ? byHost[w.median][wi] : byHost[ia][wi];
        if (!a || !b) return;
        var c = (fleet && w.median === ib) ? { ratio: 1, lo: null, hi: null, verdict: "median host", note: "" } : combine(a, b, w.hib);
        rows.push({ w: w, a: a, b: b, c: c });
      });
      if (!rows.length) {
        status.textContent = "These two hosts share no workload: nothing to compare.";
        return;
      }
      var wins = rows.filter(function (r) { return r.c.verdict === "win"; }).length;
      var losses = rows.filter(function (r) { return r.c.verdict === "loss"; }).length;
      status.textContent = rows.length + " shared workload(s); B = " + names[ib] + " against A = " + nameA + ": " +
        wins + " win(s), " + losses + " loss(es), " + (rows.length - wins - losses) + " within noise or without an interval.";
      var t = el("table");
      var head = el("tr");
      ["workload (metric)", "A", "B", "B/A [CI95]", "verdict", "B's rank"].forEach(function (x) { head.appendChild(el("th", null, x)); });
      var thead = el("thead"); thead.appendChild(head); t.appendChild(thead);
      var tb = el("tbody");
      rows.forEach(function (r) {
        var tr = el("tr"), d = r.w.decimals;
        var wd = el("td", null, r.w.label);
        wd.appendChild(el("br"));
        wd.appendChild(el("small", null, r.w.metric + " (" + r.w.unit + ", " + (r.w.hib ? "higher" : "lower") + " is better)"));
        tr.appendChild(wd);
        [r.a, r.b].forEach(function (v) {  // as `invoke compare` writes a side
          var td = el("td", { "class": "almanac-num" });
          var value = v.lm === null ? "—" : fmt(Math.exp(v.lm), d);
          td.appendChild(runLink(v.id, value));
          td.appendChild(el("br"));
          td.appendChild(el("small", null, (v.runs > 1 ? v.runs + " runs" : "1 run") + ", n=" + v.n + " · " + v.method));
          tr.appendChild(td);
        });
        var ratio = r.c.verdict === "median host" ? "1 (median host)" : r.c.ratio === null ? "—" : fmt(r.c.ratio, 3) +
          (r.c.lo === null ? (r.c.note ? " (no interval: " + r.c.note + ")" : "") : " [" + fmt(r.c.lo, 3) + ", " + fmt(r.c.hi, 3) + "]");
        tr.appendChild(el("td", { "class": "almanac-num" }, ratio));
        var cls = r.c.verdict === "win" ? "almanac-verdict-win" : (r.c.verdict === "loss" ? "almanac-verdict-loss" : "almanac-verdict-noise");
        var vd = el("td"); vd.appendChild(el("span", { "class": cls }, r.c.verdict)); tr.appendChild(vd);
        tr.appendChild(el("td", { "class": "almanac-num" }, r.b.rank + " of " + r.w.size));
        tb.appendChild(tr);
      });
      t.appendChild(tb);
      wrap.appendChild(t);
    }
    selA.addEventListener("change", render);
    selB.addEventListener("change", render);
    swap.addEventListener("click", function () { var x = selA.value; selA.value = selB.value; selB.value = x; render(); });
    render();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
