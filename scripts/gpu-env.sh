# Sourced by the GPU scripts: the carried wheels (a GPU machine reaches no registry) and the
# checkout on PYTHONPATH. The GPU image has torch and httpx but no starlette/uvicorn/httptools/
# websockets: carry their wheels in .whl/ (Python 3.12 there; see scripts/gpu-check.sh).
PYTHON="${PYTHON:-python3}"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    if "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl; then
        export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    else
        echo "the wheels in .whl/ do not fit $("$PYTHON" -V 2>&1): using what is installed" >&2
    fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
