#!/usr/bin/env bash
# The GPU benchmarks of one lent-device session, each under its own time limit so that one slow row cannot
# take the others with it; every script writes its JSON as it goes. Sizes are cut to fit a 15-minute lease
# (see the closing note that quotes them). Usage, from the repository root:  benchmarks/gpu_run.sh OUTDIR
set -u
out=${1:?usage: benchmarks/gpu_run.sh OUTDIR}
mkdir -p "$out"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$py -c "import torch, pandas; print('torch', torch.__version__, 'pandas', pandas.__version__, torch.cuda.get_device_name())"
step() {  # step SECONDS NAME CMD...: run CMD with a limit, its log in OUTDIR/NAME.log
  local limit=$1 name=$2; shift 2
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  echo "== $name: exit $? after ${SECONDS}s total"
  tail -n 25 "$out/$name.log"
}
step 160 toto_throughput $py benchmarks/throughput_bench.py --device cuda --models toto --horizons 1,64 \
  --windows 1000 --symbols 8 --repeats 2 --ref-windows 2 --ref-horizons 1 --out "$out/throughput_toto.json"
step 130 process_start $py benchmarks/process_start_bench.py --device cuda --model toto --out "$out/process_start.json"
# Toto 2.0 against the toto-2 reference (issue 34: >= 5x on a GPU, CUDA graphs with 0 skips); the reference needs
# the toto-2, dd-unit-scaling and unit-scaling wheels installed with --no-deps beside the others
step 120 toto2_throughput $py benchmarks/toto2_bench.py --device cuda --repeats 3 --out "$out/toto2_bench.json"
step 100 kronos_throughput $py benchmarks/throughput_bench.py --device cuda --models kronos --horizons 1 \
  --windows 250 --symbols 8 --repeats 2 --ref-windows 2 --out "$out/throughput_kronos.json"
(cd benchmarks && step 60 toto_latency $py toto_bench.py --device cuda --repeats 5 --quick --out "$out/toto_bench.json")
