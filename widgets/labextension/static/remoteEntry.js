// Schedule Explorer's JupyterLab extension. One plugin: a reloaded page shows every widget output
// again, on a busy machine too.
//
// Why. After a page reload, each widget output asks the widget manager for its model, which
// polls for 2 s, while the manager restores every model from the kernel in one reply. When the
// output finds no model and the restore has finished, it shows "Error displaying widget: model
// not found" for good. The poll sleeps 100 ms between looks and stops as soon as 2 s have passed,
// without a last look. Restoring the explorer's widgets holds the page for up to a second on a
// slow page (466 models for the tour), so when that reply arrives between about 1 and 2 s after
// an output started polling, the restore registers the model and finishes during the poll's
// last sleep: the poll then gives up on a model that is there, the restore is complete, and the
// output is lost (@jupyter-widgets/jupyterlab-manager 5.0.16, from jupyterlab_widgets 3.0.17).
//
// The fix: the manager's get_model takes that last look before it gives up. Everything else is
// unchanged (a model that is really missing still fails after the same 2 s).
//
// No build step: JupyterLab loads a federated extension as a script that defines a container,
// `_JUPYTERLAB[name]`, with `init(shareScope)` and `get(module)`; this plugin imports nothing
// (it reaches the widget manager's classes through their own extension's container), so it
// needs neither a bundler nor the shared scope.
var _JUPYTERLAB;
(function () {
  "use strict";

  var MANAGER = "@jupyter-widgets/jupyterlab-manager";
  var PATCHED = Symbol.for("schedule-explorer.get_model");

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

  var plugin = {
    id: "schedule-explorer:widget-restore",
    description: "A widget output of a reloaded page finds its model when the restore ends during its wait.",
    autoStart: true,
    activate: activate,
  };

  _JUPYTERLAB = _JUPYTERLAB || {};
  _JUPYTERLAB["schedule-explorer"] = {
    init: function () {},
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error('Module "' + module + '" does not exist in container.'));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: [plugin] };
      });
    },
  };
})();
