// Render every chart on the page from its inert JSON spec, with the bundled vega-embed, in the reader's
// colour scheme (Material's data-md-color-scheme: default or slate) and at its container's width; again
// when the reader toggles the scheme or the width changes (a phone turned, a fold opened).
//
// The schemes' Vega-Lite configs and the dark colour of each mark colour come from
// window.almanacChartTheme (assets/js/chart-theme.js, written at build time from
// pipelines/site/charts.py). A chart is never scaled down to fit: it is laid out at the width it has
// (single views: width "container"; concatenations: stacked below NARROW px, their views sized to fit),
// its long titles wrap and its labels are limited, so its text stays at the theme's size.
// A chart hidden in a closed fold is rendered when it shows. Each rendered chart carries
// class almanac-chart-ready and data-scheme (the scheme it was drawn in).
(function () {
  "use strict";
  var THEME = window.almanacChartTheme || { light: {}, dark: {}, darkColors: {}, font: "sans-serif", textPx: 12 };
  var NARROW = 600;
  var AXIS_ROOM = 70; // a first guess at what a y axis (labels and title) takes beside a concatenated view
  var state = new WeakMap(); // chart element -> {result, width, scheme}
  var timers = new WeakMap();

  function scheme() {
    return document.body && document.body.getAttribute("data-md-color-scheme") === "slate" ? "dark" : "light";
  }

  function isObj(o) { return o !== null && typeof o === "object" && !Array.isArray(o); }

  function merge(base, over) {
    var out = {};
    Object.keys(base || {}).forEach(function (k) { out[k] = base[k]; });
    Object.keys(over || {}).forEach(function (k) {
      out[k] = isObj(out[k]) && isObj(over[k]) ? merge(out[k], over[k]) : over[k];
    });
    return out;
  }

  var canvas;
  function textWidth(text, px, bold) {
    canvas = canvas || document.createElement("canvas");
    var ctx = canvas.getContext("2d");
    ctx.font = (bold ? "bold " : "") + px + "px " + THEME.font;
    return ctx.measureText(text).width;
  }

  // A title as lines of at most ``max`` px (a one-line title stays a string).
  function wrap(text, px, max, bold) {
    if (typeof text !== "string" || max <= 0 || textWidth(text, px, bold) <= max) return text;
    var lines = [], line = "";
    text.split(" ").forEach(function (word) {
      var next = line ? line + " " + word : word;
      if (line && textWidth(next, px, bold) > max) { lines.push(line); line = word; } else { line = next; }
    });
    if (line) lines.push(line);
    return lines.length > 1 ? lines : text;
  }

  function wrapTitle(title, px, max) {  // a chart's title (bold)
    if (isObj(title)) { title.text = wrap(title.text, title.fontSize || px, max, true); return title; }
    return wrap(title, px, max, true);
  }

  // Mark colours of the light scheme replaced by their dark counterparts (data rows left alone).
  function recolor(node, map) {
    if (Array.isArray(node)) {
      node.forEach(function (v, i) {
        if (typeof v === "string" && map[v.toLowerCase()]) node[i] = map[v.toLowerCase()];
        else recolor(v, map);
      });
    } else if (isObj(node)) {
      Object.keys(node).forEach(function (k) {
        if (k === "data" || k === "datasets") return;
        var v = node[k];
        if (typeof v === "string" && map[v.toLowerCase()]) node[k] = map[v.toLowerCase()];
        else recolor(v, map);
      });
    }
  }

  var LEGENDS = ["color", "fill", "stroke", "size", "shape", "opacity", "strokeDash"];
  var PARTS = " · "; // how the site's labels join their parts (model · test · host ...)

  // The distinct values of ``field`` in the inline data of a view and its layers (rows inline, or
  // named in the top level's datasets, as Altair writes them).
  function valuesOf(view, field, datasets, out) {
    out = out || {};
    var data = view.data || {};
    var rows = Array.isArray(data.values) ? data.values : (data.name && datasets[data.name]) || [];
    rows.forEach(function (r) { if (r && r[field] !== undefined && r[field] !== null) out[String(r[field])] = 1; });
    (view.layer || []).forEach(function (l) { valuesOf(l, field, datasets, out); });
    return out;
  }

  // A label's pieces for packing into lines: its parts (joined by PARTS, which stays at the end of a
  // line); a part wider than ``limit`` px breaks into words, and a word still wider after - or /.
  function pieces(label, limit, px) {
    var out = [], parts = label.split(PARTS);
    parts.forEach(function (part, i) {
      var sub = [part], last = i === parts.length - 1;
      if (textWidth(part + (last ? "" : " ·"), px) > limit) {
        sub = [];
        var words = part.split(/(?<= )/);
        words.forEach(function (word, j) {
          var end = j === words.length - 1 && !last ? " ·" : ""; // the joiner ends this word's line
          if (textWidth(word.trimEnd() + end, px) > limit) sub.push.apply(sub, word.split(/(?<=[-\/])/));
          else sub.push(word);
        });
      }
      if (!last) sub[sub.length - 1] += PARTS;
      out.push.apply(out, sub);
    });
    return out;
  }

  var MAX_LINES = 4; // a label longer than this many lines ends in "…" (its tooltip and the table have it all)

  // Labels wider than ``limit`` px, on lines: their pieces packed greedily, as few lines as fit (a piece
  // still too wide is cut by the label limit), at most MAX_LINES. Null when every label fits on one
  // line; else {expr: a labelExpr, lines: the most lines a label takes}.
  function labelLines(labels, limit) {
    var px = THEME.textPx || 12, map = {}, most = 1, split = false;
    labels.forEach(function (label) {
      if (textWidth(label, px) <= limit) return;
      var lines = [], line = "";
      pieces(label, limit, px).forEach(function (piece) {
        if (line && textWidth((line + piece).trimEnd(), px) > limit) { lines.push(line.trimEnd()); line = piece.trimStart(); }
        else { line += piece; }
      });
      if (line.trim()) lines.push(line.trimEnd());
      if (lines.length > MAX_LINES) {
        lines = lines.slice(0, MAX_LINES);
        lines[MAX_LINES - 1] = lines[MAX_LINES - 1].replace(/ ·$/, "") + " …";
      }
      if (lines.length > 1) { map[label] = lines; most = Math.max(most, lines.length); split = true; }
    });
    if (!split) return null;
    return { expr: "(" + JSON.stringify(map) + ")[datum.label] || datum.label", lines: most };
  }

  // Titles wrapped and label limits clamped to the room a view has, in it and in its layers; long
  // band labels and legend labels split into lines at their parts (the band grown to hold them).
  function fit(view, room, inherited, sizer) {
    var ds = room.datasets;
    if (typeof view.height === "number" || !sizer) sizer = view; // the view whose height holds the bands
    var px = THEME.textPx || 12;
    if (view.title) view.title = wrapTitle(view.title, 14, room.width - 8);
    var enc = view.encoding || {};
    ["x", "y"].forEach(function (ch) {
      var d = enc[ch];
      if (!isObj(d)) return;
      var max = ch === "x" ? room.plot : (typeof sizer.height === "number" ? Math.max(sizer.height, 120) : 200);
      if (typeof d.title === "string") d.title = wrap(d.title, px, max);
      if (isObj(d.axis) && typeof d.axis.title === "string") d.axis.title = wrap(d.axis.title, px, max);
      if (isObj(d.axis) && typeof d.axis.labelLimit === "number" && d.axis.labelLimit > room.label) d.axis.labelLimit = room.label;
      if (ch === "y" && (d.type === "nominal" || d.type === "ordinal") && d.field && d.axis !== null) {
        var labels = Object.keys(valuesOf(inherited || view, d.field, ds, valuesOf(view, d.field, ds)));
        var split = labelLines(labels, room.label);
        if (split) {
          d.axis = merge(d.axis || {}, { labelExpr: split.expr, labelLimit: room.label });
          var band = split.lines * (px + 3) + 8;
          if (typeof sizer.height === "number") sizer.height = Math.max(sizer.height, band * labels.length);
        }
      }
    });
    LEGENDS.forEach(function (ch) {
      var d = enc[ch];
      if (!isObj(d)) return;
      if (typeof d.title === "string") d.title = wrap(d.title, px, room.width - 20);
      if (d.legend === null) return;
      var legend = d.legend = isObj(d.legend) ? d.legend : {};
      if (typeof legend.labelLimit === "number" && legend.labelLimit > room.legend) legend.labelLimit = room.legend;
      if (room.narrow) legend.orient = "bottom";
      if ((legend.orient === "bottom" || legend.orient === "top") && legend.columns === undefined) legend.columns = 1;
      if (d.field && (d.type === "nominal" || d.type === "ordinal")) {
        var labels = Object.keys(valuesOf(inherited || view, d.field, ds, valuesOf(view, d.field, ds)));
        var lsplit = labelLines(labels, Math.min(room.legend, legend.labelLimit || room.legend));
        if (lsplit) legend.labelExpr = lsplit.expr;
      }
    });
    (view.layer || []).forEach(function (l) { fit(l, room, view, sizer); });
  }

  // The spec as drawn at ``width`` px in ``sch``. ``adj`` corrects a first guess after a drawing:
  // ``shrink`` px off concatenated views (the drawing was that much too wide), ``plotCut`` px off the
  // room x-axis titles wrap to (a centred title stuck out of a narrower plot).
  function prepare(spec0, width, sch, adj) {
    var shrink = adj.shrink;
    var spec = JSON.parse(JSON.stringify(spec0));
    var narrow = width < NARROW;
    if (sch === "dark") recolor(spec, THEME.darkColors || {});
    var room = { width: width, narrow: narrow, label: narrow ? Math.max(60, Math.round(width * 0.42)) : Math.min(560, Math.max(320, Math.round(width * 0.45))),
                 legend: Math.max(80, width - 60 - adj.legendCut), plot: Math.max(60, width - 90 - adj.plotCut),
                 datasets: spec.datasets || {} };
    var config = merge(THEME[sch] || {}, {
      axis: { labelLimit: Math.min(180, room.label) },
      legend: merge({ labelLimit: room.legend }, narrow ? { orient: "bottom", columns: 1 } : {}),
      title: { limit: width - 8 }
    });
    spec.config = merge(config, spec.config || {});
    if (adj.padLeft || adj.padRight) spec.padding = { left: 5 + adj.padLeft, right: 5 + adj.padRight, top: 5, bottom: 5 };
    if (spec.hconcat && narrow) { spec.vconcat = spec.hconcat; delete spec.hconcat; }
    var stacked = spec.vconcat || spec.concat;
    if (stacked) {
      stacked.forEach(function (v) { v.width = Math.max(80, width - AXIS_ROOM - shrink); fit(v, room); });
    } else if (spec.hconcat) {
      var n = spec.hconcat.length;
      spec.hconcat.forEach(function (v) {
        var w = typeof v.width === "number" ? v.width : (width - AXIS_ROOM * n) / n;
        v.width = Math.max(80, Math.floor(w - shrink / n));
        fit(v, room);
      });
    } else if (spec.width === "container" || (typeof spec.width === "number" && spec.width > width)) {
      spec.width = "container";
    }
    fit(spec, room);
    return spec;
  }

  // How far the texts of a drawing stick out of it (px): titles (which wrap narrower), and other
  // text (tick labels at the ends of an axis, which get more padding) on the left and on the right.
  function textOverflow(svg) {
    var box = svg.getBoundingClientRect(), out = { title: 0, legend: 0, left: 0, right: 0 };
    svg.querySelectorAll("text").forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (!r.width) return;
      var left = box.left - r.left, right = r.right - box.right;
      if (left <= 0.5 && right <= 0.5) return;
      if (t.closest(".role-axis-title, .role-title")) out.title = Math.max(out.title, left, right);
      else if (t.closest(".role-legend-label")) out.legend = Math.max(out.legend, left, right);
      else { out.left = Math.max(out.left, left); out.right = Math.max(out.right, right); }
    });
    return out;
  }

  function draw(el, spec0, width, sch, adj, attempt) {
    var token = {};
    el.almanacToken = token;
    el.classList.remove("almanac-chart-ready");
    var spec = prepare(spec0, width, sch, adj);
    var old = state.get(el);
    el.style.minHeight = el.offsetHeight + "px"; // no jump while it redraws
    if (old) old.result.finalize();
    state.delete(el);
    el.textContent = "";
    var target = document.createElement("div");
    target.style.width = "100%";
    el.appendChild(target);
    window.vegaEmbed(target, spec, { actions: false, renderer: "svg", tooltip: { theme: sch } })
      .then(function (result) {
        if (el.almanacToken !== token) { result.finalize(); return; }
        state.set(el, { result: result, width: width, scheme: sch });
        var svg = target.querySelector("svg");
        if (svg && attempt < 3) {
          var over = Math.ceil(svg.getBoundingClientRect().width - el.clientWidth);
          var cut = textOverflow(svg);
          over = over > 0 && (spec0.hconcat || spec0.vconcat || spec0.concat) ? over : 0;
          if (over || cut.title || cut.legend || cut.left || cut.right) {
            draw(el, spec0, width, sch, {
              shrink: adj.shrink + over, plotCut: adj.plotCut + (cut.title ? 2 * Math.ceil(cut.title) + 4 : 0),
              legendCut: adj.legendCut + Math.ceil(cut.legend) + (cut.legend ? 4 : 0),
              padLeft: adj.padLeft + Math.ceil(cut.left), padRight: adj.padRight + Math.ceil(cut.right)
            }, attempt + 1);
            return;
          }
        }
        el.style.minHeight = "";
        el.dataset.scheme = sch;
        el.classList.add("almanac-chart-ready");
      })
      .catch(function (err) {
        el.style.minHeight = "";
        el.textContent = "chart failed: " + err;
        console.error(err);
      });
  }

  function render(el, force) {
    var specEl = document.getElementById(el.dataset.spec);
    if (!specEl || typeof window.vegaEmbed !== "function") return;
    var width = el.clientWidth;
    if (!width) return; // hidden (a closed fold): drawn when it shows
    var sch = scheme(), old = state.get(el);
    if (!force && old && old.scheme === sch && Math.abs(old.width - width) < 2) {
      el.classList.add("almanac-chart-ready");
      return;
    }
    draw(el, JSON.parse(specEl.textContent), width, sch, { shrink: 0, plotCut: 0, legendCut: 0, padLeft: 0, padRight: 0 }, 0);
  }

  function later(el) {
    el.classList.remove("almanac-chart-ready");
    clearTimeout(timers.get(el));
    timers.set(el, setTimeout(function () { render(el, false); }, 120));
  }

  function start() {
    var charts = document.querySelectorAll(".almanac-chart");
    if (!charts.length) return;
    charts.forEach(function (el) { render(el, false); });
    if (window.ResizeObserver) {
      var ro = new ResizeObserver(function (entries) {
        entries.forEach(function (e) {
          var el = e.target, old = state.get(el), width = el.clientWidth;
          if (width && (!old || Math.abs(old.width - width) >= 2)) later(el);
        });
      });
      charts.forEach(function (el) { ro.observe(el); });
    }
    new MutationObserver(function () {
      var sch = scheme();
      charts.forEach(function (el) {
        var old = state.get(el);
        if (old && old.scheme !== sch) render(el, true);
      });
    }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
