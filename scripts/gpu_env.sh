# usage: . scripts/gpu_env.sh     (sourced, from the checkout's root, on a GPU machine that reaches no package registry)
#
# It installs the wheels carried in .whl/ (e.g. nvmath-python) and .whl-dask/ into /tmp/site, replaces the
# image's NVRTC libraries with the ones carried in .gpu/nvrtc-*-lib.tar.xz (NVRTC 13.0 builds
# slower code than nvcc 13.0; 13.1 and later match it), and installs this checkout without
# dependencies, so the console script and the pytest plugin are registered.
set -u
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
# Dask and the requirements the image lacks (partd, locket, tblib, tornado, zict; cloudpickle and
# toolz at the versions it needs), for --scheduler and the Dask tests (--devices needs none): carried in .whl-dask/.
if ls .whl-dask/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-dask/*.whl \
        && case ":${PYTHONPATH:-}:" in *:/tmp/site:*) ;; *) export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} ;; esac
fi
for archive in .gpu/nvrtc-*-lib.tar.xz; do
    [ -f "$archive" ] || continue
    lib=$(python3 -c "import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], 'lib'))")
    tar -xJf "$archive" -C "$lib" && echo "NVRTC libraries from $archive unpacked into $lib"
done
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -c "from cuda.bindings import nvrtc; print('NVRTC', nvrtc.nvrtcVersion()[1:])"
set +u
