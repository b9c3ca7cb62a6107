"""What to tell the author of a worker whose import found no such package.

Python Workers projects list their packages in ``pyproject.toml`` (or ``requirements.txt``) and
pywrangler bundles them at deploy. ember installs nothing: a worker imports what ember's own
Python environment has, plus the project's vendored ``python_modules/`` (uploaded with the
worker). The hint names the declared requirement that provides the module when there is one
(the supervisor reads the project's files and sends them in the Init frame: ``ember dev`` runs
a staged copy of the modules, where neither file is), and both ways out.
"""

from __future__ import annotations

import importlib.machinery
import shlex
from collections.abc import Sequence
from pathlib import Path

from ember.python_project import Requirement, normalised

# Import names whose distribution is named otherwise, for packages that are not installed (an
# installed one's import would not have failed, so importlib.metadata's packages_distributions
# knows nothing of a missing module; it also costs ~0.2 s of CPU, counted against the isolate's
# startup limit). Not complete: the well-known mismatches, so that `import PIL` suggests
# `pip install pillow` and matches a declared `Pillow`; any other module is matched by its own
# name.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "PIL": ("pillow",),
    "yaml": ("pyyaml",),
    "bs4": ("beautifulsoup4",),
    "cv2": (
        "opencv-python",
        "opencv-python-headless",
        "opencv-contrib-python",
        "opencv-contrib-python-headless",
    ),
    "sklearn": ("scikit-learn",),
    "dateutil": ("python-dateutil",),
    "dotenv": ("python-dotenv",),
    "jwt": ("pyjwt",),
}


def missing_module_hint(
    exc: ModuleNotFoundError, code_dir: Path, requirements: Sequence[Requirement] = ()
) -> str:
    """The lines to add under the traceback, or ``""`` when the module is the project's own
    (a typo there is the user's to see in the traceback) or unnamed."""
    if not exc.name:
        return ""
    top = exc.name.split(".")[0]
    if (code_dir / top).is_dir() or (code_dir / f"{top}.py").is_file():
        return ""
    known = DISTRIBUTIONS.get(top, ())
    candidates = {normalised(name) for name in (top, *known)}
    listed = next((r for r in requirements if normalised(r.name) in candidates), None)
    if listed:
        where = f"{listed.file} lists {listed.text}, but ember installs no project's dependencies"
        install = f"pip install {shlex.quote(listed.text)}"
    elif known:
        where = f"'{top}' is not installed where ember runs workers"
        install = f"pip install {shlex.quote(known[0])}, the package that provides it"
    else:
        where = f"'{top}' is not installed where ember runs workers"
        install = f"pip install {shlex.quote(top)}, or the package that provides it"
    return (
        f"{where}: a worker imports the packages of ember's own Python environment and the "
        f"project's python_modules/ folder. Install it into ember's environment for ember dev "
        f"({install}, with ember's pip), or vendor it into python_modules/ so a deploy "
        f"uploads it (pure-Python packages only: one with compiled extensions must be installed "
        f"into the environment of the ember serve that runs the worker)."
    )


def compiled_extension_hint(exc: ImportError, code_dir: Path) -> str:
    """The note for a compiled extension module uploaded with the worker that failed to load,
    or ``""`` for any other import error. A deployed worker's files are mounted without exec
    rights, so the loader's own words ("failed to map segment from shared object") are all the
    author would see; on Cloudflare, Pyodide loads no Linux builds either."""
    path = exc.path or str(exc).split(":", 1)[0]
    root = str(code_dir).rstrip("/") + "/"
    suffixes = (*importlib.machinery.EXTENSION_SUFFIXES, ".so")
    if not path.startswith(root) or not path.endswith(suffixes):
        return ""
    name = path[len(root) :]
    return (
        f"{name} is a compiled extension module: a deployed worker cannot load native code from "
        f"its own files (as on Cloudflare, where only Pyodide's builds load). Install the package "
        f"into the Python environment ember serve runs from (the operator's pip), and leave it "
        f"out of python_modules/; vendor pure-Python packages only."
    )
