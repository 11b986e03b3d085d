"""The explorer's JupyterLab extension (widgets/labextension): a reloaded page's widget outputs
find their models even when the restore ends during their wait (issue 21, plots that always
draw).

Reproduced on main with test_lab_plots_draw beside two CPU burners (2 runs in 5 here, and both
clean-clone CI runs of 2026-11-27): after the reload the tour's explorer showed "Error
displaying widget: model not found". The page's log: the output started waiting for its model
at 429.04 s, the kernel's reply with every widget's state arrived at 430.66 s, and the error
came at 431.79 s, after the restore had registered the model. The widget manager's
``get_model`` polls every 100 ms for 2 s and gives up without a last look, so a restore that
registers the model during the last sleep and finishes before the poll wakes loses the output
for good. The test below replays that order of events against the real widget manager of a
real JupyterLab page: it fails without the extension (checked by removing its link from the
venv) and passes with it.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PLUGIN = "schedule-explorer:widget-restore"

# The widget manager's own get_model (from its extension's container, as JupyterLab loaded it),
# on a bare manager asked for model "m", on a clock of its own: only get_model's calls see it
# (checked by their stack), each of its 100 ms sleeps advances it by 100 ms at once. With
# ``late``, the model is registered during the sleep that carries the clock to 2 s, the order
# of events of the failure (a restore that finishes while the poll sleeps past its limit). A
# clock of the test's own keeps that order on a loaded machine, where real timers fired out of
# it (one CI run beside the rest of the suite: the poll's last timer ran before the one that
# was to register the model). Without ``late`` the model never comes.
ASK_JS = """async (late) => {
  const lab = (await window._JUPYTERLAB['@jupyter-widgets/jupyterlab-manager'].get('./index'))();
  let proto = lab.LabWidgetManager.prototype;
  while (!Object.prototype.hasOwnProperty.call(proto, 'get_model'))
    proto = Object.getPrototypeOf(proto);
  const manager = Object.create(proto);
  manager._models = {};
  const realNow = Date.now, realSetTimeout = window.setTimeout;
  const polling = () => (new Error().stack || '').includes('get_model');
  let clock = 0;
  Date.now = () => (polling() ? clock : realNow());
  window.setTimeout = (fn, ms, ...rest) => {
    if (!polling()) return realSetTimeout(fn, ms, ...rest);
    return realSetTimeout(() => {
      clock += ms;
      if (late && clock >= 2000) manager._models.m = Promise.resolve('the model');
      fn(...rest);
    }, 0);
  };
  try {
    const answer = await manager.get_model('m').then(m => m, err => `rejected: ${err.message}`);
    return {answer, after_ms: clock};
  } finally {
    Date.now = realNow;
    window.setTimeout = realSetTimeout;
  }
}"""


def test_a_model_registered_during_the_last_wait_is_found(jupyter_lab, page):
    page.goto(f"{jupyter_lab.url}/lab?reset&token={jupyter_lab.token}")
    page.wait_for_function(
        f"() => window.jupyterapp && window.jupyterapp.isPluginActivated('{PLUGIN}')",
        timeout=90_000,
    )
    late = page.evaluate(ASK_JS, True)
    assert late["answer"] == "the model", late
    missing = page.evaluate(ASK_JS, False)
    assert missing["answer"] == "rejected: widget model not found", missing
    assert missing["after_ms"] >= 2000, missing
    assert page.log.page_errors == [], page.log.page_errors
