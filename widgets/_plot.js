// The page side of widgets._plot.LiveFigure: draws the figure JSON that the figure's state
// model holds, again each time it changes, and sends clicks on points back to the kernel.
//
// This module is small on purpose. anywidget imports every widget's module separately and gives
// a model 2 s to load it; a model that misses that never handles another message from the
// kernel. So nothing here depends on this (the view's) model receiving messages: the figure
// lives in a plain ipywidgets model (the state), and plotly.js comes once per page from a
// third model (the library), evaluated once and shared by every plot. The library's model has
// it when the kernel opens it; a reloaded page asks the library for it (a message).
//
// Evaluating plotly.js holds the page for a second or more (seconds on a slow laptop): views
// still loading this module meanwhile would miss anywidget's 2 s (harmless here, but it logs
// an error). So the first plot waits until no view has started for a while (a page reload
// restores every view at once) before it evaluates plotly.js.

// Each view gets its own copy of this module: what they share lives on globalThis.
const SHARED = (globalThis[Symbol.for("schedule-explorer.plots")] ??= {
  plotly: new Map(), // plotly.js version -> Promise of the library
  lastStart: 0, // performance.now() when a plot's model last loaded this module
});
const CONFIG = { displaylogo: false };
const FIND_MODEL_SECS = 60;
const QUIET_MS = 500;
const CLICK_WAIT_MS = 100; // how long plotly may take to report a click itself

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The ipywidgets model a "IPY_MODEL_<id>" reference names (waits while the page restores
 * the kernel's widgets after a reload: they are created in no fixed order). */
async function modelOf(manager, ref) {
  const id = String(ref).replace(/^IPY_MODEL_/, "");
  const deadline = Date.now() + FIND_MODEL_SECS * 1000;
  for (let pause = 50; ; pause = Math.min(2 * pause, 1000)) {
    try {
      return await manager.get_model(id);
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(pause);
    }
  }
}

/** plotly.js's source from the library model: in its state when the kernel opened it; a
 * reloaded page (whose restored state is empty, to keep the restore small) asks for it. */
async function sourceOf(library) {
  const source = library.get("source");
  if (source && source.byteLength > 0) return source;
  return new Promise((resolve) => {
    const onMessage = (content, buffers) => {
      if (content?.["plotly.js"] === undefined || !buffers?.length) return;
      library.off("msg:custom", onMessage);
      resolve(buffers[0]);
    };
    library.on("msg:custom", onMessage);
    library.send({ request: "plotly.js" });
  });
}

/** plotly.js from the library model, evaluated once per page and version. */
async function plotlyOf(library) {
  const loaded = SHARED.plotly;
  const version = library.get("version");
  if (!loaded.has(version)) {
    while (performance.now() - SHARED.lastStart < QUIET_MS) await sleep(QUIET_MS);
  }
  if (!loaded.has(version)) {
    // plotly.min.js is a UMD bundle: given a `module`, it exports through it. Its source
    // arrives as bytes (a DataView), put in the module as they are.
    const head = "const module = { exports: {} };\n";
    const tail = "\nexport default module.exports;\n";
    const plotly = sourceOf(library).then((source) => {
      const blob = new Blob([head, source, tail], { type: "text/javascript" });
      const url = URL.createObjectURL(blob);
      return import(/* webpackIgnore: true */ url)
        .finally(() => URL.revokeObjectURL(url))
        .then((m) => m.default);
    });
    loaded.set(version, plotly);
  }
  return loaded.get(version);
}

async function render({ model, el }) {
  const manager = model.widget_manager;
  const [state, library] = await Promise.all([
    modelOf(manager, model.get("state")),
    modelOf(manager, model.get("library")),
  ]);
  const Plotly = await plotlyOf(library);
  const plot = document.createElement("div");
  el.appendChild(plot);

  // One drawing at a time, always of the newest figure; changes arriving meanwhile are drawn
  // once, after it.
  let queued = false;
  let drawing = Promise.resolve();
  const draw = () => {
    if (queued) return;
    queued = true;
    drawing = drawing
      .then(() => {
        queued = false;
        const figure = JSON.parse(state.get("figure"));
        const layout = figure.layout ?? {};
        // The user's zoom and hidden legend entries survive the figure's updates.
        layout.uirevision ??= "kept";
        return Plotly.react(plot, figure.data ?? [], layout, CONFIG);
      })
      .catch((err) => console.error("[schedule explorer] a plot failed to draw:", err));
  };
  state.on("change:figure", draw);
  draw();
  await drawing;

  const sendClick = (hovered) => {
    const points = (hovered ?? [])
      .filter((p) => Number.isInteger(p.pointNumber))
      .map((p) => ({ curve: p.curveNumber, point: p.pointNumber, meta: p.data.meta ?? null }));
    if (points.length) state.send({ event: "click", points });
  };
  // plotly reports a click on the point hovered when the button goes up. On a busy page the
  // browser can move the hover away in between (plotly covers the plot with a layer when the
  // button goes down, and the browser's next synthetic mouse move then leaves the point), and
  // the click was lost: seen on the first click of a run of twelve beside two CPU burners. A
  // click that plotly did not report goes out with what was hovered when the button went down.
  let press = null;
  plot.addEventListener(
    "mousedown",
    (e) => {
      // on the plotting area only (not a legend entry, an axis or the toolbar)
      const onArea = e.button === 0 && e.target.classList?.contains("nsewdrag");
      press = onArea
        ? { x: e.clientX, y: e.clientY, hovered: plot._hoverdata, reported: false }
        : null;
    },
    true,
  );
  plot.on("plotly_click", (event) => {
    if (press) press.reported = true;
    sendClick(event.points);
  });
  const released = (e) => {
    const down = press;
    if (!down || e.button !== 0) return;
    // after plotly's own handling of this event, which may report the click
    setTimeout(() => {
      if (press === down) press = null;
      const still = Math.hypot(e.clientX - down.x, e.clientY - down.y) < 3;
      if (!down.reported && still) sendClick(down.hovered);
    }, CLICK_WAIT_MS);
  };
  window.addEventListener("mouseup", released, true);

  // A plot drawn in a hidden tab has plotly's default width: fit it to its box when it shows,
  // and whenever the box changes size.
  let frame = 0;
  const resized = new ResizeObserver(() => {
    cancelAnimationFrame(frame);
    frame = requestAnimationFrame(() => {
      if (plot.offsetWidth > 0) Plotly.Plots.resize(plot).catch(() => {});
    });
  });
  resized.observe(el);

  return () => {
    window.removeEventListener("mouseup", released, true);
    state.off("change:figure", draw);
    resized.disconnect();
    cancelAnimationFrame(frame);
    Plotly.purge(plot);
  };
}

function initialize() {
  SHARED.lastStart = performance.now();
}

export default { initialize, render };
