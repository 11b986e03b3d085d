// Schedule Explorer's JupyterLab extension. Plugins that keep a reloaded page working as
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
// 3. click-order: a click reaches the kernel after the fields the user changed before it. An
// ipywidgets model holds its next update back while the kernel has not answered its previous
// one, and a click is another model's message, sent at once: on a busy kernel the editor's
// Apply arrived before the loop the user had just chosen, and split the loop chosen before
// it (@jupyter-widgets/base 6.0.12, from jupyterlab_widgets 3.0.17). The fix: before a model
// sends a message of its own (a click), every model of the same page whose update is held
// sends it, as it would have once the kernel answered. The kernel then handles them in the
// order the user acted.
//
// 4. choice-labels: a choice reaches the kernel with the label the page showed. A Dropdown or
// Select sends its choice as an index into the options the page shows; when the kernel has just
// replaced the options (the editor's loop names after a step) and the page has not drawn them
// yet, that index names another option on the kernel (@jupyter-widgets/controls 5.0.13). The
// fix: an index update of a model that declares the attribute `_chosen_label` (the explorer's
// pickers, widgets/_pickers.py) carries the label at that index as well, and the kernel takes
// the option with that label, or refuses a label it no longer has.
//
// No build step: JupyterLab loads a federated extension as a script that defines a container,
// `_JUPYTERLAB[name]`, with `init(shareScope)` and `get(module)`. The first plugin reaches the
// widget manager's classes through their own extension's container; the others take Lumino's
// widgets and the widget models from the shared scope `init` is given (JupyterLab shares one
// @lumino/widgets and one @jupyter-widgets/base), so none needs a bundler.
var _JUPYTERLAB;
(function () {
  "use strict";

  var MANAGER = "@jupyter-widgets/jupyterlab-manager";
  var PATCHED = Symbol.for("schedule-explorer.get_model");
  var TABS_PATCHED = Symbol.for("schedule-explorer.tab-listeners");
  var ORDER_PATCHED = Symbol.for("schedule-explorer.click-order");
  var LABELS_PATCHED = Symbol.for("schedule-explorer.choice-labels");
  var LABEL = "_chosen_label";
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

  /** A module as JupyterLab shares it (`name`): the loaded version, else the newest. */
  async function shared(name) {
    var versions = shareScope && shareScope[name];
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
    var widgets = await shared("@lumino/widgets");
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

  async function activateClickOrder() {
    var base = await shared("@jupyter-widgets/base");
    var proto = base && base.WidgetModel && base.WidgetModel.prototype;
    if (!proto || typeof proto.sync !== "function" || typeof proto.send !== "function") {
      console.warn("[schedule explorer] no shared @jupyter-widgets/base: clicks may overtake held updates");
      return;
    }
    if (proto[ORDER_PATCHED]) return;
    var held = new Set(); // models that held an update back (some may have sent it since)
    var sync = proto.sync;
    proto.sync = function () {
      var result = sync.apply(this, arguments);
      if (this._msg_buffer !== null && this._msg_buffer !== undefined) held.add(this);
      return result;
    };
    var send = proto.send;
    proto.send = function () {
      var manager = this.widget_manager;
      held.forEach(function (model) {
        if (model._msg_buffer === null || model._msg_buffer === undefined) {
          held.delete(model); // the kernel answered and the model sent it
        } else if (model.widget_manager === manager) {
          // what the model does itself when the kernel answers (its _handle_status)
          var msgId = model.send_sync_message(model._msg_buffer, model._msg_buffer_callbacks);
          model.rememberLastUpdateFor(msgId);
          model._msg_buffer = null;
          model._msg_buffer_callbacks = null;
          held.delete(model);
        }
      });
      return send.apply(this, arguments);
    };
    proto[ORDER_PATCHED] = true;
  }

  async function activateChoiceLabels() {
    var base = await shared("@jupyter-widgets/base");
    var proto = base && base.WidgetModel && base.WidgetModel.prototype;
    if (!proto || typeof proto.sync !== "function") {
      console.warn("[schedule explorer] no shared @jupyter-widgets/base: choices are sent by position only");
      return;
    }
    if (proto[LABELS_PATCHED]) return;
    var sync = proto.sync;
    proto.sync = function (method, model, options) {
      var attrs = options && options.attrs;
      if (method === "patch" && attrs && "index" in attrs && this.attributes && LABEL in this.attributes) {
        var labels = this.get("_options_labels") || [];
        var index = attrs.index;
        var label = typeof index === "number" && index >= 0 && index < labels.length ? labels[index] : null;
        var extra = {};
        extra[LABEL] = label;
        options = Object.assign({}, options, { attrs: Object.assign({}, attrs, extra) });
      }
      return sync.call(this, method, model, options);
    };
    proto[LABELS_PATCHED] = true;
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
    {
      id: "schedule-explorer:click-order",
      description: "A click reaches the kernel after the field updates the page held back before it.",
      autoStart: true,
      activate: activateClickOrder,
    },
    {
      id: "schedule-explorer:choice-labels",
      description: "A Dropdown's or Select's choice reaches the kernel with the label the page showed.",
      autoStart: true,
      activate: activateChoiceLabels,
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
