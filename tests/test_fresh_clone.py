"""A fresh clone is the whole product: `git clone`, `make run`, and the registry, the tune flow and
the README's cost-model snippet work there with nothing from the machine that trained.

The clone is a local `git clone` of this repository at HEAD; its DVC remote is the `dvc-store/`
committed with it (.dvc/config), so `make run`'s `dvc pull` reads nothing from the network. `make
setup` is not rerun: the clone uses the virtual environment this test runs in (`make -o` marks
its `.installed` as done), which is what `make setup` would build from the same pyproject.toml.
Then `make run`'s `dvc repro` must run only `register` (every other stage is up to date from the
pulled data), and:

  (a) MLflow's UI on the clone's store, rendered by headless Chromium, lists every registered
      model with its `champion` alias (a screenshot is kept next to the DOM);
  (b) `python -m flows.tune --network <a .pt2 of tests/tiny_net.py> --trials 16` builds a library
      that loads with `tvm.runtime.load_module` and matches PyTorch; it tunes with the `tcl`
      cost model only (a params file differing in `tune.cost_models`, and in `tune.search` and
      `tune.learned_search` as every test that tunes: conftest.TINY_SEARCH): that is the model the rebuilt registry serves, and the
      built-in ones would quadruple the runtime;
  (c) `tcl.tvm.cost_model.cost_model("models:/tcl-tcl-<platform>@champion")` loads, for the
      platform whose model the tune flow picked for this CPU.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO, TINY_SEARCH, print_past_capture
from servers import browse, clean_env, mlflow_server
from tiny_net import TinyNet

pytestmark = pytest.mark.slow

P = "local-1c"  # the platform the README's tune command names
VENV = Path(sys.executable).parent.parent


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{out[-6000:]}"
    return out


def _champions(manifest: dict) -> dict[str, str]:
    """{registered model: champion version} as the register stage's manifest records them."""
    return {name: entry["aliases"]["champion"] for name, entry in manifest["registered_models"].items()
            if "champion" in entry["aliases"]}


def test_a_fresh_clone_rebuilds_the_registry_and_tunes_a_user_network(tmp_path, request):
    import torch
    import tvm
    from PIL import Image
    from tvm import relax

    steps, start = [], time.monotonic()

    def lap(name: str) -> None:
        steps.append(f"{name} {time.monotonic() - start:.0f} s")

    clone = tmp_path / "clone"
    env = clean_env(DVC_NO_ANALYTICS="1")
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    out = _run(["make", "-o", f"{VENV}/.installed", "run", f"VENV={VENV}"], clone, env)
    lap("make run")
    assert set(re.findall(r"Running stage '([^']+)'", out)) == {"register"}, out[-6000:]
    status = _run([str(VENV / "bin" / "dvc"), "status"], clone, env)
    assert "up to date" in status, status  # nothing left for another repro

    # (a) the registry in MLflow's UI
    champions = _champions(json.loads((clone / "mlruns" / "tcl-registry.json").read_text()))
    ui = tmp_path / "ui"
    ui.mkdir()
    shot = ui / "mlflow-models.png"
    with mlflow_server(clone / "mlflow.db", ui) as url:
        with urllib.request.urlopen(f"{url}/api/2.0/mlflow/registered-models/search?max_results=1000") as r:
            store = {m["name"]: {a["alias"]: a["version"] for a in m.get("aliases", [])}
                     for m in json.loads(r.read())["registered_models"]}
        dom = browse(f"{url}/#/models", ui / "chromium", "--dump-dom", f"--screenshot={shot}")
    lap("MLflow UI")
    assert {name: aliases["champion"] for name, aliases in store.items() if "champion" in aliases} == champions
    # The list is paged (MLflow shows the first page of models by name); every champion is checked through the
    # API above, and each model the page shows must link its champion version under the alias tag.
    listed = set(re.findall(r'href="#/models/([^"/]+)"', dom))
    shown = {name: version for name, version in champions.items() if name in listed}
    assert len(shown) >= min(len(champions), 10), f"the UI's model list shows {sorted(listed)}"
    for name, version in shown.items():
        assert re.search(rf'href="#/models/{re.escape(name)}/versions/{version}"><div[^>]*title="champion"', dom), \
            f"{name}: no '@ champion: Version {version}' in the UI's model list:\n{dom[-3000:]}"
    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 50, f"{shot} is nearly blank ({len(colours)} colours)"

    # (b) the README's "Tune your own network", with the tcl model from the rebuilt registry
    torch.manual_seed(0)
    model, x = TinyNet().eval(), torch.randn(1, 3, 8, 8)
    network = tmp_path / "tiny_net.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(network))
    params = yaml.safe_load((clone / "params.yaml").read_text())
    params["tune"]["cost_models"] = ["tcl"]
    params["tune"]["search"].update(TINY_SEARCH)
    params["tune"]["learned_search"] = dict(TINY_SEARCH)  # the learned models' own search, as small
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run([sys.executable, "-m", "flows.tune", "--platform", P, "--params", str(tmp_path / "params.yaml"),
          "--network", str(network), "--trials", "16"], clone, env)
    lap("tune")
    row = json.loads((clone / "reports/tune/tiny_net" / f"{P}.json").read_text())["tcl"]
    used = row["model"]
    assert used["registered_model"] == f"tcl-tcl-{used['trained_for']}", used
    lib = tvm.runtime.load_module(str(clone / "reports/tune/tiny_net" / P / "tcl" / "tiny_net.so"))
    vm = relax.VirtualMachine(lib, tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x.numpy(), tvm.cpu()))[0].numpy()  # an exported graph returns a tuple
    with torch.no_grad():
        want = model(x).numpy()
    assert got.shape == want.shape and abs(got - want).max() < 1e-4, (got, want)

    # (c) the README's "Using a trained model": the registry's champion as a MetaSchedule cost model
    uri = f"models:/tcl-tcl-{used['trained_for']}@champion"
    loaded = _run([sys.executable, "-c", "import tcl, tcl.tvm.cost_model as tcm\n"
                   f"m = tcm.cost_model({uri!r})\n"
                   "print(tcl.__file__, type(m).__name__, m.bundle.model_name, m.bundle.platform)"], clone, env)
    lap("cost model")
    assert f"{clone}/tcl/__init__.py LearnedCostModel tcl {used['trained_for']}" in loaded, loaded
    print_past_capture(request, f"fresh clone: {', '.join(steps)}; screenshot {shot}")
