// Draws every .lab-chart on the page from the JSON spec beside it, with the Plotly bundle
// this site serves itself.  Material's document$ fires on the first load and after every
// instant (in-site) navigation, so charts appear either way; a palette switch redraws them.
(function () {
  "use strict";
  function dark() {
    return document.body.getAttribute("data-md-color-scheme") === "slate";
  }
  function themed(layout) {
    var fg = dark() ? "#e0e0e0" : "#222222";
    var grid = dark() ? "rgba(255,255,255,0.12)" : "rgba(0,0,0,0.1)";
    var out = JSON.parse(JSON.stringify(layout));
    out.paper_bgcolor = "rgba(0,0,0,0)";
    out.plot_bgcolor = "rgba(0,0,0,0)";
    out.font = Object.assign({}, out.font || {}, { color: fg });
    ["xaxis", "yaxis"].forEach(function (axis) {
      out[axis] = Object.assign({}, out[axis] || {}, { gridcolor: grid, linecolor: grid, zerolinecolor: grid });
    });
    (out.shapes || []).forEach(function (s) { s.line = Object.assign({}, s.line, { color: fg }); });
    out.autosize = true;
    return out;
  }
  function draw() {
    if (typeof Plotly === "undefined") {
      return;
    }
    document.querySelectorAll(".lab-chart").forEach(function (el) {
      var spec = JSON.parse(el.getAttribute("data-figure"));
      var target = el.querySelector(".lab-plot");
      Plotly.react(target, spec.data, themed(spec.layout), { responsive: true, displaylogo: false })
        .then(function () { el.setAttribute("data-drawn", "true"); });
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(draw);
  } else {
    document.addEventListener("DOMContentLoaded", draw);
  }
  new MutationObserver(draw).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
})();
