#!/usr/bin/env bash
# Fresh-clone transcript (issue 23): docs/fresh-clone/transcript.sh > docs/fresh-clone/transcript.log
set -euo pipefail
SRC=${1:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}   # the repository to clone
F=/tmp/fresh; rm -rf $F
t() { local s=$(date +%s.%N); "$@"; echo ">>> [$(printf %.1f $(echo "$(date +%s.%N) - $s" | bc)) s] $*"; }
cd /tmp && t git clone -q "$SRC" $F && cd $F
t make setup > /tmp/fresh-setup.log 2>&1; tail -2 /tmp/fresh-setup.log
t make run > /tmp/fresh-run.log 2>&1; grep -E "Running stage" /tmp/fresh-run.log; echo "stages skipped (up to date): $(grep -c "didn't change" /tmp/fresh-run.log)"
source .venv/bin/activate
echo "=== registry (mlflow.db of the clone)"
python - <<'PY'
from mlflow import MlflowClient
c = MlflowClient(tracking_uri="sqlite:///mlflow.db", registry_uri="sqlite:///mlflow.db")
for m in sorted(c.search_registered_models(max_results=1000), key=lambda m: m.name):
    vs = c.search_model_versions(f"name='{m.name}'")
    tags = c.get_model_version(m.name, m.aliases["champion"]).tags if "champion" in m.aliases else {}
    print(f"{m.name:34s} versions={len(vs)} aliases={dict(m.aliases)} data_version={tags.get('data_version','-')[:10]} git={tags.get('git_commit','-')[:8]}")
print("runs:", sum(len(c.search_runs([e.experiment_id], max_results=5000)) for e in c.search_experiments()))
PY
echo "=== tune a user network"
python - <<'PY'
import sys; sys.path.insert(0, "tests")
import torch; from tiny_net import TinyNet
torch.manual_seed(0); m, x = TinyNet().eval(), torch.randn(1, 3, 8, 8)
torch.export.save(torch.export.export(m, (x,)), "/tmp/my_net.pt2")
PY
t python -m flows.tune --platform local-1c --network /tmp/my_net.pt2 --trials 16 2>&1 | tail -8
echo "=== load check"
python - <<'PY'
import sys, glob, torch, tvm; from tvm import relax; sys.path.insert(0, "tests"); from tiny_net import TinyNet
torch.manual_seed(0); m, x = TinyNet().eval(), torch.randn(1, 3, 8, 8)
for so in sorted(glob.glob("reports/tune/my_net/local-1c/*/my_net.so")):
    vm = relax.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x.numpy(), tvm.cpu()))[0].numpy()
    print(so, "max |tvm - torch| =", float(abs(got - m(x).detach().numpy()).max()))
PY
echo "=== cost_model from the registry"
python -c "import tcl.tvm.cost_model as c; m=c.cost_model('models:/tcl-tcl-zen4-avx512-1c@champion'); print(type(m).__name__, m.bundle.model_name, m.bundle.platform)"
echo "=== MLflow UI screenshot"
python - <<'PY'
import sys; from pathlib import Path; sys.path.insert(0, "tests")
from servers import browse, mlflow_server
ui = Path("/tmp/fresh-ui"); ui.mkdir(exist_ok=True)
with mlflow_server(Path("mlflow.db").resolve(), ui) as url:
    dom = browse(f"{url}/#/models", ui / "chromium", "--dump-dom", f"--screenshot={ui}/mlflow-models.png")
print("screenshot", ui / "mlflow-models.png", "champion tags in DOM:", dom.count('title="champion"'))
PY
t make run > /tmp/fresh-run2.log 2>&1; grep -cE "Running stage" /tmp/fresh-run2.log || true; tail -2 /tmp/fresh-run2.log
