"""What to tell the author of a worker whose import found no such package.

Python Workers projects list their packages in ``pyproject.toml`` (or ``requirements.txt``) and
pywrangler bundles them at deploy. ember installs nothing: a worker imports what ember's own
Python environment has, plus the project's vendored ``python_modules/`` (uploaded with the
worker). The hint names the declared requirement that provides the module when there is one
(the supervisor reads the project's files and sends them in the Init frame: ``ember dev`` runs
a staged copy of the modules, where neither file is), and both ways out.
"""

from __future__ import annotations

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
        f"uploads it."
    )
