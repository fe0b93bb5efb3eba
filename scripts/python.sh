# Sourced by the scripts: sets PY to the Python that pai is (or will be) installed into.
#   1. the active virtual environment, if any ($VIRTUAL_ENV);
#   2. else .venv in the project, where setup.sh made one because the system Python is managed by the OS (PEP 668);
#   3. else $PYTHON, or python3.
if [ -n "${VIRTUAL_ENV:-}" ]; then
  PY="$VIRTUAL_ENV/bin/python"
elif [ -x .venv/bin/python ]; then
  PY=.venv/bin/python
else
  PY=${PYTHON:-python3}
fi
