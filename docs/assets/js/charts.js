// Render every chart on the page from its inert JSON spec, with the bundled vega-embed.
(function () {
  function render() {
    document.querySelectorAll(".almanac-chart").forEach(function (el) {
      if (el.dataset.rendered) return;
      var specEl = document.getElementById(el.dataset.spec);
      if (!specEl || typeof window.vegaEmbed !== "function") return;
      el.dataset.rendered = "1";
      window.vegaEmbed(el, JSON.parse(specEl.textContent), { actions: false, renderer: "svg" })
        .then(function () { el.classList.add("almanac-chart-ready"); })
        .catch(function (err) { el.textContent = "chart failed: " + err; console.error(err); });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", render);
  else render();
})();
