// Leaderboard filters (issue 19): host, model, backend and test, in the browser, no network.
// The page carries its boards as inert JSON (#almanac-fleet-data: per board its model and tests); each
// table row holds a marker <span class="almanac-r" data-b data-r data-h data-k>: its board, row, host
// and backend (only the rows the page shows: a fleet's page carries no list of every row).
// Nothing is read back from the page's text. A selection that matches nothing says so.
(function () {
  function setup() {
    var box = document.getElementById("almanac-fleet-filters");
    var dataEl = document.getElementById("almanac-fleet-data");
    if (!box || !dataEl || box.dataset.ready) return;
    box.dataset.ready = "1";
    var boards = JSON.parse(dataEl.textContent);
    var selects = box.querySelectorAll("select[data-filter]");
    var nomatch = document.querySelector(".almanac-nomatch");
    var counter = box.querySelector("[data-filter-count]");

    function current() {
      var f = {};
      selects.forEach(function (s) { f[s.dataset.filter] = s.value; });
      return f;
    }

    function apply() {
      var f = current();
      var shownBoards = 0, shownRows = 0;
      document.querySelectorAll(".almanac-board").forEach(function (div) {
        var markers = div.querySelectorAll("span.almanac-r");
        var visible = 0;
        markers.forEach(function (m) {
          var b = boards[+m.dataset.b], row = b && { host: m.dataset.h, backend: m.dataset.k };
          var ok = !!row && (!f.host || row.host === f.host) && (!f.backend || row.backend === f.backend)
            && (!f.model || b.model === f.model) && (!f.test || b.tests.indexOf(f.test) >= 0);
          var tr = m.closest("tr");
          if (tr) tr.hidden = !ok;
          if (ok) visible += 1;
        });
        div.hidden = markers.length > 0 && visible === 0;
        var fold = div.querySelector("details.almanac-fold");
        if (fold && !div.hidden) fold.open = Object.keys(f).some(function (k) { return f[k]; });
        if (!div.hidden) shownBoards += div.classList.contains("almanac-singles") ? 0 : 1;
        shownRows += visible;
      });
      var any = Object.keys(f).some(function (k) { return f[k]; });
      if (nomatch) nomatch.hidden = !(any && shownRows === 0);
      if (counter) counter.textContent = any ? shownRows + " rows shown" : "";
      var q = Object.keys(f).filter(function (k) { return f[k]; })
        .map(function (k) { return k + "=" + encodeURIComponent(f[k]); }).join("&");
      if (window.history && window.history.replaceState) {
        window.history.replaceState(null, "", q ? "#" + q : window.location.pathname + window.location.search);
      }
    }

    // a selection in the URL (#host=...&test=...) is applied on load
    var hash = window.location.hash.replace(/^#/, "");
    if (hash.indexOf("=") > 0) {
      hash.split("&").forEach(function (kv) {
        var p = kv.split("="), s = box.querySelector('select[data-filter="' + p[0] + '"]');
        if (s) s.value = decodeURIComponent(p[1] || "");
      });
    }
    selects.forEach(function (s) { s.addEventListener("change", apply); });
    var reset = box.querySelector("[data-filter-reset]");
    if (reset) reset.addEventListener("click", function () {
      selects.forEach(function (s) { s.value = ""; });
      apply();
    });
    apply();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
  // Material's instant navigation swaps pages without a load event
  if (window.document$ && window.document$.subscribe) window.document$.subscribe(setup);
})();
