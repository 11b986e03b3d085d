// Schedule Explorer's JupyterLab extension. Two plugins that keep a reloaded page working as
// before the reload, on a busy machine too.
//
// 1. widget-restore: every widget output shows again. After a page reload, each widget output
// asks the widget manager for its model, which polls for 2 s, while the manager restores every
// model from the kernel in one reply. When the output finds no model and the restore has
// finished, it shows "Error displaying widget: model not found" for good. The poll sleeps 100 ms
// between looks and stops as soon as 2 s have passed, without a last look. Restoring the
// explorer's widgets holds the page for up to a second on a slow page (466 models for the
// tour), so when that reply arrives between about 1 and 2 s after an output started polling,
// the restore registers the model and finishes during the poll's last sleep: the poll then gives
// up on a model that is there, the restore is complete, and the output is lost
// (@jupyter-widgets/jupyterlab-manager 5.0.16, from jupyterlab_widgets 3.0.17). The fix: the
// manager's get_model takes that last look before it gives up. Everything else is unchanged (a
// model that is really missing still fails after the same 2 s).
//
// 2. tab-clicks: a tab title still switches tabs. A reloaded notebook attaches its cells a few
// at a time when the page is idle (JupyterLab 4.6). A cell further down gets its widget views
// while it is being attached, so the explorer's ipywidgets Tab receives Lumino's after-attach
// message without the before-attach one. Lumino's TabBar adds its pointer and key listeners on
// before-attach only: such a tab bar showed the right tab and followed the kernel, but clicks
// on its titles did nothing (the kernel's `selected_index` never changed). The fix: a TabBar
// also adds those listeners on after-attach (adding a listener already there does nothing, and
// after-detach removes them as before).
//
// No build step: JupyterLab loads a federated extension as a script that defines a container,
// `_JUPYTERLAB[name]`, with `init(shareScope)` and `get(module)`. The first plugin reaches the
// widget manager's classes through their own extension's container; the second takes Lumino's
// widgets from the shared scope `init` is given (JupyterLab shares one @lumino/widgets), so
// neither needs a bundler.
var _JUPYTERLAB;
(function () {
  "use strict";

  var MANAGER = "@jupyter-widgets/jupyterlab-manager";
  var PATCHED = Symbol.for("schedule-explorer.get_model");
  var TABS_PATCHED = Symbol.for("schedule-explorer.tab-listeners");
  // What Lumino 2's TabBar listens to on its node, added on before-attach.
  var TAB_EVENTS = ["pointerdown", "pointerleave", "dblclick", "keydown"];
  var shareScope = null;

  /** The prototype that defines `name`, from `proto` up. */
  function owner(proto, name) {
    while (proto && !Object.prototype.hasOwnProperty.call(proto, name)) {
      proto = Object.getPrototypeOf(proto);
    }
    return proto;
  }

  async function activate() {
    var container = _JUPYTERLAB[MANAGER];
    if (!container) {
      console.warn("[schedule explorer] no " + MANAGER + ": widget outputs are as JupyterLab has them");
      return;
    }
    var lab = (await container.get("./index"))();
    var base = owner(lab.LabWidgetManager && lab.LabWidgetManager.prototype, "get_model");
    if (!base || base[PATCHED]) return;
    var poll = base.get_model;
    base.get_model = async function (modelId) {
      try {
        return await poll.call(this, modelId);
      } catch (err) {
        // the last look: registered while the poll slept past its 2 s
        var late = this._models && this._models[modelId];
        if (late !== undefined) return late;
        throw err;
      }
    };
    base[PATCHED] = true;
  }

  /** Lumino's widgets module, as JupyterLab shares it: the loaded version, else the newest. */
  async function luminoWidgets() {
    var versions = shareScope && shareScope["@lumino/widgets"];
    if (!versions) return null;
    var names = Object.keys(versions);
    var newest = function (a, b) {
      var x = a.split(/[.-]/).map(Number), y = b.split(/[.-]/).map(Number);
      for (var i = 0; i < Math.max(x.length, y.length); i++) {
        if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) - (y[i] || 0);
      }
      return 0;
    };
    var loaded = names.filter(function (v) { return versions[v].loaded; });
    var pick = (loaded.length ? loaded : names).sort(newest).pop();
    return (await versions[pick].get())();
  }

  async function activateTabClicks() {
    var widgets = await luminoWidgets();
    var proto = widgets && widgets.TabBar && widgets.TabBar.prototype;
    if (!proto) {
      console.warn("[schedule explorer] no shared @lumino/widgets: tab bars are as Lumino has them");
      return;
    }
    if (proto[TABS_PATCHED]) return;
    var afterAttach = proto.onAfterAttach;
    proto.onAfterAttach = function (msg) {
      for (var i = 0; i < TAB_EVENTS.length; i++) this.node.addEventListener(TAB_EVENTS[i], this);
      return afterAttach.call(this, msg);
    };
    proto[TABS_PATCHED] = true;
  }

  var plugins = [
    {
      id: "schedule-explorer:widget-restore",
      description: "A widget output of a reloaded page finds its model when the restore ends during its wait.",
      autoStart: true,
      activate: activate,
    },
    {
      id: "schedule-explorer:tab-clicks",
      description: "A tab bar attached without Lumino's before-attach message still hears clicks on its titles.",
      autoStart: true,
      activate: activateTabClicks,
    },
  ];

  _JUPYTERLAB = _JUPYTERLAB || {};
  _JUPYTERLAB["schedule-explorer"] = {
    init: function (scope) {
      shareScope = scope;
    },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error('Module "' + module + '" does not exist in container.'));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: plugins };
      });
    },
  };
})();
