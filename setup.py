"""Build hook: the wheel carries the top-level ``resources/`` folder (templates, identity terms, the model-card
schema) as ``fairdesk/resources``, where :func:`fairdesk.paths.resources_dir` finds it when FairDesk is installed
rather than run from a checkout (a checkout and an editable install use ``resources/`` beside the package; the frozen
build bundles it, see ``packaging/fairdesk.spec``). Everything else is in ``pyproject.toml``."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithResources(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        shutil.copytree(Path(__file__).resolve().parent / "resources", Path(self.build_lib) / "fairdesk" / "resources",
                        dirs_exist_ok=True)
        # the user guide (Help › User guide) is written in docs/guide and ships beside the other resources (a source
        # tree without it, e.g. a bare sdist, builds without the guide; the window then says it is not installed)
        guide = Path(__file__).resolve().parent / "docs" / "guide"
        if guide.is_dir():
            shutil.copytree(guide, Path(self.build_lib) / "fairdesk" / "resources" / "guide", dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithResources})
