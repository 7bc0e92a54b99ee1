// Runs fn on the first load and after every instant (in-site) navigation.  Material's document$
// fires for both when the site is served; opened from disk (file://) it never fires, so the
// first load is also taken from the DOM itself.  fn must not mind running twice for one page.
function labOnEveryPage(fn) {
  "use strict";
  if (typeof document$ !== "undefined") {
    document$.subscribe(fn);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", fn);
  } else {
    fn();
  }
}

// Draws every .lab-chart on the page from the JSON spec beside it, with the Plotly bundle
// this site serves itself; a palette switch redraws them.
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
  function draw(redraw) {
    if (typeof Plotly === "undefined") {
      return;
    }
    document.querySelectorAll(".lab-chart").forEach(function (el) {
      if (redraw !== true && el.hasAttribute("data-drawn")) {
        return;  // (the first load can arrive twice: from document$ and from the DOM)
      }
      var spec = JSON.parse(el.getAttribute("data-figure"));
      var target = el.querySelector(".lab-plot");
      Plotly.react(target, spec.data, themed(spec.layout), { responsive: true, displaylogo: false })
        .then(function () { el.setAttribute("data-drawn", "true"); });
    });
  }
  labOnEveryPage(function () { draw(false); });
  new MutationObserver(function () { draw(true); }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
})();

// Provenance by keyboard and touch.  Every number links to its run, with where it came from
// in its title (which only a mouse can hover).  Focusing a number (Tab) or tapping it shows
// the same text in a small popover; a second tap, Enter, or the popover's link follows it.
// Cells that explain themselves on hover (refused, failed check) and column headers get
// the same popover, and become focusable for it.
(function () {
  "use strict";
  var SELECTOR = ["a.num", "span.num", ".lab-table td span", ".lab-table th"]
    .map(function (s) { return s + "[title]:not([title=''])"; }).join(", ");
  var pop = null;
  var owner = null;
  var touched = null;
  var wasOpen = false;

  function popover() {
    if (pop === null || !document.body.contains(pop)) {
      pop = document.createElement("div");
      pop.className = "lab-pop";
      pop.id = "lab-pop";
      pop.setAttribute("role", "tooltip");
      pop.hidden = true;
      document.body.appendChild(pop);
    }
    return pop;
  }

  function text(el) {
    return el.getAttribute("title") || el.getAttribute("data-title") || "";
  }

  function show(el) {
    var p = popover();
    p.textContent = "";
    text(el).split("\n").forEach(function (line) {
      var div = document.createElement("div");
      div.textContent = line;
      p.appendChild(div);
    });
    if (el.tagName === "A" && el.getAttribute("href")) {
      var go = document.createElement("a");
      go.href = el.getAttribute("href");
      go.textContent = "Open this run on the Sources page";
      go.className = "lab-pop-link";
      p.appendChild(go);
    }
    p.hidden = false;
    var r = el.getBoundingClientRect();
    var width = Math.min(420, document.documentElement.clientWidth - 16);
    p.style.maxWidth = width + "px";
    var left = Math.max(8, Math.min(r.left + window.scrollX, window.scrollX + document.documentElement.clientWidth - width - 8));
    p.style.left = left + "px";
    p.style.top = (r.bottom + window.scrollY + 6) + "px";
    el.setAttribute("aria-describedby", "lab-pop");
    owner = el;
  }

  function hide() {
    if (pop !== null) {
      pop.hidden = true;
    }
    if (owner !== null) {
      owner.removeAttribute("aria-describedby");
    }
    owner = null;
  }

  function prepare() {
    document.querySelectorAll(SELECTOR).forEach(function (el) {
      if (el.tagName !== "A" && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
      }
    });
    hide();
  }

  document.addEventListener("focusin", function (e) {
    var el = e.target.closest ? e.target.closest(SELECTOR) : null;
    if (el !== null) {
      show(el);
    } else if (pop !== null && !pop.contains(e.target)) {
      hide();
    }
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") {
      hide();
    }
  });
  document.addEventListener("pointerdown", function (e) {
    var el = e.target.closest ? e.target.closest(SELECTOR) : null;
    touched = e.pointerType === "touch" || e.pointerType === "pen" ? el : null;
    // (the tap focuses the number before its click: remember whether it was showing already)
    wasOpen = el !== null && owner === el && pop !== null && !pop.hidden;
    if (el === null && pop !== null && !pop.contains(e.target)) {
      hide();
    }
  });
  document.addEventListener("click", function (e) {
    var el = e.target.closest ? e.target.closest(SELECTOR) : null;
    if (el === null || el !== touched) {
      return;
    }
    // A tap: the first shows where the number came from; a second on the same number follows it.
    if (!wasOpen) {
      e.preventDefault();
      e.stopPropagation();  // (Material's instant navigation follows links on its own)
      el.focus({ preventScroll: true });
      show(el);
    }
  }, true);

  // A link to a table, chart or claim inside a collapsed section opens the section.
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id ? document.getElementById(id) : null;
    if (target === null) {
      return;
    }
    var opened = false;
    for (var d = target.closest("details"); d !== null; d = d.parentElement.closest("details")) {
      if (!d.open) {
        d.open = true;
        opened = true;
      }
    }
    if (opened) {
      target.scrollIntoView();
    }
  }

  window.addEventListener("hashchange", reveal);
  labOnEveryPage(function () { prepare(); reveal(); });
})();
