#!/usr/bin/env bash
# device_check.sh: the GPU checks, run from the repository root on a machine with a GPU, PyTorch
# (python3) and a C++ compiler but no Go. The test binaries come prebuilt by `make cuda-test-bins`
# (build/cuda/, or build/cuda.tar.xz of it) against the libtorch of the same PyTorch version.
#   1. the machine: nvidia-smi, python3's torch and its CUDA;
#   2. every build/cuda/*.test, in its package's folder: the CUDA, NCCL and concurrency tests;
#   3. the Python extension (python/csrc and cgotorch's C/C++, without the process groups, whose
#      Gloo headers the wheel lacks) built with g++ against python3's torch, while step 2 runs,
#      unless $PYLIB_PREBUILT names one built elsewhere against the same torch version;
#   4. python/tests with pytest (test_cuda.py runs on the GPU);
#   5. nn's BenchmarkCTRStep on the CPU at 1, 2, 4, 8 and 16 threads (GOMAXPROCS and torch's).
#   6. nn's BenchmarkCTRStepHogwild: sync-1 against 4, 8 and 16 Hogwild workers.
# Every step has a time limit, all of them together at most $DEVICE_CHECK_BUDGET seconds (default
# 480: a step that would start later is skipped, one that would end later is cut short), and the
# script goes on after a failure; the logs go to $OUT (or ./device-logs) and the last lines
# printed are each step's status.
set -u
OUT=${OUT:-$PWD/device-logs}
mkdir -p "$OUT"
ROOT=$PWD
BUDGET=${DEVICE_CHECK_BUDGET:-480}
SUMMARY=()
status() { SUMMARY+=("$(printf '%-28s %s' "$1" "$2")"); echo "== $1: $2"; }
# limit N: N seconds, or what is left of the budget if less (0 when under 10 s are left).
limit() {
  local left=$((BUDGET - SECONDS))
  if [ $left -lt 10 ]; then echo 0; elif [ $left -lt "$1" ]; then echo $left; else echo "$1"; fi
}

# ---- 1. the machine -------------------------------------------------------------------------
{
  nvidia-smi || echo "nvidia-smi failed"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"available", torch.cuda.is_available(), "devices", torch.cuda.device_count(),
"cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)'
  nproc; command -v g++ || echo "no g++"; python3 -m pytest --version || echo "no pytest"
} >"$OUT/01-machine.log" 2>&1
status machine "$(grep -m1 '^torch ' "$OUT/01-machine.log" || echo 'no torch')"
TORCH_DIR=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null)
if [ -f build/cuda.tar.xz ] && ! ls build/cuda/*.test >/dev/null 2>&1; then
  tar -C build -xJf build/cuda.tar.xz
fi
export LD_LIBRARY_PATH=$TORCH_DIR/lib:$ROOT/build/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---- 3 (in the background). the Python extension --------------------------------------------
PYLIB=$ROOT/build/py-device/libgorec_torch.so
build_python() {
  set -e
  local abi inc objs=() src obj
  abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
  inc="-I$TORCH_DIR/include -I$TORCH_DIR/include/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=$abi"
  for d in $(find cgotorch -name '*.h' ! -path '*/ctest/*' -printf '%h\n' | sort -u); do inc="$inc -I$d"; done
  mkdir -p build/py-device
  for src in $(find cgotorch -name 'unity_*.cc' ! -name 'unity_dist*') python/csrc/*.cc \
    $(find cgotorch -name '*.c' ! -path '*/ctest/*'); do
    obj=build/py-device/$(echo "$src" | tr / _).o
    objs+=("$obj")
    case $src in
      *.c) echo "gcc $src"; gcc -O3 -std=gnu11 -fPIC -Wall -c "$src" -o "$obj" & ;;
      *) echo "g++ $src"; g++ -std=c++20 -O2 -fPIC -fopenmp $inc -Wall -Wno-unused-parameter -c "$src" -o "$obj" & ;;
    esac
  done
  local failed=0
  for job in $(jobs -p); do wait "$job" || failed=1; done
  [ $failed = 0 ]
  g++ -shared -fopenmp "${objs[@]}" -o "$PYLIB" -L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" \
    -ltorch_cpu -ltorch -lc10 -lm
  echo "built $PYLIB"
}
if [ -n "${PYLIB_PREBUILT:-}" ] && [ -f "$PYLIB_PREBUILT" ]; then
  # built elsewhere against the libtorch of this machine's PyTorch version (saves the compile)
  PYLIB=$ROOT/$PYLIB_PREBUILT
  (echo "prebuilt $PYLIB") >"$OUT/03-python-build.log" 2>&1 &
else
  (timeout -k 10 "$(limit 300)" bash -c "$(declare -f build_python); TORCH_DIR='$TORCH_DIR' PYLIB='$PYLIB' build_python") \
    >"$OUT/03-python-build.log" 2>&1 &
fi
PYBUILD=$!

# ---- 2. the Go test binaries ----------------------------------------------------------------
RUN='CUDA|Cuda|GPU|Concurrent|NCCL|Backend'
for bin in build/cuda/*.test; do
  [ -e "$bin" ] || { status "go tests" "no build/cuda/*.test"; break; }
  name=$(basename "$bin" .test)
  pkg=$(echo "${name%_race}" | tr _ /)
  secs=$(limit 100)
  case $name in *_race) secs=$(limit 150) ;; esac
  if [ ! -d "$pkg" ]; then
    status "go $name" "SKIPPED (no folder $pkg)"
    continue
  fi
  if [ "$secs" = 0 ]; then
    status "go $name" "SKIPPED (out of time)"
    continue
  fi
  log=$OUT/02-go-tests.log
  echo "==== $name in $pkg: -test.run '$RUN'" >>"$log"
  (cd "$pkg" && timeout -k 10 "$secs" "$ROOT/$bin" -test.v -test.count=1 -test.timeout "${secs}s" \
    -test.run "$RUN") >>"$log" 2>&1
  rc=$?
  counts="pass $(sed -n "/^==== $name /,/^==== /p" "$log" | grep -c -- '^--- PASS'),"
  counts="$counts skip $(sed -n "/^==== $name /,/^==== /p" "$log" | grep -c -- '^--- SKIP'),"
  counts="$counts fail $(sed -n "/^==== $name /,/^==== /p" "$log" | grep -c -- '^--- FAIL')"
  if [ $rc = 0 ]; then status "go $name" "ok ($counts)"; else status "go $name" "FAILED rc=$rc ($counts)"; fi
done

# ---- 3 and 4. the Python extension and its tests --------------------------------------------
wait $PYBUILD
rc=$?
if [ $rc = 0 ]; then status "python build" ok; else status "python build" "FAILED rc=$rc"; fi
secs=$(limit 150)
if [ $rc = 0 ] && [ "$secs" = 0 ]; then
  status "python tests" "SKIPPED (out of time)"
elif [ $rc = 0 ]; then
  export GOREC_TORCH_LIB=$PYLIB PYTHONPATH=$ROOT/python
  if python3 -m pytest --version >/dev/null 2>&1; then
    # test_cuda.py first, so that a time limit cuts the others
    timeout -k 10 "$secs" python3 -m pytest -v -rs python/tests/test_cuda.py \
      $(ls python/tests/test_*.py | grep -v test_cuda.py | \
        { command -v go >/dev/null && cat || grep -v test_interop.py; }) >"$OUT/04-pytest.log" 2>&1
    rc=$?
  else # no pytest: test_cuda.py's tests by hand (their only fixture is name)
    timeout -k 10 "$secs" python3 - >"$OUT/04-pytest.log" 2>&1 <<'EOF'
import importlib.util, sys, traceback
sys.path.insert(0, "python/tests")
spec = importlib.util.spec_from_file_location("test_cuda", "python/tests/test_cuda.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
failed = passed = 0
for k, f in sorted(vars(m).items()):
    if k.startswith("test_") and callable(f):
        try:
            f(k); passed += 1; print("PASS", k)
        except Exception:
            failed += 1; print("FAIL", k); traceback.print_exc()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
    rc=$?
  fi
  summary=$(grep -E '(passed|failed|error)' "$OUT/04-pytest.log" | tail -1)
  [ $rc = 124 ] && summary="timed out after $secs s; $(grep -c PASSED "$OUT/04-pytest.log") passed"
  cuda=$(grep -c 'test_cuda.py.*SKIP\|SKIPPED.*test_cuda' "$OUT/04-pytest.log")
  if [ $rc = 0 ]; then status "python tests" "ok: $summary (test_cuda skips: $cuda)"; else
    status "python tests" "FAILED rc=$rc: $summary"; fi
fi

# ---- 5. the many-core figure (issue #34): CPU only, nothing else running ---------------------
if [ -x build/cuda/nn.test ] && grep -q BenchmarkCTRStep nn/bench_test.go 2>/dev/null; then
  for n in 1 2 4 8 16; do
    secs=$(limit 30)
    if [ "$secs" = 0 ]; then
      status "bench CTR threads=$n" "SKIPPED (out of time)"
      continue
    fi
    (cd nn && GOMAXPROCS=$n GOREC_BENCH_THREADS=$n CUDA_VISIBLE_DEVICES= timeout -k 5 "$secs" \
      "$ROOT/build/cuda/nn.test" -test.run '^$' -test.bench 'BenchmarkCTRStep$' -test.benchtime 2s) \
      >>"$OUT/05-bench-ctr.log" 2>&1
    rc=$?
    fig=$(grep '^BenchmarkCTRStep' "$OUT/05-bench-ctr.log" | tail -1 | grep -o '[0-9.]* samples/s')
    status "bench CTR threads=$n" "$([ $rc = 0 ] && echo "ok $fig" || echo "FAILED rc=$rc")"
  done
else
  status "bench CTR" "SKIPPED (no nn.test or BenchmarkCTRStep)"
fi

# ---- 6. nn.Hogwild over the cores (issue #34: 0.8 x N on N cores): N workers, 1 thread each ---
if [ -x build/cuda/nn.test ] && grep -q GOREC_BENCH_WORKERS nn/bench_hogwild_test.go 2>/dev/null; then
  for n in 4 8 16; do
    secs=$(limit 60)
    if [ "$secs" = 0 ]; then
      status "bench Hogwild workers=$n" "SKIPPED (out of time)"
      continue
    fi
    (cd nn && GOREC_BENCH_WORKERS=$n CUDA_VISIBLE_DEVICES= timeout -k 5 "$secs" \
      "$ROOT/build/cuda/nn.test" -test.run '^$' -test.bench "BenchmarkCTRStepHogwild/(sync-threads-1|workers-$n|workers-$n-own)\$" \
      -test.benchtime 2s) >>"$OUT/06-bench-hogwild.log" 2>&1
    rc=$?
    one=$(grep 'sync-threads-1' "$OUT/06-bench-hogwild.log" | tail -1 | grep -o '[0-9.]* samples/s')
    fig=$(grep "workers-$n-[0-9]" "$OUT/06-bench-hogwild.log" | tail -1 | grep -o '[0-9.]* samples/s')
    own=$(grep "workers-$n-own" "$OUT/06-bench-hogwild.log" | tail -1 | grep -o '[0-9.]* samples/s')
    status "bench Hogwild workers=$n" "$([ $rc = 0 ] && echo "ok $fig, own batches: $own (sync-1: $one)" || echo "FAILED rc=$rc")"
  done
else
  status "bench Hogwild" "SKIPPED (no nn.test or GOREC_BENCH_WORKERS)"
fi

printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/00-summary.txt"
